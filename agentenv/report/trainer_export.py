"""Trainer-ready records: token ids, logprobs, assistant spans (the loss mask) and advantages.

For runs whose policy returned token ids (``OpenAIPolicy(return_tokens=True)`` against a
vLLM-style server), a trainer can consume these rows without re-tokenizing anything:

- ``trainer_rows(trajectories, ...)``, one row per turn: ``prompt_token_ids``,
  ``completion_token_ids``, ``completion_logprobs``, ``input_ids`` (prompt then completion),
  ``loss_mask`` (1 on the completion's tokens), the turn's ``advantage`` spread over its tokens
  (``token_advantages``, 0 on the prompt), and the ids that tie it to its episode.
- ``episode_rows(trajectories, ...)``, one packed row per episode when every turn's prompt starts
  with the previous turn's prompt and completion (the server rendered the history as it was
  generated): the last prompt plus the last completion as ``input_ids``, every assistant reply's
  ``assistant_spans`` ``[start, end)``, the ``loss_mask`` over them, each turn's advantage on its
  span and the logprobs aligned to ``input_ids`` (0.0 outside the spans). Episodes where that
  does not hold are left out and counted (re-tokenization drift: train on the turn rows).

Advantages are :mod:`agentenv.credit`'s: per turn, ``turn_advantages`` under ``scheme``
(default ``"delta"``, the env's default step reward); per episode, ``group_advantages`` with
TRL's ``scale_rewards`` and ``baseline`` (``episode_advantage`` in every row).
``export_trainer_records(run, out, format=...)`` writes JSONL, or Parquet (``pyarrow``).
Turns without token ids (offline policies) have no rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenv.choices import ExportFormat, parse, values
from agentenv.credit import group_advantages, turn_advantages
from agentenv.errors import ConfigError, MissingDependency
from agentenv.records import Trajectory
from agentenv.report.runs import load_run, trajectories_path
from agentenv.rollout.store import replacing
from agentenv.untrusted import json_line

__all__ = ["TRAINER_FILE", "episode_rows", "export_trainer_records", "trainer_rows"]

TRAINER_FILE = "trainer"  # .jsonl or .parquet
FORMATS = values(ExportFormat)


def _advantages(trajectories: Sequence[Trajectory], scheme: str, scale_rewards: str,
                baseline: str) -> tuple[list[list[float]], list[float]]:
    per_turn = turn_advantages(trajectories, scheme=scheme)
    per_episode = group_advantages(trajectories, scheme=scheme, scale_rewards=scale_rewards,
                                   baseline=baseline)
    return per_turn, per_episode


def trainer_rows(trajectories: Sequence[Trajectory], *, scheme: str = "delta",
                 scale_rewards: str = "group", baseline: str = "mean") -> list[dict[str, Any]]:
    """One row per turn that carries the server's token ids (see the module docstring)."""
    per_turn, per_episode = _advantages(trajectories, scheme, scale_rewards, baseline)
    rows = []
    for i, trajectory in enumerate(trajectories):
        for t, record in enumerate(trajectory.turns):
            if record.prompt_token_ids is None or record.completion_token_ids is None:
                continue
            prompt, completion = list(record.prompt_token_ids), list(record.completion_token_ids)
            advantage = per_turn[i][t]
            rows.append({
                "episode_id": trajectory.episode_id, "task_name": trajectory.task_name,
                "sample": trajectory.sample, "turn": record.turn, "reward": record.reward,
                "prompt_token_ids": prompt, "completion_token_ids": completion,
                "completion_logprobs": list(record.logprobs) if record.logprobs is not None else None,
                "input_ids": prompt + completion,
                "loss_mask": [0] * len(prompt) + [1] * len(completion),
                "advantage": advantage, "episode_advantage": per_episode[i],
                "token_advantages": [0.0] * len(prompt) + [advantage] * len(completion),
            })
    return rows


