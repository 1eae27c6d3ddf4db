"""MultiTurnCodingEnv: submit code, read which tests failed, revise; with exact RL semantics.

What it owns: the multi-turn configuration of the episode core
(:class:`agentenv.envs.episode.EpisodeCore`, composed of the conversation, the budget,
visibility, shaping and recording), and the documentation of what each option means for an
episode. ``reset()`` poses a task as a chat (system + task message rendered from Jinja
templates); each ``step(raw_text)`` extracts the code, grades it against the task's hidden
checks, records a :class:`TurnRecord` and either ends the episode or appends the feedback
message.

How an episode ends (``info["stop_reason"]``, also ``env.trajectory.stop_reason``):

- ``"solved"``: every hidden check passed, or with ``stop_when="visible"`` every visible one
  (``terminated``; an absorbing state);
- ``"max_turns"``: ``max_turns`` submissions were graded (``truncated``);
- ``"token_budget"``: the next observation, with room for a reply, would not fit in
  ``token_budget`` even with the feedback trimmed (``truncated``). RL code bootstraps values on
  truncation, not termination.

The score of a turn always comes from the hidden ``checks``. What the policy is shown, and what
ends the episode, are two options, and each says what it leaks:

- ``feedback_from="all"`` (default): feedback lists the hidden checks' failures (their text,
  kinds and messages). Everything about the hidden tests reaches the policy; one sandbox run
  grades both lists.
- ``feedback_from="visible"``: the task's ``visible_checks`` run in a sandbox run of their own,
  before the hidden run, and every field the policy can read (``messages``, the observation,
  ``info``, the template variables ``passed``/``total``/``failures``/``outcome``/``timed_out``,
  token counts) is computed from that run alone: what the candidate does on hidden inputs
  (exit, hang, print) cannot show. ``info["view"]`` says which. The hidden results stay in
  ``env.trajectory`` (listed as ``researcher_only``) and in the step's ``reward``.
- ``stop_when="hidden"`` (default): the episode ends when the hidden checks all pass, so whether
  it goes on leaks one bit per turn (hidden all passed or not); the wall time of a step also
  includes the hidden run, which no observation reports.
- ``stop_when="visible"`` (RLEF): the episode ends when the visible checks pass (``decided_by`` is
  ``"visible_checks"``); together with ``feedback_from="visible"`` nothing the policy observes
  depends on the hidden checks. A task without visible checks then runs to ``max_turns``.

A submission the sandbox could not grade (a ``SandboxError``: a worker lost, the pool closed, a
sandbox that could not start) is an infrastructure fault, never the model's failure. By default
(``on_infra_error="flag"``) the step returns reward 0.0 with ``info["infra_error"]`` the fault
(``None`` on every graded step) and ``outcome="infra_error"``; the turn is taken back (no turn
record, the same turn may be stepped again) and ``env.trajectory.infra_error`` holds the fault
until a later step is graded, so an episode left there is in no report's metrics. A multi-turn
step returns ``done=False``; a single-step episode ends (``stop_reason="infra_error"``, neither
terminated nor truncated). ``on_infra_error="raise"`` raises the ``SandboxError`` instead (the
trainer integrations use it to take the turn back their own way).

The step reward (``step_reward``) is paid so that, by default, an episode's summed step rewards
equal its final score: ``"delta"`` pays each turn's score minus the previous one (potential-based
shaping, dense); ``"final"`` pays 0 until the last step, then the final score; ``"absolute"``
pays every turn its own score (a learner that stalls at 0.5 for three turns earns 1.5, more than
one that solves at once: never the default). ``TurnRecord.reward`` is always the turn's score.

Failure messages are truncated, quoted and neutralised, and values of secret-looking environment
variables are redacted (by grading, :mod:`agentenv.grading.redact`, and again here for a
custom grader), before they reach an observation or a record.

The episode logic is I/O-free and shared: ``step`` and ``astep`` differ only in how they call
the :class:`Grader` (the sandbox by default). Pass ``grader=`` to plug in another one, e.g. a
remote sandbox service or, in benchmarks, a stub that measures the env's own overhead.
"""

from __future__ import annotations

from agentenv.envs.episode import EpisodeCore, EpisodeSnapshot

__all__ = ["EpisodeSnapshot", "MultiTurnCodingEnv"]


class MultiTurnCodingEnv(EpisodeCore):
    """Revise-on-failure coding environment: ``done`` once the hidden tests pass or turns/tokens run out.

    The walk-through's loop works as written::

        env = MultiTurnCodingEnv(max_turns=3, seed=0)
        obs = env.reset(task_index=idx)
        done = False
        while not done:
            obs, reward, done, info = env.step(policy(obs))

    The observation has ``prompt``, ``entry_point``, ``task_name``, ``messages`` (the whole
    conversation in OpenAI chat format), ``feedback`` (the latest feedback text), ``turn`` (the
    1-based turn it asks for; after the end, the last turn played), ``turns_left`` (submissions
    still allowed), ``max_turns``, ``tokens_used``, ``tokens_left`` and ``max_tokens`` (None
    without a budget), and ``seed`` (the episode's seed, for policies that sample).
    Feedback is appended to ``messages`` only while the episode goes on; the final verdict is
    in ``feedback`` and the turn record.

    The token budget binds. Tokens are counted as OpenAI's API counts a chat (see
    :class:`agentenv.tokens.TokenCounter`): ``tokens_used`` is the next request's prompt tokens.
    ``max_tokens`` in the observation is what the reply may have: the budget left, minus (while
    turns remain after this one) a reserve for the next observation and a minimal reply to it;
    the OpenAI-compatible policy sends it as ``max_tokens``. A reply that still overruns it is
    cut there and graded as cut (``info["reply_cut"]``, ``finish_reason="length"`` in the
    record), as the server would have cut it; the episode goes on. Feedback that does not fit is
    trimmed with a marker, keeping its last paragraph (the attempts-left instructions) and room
    for a reply of ``MIN_REPLY_TOKENS``; if even that cannot fit, the episode ends with
    ``stop_reason="token_budget"``. No request plus its reply ever exceeds the budget.
    The reward of each step follows ``step_reward`` (see the module docstring: by default the
    change in the turn's score, so the rewards sum to the final score). ``info``
    carries ``terminated``, ``truncated`` and ``stop_reason``. ``env.state`` is the conversation
    state; ``env.trajectory`` the episode's :class:`Trajectory` of :class:`TurnRecord`.

    ``tokenizer`` is a model or encoding name for tiktoken, or any object with
    ``.encode(str) -> list`` (a Hugging Face tokenizer); ``prompts_dir`` overrides the packaged
    templates one by one; ``grader`` replaces the sandbox (``isolation`` picks the sandbox's
    isolation level otherwise).
    """
