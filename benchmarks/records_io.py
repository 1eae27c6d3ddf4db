"""Reading and writing a 10,000-episode ``trajectories.jsonl``: agentenv's records (msgspec,
``agentenv.serial``) beside a hand-written baseline (``json`` with field-by-field dicts, as the
records were read and written before), in the same run.

    python benchmarks/records_io.py [--episodes 10000] [--repeats 5]

The episodes are those of an offline run of the builtin tasks (scripted policy, three turns),
repeated to ``--episodes`` lines. Printed: the median seconds of each way to read every line
back into ``Trajectory`` records and to write them all out, and agentenv's speed-up.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from agentenv.grading.result import Failure
from agentenv.policies import ScriptedPolicy
from agentenv.records import RESEARCHER_ONLY, Trajectory, TurnRecord
from agentenv.rollout import RolloutConfig, run_rollouts
from agentenv.tasks.builtin import builtin_tasks

DERIVED = ("researcher_only", "partial", "terminated", "truncated", "first_turn_solved",
           "solved_turn", "final_reward", "total_tokens", "action_tokens")


def baseline_turn_to_dict(turn: TurnRecord) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(turn):
        value = getattr(turn, f.name)
        if f.name == "failures":
            value = [x.to_dict() for x in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def baseline_to_dict(t: Trajectory) -> dict[str, Any]:
    out = {f.name: getattr(t, f.name) for f in fields(t)}
    out["turns"] = [baseline_turn_to_dict(turn) for turn in t.turns]
    out["researcher_only"] = list(RESEARCHER_ONLY) if t.feedback_from == "visible" else []
    for name in DERIVED[1:]:
        out[name] = getattr(t, name)
    return out


def baseline_turn_from_dict(data: Mapping[str, Any]) -> TurnRecord:
    known = {f.name for f in fields(TurnRecord)}
    kwargs = {k: v for k, v in data.items() if k in known}
    kwargs["failures"] = tuple(Failure.from_dict(x) for x in data.get("failures", ()))
    for name in ("newly_passed", "newly_failed", "passed_indices"):
        kwargs[name] = tuple(data.get(name, ()))
    for name in ("prompt_token_ids", "completion_token_ids", "logprobs"):
        if data.get(name) is not None:
            kwargs[name] = tuple(data[name])
    return TurnRecord(**kwargs)


def baseline_from_dict(data: Mapping[str, Any]) -> Trajectory:
    known = {f.name for f in fields(Trajectory)}
    kwargs = {k: v for k, v in data.items() if k in known and k not in DERIVED}
    kwargs["turns"] = [baseline_turn_from_dict(t) for t in data.get("turns", ())]
    kwargs["template_ids"] = dict(data.get("template_ids", {}))
    kwargs["opening"] = [dict(m) for m in data.get("opening", ())]
    kwargs["metadata"] = dict(data.get("metadata", {}))
    return Trajectory(**kwargs)


def episodes(n: int) -> list[bytes]:
    with tempfile.TemporaryDirectory() as out:
        run_rollouts(builtin_tasks(), ScriptedPolicy(), RolloutConfig(max_turns=3), out)
        lines = (Path(out) / "trajectories.jsonl").read_bytes().splitlines()
    return [line for _ in range(n // len(lines) + 1) for line in lines][:n]


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    lines = episodes(args.episodes)
    records = [Trajectory.from_json(line) for line in lines]
    assert records == [baseline_from_dict(json.loads(line)) for line in lines]
    assert [json.loads(r.to_json()) for r in records[:50]] == [baseline_to_dict(r) for r in records[:50]]
    size = sum(len(line) + 1 for line in lines) / 2**20
    print(f"{len(lines)} episodes, {size:.1f} MiB of trajectories.jsonl; median of {args.repeats}")
    rows = [
        ("read", lambda: [baseline_from_dict(json.loads(line)) for line in lines],
         lambda: [Trajectory.from_json(line) for line in lines]),
        ("write", lambda: [json.dumps(baseline_to_dict(r), ensure_ascii=False) for r in records],
         lambda: [r.to_json() for r in records]),
    ]
    print(f"{'':6} {'json + hand-written':>20} {'agentenv (msgspec)':>20} {'speed-up':>9}")
    for name, baseline, ours in rows:
        base, new = median_seconds(baseline, args.repeats), median_seconds(ours, args.repeats)
        print(f"{name:6} {base:19.3f}s {new:19.3f}s {base / new:8.1f}x")


if __name__ == "__main__":
    main()
