"""TRL multi-turn: ``MultiTurnCodingEnv`` as a ``GRPOTrainer(environment_factory=...)`` environment.

TRL's contract (GRPOTrainer, 1.16): the factory is called with no argument and returns one
environment per rollout (instances are pooled and reused); before generation TRL calls
``reset(**row)`` with the dataset row; every public method other than ``reset`` and
``get_reward`` becomes a tool, described to the model from its signature and Google-style
docstring; after the rollout, ``get_reward()`` scores it from the environment's own state.

- :func:`environment_factory` builds the factory over a task list and every option of
  ``MultiTurnCodingEnv`` (``max_turns``, ``token_budget``, ``feedback_from``, ``prompts_dir``,
  ``timeout``, ...). Its environments expose one tool, ``submit(code)``: it is one turn of the
  multi-turn env (grade in the sandbox, record the turn) and returns the rendered feedback,
  which TRL shows the model as the tool message. ``get_reward()`` is the episode's return
  under a credit scheme of :mod:`agentenv.credit`, or ``None`` (which TRL masks) for an
  episode in which the sandbox could not grade a submission (a ``SandboxError``: an
  infrastructure fault, never the model's 0); that submission is not counted as a turn.
- :class:`PrefetchGrading` makes grading overlap across the rollouts of a batch. TRL runs a
  synchronous tool (and an async one too) one rollout at a time, waiting for each result, so
  the sandbox runs of a batch would queue behind one another. Mixed into ``GRPOTrainer``, it
  reads every rollout's ``submit`` call as soon as the batch is generated (and again after each
  regeneration) and starts all of their gradings at once; each ``submit`` then finds its
  result ready. Grading and results are the same with or without it.

Nothing here imports TRL or torch.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from agentenv.credit import SCHEMES, episode_return
from agentenv.envs.multiturn import MultiTurnCodingEnv
from agentenv.errors import ConfigError, SandboxError
from agentenv.extract import extract_code
from agentenv.grading.scoring import Grader, SandboxGrader, Scored, split_task
from agentenv.integrations._common import resolve_tasks, tool_call_code
from agentenv.tasks.schema import Task

__all__ = ["CodingToolEnv", "EnvironmentFactory", "PrefetchGrading", "SharedGrader",
           "environment_factory"]

TOOL_NAME = "submit"
EPISODE_OVER = ("The episode is over ({reason}): this submission was not graded. "
                "Stop calling tools.")
NOT_GRADED = ("The grader failed on its side (an infrastructure fault, not your code): this "
              "submission was not graded and does not count as a turn.")


class SharedGrader:
    """The grader every environment of one factory uses: the sandbox, plus gradings started early.

    :meth:`prefetch` starts grading a submission on a worker thread (rollouts of one batch that
    send the same code share one grading); :meth:`score` returns that result when one was
    started for the same task (the same checks, not just the same name: an env that grades
    visible and hidden checks apart asks for each part on its own), code and timeout, and
    grades directly otherwise. ``prefetched`` counts the gradings started early, ``hits`` the
    gradings they served.
    """

    def __init__(self, inner: Grader, max_workers: int) -> None:
        self.inner = inner
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="agentenv-grade")
        self._lock = threading.Lock()
        self._started: dict[tuple[Task, str, float], tuple[Future[Scored], int]] = {}
        self.prefetched = 0
        self.hits = 0

    def prefetch(self, task: Task, code: str, *, timeout: float) -> None:
        key = (task, code, timeout)
        with self._lock:
            future, waiting = self._started.get(key, (None, 0))
            if future is None:
                future = self._pool.submit(self.inner.score, task, code, timeout=timeout)
                self.prefetched += 1
            self._started[key] = (future, waiting + 1)

    def _claim(self, task: Task, code: str, timeout: float) -> Future[Scored] | None:
        key = (task, code, timeout)
        with self._lock:
            entry = self._started.pop(key, None)
            if entry is None:
                return None
            future, waiting = entry
            if waiting > 1:
                self._started[key] = (future, waiting - 1)
            self.hits += 1
            return future

    def score(self, task: Task, code: str, *, timeout: float) -> Scored:
        future = self._claim(task, code, timeout)
        if future is not None:
            return future.result()
        return self.inner.score(task, code, timeout=timeout)

    async def ascore(self, task: Task, code: str, *, timeout: float) -> Scored:
        future = self._claim(task, code, timeout)
        if future is not None:
            return await asyncio.wrap_future(future)
        return await self.inner.ascore(task, code, timeout=timeout)

    def discard(self) -> None:
        """Forget gradings nobody asked for (a rollout that stopped before its tool ran)."""
        with self._lock:
            self._started.clear()


class CodingToolEnv:
    """One rollout's environment: a ``MultiTurnCodingEnv`` episode driven by ``submit`` calls.

    Made by :func:`environment_factory`; TRL calls :meth:`reset`, the ``submit`` tool and
    :meth:`get_reward`. ``env`` is the wrapped ``MultiTurnCodingEnv`` (its ``trajectory`` holds
    the episode's turn records).
    """

    def __init__(self, tasks: Mapping[str, tuple[int, Task]], env_options: Mapping[str, Any],
                 grader: SharedGrader, credit: str, gamma: float) -> None:
        self._tasks = tasks
        self._grader = grader
        self._credit = credit
        self._gamma = gamma
        self.env = MultiTurnCodingEnv(tasks=[task for _, task in tasks.values()], grader=grader,
                                      on_infra_error="raise", **env_options)
        self._task: Task | None = None
        self.infra_error: str | None = None  # the episode's sandbox fault, if one happened

    def reset(self, **row: Any) -> None:
        """Start an episode on the row's task (its ``task_name`` column); the row's prompt poses it."""
        name = row.get("task_name")
        if not isinstance(name, str):
            raise ConfigError(
                "the dataset row has no task_name column: build the dataset with "
                "agentenv.integrations.trl.to_hf_dataset(tasks) and keep remove_unused_columns=False")
        entry = self._tasks.get(name)
        if entry is None:
            raise ConfigError(f"the dataset row's task {name!r} is not among the tasks given to "
                              "environment_factory; pass it the tasks the dataset was built from")
        index, task = entry
        self.env.reset(task_index=index)
        self._task = task
        self.infra_error = None
        return None

    def submit(self, code: str) -> str:
        """Submit Python code to be graded against the task's hidden tests.

        Args:
            code: The complete Python solution, defining the function the task asks for.

        Returns:
            Feedback on the submission: how many tests passed and which ones failed.
        """
        env = self.env
        trajectory = env.trajectory
        if trajectory is None:
            raise ConfigError("submit() before reset(): TRL resets every environment before generation")
        if trajectory.stop_reason is not None:
            return EPISODE_OVER.format(reason=trajectory.stop_reason)
        try:
            obs, _, _, _ = env.step(code if isinstance(code, str) else "")
        except SandboxError as exc:  # the env took the turn back; the episode is not scored
            self.infra_error = f"{type(exc).__name__}: {exc}"[:300]
            return NOT_GRADED
        return str(obs["feedback"])

    def get_reward(self) -> float | None:
        """The episode's return under the factory's credit scheme (0.0 when nothing was
        submitted); ``None`` when the sandbox failed on a submission (TRL masks the rollout)."""
        if self.infra_error is not None:
            return None
        trajectory = self.env.trajectory
        if trajectory is None or not trajectory.turns:
            return 0.0
        return float(episode_return(trajectory, self._credit, self._gamma))

    # TRL turns every public method into a tool: what the mixin calls stays private.
    def _prefetch_calls(self, message: Any) -> None:
        """Start grading the ``submit`` calls of an assistant message, as many as turns remain
        (TRL runs each call of a message, in order: each is one turn)."""
        trajectory = self.env.trajectory
        if not isinstance(message, Mapping) or trajectory is None:
            return
        left = max(0, self.env.max_turns - len(trajectory.turns))
        for code in tool_call_code(message, TOOL_NAME)[:left]:
            self._prefetch(code)

    def _prefetch(self, code: Any) -> None:
        """Start grading ``code`` (what a pending ``submit`` call carries) ahead of the call."""
        trajectory = self.env.trajectory
        task = self._task
        if task is None or trajectory is None or trajectory.stop_reason is not None:
            return
        text = code if isinstance(code, str) else ""
        source = extract_code(text, task.entry_point)
        # What the env's step will ask the grader for: the task, or its visible and hidden
        # checks as two runs (feedback_from="visible", stop_when="visible").
        hidden, visible = split_task(task) if self.env.visible_apart else (task, None)
        for part in (visible, hidden):
            if part is not None:
                self._grader.prefetch(part, source, timeout=self.env.timeout)


class EnvironmentFactory:
    """Makes one :class:`CodingToolEnv` per call (TRL calls it with no argument).

    ``grader`` is the :class:`SharedGrader` all its environments grade through (its
    ``prefetched``/``hits`` counters say how much grading :class:`PrefetchGrading` overlapped).
    """

    def __init__(self, tasks: Mapping[str, tuple[int, Task]], env_options: Mapping[str, Any],
                 grader: SharedGrader, credit: str, gamma: float) -> None:
        self.tasks = tasks
        self.env_options = dict(env_options)
        self.grader = grader
        self.credit = credit
        self.gamma = gamma

    def __call__(self) -> CodingToolEnv:
        return CodingToolEnv(self.tasks, self.env_options, self.grader, self.credit, self.gamma)


def environment_factory(tasks: Iterable[Task] | str, *, credit: str = "final_only",
                        gamma: float = 1.0, max_workers: int | None = None,
                        **env_options: Any) -> EnvironmentFactory:
    """What ``GRPOTrainer(environment_factory=...)`` takes: a maker of :class:`CodingToolEnv`.

    ``tasks`` are the tasks the training dataset was built from (``to_hf_dataset(tasks,
    max_turns=...)``; a task-set name is loaded with ``load_tasks``). ``env_options`` go to
    ``MultiTurnCodingEnv`` as they are: ``max_turns``, ``token_budget``, ``tokenizer``,
    ``feedback_from``, ``prompts_dir``, ``timeout``, ``reward_fn``, ``isolation`` or ``grader``.
    ``credit`` is the scheme ``get_reward`` reports (``"final_only"``: the final turn's score;
    see :mod:`agentenv.credit`), with discount ``gamma``. Up to ``max_workers`` gradings run at
    once when :class:`PrefetchGrading` starts them early. Set ``GRPOConfig(
    max_tool_calling_iterations=max_turns)`` so TRL stops asking once the turns are spent.
    """
    task_list = resolve_tasks(tasks)
    if not task_list:
        raise ConfigError("environment_factory needs at least one task")
    by_name: dict[str, tuple[int, Task]] = {}
    for task in task_list:  # a name seen twice keeps its first task (to_records rows repeat)
        if task.name not in by_name:
            by_name[task.name] = (len(by_name), task)
    if credit not in SCHEMES:
        raise ConfigError(f"unknown credit scheme {credit!r}; use one of {', '.join(SCHEMES)}")
    if not (isinstance(gamma, (int, float)) and 0.0 <= gamma <= 1.0):
        raise ConfigError(f"gamma must be a number in [0, 1], got {gamma!r}")
    options = dict(env_options)
    if "seed" in options:
        raise ConfigError("environment_factory picks no task at random (each dataset row names "
                          "its task), so seed= does nothing; leave it out")
    if options.get("grader") is not None and options.get("isolation") is not None:
        raise ConfigError("pass isolation= or grader=, not both (a custom grader picks its own isolation)")
    inner: Grader = options.pop("grader", None) or SandboxGrader(options.pop("isolation", None))
    options.pop("isolation", None)
    workers = 32 if max_workers is None else max_workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"max_workers must be a positive integer, got {max_workers!r}")
    grader = SharedGrader(inner, workers)
    MultiTurnCodingEnv(tasks=task_list[:1], grader=grader, **options)  # bad options fail here, once
    return EnvironmentFactory(by_name, options, grader, credit, float(gamma))


class _WatchedMessages(list[Any]):
    """A rollout's message list that starts grading each ``submit`` call appended to it."""

    def __init__(self, messages: Iterable[Any], env: CodingToolEnv) -> None:
        super().__init__(messages)
        self.env = env

    def append(self, message: Any) -> None:
        super().append(message)
        self.env._prefetch_calls(message)


class PrefetchGrading:
    """Mixin for ``GRPOTrainer``: the gradings of one batch's ``submit`` calls overlap.

    Use it as ``class Trainer(PrefetchGrading, GRPOTrainer): pass`` with an
    :func:`environment_factory`. It wraps TRL's tool-calling loop (``_tool_call_loop``, a
    private method of TRL 1.16): before the loop, and whenever TRL appends a regenerated
    assistant message to a rollout, the rollout's pending ``submit`` code starts grading on the
    factory's worker threads. Should TRL change that method, nothing breaks: each ``submit``
    then grades on its own, as without the mixin.
    """

    environments: Sequence[Any] | None

    def _tool_call_loop(self, prompts: Any, prompt_ids: Any, completion_ids: Any,
                        completions: list[Any], *args: Any, **kwargs: Any) -> Any:
        envs = list(getattr(self, "environments", None) or ())
        watched = len(envs) == len(completions)
        if watched:
            for i, (env, messages) in enumerate(zip(envs, completions, strict=True)):
                if isinstance(env, CodingToolEnv) and isinstance(messages, list):
                    for message in messages[-1:]:
                        env._prefetch_calls(message)
                    completions[i] = _WatchedMessages(messages, env)
        try:
            return super()._tool_call_loop(  # type: ignore[misc]
                prompts, prompt_ids, completion_ids, completions, *args, **kwargs)
        finally:
            if watched:
                for i, messages in enumerate(completions):
                    if isinstance(messages, _WatchedMessages):
                        completions[i] = list(messages)
                for env in envs:
                    if isinstance(env, CodingToolEnv):
                        env._grader.discard()
                        break
