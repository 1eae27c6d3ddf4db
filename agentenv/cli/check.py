"""``agentenv check``: score one code file (or a model's answer) against a task, failures shown."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from agentenv import settings
from agentenv.choices import IsolationLevel, values
from agentenv.cli.common import (
    EXIT_FAILURES,
    EXIT_OK,
    NONNEG_FLOAT,
    Command,
    TaskSelection,
    find_task,
    load_tasks,
    stdout,
    task_options,
)
from agentenv.errors import ConfigError
from agentenv.untrusted import printable


@click.command("check", cls=Command, short_help="score one code file against a task",
               help="Score one code file against a task. CODE_FILE: a .py file, or a text/Markdown "
                    "answer with a code block.")
@click.argument("code_file")
@click.option("--task", "task_name", required=True, help="task name")
@task_options()
@click.option("--timeout", type=NONNEG_FLOAT, default=settings.DEFAULT_TIMEOUT,
              help=f"sandbox seconds (default: {settings.DEFAULT_TIMEOUT:g})")
@click.option("--isolation", type=click.Choice(values(IsolationLevel)), default=None,
              help="the isolation level required (default: the best available)")
def check_command(code_file: str, task_name: str, selection: TaskSelection, timeout: float,
                  isolation: str | None) -> int:
    from agentenv.extract import extract_code
    from agentenv.grading.scoring import score
    from agentenv.records import classify_outcome
    from agentenv.rewards import dense_reward

    path = Path(code_file)
    if not path.is_file():
        raise ConfigError(f"no such file: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text") from None
    task = find_task(load_tasks(selection), task_name, selection.spec)
    # A .py file is the code itself (a syntax error must reach the sandbox and be reported);
    # anything else is a model's answer, from which the code block is extracted.
    code = text if path.suffix == ".py" else extract_code(text, task.entry_point)
    scored = score(task, code, timeout=timeout, isolation=isolation)
    result = scored.hidden
    reward = dense_reward(result, code)
    out = stdout()
    out.print(f"task {printable(task.name)}: {classify_outcome(code, result)}, passed {result.passed}/{result.total}, "
              f"reward {reward:.3f}" + (" (timed out)" if result.timed_out else "")
              + f"  [isolation: {result.isolation}]")
    if scored.visible is not None:
        out.print(f"visible checks: passed {scored.visible.passed}/{scored.visible.total}")
    if result.failures:
        table = Table(title="failures", title_justify="left")
        for column in ("#", "kind", "check", "message"):
            table.add_column(column)
        for row in _failure_rows(result.failures):  # candidate text is data: escaped
            table.add_row(*(Text(printable(cell)) for cell in row))
        out.print(table)
    return EXIT_OK if result.all_passed else EXIT_FAILURES


def _failure_rows(failures: Sequence[Any]) -> list[tuple[str, str, str, str]]:
    """One row per failing check, but a run of checks failing with the same kind and message (a
    syntax error fails every check alike) is one row naming how many checks it covers."""
    groups: list[list[Any]] = []
    for f in failures:
        if groups and (groups[-1][0].kind, groups[-1][0].message) == (f.kind, f.message):
            groups[-1].append(f)
        else:
            groups.append([f])
    rows = []
    for group in groups:
        first = group[0]
        if len(group) == 1:
            rows.append((str(first.index), first.kind, first.check, first.message))
        else:
            which = "all" if len(group) == len(failures) else "these"
            rows.append((f"{first.index}-{group[-1].index}", first.kind,
                         f"{which} {len(group)} checks, e.g. {first.check}", first.message))
    return rows
