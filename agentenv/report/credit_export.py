"""Exporting a run's per-turn credit for trainers: ``credit.jsonl`` next to the trajectories.

One JSON line per turn, from :func:`agentenv.credit.credit_rows`: the episode id, task, sample,
turn, reward and delta, then for every credit scheme the turn's return (``return_<scheme>``),
the episode's group-normalised advantage (``adv_<scheme>``, groups are the samples of a task)
and the per-turn advantage (``turn_adv_<scheme>``). The file is written to a temporary name
and renamed, so a trainer never reads half of it. The numbers are defined in
:mod:`agentenv.credit`; this module only reads the run and writes the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentenv.credit import SCHEMES, credit_rows
from agentenv.report.runs import load_run, trajectories_path
from agentenv.rollout.store import replacing
from agentenv.untrusted import json_line

__all__ = ["CREDIT_FILE", "export_credit"]

CREDIT_FILE = "credit.jsonl"


def export_credit(run: str | Path, out: str | Path | None = None, *, gamma: float = 1.0,
                  schemes: Sequence[str] = SCHEMES, scale: str = "std") -> Path:
    """Write the run's per-turn returns and advantages as JSONL; returns the file's path.

    ``out`` defaults to ``credit.jsonl`` in the run directory. ``gamma`` is the discount of the
    discounted and improvement schemes; ``scale`` is ``"std"`` (GRPO) or ``"none"``.
    """
    trajectories = load_run(run)
    rows = credit_rows(trajectories, schemes=schemes, gamma=gamma, scale=scale)
    target = Path(out) if out is not None else trajectories_path(run).parent / CREDIT_FILE
    with replacing(target) as temporary, open(temporary, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json_line(row) + "\n")  # any task name fits
    return target
