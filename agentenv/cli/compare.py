"""``agentenv compare``: per-task paired differences of two runs (B - A) with bootstrap intervals."""

from __future__ import annotations

import click

from agentenv.cli.common import EXIT_OK, POSITIVE_INT, Command, stdout


@click.command("compare", cls=Command, short_help="per-task paired differences of two runs (B - A)",
               help="Per-task paired differences of two runs (B - A).")
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@click.option("--out", default=None, help="also write compare.json/compare.txt here")
@click.option("--boot", type=POSITIVE_INT, default=10_000, help="bootstrap resamples")
@click.option("--seed", type=int, default=0, help="bootstrap seed")
def compare_command(run_a: str, run_b: str, out: str | None, boot: int, seed: int) -> int:
    from agentenv import report

    if out:
        comparison = report.write_comparison(run_a, run_b, out, n_boot=boot, seed=seed)
    else:
        comparison = report.compare_runs(run_a, run_b, n_boot=boot, seed=seed)
    stdout().print(report.format_comparison(comparison))
    if out:
        stdout().print("wrote " + ", ".join(sorted(comparison.get("files", {}).values())))
    return EXIT_OK
