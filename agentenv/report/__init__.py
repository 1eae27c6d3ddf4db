"""Analysis of finished runs: reports, comparisons, revise vs resample, credit export.

The library side of ``agentenv report`` and ``agentenv compare``. The modules, in data order:

- ``runs``: read a run directory (``trajectories.jsonl``, ``summary.json``) into Trajectories;
- ``budget``: what an episode cost in policy calls and tokens;
- ``stats``: the unbiased pass@k estimator and bootstrap intervals (pure Python);
- ``metrics``: one run's pass@1, solve@T, repair rate, solve rate by turn, reward
  distribution, outcome transitions and tokens, overall, per difficulty and per task;
- ``compare``: two runs' per-task paired differences (the prompt-template experiment);
- ``revise``: revise (multi-turn) against resample (k single-step samples) at k calls;
- ``credit_export``: per-turn returns and advantages under every credit scheme, as JSONL;
- ``trainer_export``: token ids, logprobs, loss masks and advantages on assistant spans, as
  JSONL or Parquet (for runs whose policy returned token ids);
- ``plots`` / ``page`` / ``text``: PNG figures, the self-contained HTML pages (Jinja templates
  under ``templates/``, rendered with autoescape by ``templating``), terminal tables;
- ``writer``: run an analysis and write its files.

Nothing here prints; matplotlib (the ``plots`` extra) is imported only to draw.
"""

from __future__ import annotations

from agentenv.report.budget import EpisodeCost, episode_cost
from agentenv.report.compare import compare_runs
from agentenv.report.credit_export import CREDIT_FILE, export_credit
from agentenv.report.metrics import run_metrics
from agentenv.report.revise import revise_vs_resample
from agentenv.report.runs import load_run, load_summary, run_mode
from agentenv.report.stats import Interval, paired_bootstrap, pass_at_k
from agentenv.report.text import format_comparison, format_report, format_revise
from agentenv.report.trainer_export import export_trainer_records
from agentenv.report.writer import write_comparison, write_report, write_revise_report

__all__ = [
    "CREDIT_FILE",
    "EpisodeCost",
    "Interval",
    "compare_runs",
    "episode_cost",
    "export_credit",
    "export_trainer_records",
    "format_comparison",
    "format_report",
    "format_revise",
    "load_run",
    "load_summary",
    "paired_bootstrap",
    "pass_at_k",
    "revise_vs_resample",
    "run_metrics",
    "run_mode",
    "write_comparison",
    "write_report",
    "write_revise_report",
]
