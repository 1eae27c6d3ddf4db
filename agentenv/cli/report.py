"""``agentenv report``: the text report, HTML page and rollout browser of a run; with two runs
(one single-step with ``--samples k``, one multi-turn) revise vs resample."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from agentenv.choices import Mode
from agentenv.cli.common import EXIT_OK, NONNEG_FLOAT, POSITIVE_INT, Command, quiet, stderr, stdout
from agentenv.errors import ConfigError


@click.command("report", cls=Command,
               short_help="plots and an HTML page for a run; with two runs (one single-step with "
                          "--samples k, one multi-turn) revise vs resample",
               help="Plots and an HTML page for a run; with two runs (one single-step with --samples k, "
                    "one multi-turn) revise vs resample. RUN_DIR: one run, or two for revise vs resample.")
@click.argument("runs", nargs=-1, required=True, metavar="RUN_DIR...")
@click.option("--out", default=None, help="output directory (default: inside the run)")
@click.option("--k", type=POSITIVE_INT, default=None,
              help="budget in calls for revise vs resample (default: the multi-turn max_turns)")
@click.option("--no-credit", is_flag=True, help="do not export credit.jsonl")
@click.option("--gamma", type=NONNEG_FLOAT, default=1.0, help="discount for credit export")
def report_command(runs: tuple[str, ...], out: str | None, k: int | None, no_credit: bool, gamma: float) -> int:
    from agentenv import report

    printer = stdout()
    if len(runs) == 1:
        metrics = report.write_report(runs[0], out, credit=not no_credit, gamma=gamma)
        printer.print(report.format_report(metrics))
        _print_written(metrics)
        return EXIT_OK
    if len(runs) != 2:
        raise ConfigError("report takes one run, or two (a single-step run and a multi-turn run)")
    modes = {run: report.run_mode(report.load_run(run)) for run in runs}
    single = [r for r, m in modes.items() if m == Mode.SINGLE_STEP]
    multi = [r for r, m in modes.items() if m != Mode.SINGLE_STEP]
    if not single:  # two multi-turn runs (or one twice): the first's first turns are the samples
        single, multi = [runs[0]], [runs[1]]
    if len(single) != 1 or len(multi) != 1:
        raise ConfigError("revise vs resample needs one single-step run (agentenv run --single-step "
                          f"--samples k) and one multi-turn run; got modes {sorted(modes.values())}")
    result = report.write_revise_report(single[0], multi[0], out, k=k)
    printer.print(report.format_revise(result))
    _print_written(result)
    return EXIT_OK


def _print_written(result: Mapping[str, Any]) -> None:
    files = result.get("files", {})
    stdout().print("wrote " + ", ".join(sorted(files.values())))
    if not quiet():
        for note in result.get("notes", []):
            stderr().print(f"note: {note}")
    page = files.get("html")
    if page:
        browse = f"; every episode: {files['episodes']}" if files.get("episodes") else ""
        stdout().print(f"open {page} in a browser{browse}")
