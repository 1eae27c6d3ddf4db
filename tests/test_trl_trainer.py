"""The TRL recipes, trained for real: GRPOTrainer (TRL 1.16, CPU torch) on the tiny local chat
model for two steps, single-turn with code_reward and multi-turn with environment_factory. No
device field is passed: the recipes choose the CPU themselves (device_args)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.recipes import recipe
from support.tiny_model import MULTI_TURNS, default_tasks

pytest.importorskip("trl")

SMALL = dict(max_steps=2, num_generations=4, per_device_train_batch_size=4, max_completion_length=96,
             logging_steps=1, save_strategy="no", learning_rate=1e-4, seed=0,
             report_to="none")


@pytest.fixture(autouse=True)
def _quiet_trl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def logged(trainer: Any, key: str) -> list[float]:
    return [float(h[key]) for h in trainer.state.log_history if key in h]


def test_single_turn_recipe_trains_two_steps_and_logs_varying_code_rewards(
        tiny_chat_model: str, tmp_path: Path) -> None:
    """code_reward scores every completion; its metrics are logged and rewards vary in a group."""
    trainer = recipe("trl_grpo").build(tiny_chat_model, default_tasks() * 4,
                                       output_dir=str(tmp_path), **SMALL)
    trainer.train()
    assert trainer.state.global_step == 2
    assert len(logged(trainer, "rewards/code_reward/mean")) == 2
    assert max(logged(trainer, "rewards/code_reward/std")) > 0  # right and wrong answers in a group
    assert logged(trainer, "code_reward/pass")


class SandboxLog:
    """Wraps the factory's sandbox grader and keeps every grading it returns: the proof that a
    tool call reached the sandbox is a result the sandbox produced for its code."""

    def __init__(self, factory: Any) -> None:
        self.inner = factory.grader.inner
        self.results: list[tuple[str, Any]] = []
        factory.grader.inner = self

    def score(self, task: Any, code: str, *, timeout: float) -> Any:
        scored = self.inner.score(task, code, timeout=timeout)
        self.results.append((code, scored.hidden))
        return scored

    async def ascore(self, task: Any, code: str, *, timeout: float) -> Any:
        scored = await self.inner.ascore(task, code, timeout=timeout)
        self.results.append((code, scored.hidden))
        return scored


def assert_sandbox_graded(trainer: Any, sandbox: SandboxLog) -> None:
    """Every submit call of the last step is a graded turn whose code the sandbox ran against
    every hidden check (isolated, not a stand-in result), and some checks passed."""
    (task,) = default_tasks()
    ran = {code: result for code, result in sandbox.results}
    assert ran and all(r.total == len(task.checks) for r in ran.values())
    assert sum(r.passed for r in ran.values()) > 0
    assert {r.isolation for r in ran.values()} <= {"strict", "rlimits"}
    episodes = [env.env.trajectory for pool in trainer._environment_pool.values() for env in pool
                if env.env.trajectory is not None and env.env.trajectory.turns]
    assert episodes and {t.task_name for t in episodes} == {task.name}
    for turn in (turn for t in episodes for turn in t.turns):
        assert turn.code in ran and (turn.passed, turn.total) == (ran[turn.code].passed, ran[turn.code].total)


def test_multi_turn_recipe_trains_two_steps_with_tool_calls_graded_in_the_sandbox(
        tiny_chat_model: str, tmp_path: Path) -> None:
    """submit calls reach the sandbox (overlapped by PrefetchGrading), get_reward is logged."""
    trainer = recipe("trl_multiturn").build(tiny_chat_model, default_tasks() * 4,
                                            max_turns=MULTI_TURNS, output_dir=str(tmp_path), **SMALL)
    factory = trainer.environment_factories[None]
    sandbox = SandboxLog(factory)
    trainer.train()
    assert trainer.state.global_step == 2
    assert max(logged(trainer, "tools/call_frequency")) > 0
    rewards = logged(trainer, "rewards/CodingToolEnv/mean")
    assert len(rewards) == 2 and max(rewards) > 0
    assert factory.grader.hits > 0  # gradings were started before TRL's tool loop asked for them
    assert_sandbox_graded(trainer, sandbox)


def test_plain_grpo_trainer_takes_the_factory_as_it_is(tiny_chat_model: str, tmp_path: Path) -> None:
    """GRPOTrainer(environment_factory=environment_factory(tasks, max_turns=3)), no mixin: two
    steps, submit graded in the sandbox one call at a time, the episode's return logged."""
    from trl import GRPOConfig, GRPOTrainer

    from agentenv.integrations.trl import device_args, environment_factory, to_hf_dataset

    tasks = default_tasks() * 4
    factory = environment_factory(tasks, max_turns=MULTI_TURNS)
    trainer = GRPOTrainer(
        model=tiny_chat_model,
        args=GRPOConfig(output_dir=str(tmp_path), max_tool_calling_iterations=MULTI_TURNS,
                        remove_unused_columns=False, **device_args(), **SMALL),
        train_dataset=to_hf_dataset(tasks, max_turns=MULTI_TURNS),
        environment_factory=factory,
    )
    sandbox = SandboxLog(factory)
    trainer.train()
    assert trainer.state.global_step == 2
    assert max(logged(trainer, "tools/call_frequency")) > 0
    assert len(logged(trainer, "rewards/CodingToolEnv/mean")) == 2
    assert factory.grader.prefetched == factory.grader.hits == 0  # nothing graded ahead
    assert_sandbox_graded(trainer, sandbox)
