"""``agentenv tasks list|show|validate``: browse a task set, and check every task file and
every reference solution, reporting every problem (one broken task hides no other)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from agentenv.cli.common import (
    EXIT_FAILURES,
    EXIT_OK,
    NONNEG_FLOAT,
    Group,
    TaskSelection,
    find_task,
    load_tasks,
    plural,
    quiet,
    set_argument,
    state,
    stderr,
    stdout,
    task_options,
)
from agentenv.untrusted import printable


@click.group("tasks", cls=Group, short_help="list, show or validate tasks",
             help="List, show or validate tasks.")
@click.pass_context
def tasks_group(ctx: click.Context) -> None:
    if ctx.invoked_subcommand is None:
        state()["prog"] = ctx.command_path
        raise click.UsageError("choose an action: list, show NAME or validate SET", ctx)


@tasks_group.command("list", short_help="list the tasks of a set", help="List the tasks of a set.")
@set_argument
def list_command(set_: str | None, selection: TaskSelection) -> int:
    selection = selection.with_set(set_)
    tasks = load_tasks(selection)
    table = Table(title=f"{len(tasks)} task(s) in {selection.spec}", title_justify="left")
    for column in ("#", "name", "difficulty", "checks", "visible", "reference", "attempts", "tags"):
        table.add_column(column, justify="right" if column in ("#", "checks", "visible", "attempts") else "left")
    for i, task in enumerate(tasks):
        attempts = task.metadata.get("attempts") or ()
        table.add_row(str(i), printable(task.name), printable(task.difficulty or "-"),
                      str(len(task.checks)), str(len(task.visible_checks)),
                      "yes" if task.reference_solution else "no",
                      str(len(attempts)) if isinstance(attempts, list) else "-",
                      printable(", ".join(task.tags)))
    stdout().print(table)
    return EXIT_OK


@tasks_group.command("show", short_help="show one task in full", help="Show one task in full.")
@click.argument("name")
@task_options()
def show_command(name: str, selection: TaskSelection) -> int:
    from rich.syntax import Syntax

    task = find_task(load_tasks(selection), name, selection.spec)
    out = stdout()
    # Everything of a task file is data: its control characters are shown as escapes.
    out.print(printable(task.name), style="bold", end="")
    out.print(printable(f"  difficulty={task.difficulty or '-'}  entry_point={task.entry_point}  "
                        f"source={task.source}  tags={', '.join(task.tags) or '-'}"))

    def heading(text: str) -> None:
        out.print()
        out.print(text, style="bold")

    def code(source: str) -> Text:
        # Highlighted text, not a Syntax panel: a panel pads every line to the console's width.
        shown = printable(source.strip())
        text = Syntax(shown, "python").highlight(shown)
        text.rstrip()
        return text

    heading("prompt")
    out.print(printable(task.prompt.strip()))
    heading(f"hidden checks ({len(task.checks)})")
    for i, check in enumerate(task.checks):
        out.print(printable(f"  {i}. {check}"))
    if task.visible_checks:
        heading(f"visible checks ({len(task.visible_checks)})")
        for i, check in enumerate(task.visible_checks):
            out.print(printable(f"  {i}. {check}"))
    if task.setup_code.strip():
        heading("setup code")
        out.print(code(task.setup_code))
    if task.reference_solution:
        heading("reference solution")
        out.print(code(task.reference_solution))
    attempts = task.metadata.get("attempts") or []
    for i, attempt in enumerate(attempts if isinstance(attempts, list) else [], start=1):
        heading(f"scripted attempt {i}")
        out.print(code(str(attempt)))
    return EXIT_OK


@tasks_group.command("validate", short_help="check every task file and run every reference solution; "
                     "report every problem",
                     help="Check every task file and run every reference solution; report every problem.")
@set_argument
@click.option("--timeout", type=NONNEG_FLOAT, default=10.0, help="sandbox seconds per task (default: 10)")
@click.option("--no-progress", is_flag=True, help="no live progress bar")
def validate_command(set_: str | None, selection: TaskSelection, timeout: float, no_progress: bool) -> int:
    selection = selection.with_set(set_)
    tasks, problems = _validation_problems(selection)
    out = stdout()
    if problems:
        out.print(f"{plural(len(problems), 'problem')} in the task files:")
        for line in problems:
            out.print(Text(f"  {printable(line)}"))
    if not tasks:
        return EXIT_FAILURES
    progress = Progress(TextColumn("[bold]validating"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=stderr(), disable=no_progress or quiet(),
                        transient=True)
    rows: list[dict[str, Any]] = []
    with progress, ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        bar = progress.add_task("validate", total=len(tasks))
        for row in pool.map(lambda t: _validate_one(t, timeout), tasks):
            rows.append(row)
            progress.advance(bar)
    failing = [r for r in rows if r["reference"] is not None and
               (not r["reference"].all_passed or (r["visible"] is not None and not r["visible"].all_passed))]
    missing = [r for r in rows if r["reference"] is None]
    if failing:
        table = Table(title=f"{len(failing)} reference solution(s) fail", title_justify="left")
        for column in ("task", "hidden", "visible", "first failure"):
            table.add_column(column)
        for r in failing:
            ref, vis = r["reference"], r["visible"]
            first = (ref.failures or (vis.failures if vis is not None else ()) or (None,))[0]
            reason = f"[{first.kind}] {first.check}: {first.message}" if first is not None else "-"
            table.add_row(printable(r["task"].name), f"{ref.passed}/{ref.total}",
                          f"{vis.passed}/{vis.total}" if vis is not None else "-", printable(reason))
        out.print(table)
    for r in rows:
        for index, missing_names in r["unresolved"]:
            out.print(f"warning: task {printable(repr(r['task'].name))}: check {index} reads "
                      f"{printable(', '.join(sorted(missing_names)))}, which neither the task nor what "
                      "it asks the candidate to define binds (a NameError, or the candidate's own helper)")
    for r in rows:
        if r["passing_attempts"]:
            out.print(f"warning: task {printable(repr(r['task'].name))}: scripted attempt(s) "
                      f"{r['passing_attempts']} pass every check; a scripted attempt is meant to be a "
                      "realistic failure")
    _print_hackable(out, tasks)
    checked = len(rows) - len(missing)
    out.print(f"{checked - len(failing)} of {checked} reference solution(s) pass"
              + (f"; {len(missing)} task(s) have no reference" if missing else ""))
    return EXIT_FAILURES if failing or problems else EXIT_OK


def _validate_one(task: Any, timeout: float) -> dict[str, Any]:
    from agentenv.grading.scoring import score

    row: dict[str, Any] = {"task": task, "reference": None, "visible": None, "passing_attempts": [],
                           "unresolved": _unresolved(task)}
    if task.reference_solution is not None:
        scored = score(task, task.reference_solution, timeout=timeout)
        row["reference"], row["visible"] = scored.hidden, scored.visible
    attempts = task.metadata.get("attempts") or []
    for i, attempt in enumerate(attempts if isinstance(attempts, list) else [], start=1):
        if isinstance(attempt, str) and score(task, attempt, timeout=timeout).hidden.all_passed:
            row["passing_attempts"].append(i)
    return row


def _unresolved(task: Any) -> list[tuple[int, frozenset[str]]]:
    """The checks of ``task`` reading names nothing binds (see ``names.unresolved_names``)."""
    from agentenv.grading.names import unresolved_names
    from agentenv.grading.scoring import asked_by

    asked = asked_by(task)
    if asked is None:
        return []
    checks = [c if isinstance(c, str) else "" for c in task.checks]
    return unresolved_names(checks, prelude=task.prelude, setup=task.setup_code, asked=asked,
                            reference=task.reference_solution)


def _validation_problems(selection: TaskSelection) -> tuple[list[Any], list[str]]:
    """The tasks that load, and one line per problem of those that do not: every task file of
    a directory and every record of a file is read, so one broken task hides no other."""
    from agentenv.errors import TaskFormatError

    problems: list[str] = []
    try:
        tasks = load_tasks(selection, problems=problems)
    except TaskFormatError as exc:  # the file as a whole (or a named benchmark's record)
        return [], problems + exc.lines()
    return tasks, problems


def _print_hackable(out: Any, tasks: Sequence[Any]) -> None:
    """The checks only the candidate's own ``__eq__`` decides (agentenv.grading.hackable)."""
    from agentenv.grading.hackable import hackable_checks

    found = [h for task in tasks for h in hackable_checks(task)]
    if not found:
        return
    table = Table(title=f"{plural(len(found), 'hackable check')} (Python's verdict is kept: "
                        "the candidate's __eq__ decides these)", title_justify="left")
    for column in ("task", "check", "compares", "why"):
        table.add_column(column)
    for h in found:
        table.add_row(printable(h.task), printable(h.check), printable(h.comparison), printable(h.why))
    out.print(table)
