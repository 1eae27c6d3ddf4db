"""feedback_from="visible": nothing the policy can read depends on the hidden checks.

Each hostile candidate behaves differently on the hidden input (exits with a status computed
from it, hangs, prints it, raises it, plants it in a file); the hidden input varies across
episodes. Every observation, every ``info`` and every Gymnasium observation/info must be byte
for byte the same whatever the hidden input is, while the researcher's record still holds the
hidden results. With ``stop_when="visible"`` (RLEF) the episode ends when the visible checks
pass, and the reward still comes from the hidden ones.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agentenv.envs.coding import CodingEnv
from agentenv.envs.multiturn import MultiTurnCodingEnv
from agentenv.errors import ConfigError
from agentenv.records import RESEARCHER_ONLY, Trajectory
from agentenv.tasks import Task

# All >= 100, so that every candidate below gets the same hidden verdict on each of them (the
# one bit stop_when="hidden" reveals, by ending the episode, is then the same too).
HIDDEN_INPUTS = (918273645, 555555, 4242)
VISIBLE = "assert inc(2) == 3"
# Each run's CPU limit: the "hang" candidate spends all of it on every hidden check, so it sets
# that case's cost; the visible check it must pass takes a millisecond.
TIMEOUT = 0.2


# Under stop_when="visible" nothing may depend on the hidden checks at all, not even on their
# verdicts: the hidden check is also varied so that each candidate passes it (7: `half_wrong`
# handles it; None: the hidden checks are the visible one alone, which every candidate passes)
# or fails it, hangs on it, exits on it...
RLEF_HIDDEN = (*HIDDEN_INPUTS, 7, None)


def task_with_hidden_input(secret: int | None) -> Task:
    hidden = () if secret is None else (f"assert inc({secret}) == {secret + 1}",)
    return Task(name="inc", prompt="Write `inc(x)` returning x + 1.", entry_point="inc",
                checks=(VISIBLE, *hidden), visible_checks=(VISIBLE,))


def fenced(body: str) -> str:
    return f"```python\n{body}\n```"


# Each passes the visible check and does something on every other input.
HOSTILE = {
    "exit_status": fenced("import os\ndef inc(x):\n    if x != 2:\n        os._exit(x % 256)\n    return x + 1"),
    "hang": fenced("def inc(x):\n    while x != 2:\n        pass\n    return x + 1"),
    "print": fenced("def inc(x):\n    print('hidden input', x)\n    return 3"),
    "raise": fenced("def inc(x):\n    if x != 2:\n        raise ValueError(f'hidden input {x}')\n    return 3"),
    "plant_file": fenced(
        "import os\n"
        "def inc(x):\n"
        "    for d in ('.', '/tmp', os.path.expanduser('~')):\n"
        "        try:\n"
        "            with open(os.path.join(d, 'leak.txt'), 'a') as f:\n"
        "                f.write(str(x))\n"
        "        except OSError:\n"
        "            pass\n"
        "    found = ''\n"
        "    for d in ('.', '/tmp', os.path.expanduser('~')):\n"
        "        try:\n"
        "            found += open(os.path.join(d, 'leak.txt')).read()\n"
        "        except OSError:\n"
        "            pass\n"
        "    if x == 2:\n"
        "        raise ValueError('found ' + found)\n"
        "    return x + 1"),
    "half_wrong": fenced("def inc(x):\n    return x + 1 if x < 100 else x * 0"),
}


def everything_shown(secret: int | None, answer: str, **options: Any) -> tuple[str, Trajectory]:
    """Every observation and info of a 3-turn episode, as one JSON string, and the record."""
    env = MultiTurnCodingEnv(tasks=[task_with_hidden_input(secret)], max_turns=3, timeout=TIMEOUT,
                             feedback_from="visible", **options)
    shown = [env.reset(task_index=0)]
    done = False
    while not done:
        obs, _reward, done, info = env.step(answer)
        shown += [obs, info]
    assert env.trajectory is not None
    return json.dumps(shown, sort_keys=True), env.trajectory


@pytest.mark.parametrize("stop_when", ["hidden", "visible"])
@pytest.mark.parametrize("attack", sorted(HOSTILE))
def test_nothing_shown_depends_on_the_hidden_input(attack: str, stop_when: str) -> None:
    """Byte-identical observations and infos across hidden inputs, for every hostile candidate."""
    secrets = HIDDEN_INPUTS if stop_when == "hidden" else RLEF_HIDDEN
    runs = [everything_shown(secret, HOSTILE[attack], stop_when=stop_when) for secret in secrets]
    texts = {text for text, _ in runs}
    assert len(texts) == 1, f"{attack}: what the policy sees depends on the hidden checks"
    assert "918273645" not in texts.pop()
    for secret, (_, trajectory) in zip(secrets, runs, strict=True):  # the researcher keeps the hidden verdicts
        assert trajectory.turns[0].total == (1 if secret is None else 2)
        assert trajectory.turns[0].visible_total == 1


def test_hidden_stop_reveals_one_bit_and_the_visible_stop_closes_it() -> None:
    """Documented: under stop_when="hidden" the episode's end says whether the hidden checks all
    passed (secret 7 is handled right by `half_wrong`, 918273645 is not); under "visible" the
    policy sees the same either way."""
    hidden_stop = {everything_shown(s, HOSTILE["half_wrong"])[0] for s in (7, 918273645)}
    visible_stop = {everything_shown(s, HOSTILE["half_wrong"], stop_when="visible")[0] for s in (7, 918273645)}
    assert len(hidden_stop) == 2 and len(visible_stop) == 1


def test_hidden_results_stay_in_the_record_marked_researcher_only() -> None:
    _, trajectory = everything_shown(918273645, HOSTILE["exit_status"])
    record = trajectory.to_dict()
    assert record["researcher_only"] == list(RESEARCHER_ONLY)
    first = record["turns"][0]
    assert first["passed"] == 1 and first["total"] == 2  # hidden: the exit killed check 2
    assert "status" in json.dumps(first["failures"])
    assert first["visible_passed"] == first["visible_total"] == 1
    assert Trajectory.from_dict(record).to_dict() == record


def test_the_exit_status_channel_is_open_when_feedback_shows_everything() -> None:
    """The contrast: with feedback_from="all" the hidden exit status is in the feedback."""
    env = MultiTurnCodingEnv(tasks=[task_with_hidden_input(918273645)], max_turns=2, timeout=TIMEOUT)
    env.reset(task_index=0)
    obs, _, _, _ = env.step(HOSTILE["exit_status"])
    assert str(918273645 % 256) in obs["feedback"]


@pytest.mark.parametrize("stop_when", ["hidden", "visible"])
def test_gymnasium_observation_and_info_do_not_depend_on_the_hidden_input(stop_when: str) -> None:
    pytest.importorskip("gymnasium")
    from agentenv.gym import MultiTurnCodingGymEnv

    seen = set()
    for secret in HIDDEN_INPUTS if stop_when == "hidden" else RLEF_HIDDEN:
        env = MultiTurnCodingGymEnv(tasks=[task_with_hidden_input(secret)], max_turns=3, timeout=TIMEOUT,
                                    feedback_from="visible", stop_when=stop_when)
        obs, info = env.reset(seed=0)
        steps: list[Any] = [obs, info]
        done = False
        while not done:
            obs, _reward, terminated, truncated, info = env.step(HOSTILE["exit_status"])
            steps += [obs, info, terminated, truncated]
            done = terminated or truncated
        seen.add(json.dumps(steps, sort_keys=True))
    assert len(seen) == 1


@pytest.mark.parametrize("attack", sorted(HOSTILE))
def test_single_step_visible_view_does_not_depend_on_the_hidden_input(attack: str) -> None:
    """One turn always ends the episode, so not even the hidden verdict may show (RLEF_HIDDEN)."""
    infos = set()
    for secret in RLEF_HIDDEN:
        env = CodingEnv(tasks=[task_with_hidden_input(secret)], timeout=TIMEOUT, feedback_from="visible")
        obs = env.reset(task_index=0)
        obs2, _, done, info = env.step(HOSTILE[attack])
        assert done
        assert env.trajectory is not None  # the hidden checks were graded, for the researcher
        assert env.trajectory.turns[0].total == (1 if secret is None else 2)
        shown: list[Any] = [obs, obs2, info]
        if gymnasium_installed():
            from agentenv.gym import CodingGymEnv

            gym_env = CodingGymEnv(tasks=[task_with_hidden_input(secret)], timeout=TIMEOUT, feedback_from="visible")
            gym_obs, gym_info = gym_env.reset(seed=0)
            gym_step = gym_env.step(HOSTILE[attack])
            shown += [gym_obs, gym_info, gym_step[0], *gym_step[2:]]
        infos.add(json.dumps(shown, sort_keys=True))
    assert len(infos) == 1, attack


def gymnasium_installed() -> bool:
    try:
        import gymnasium  # noqa: F401
    except ImportError:
        return False
    return True


# A feedback template that renders every variable it may use, raw: a researcher's template can
# show the policy any of them, so each must be computed from the visible run alone.
EVERY_VARIABLE = """turn={{ turn }} turns_left={{ turns_left }} passed={{ passed }} total={{ total }}
solved={{ solved }} outcome={{ outcome }} timed_out={{ timed_out }} source={{ source }}
entry_point={{ entry_point }} omitted={{ omitted }} failures={{ failures }}

