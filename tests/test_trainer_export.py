"""Trainer-ready records: token ids and logprobs from a vLLM-style server reach the turn records,
and export as per-turn and packed per-episode rows (loss mask, spans, advantages), JSONL or Parquet."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from pathlib import Path

import pytest

from agentenv.credit import turn_advantages
from agentenv.envs.multiturn import MultiTurnCodingEnv
from agentenv.errors import ConfigError
from agentenv.policies import OpenAIPolicy
from agentenv.records import Trajectory
from agentenv.report.trainer_export import episode_rows, export_trainer_records, trainer_rows
from agentenv.rollout.episode import run_episode
from agentenv.tasks import Task
from agentenv.testing import ChatServer

ADD = Task(name="add", prompt="Write `add(a, b)`.", entry_point="add",
           checks=("assert add(2, 3) == 5", "assert add(10, 5) == 15", "assert add(-1, 1) == 0",
                   "assert add(-4, -6) == -10"))
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"
HALF = "```python\ndef add(a, b):\n    return abs(a) + abs(b)\n```"
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"


@pytest.fixture(scope="module")
def episodes() -> list[Trajectory]:
    out = []
    for sample, replies in enumerate(([WRONG, HALF, RIGHT], [HALF, HALF, HALF], [WRONG, WRONG, WRONG])):
        with ChatServer(list(replies)) as server:
            policy = OpenAIPolicy("test-model", base_url=server.url, api_key="x", max_retries=0,
                                  return_tokens=True)
            env = MultiTurnCodingEnv(tasks=[ADD], max_turns=3)
            trajectory = run_episode(env, policy, task_index=0, sample=sample, episode_id=f"add#{sample}")
            bodies = [r.body for r in server.chat_requests]
        assert all(b["logprobs"] is True and b["return_token_ids"] is True for b in bodies)
        out.append(trajectory)
    return out


def test_token_ids_and_logprobs_reach_every_turn_record(episodes: list[Trajectory]) -> None:
    for trajectory in episodes:
        for record in trajectory.turns:
            assert record.prompt_token_ids and record.completion_token_ids
            assert record.logprobs is not None and len(record.logprobs) == len(record.completion_token_ids)
        back = Trajectory.from_dict(json.loads(json.dumps(trajectory.to_dict())))
        assert back.turns == trajectory.turns


def test_turn_rows_mask_the_completion_and_carry_its_advantage(episodes: list[Trajectory]) -> None:
    rows = trainer_rows(episodes)
    assert len(rows) == sum(len(t.turns) for t in episodes) == 9
    advantages = turn_advantages(episodes, scheme="delta")
    flat = [a for per in advantages for a in per]
    for row, advantage in zip(rows, flat, strict=True):
        n_prompt, n_completion = len(row["prompt_token_ids"]), len(row["completion_token_ids"])
        assert row["input_ids"] == row["prompt_token_ids"] + row["completion_token_ids"]
        assert row["loss_mask"] == [0] * n_prompt + [1] * n_completion
        assert row["token_advantages"][n_prompt:] == [advantage] * n_completion
        assert set(row["token_advantages"][:n_prompt]) <= {0.0}
        assert row["advantage"] == advantage
    assert len({r["episode_advantage"] for r in rows}) == 3  # one per episode, GRPO over the group


def test_packed_rows_put_every_reply_on_its_span(episodes: list[Trajectory]) -> None:
    rows, skipped = episode_rows(episodes)
    assert skipped == 0 and len(rows) == 3
    for row, trajectory in zip(rows, episodes, strict=True):
        assert len(row["assistant_spans"]) == len(trajectory.turns)
        for (start, end), record, advantage in zip(row["assistant_spans"], trajectory.turns,
                                                    row["turn_advantages"], strict=True):
            assert row["input_ids"][start:end] == list(record.completion_token_ids or ())
            assert row["token_advantages"][start:end] == [advantage] * (end - start)
            assert row["logprobs"][start:end] == list(record.logprobs or ())
        assert sum(row["loss_mask"]) == sum(len(r.completion_token_ids or ()) for r in trajectory.turns)


def test_an_episode_whose_history_was_retokenized_is_not_packed(episodes: list[Trajectory]) -> None:
    long = episodes[0]
    second = long.turns[1]
    drifted_ids = (999_999, *(second.prompt_token_ids or ())[1:])
    drifted = dataclasses.replace(long, turns=[long.turns[0], dataclasses.replace(second, prompt_token_ids=drifted_ids),
                                               *long.turns[2:]])
    rows, skipped = episode_rows([drifted, *episodes[1:]])
    assert skipped == 1 and len(rows) == 2


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_export_writes_rows_a_trainer_reads_back(episodes: list[Trajectory], tmp_path: Path, fmt: str) -> None:
    path = export_trainer_records(episodes, tmp_path / f"rows.{fmt}", format=fmt, packed=True)
    if fmt == "jsonl":
        back = [json.loads(line) for line in path.read_text().splitlines()]
    else:
        pq = pytest.importorskip("pyarrow.parquet")
        back = pq.read_table(path).to_pylist()
    assert [r["episode_id"] for r in back] == ["add#0", "add#1", "add#2"]
    assert back[0]["input_ids"] == episode_rows(episodes)[0][0]["input_ids"]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_exported_records_are_readable_like_the_run_files(episodes: list[Trajectory], tmp_path: Path,
                                                          fmt: str) -> None:
    """Written through a temporary file and a rename, yet 0644 under umask 022 (mkstemp's 0600
    kept other users and a trainer running as another user from reading them); no temporary
    file is left beside the result."""
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    previous = os.umask(0o022)
    try:
        path = export_trainer_records(episodes, tmp_path / f"rows.{fmt}", format=fmt)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_export_without_token_ids_says_how_to_get_them(tmp_path: Path) -> None:
    env = MultiTurnCodingEnv(tasks=[ADD], max_turns=1)
    from agentenv.policies import ScriptedPolicy

    trajectory = run_episode(env, ScriptedPolicy([ADD]), task_index=0)
    with pytest.raises(ConfigError, match="return_tokens=True"):
        export_trainer_records([trajectory], tmp_path / "x.jsonl")


def test_cli_run_with_return_tokens_gives_an_exportable_run(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from agentenv.cli import main
    from agentenv.tasks.builtin import builtin_tasks
    from agentenv.testing import ScriptedModel

    tasks = builtin_tasks()[:2]
    with ChatServer(ScriptedModel(tasks)) as server:
        assert main(["run", "--policy", "openai", "--base-url", server.url, "--model", "M",
                     "--return-tokens", "--limit", "2", "--samples", "2", "--max-turns", "3",
                     "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    capsys.readouterr()
    path = export_trainer_records(tmp_path / "run", packed=True)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert path.name == "trainer.jsonl" and len(rows) == 4
    assert all(sum(r["loss_mask"]) == sum(e - s for s, e in r["assistant_spans"]) for r in rows)