def _packed(trajectory: Trajectory, advantages: Sequence[float]) -> dict[str, Any] | None:
    turns = trajectory.turns
    if not turns or any(r.prompt_token_ids is None or r.completion_token_ids is None for r in turns):
        return None
    for before, after in itertools.pairwise(turns):
        prefix = list(before.prompt_token_ids or ()) + list(before.completion_token_ids or ())
        if list(after.prompt_token_ids or ())[:len(prefix)] != prefix:
            return None  # the history was re-tokenized differently: no single sequence
    last = turns[-1]
    input_ids = list(last.prompt_token_ids or ()) + list(last.completion_token_ids or ())
    mask = [0] * len(input_ids)
    token_advantages = [0.0] * len(input_ids)
    logprobs = [0.0] * len(input_ids)
    spans = []
    for record, advantage in zip(turns, advantages, strict=True):
        start = len(record.prompt_token_ids or ())
        end = start + len(record.completion_token_ids or ())
        spans.append([start, end])
        for k in range(start, end):
            mask[k], token_advantages[k] = 1, advantage
        if record.logprobs is not None:
            logprobs[start:start + len(record.logprobs)] = list(record.logprobs)[:end - start]
    return {"input_ids": input_ids, "assistant_spans": spans, "loss_mask": mask,
            "token_advantages": token_advantages, "logprobs": logprobs}


def episode_rows(trajectories: Sequence[Trajectory], *, scheme: str = "delta",
                 scale_rewards: str = "group", baseline: str = "mean"
                 ) -> tuple[list[dict[str, Any]], int]:
    """Packed rows, one per episode that can be packed, and how many could not be."""
    per_turn, per_episode = _advantages(trajectories, scheme, scale_rewards, baseline)
    rows, skipped = [], 0
    for i, trajectory in enumerate(trajectories):
        packed = _packed(trajectory, per_turn[i])
        if packed is None:
            skipped += any(r.completion_token_ids is not None for r in trajectory.turns)
            continue
        rows.append({"episode_id": trajectory.episode_id, "task_name": trajectory.task_name,
                     "sample": trajectory.sample, "turns": len(trajectory.turns),
                     "final_reward": trajectory.final_reward, "episode_advantage": per_episode[i],
                     "turn_advantages": per_turn[i], **packed})
    return rows, skipped


def _write(rows: list[dict[str, Any]], target: Path, fmt: str) -> None:
    if fmt == "parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise MissingDependency.for_extra("pyarrow", "parquet", "Parquet export") from exc
        with replacing(target) as temporary:
            pq.write_table(pa.Table.from_pylist(rows), temporary)
    else:
        with replacing(target) as temporary, open(temporary, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json_line(row) + "\n")


def export_trainer_records(run: str | Path | Sequence[Trajectory], out: str | Path | None = None, *,
                           format: str = "jsonl", packed: bool = False, scheme: str = "delta",
                           scale_rewards: str = "group", baseline: str = "mean") -> Path:
    """Write per-turn rows (or, ``packed=True``, per-episode rows) as JSONL or Parquet; returns
    the file. ``out`` defaults to ``trainer.<format>`` in the run directory."""
    format = parse(ExportFormat, format, "format").value
    if isinstance(run, (str, Path)):
        trajectories, default_dir = load_run(run), trajectories_path(run).parent
    else:
        trajectories, default_dir = list(run), None
    if packed:
        rows, _skipped = episode_rows(trajectories, scheme=scheme, scale_rewards=scale_rewards,
                                      baseline=baseline)
    else:
        rows = trainer_rows(trajectories, scheme=scheme, scale_rewards=scale_rewards, baseline=baseline)
    if not rows:
        raise ConfigError("no turn of this run carries token ids; run the policy with "
                          "OpenAIPolicy(return_tokens=True) against a server that returns them (vLLM)")
    if out is None and default_dir is None:
        raise ConfigError("pass out= when exporting trajectories that are not a run directory")
    target = Path(out) if out is not None else Path(str(default_dir)) / f"{TRAINER_FILE}.{format}"
    _write(rows, target, format)
    return target