{{ turns_left }} attempts left."""


@pytest.mark.parametrize("attack", sorted(HOSTILE))
def test_every_feedback_template_variable_is_computed_from_the_visible_run(
        attack: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    prompts = tmp_path_factory.mktemp("prompts")
    (prompts / "feedback.j2").write_text(EVERY_VARIABLE)
    rendered = set()
    for secret in RLEF_HIDDEN:
        text, trajectory = everything_shown(secret, HOSTILE[attack], stop_when="visible", prompts_dir=prompts)
        assert "outcome=" in text and "timed_out=" in text  # the template was used
        rendered.add(text + json.dumps([t.feedback for t in trajectory.turns]))
    assert len(rendered) == 1, attack


def test_async_steps_keep_the_same_view() -> None:
    async def shown(secret: int) -> str:
        env = MultiTurnCodingEnv(tasks=[task_with_hidden_input(secret)], max_turns=2, timeout=TIMEOUT,
                                 feedback_from="visible", stop_when="visible")
        out: list[Any] = [env.reset(task_index=0)]
        out += list(await env.astep(HOSTILE["raise"]))[::3]  # obs and info
        return json.dumps(out, sort_keys=True)

    assert len({asyncio.run(shown(s)) for s in HIDDEN_INPUTS}) == 1


def test_rlef_stop_ends_when_the_visible_checks_pass_and_pays_the_hidden_score() -> None:
    """stop_when="visible": a candidate passing only the public test ends the episode on turn 1,
    as solved by the visible checks; its reward is the hidden score (1 of 2)."""
    env = MultiTurnCodingEnv(tasks=[task_with_hidden_input(918273645)], max_turns=3,
                             feedback_from="visible", stop_when="visible")
    env.reset(task_index=0)
    _, reward, done, info = env.step(HOSTILE["half_wrong"])
    assert done and info["stop_reason"] == "solved" and info["terminated"]
    assert reward == 0.5
    assert env.trajectory is not None and env.trajectory.decided_by == "visible_checks"
    assert env.trajectory.solved_turn is None  # the hidden checks did not all pass


def test_hidden_stop_continues_when_only_the_visible_checks_pass() -> None:
    env = MultiTurnCodingEnv(tasks=[task_with_hidden_input(918273645)], max_turns=3,
                             feedback_from="visible")
    env.reset(task_index=0)
    obs, _, done, info = env.step(HOSTILE["half_wrong"])
    assert not done and "passes every visible example" in obs["feedback"]
    assert info["passed"] == info["total"] == 1 and info["view"] == "visible"


def test_unknown_stop_condition_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="stop_when must be one of hidden, visible"):
        MultiTurnCodingEnv(stop_when="public")


def test_rlef_stop_with_full_feedback_shows_hidden_failures_and_stops_on_visible() -> None:
    env = MultiTurnCodingEnv(tasks=[task_with_hidden_input(918273645)], max_turns=3, stop_when="visible")
    env.reset(task_index=0)
    _, reward, done, info = env.step(HOSTILE["half_wrong"])
    assert done and info["stop_reason"] == "solved" and reward == 0.5
    assert info["view"] == "hidden" and info["passed"] == 1 and info["total"] == 2
