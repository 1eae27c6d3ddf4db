"""Branching rollouts: snapshot an episode between turns, restore it (here or elsewhere, from JSON),
and build repair trees whose shared first turn is generated and graded once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentenv.cli import main
from agentenv.envs.multiturn import EpisodeSnapshot, MultiTurnCodingEnv
from agentenv.errors import ConfigError, EnvStateError
from agentenv.grading.scoring import SandboxGrader, Scored
from agentenv.policies import ScriptedPolicy
from agentenv.report.metrics import run_metrics
from agentenv.rollout import RolloutConfig, run_rollouts
from agentenv.rollout.tree import run_repair_trees
from agentenv.tasks import Task
from agentenv.tasks.builtin import builtin_tasks

ADD = Task(name="add", prompt="Write `add(a, b)`.", entry_point="add",
           checks=("assert add(2, 3) == 5", "assert add(10, 5) == 15", "assert add(-1, 1) == 0",
                   "assert add(-4, -6) == -10"))
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"
HALF = "```python\ndef add(a, b):\n    return abs(a) + abs(b)\n```"
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"


class CountingGrader(SandboxGrader):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def score(self, task: Task, code: str, *, timeout: float) -> Scored:
        self.calls += 1
        return super().score(task, code, timeout=timeout)


def test_a_restored_branch_continues_exactly_like_the_original() -> None:
    original = MultiTurnCodingEnv(tasks=[ADD], max_turns=3, token_budget=2000)
    original.reset(task_index=0)
    original.step(WRONG)
    snapshot = original.snapshot()
    obs_a, reward_a, done_a, info_a = original.step(HALF)

    grader = CountingGrader()
    branch = MultiTurnCodingEnv(tasks=[ADD], max_turns=3, token_budget=2000, grader=grader)
    restored = branch.restore(EpisodeSnapshot.from_dict(json.loads(json.dumps(snapshot.to_dict()))))
    assert restored["turn"] == 2 and restored["turns_left"] == 2
    assert [m["role"] for m in restored["messages"]] == ["system", "user", "assistant", "user"]
    obs_b, reward_b, done_b, info_b = branch.step(HALF)
    assert grader.calls == 1  # only the new turn was graded: the prefix was not redone
    assert (obs_a, reward_a, done_a) == (obs_b, reward_b, done_b)
    assert {k: v for k, v in info_a.items() if k != "exec_seconds"} == \
        {k: v for k, v in info_b.items() if k != "exec_seconds"}
    assert original.trajectory is not None and branch.trajectory is not None
    strip = [{k: v for k, v in t.to_dict().items() if k != "exec_seconds"} for t in original.trajectory.turns]
    assert strip == [{k: v for k, v in t.to_dict().items() if k != "exec_seconds"} for t in branch.trajectory.turns]


def test_one_snapshot_branches_many_ways_each_with_its_own_seed() -> None:
    env = MultiTurnCodingEnv(tasks=[ADD], max_turns=2)
    env.reset(task_index=0)
    env.step(WRONG)
    snapshot = env.snapshot()
    finals = []
    for seed, answer in ((1, RIGHT), (2, HALF)):
        obs = env.restore(snapshot, seed=seed)
        assert obs["seed"] == seed
        _, _, done, _ = env.step(answer)
        assert done and env.trajectory is not None and env.trajectory.seed == seed
        finals.append(env.trajectory.final_reward)
    assert finals == [1.0, 0.5]


def test_snapshots_only_between_turns_and_only_under_the_same_settings() -> None:
    env = MultiTurnCodingEnv(tasks=[ADD], max_turns=2)
    with pytest.raises(EnvStateError, match="between turns"):
        env.snapshot()
    env.reset(task_index=0)
    env.step(WRONG)
    snapshot = env.snapshot()
    with pytest.raises(ConfigError, match="max_turns"):
        MultiTurnCodingEnv(tasks=[ADD], max_turns=3).restore(snapshot)
    with pytest.raises(ConfigError, match="task 'add'"):
        MultiTurnCodingEnv(tasks=builtin_tasks()[1:2], max_turns=2).restore(snapshot)
    env.step(RIGHT)
    with pytest.raises(EnvStateError):
        env.snapshot()  # the episode is over


def counting_policy(calls: list[Any]) -> Any:
    scripted = ScriptedPolicy(builtin_tasks())

    def policy(obs: Any) -> str:
        calls.append((obs["task_name"], obs["seed"], len(obs["messages"])))
        return scripted(obs)

    return policy


def test_a_repair_tree_generates_each_shared_first_turn_once(tmp_path: Path) -> None:
    tasks = builtin_tasks()[:6]
    calls: list[Any] = []
    result = run_repair_trees(tasks, counting_policy(calls), RolloutConfig(max_turns=2, seed=4),
                              tmp_path, initial=3, repairs=2)
    tree = result.summary["tree"]
    first_turns = [c for c in calls if c[2] == 2]
    assert len(first_turns) == 6 * 3 == tree["roots"]
    assert len(calls) == tree["roots"] + 2 * tree["failed_roots"] == tree["policy_calls"]
    assert tree["failed_roots"] > 0 and tree["calls_saved_by_sharing"] == tree["failed_roots"]
    by_root: dict[str, list[Any]] = {}
    for t in result.trajectories:
        by_root.setdefault(str(t.episode_id).split(".")[0], []).append(t)
    for root_id, leaves in by_root.items():
        meta = [t.metadata["tree"] for t in leaves]
        if len(leaves) == 1:
            assert meta[0]["branch"] is None and leaves[0].turns[0].outcome == "pass"
        else:
            assert [m["branch"] for m in meta] == [0, 1] and all(m["shared_turns"] == 1 for m in meta)
            assert len({t.turns[0].code_hash for t in leaves}) == 1, root_id  # one shared first program
            assert len({t.seed for t in leaves}) == 2
    again = run_repair_trees(tasks, counting_policy(calls := []), RolloutConfig(max_turns=2, seed=4),
                             tmp_path, initial=3, repairs=2)
    assert calls == [] and again.summary["tree"]["resumed_roots"] == 18
    lines = (tmp_path / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == len(result.trajectories)


def test_a_tree_counts_each_root_once() -> None:
    """A failed root is stored as M branches; the numbers weigh each by 1/M. The roots are seeded
    as a plain run's samples, so the tree's pass@1 is that run's, and its solve rate is the mean
    over roots of (solved first, else the fraction of its branches that repaired it)."""
    tasks = builtin_tasks()[:8]
    config = RolloutConfig(max_turns=2, seed=1, samples=3)
    tree = run_repair_trees(tasks, ScriptedPolicy(tasks), config, None, initial=3, repairs=2)
    plain = run_rollouts(tasks, ScriptedPolicy(tasks), config, None)
    assert tree.summary["tree"]["failed_roots"] > 0  # else nothing here is tested
    assert tree.summary["pass@1"] == pytest.approx(plain.summary["pass@1"])
    assert tree.summary["episodes"] > plain.summary["episodes"]  # every branch is still stored
    by_root: dict[str, list[Any]] = {}
    for t in tree.trajectories:
        by_root.setdefault(str(t.episode_id).split(".")[0], []).append(t)
    per_root = [sum(t.solved_turn is not None for t in leaves) / len(leaves) for leaves in by_root.values()]
    assert len(per_root) == 24
    assert tree.summary["solve_rate"] == pytest.approx(sum(per_root) / len(per_root))
    assert tree.summary["solve_rate_by_turn"][-1] == pytest.approx(tree.summary["solve_rate"])
    repaired = [sum(t.solved_turn is not None for t in leaves) / len(leaves)
                for leaves in by_root.values() if leaves[0].metadata["tree"]["branch"] is not None]
    assert tree.summary["repair_rate"] == pytest.approx(sum(repaired) / len(repaired))
    any_solved = [any(t.solved_turn is not None for t in leaves) for leaves in by_root.values()]
    assert tree.summary["tree"]["tree_solve_rate"] == pytest.approx(sum(any_solved) / len(any_solved))
    report = run_metrics(tree.trajectories)["overall"]  # the report weighs them the same way
    assert report["pass@1"] == pytest.approx(plain.summary["pass@1"])
    assert report["solve_rate"] == pytest.approx(tree.summary["solve_rate"])
    for row in tree.summary["per_task"]:  # per task too: 3 roots each
        mine = [t for t in tree.trajectories if t.task_name == row["task_name"]]
        first = {str(t.episode_id).split(".")[0]: t.first_turn_solved for t in mine}
        assert row["pass@1"] == pytest.approx(sum(first.values()) / 3)


def test_repair_trees_need_a_second_turn() -> None:
    with pytest.raises(ConfigError, match="max_turns >= 2"):
        run_repair_trees(builtin_tasks()[:1], ScriptedPolicy(), RolloutConfig(max_turns=1))


def test_the_cli_builds_repair_trees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--repair-tree", "2,3", "--max-turns", "2", "--limit", "4", "--no-progress",
                 "--out", str(tmp_path / "t")]) == 0
    out, _ = capsys.readouterr()
    assert "8 roots" in out and "branched 3 ways" in out and "tree solve rate" in out
    records = [json.loads(line) for line in (tmp_path / "t" / "trajectories.jsonl").read_text().splitlines()]
    assert records and all("tree" in r["metadata"] for r in records)
    summary = json.loads((tmp_path / "t" / "summary.json").read_text())
    assert summary["tree"]["initial"] == 2 and summary["tree"]["repairs"] == 3
