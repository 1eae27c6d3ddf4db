"""The reader policy: its revisions depend on what the feedback shows, so a feedback-template
change has a measurable effect offline (the scripted policy's does not)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv import MultiTurnCodingEnv
from agentenv.errors import ConfigError
from agentenv.policies import ReaderPolicy, ScriptedPolicy, make_policy
from agentenv.policies.reader import shown_failures
from agentenv.rollout import RolloutConfig, run_rollouts
from agentenv.tasks.builtin import builtin_tasks

TASKS = builtin_tasks()
TERSE = ("{% if solved %}All tests passed.{% else %}Your solution passed {{ passed }} of "
         "{{ total }} tests.{% endif %}\n")


def terse_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "terse"
    directory.mkdir()
    (directory / "feedback.j2").write_text(TERSE)
    return directory


def by_task(trajectories: list) -> dict:
    return {(t.task_name, t.sample): t for t in trajectories}


def test_a_feedback_that_shows_failures_is_repaired_more_often(tmp_path: Path) -> None:
    """Same tasks, seeds and first turns; only the feedback template differs: the default one
    (failures listed) gets more episodes solved than one that lists none."""
    config = dict(max_turns=3, samples=2)
    shown = run_rollouts(TASKS, ReaderPolicy(TASKS), RolloutConfig(**config)).trajectories
    hidden = run_rollouts(TASKS, ReaderPolicy(TASKS),
                          RolloutConfig(**config, prompts_dir=str(terse_dir(tmp_path)))).trajectories
    a, b = by_task(shown), by_task(hidden)
    assert a.keys() == b.keys()
    assert all(a[k].turns[0].code == b[k].turns[0].code for k in a)  # the same first samples
    solved_shown = sum(t.solved_turn is not None for t in shown)
    solved_hidden = sum(t.solved_turn is not None for t in hidden)
    assert solved_shown - solved_hidden >= len(TASKS) // 2


def test_the_scripted_policy_shows_no_such_effect(tmp_path: Path) -> None:
    """The contrast the reader exists for: the scripted policy ignores the feedback."""
    config = dict(max_turns=3, samples=1)
    shown = run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(**config)).trajectories
    hidden = run_rollouts(TASKS, ScriptedPolicy(TASKS),
                          RolloutConfig(**config, prompts_dir=str(terse_dir(tmp_path)))).trajectories
    assert [t.final_reward for t in shown] == [t.final_reward for t in hidden]


def test_shown_failures_counts_the_checks_the_feedback_quotes() -> None:
    task = next(t for t in TASKS if len(t.checks) >= 3)
    env = MultiTurnCodingEnv(tasks=[task], max_turns=2, seed=0)
    env.reset(task_index=0)
    obs, _, _, _ = env.step(f"def {task.entry_point}(*args, **kwargs):\n    return None\n")
    assert shown_failures(task, obs["feedback"]) >= 2
    assert shown_failures(task, "Your solution passed 0 of 5 tests.") == 0
    first = str(task.checks[0])
    assert shown_failures(task, f"failed: `{first}`") >= 1


def test_more_shown_failures_mean_a_likelier_repair() -> None:
    policy = ReaderPolicy(TASKS)
    chances = [policy.repair_chance(n) for n in range(6)]
    assert chances == sorted(chances) and chances[0] == pytest.approx(0.05) and chances[5] > 0.8


def test_it_is_stateless_and_seeded() -> None:
    """The same observation gets the same answer from two instances; the seed picks the sample."""
    env = MultiTurnCodingEnv(tasks=TASKS, max_turns=3, seed=0)
    obs = env.reset(task_index=3)
    obs = {**obs, "seed": 7}
    assert ReaderPolicy(TASKS)(obs) == ReaderPolicy(TASKS)(obs)
    answers = {ReaderPolicy(TASKS)({**obs, "seed": s}) for s in range(20)}
    assert len(answers) > 1


def test_it_is_built_by_name_and_checks_its_options() -> None:
    assert isinstance(make_policy("reader", tasks=TASKS), ReaderPolicy)
    assert make_policy("reader", tasks=TASKS, per_failure=0.5).per_failure == 0.5
    with pytest.raises(ConfigError):
        ReaderPolicy(TASKS, per_failure=1.5)


def test_it_survives_pickling_for_ray_workers() -> None:
    import pickle

    env = MultiTurnCodingEnv(tasks=TASKS, max_turns=3, seed=0)
    obs = {**env.reset(task_index=5), "seed": 3}
    policy = ReaderPolicy(TASKS)
    assert pickle.loads(pickle.dumps(policy))(obs) == policy(obs)
