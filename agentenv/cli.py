"""The ``agentenv`` command line: run rollouts, inspect and validate tasks, score a file, report.

Commands::

    agentenv run [options]                  rollouts into runs/<timestamp>/ (offline by default)
    agentenv tasks list [--tasks SET]       the tasks of a set
    agentenv tasks show NAME [--tasks SET]  one task in full
    agentenv tasks validate [PATH]          run every reference solution, report the failures
    agentenv check CODE_FILE --task NAME    score one file against a task, failures shown
    agentenv report RUN_DIR [RUN_DIR2]      plots + HTML for a run (two runs: revise vs resample)
    agentenv compare RUN_A RUN_B            per-task paired differences with bootstrap intervals

This module only parses options, calls the library and prints; it is the one place (with the
examples) that configures logging. Every error a user can cause (a bad flag, a missing or
malformed file, a missing API key) ends as one line on stderr and a non-zero exit code:
2 for usage and configuration errors, 1 when the work ran but found failures, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import difflib
import json
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from agentenv.errors import AgentEnvError, ConfigError
from agentenv.untrusted import printable

__all__ = ["build_parser", "main"]

EXIT_OK, EXIT_FAILURES, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class _UsageError(Exception):
    """A bad command line, reported as one line."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (no usage dump) and exits with code 2."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")


# -- option parsing ----------------------------------------------------------------------------

def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _nonneg_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _add_task_options(p: argparse.ArgumentParser, default: str | None = "builtin", *,
                      positional: bool = False) -> None:
    """Options that choose a task set and filter it; the same on every subcommand that loads tasks."""
    help_set = ("builtin | humaneval | mbpp | livecodebench | apps | PATH.jsonl | PATH.toml | DIR "
                "(default: %(default)s)")
    if positional:
        p.add_argument("tasks", nargs="?", default=default, metavar="SET", help=help_set)
    else:
        p.add_argument("--tasks", default=default, metavar="SET", help=help_set)
    p.add_argument("--data", default=None, metavar="PATH",
                   help="local copy of a named benchmark (mbpp, livecodebench, apps, humaneval)")
    p.add_argument("--map", dest="field_map", default=None, metavar="FIELD=COLUMN,...",
                   help="field mapping for a generic JSONL/HF file, e.g. prompt=question,checks=tests")
    p.add_argument("--option", dest="loader_options", action="append", default=[], metavar="KEY=VALUE",
                   help="extra loader option (repeatable; VALUE is read as JSON when it parses)")
    p.add_argument("--difficulty", default=None, help="keep these difficulties (comma-separated)")
    p.add_argument("--tag", dest="tags", default=None, help="keep tasks with one of these tags")
    p.add_argument("--since", default=None, metavar="YYYY-MM-DD",
                   help="keep tasks released on or after this date (contamination-free windows)")
    p.add_argument("--dedupe", action="store_true", help="drop tasks whose prompt repeats an earlier one")
    p.add_argument("--shuffle-seed", type=int, default=None, help="shuffle the tasks with this seed")
    p.add_argument("--limit", type=_positive_int, default=None, help="keep the first N tasks")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="agentenv",
                     description="RL environments for LLM coding agents: rollouts, tasks, reports.")
    parser.add_argument("--log-level", default="warning",
                        help="debug | info | warning | error (default: warning)")
    parser.add_argument("--log-json", action="store_true", help="log as JSON lines on stderr")
    from agentenv import __version__

    parser.add_argument("--version", action="version", version=f"agentenv {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = sub.add_parser("run", help="run rollouts and write trajectories and a summary",
                         description="Run episodes of a policy on a task set. With no options: "
                                     "builtin tasks, scripted policy, multi-turn with 3 turns, "
                                     "offline, into runs/<timestamp>/.")
    run.add_argument("--policy", default="scripted",
                     help="mock | reference | scripted | openai | package.module:name "
                          "(default: scripted)")
    run.add_argument("--model", default=None, help="model id for --policy openai (default gpt-4o)")
    run.add_argument("--base-url", default=None,
                     help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (vLLM, Ollama)")
    run.add_argument("--temperature", type=_nonneg_float, default=0.2,
                     help="sampling temperature for --policy openai (default: 0.2)")
    run.add_argument("--max-tokens", type=_positive_int, default=None,
                     help="cap on generated tokens per call for --policy openai")
    run.add_argument("--return-tokens", action="store_true",
                     help="ask a vLLM-style server for token ids and logprobs (--policy openai), "
                          "recorded per turn for trainer exports")
    _add_task_options(run)
    run.add_argument("--max-turns", type=_positive_int, default=3, help="turns per episode (default: 3)")
    run.add_argument("--single-step", action="store_true",
                     help="one-turn episodes with CodingEnv (a bandit) instead of multi-turn")
    run.add_argument("--samples", type=_positive_int, default=1, help="episodes per task (default: 1)")
    run.add_argument("--seed", type=int, default=0, help="run seed; episode seeds derive from it")
    run.add_argument("--concurrency", type=_positive_int, default=8,
                     help="policy calls in flight at once (default: 8)")
    run.add_argument("--backend", choices=("local", "ray"), default="local",
                     help="where episodes run (default: local)")
    run.add_argument("--address", default=None, help="Ray cluster address for --backend ray")
    run.add_argument("--token-budget", type=_positive_int, default=None,
                     help="end an episode when its conversation would exceed this many tokens")
    run.add_argument("--prompts-dir", default=None, help="directory of Jinja templates overriding "
                                                         "system.j2 / task.j2 / feedback.j2")
    run.add_argument("--feedback-from", choices=("all", "visible"), default="all",
                     help="which failing checks the feedback shows (default: all)")
    run.add_argument("--repair-tree", type=_tree_shape, default=None, metavar="N,M",
                     help="repair trees: N first programs per task, M repairs from each failing "
                          "one (the shared first turn is generated once); --max-turns 2 is one repair")
    run.add_argument("--stop-when", choices=("hidden", "visible"), default="hidden",
                     help="which checks end an episode when they pass; the reward always comes "
                          "from the hidden ones (default: hidden)")
    run.add_argument("--timeout", type=_nonneg_float, default=5.0,
                     help="sandbox seconds per submission (default: 5)")
    run.add_argument("--out", default=None,
                     help="run directory (default: runs/<timestamp>); an existing one is resumed")
    run.add_argument("--no-progress", action="store_true", help="no live progress bar")

    tasks = sub.add_parser("tasks", help="list, show or validate tasks")
    tasks_sub = tasks.add_subparsers(dest="tasks_command", metavar="ACTION", parser_class=_Parser)
    t_list = tasks_sub.add_parser("list", help="list the tasks of a set")
    _add_task_options(t_list)
    t_show = tasks_sub.add_parser("show", help="show one task in full")
    t_show.add_argument("name", help="task name")
    _add_task_options(t_show)
    t_validate = tasks_sub.add_parser("validate", help="run every reference solution; report failures")
    _add_task_options(t_validate, positional=True)
    t_validate.add_argument("--timeout", type=_nonneg_float, default=10.0,
                            help="sandbox seconds per task (default: 10)")
    t_validate.add_argument("--no-progress", action="store_true", help="no live progress bar")

    check = sub.add_parser("check", help="score one code file against a task")
    check.add_argument("code_file", help="a .py file, or a text/Markdown answer with a code block")
    check.add_argument("--task", required=True, help="task name")
    _add_task_options(check)
    check.add_argument("--timeout", type=_nonneg_float, default=5.0, help="sandbox seconds (default: 5)")

    report = sub.add_parser("report", help="plots and an HTML page for a run; with two runs (one "
                                           "single-step with --samples k, one multi-turn) revise "
                                           "vs resample")
    report.add_argument("runs", nargs="+", metavar="RUN_DIR", help="one run, or two for revise vs resample")
    report.add_argument("--out", default=None, help="output directory (default: inside the run)")
    report.add_argument("--k", type=_positive_int, default=None,
                        help="budget in calls for revise vs resample (default: the multi-turn max_turns)")
    report.add_argument("--no-credit", action="store_true", help="do not export credit.jsonl")
    report.add_argument("--gamma", type=_nonneg_float, default=1.0, help="discount for credit export")

    compare = sub.add_parser("compare", help="per-task paired differences of two runs (B - A)")
    compare.add_argument("run_a", metavar="RUN_A")
    compare.add_argument("run_b", metavar="RUN_B")
    compare.add_argument("--out", default=None, help="also write compare.json/compare.txt here")
    compare.add_argument("--boot", type=_positive_int, default=10_000, help="bootstrap resamples")
    compare.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    return parser


# -- helpers -----------------------------------------------------------------------------------

def _console(stderr: bool) -> Console:
    console = Console(stderr=stderr, highlight=False, soft_wrap=True)
    if not console.is_terminal:  # piped or captured: do not squeeze tables into 80 columns
        console.width = max(console.width, 120)
    return console


def _stdout() -> Console:
    return _console(stderr=False)


def _stderr() -> Console:
    return _console(stderr=True)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _loader_option(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--option takes KEY=VALUE, got {text!r}")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return key.strip(), value


def _load_tasks(args: argparse.Namespace, spec: str | None = None) -> list[Any]:
    """Load the task set named on the command line, with its loader options and filters."""
    from agentenv.tasks import load_tasks

    spec = spec if spec is not None else args.tasks
    options: dict[str, Any] = dict(_loader_option(o) for o in getattr(args, "loader_options", []))
    for attr, key in (("data", "path"), ("field_map", "map"), ("difficulty", "difficulty"),
                      ("tags", "tags"), ("since", "since"), ("shuffle_seed", "shuffle_seed"),
                      ("limit", "limit")):
        value = getattr(args, attr, None)
        if value is not None:
            options[key] = value
    if getattr(args, "dedupe", False):
        options["dedupe"] = True
    try:
        tasks = load_tasks(spec, **options)
    except TypeError as exc:  # an option the chosen loader does not take
        raise ConfigError(f"task set {spec!r} does not take these options ({exc}); "
                          "see `agentenv tasks list --help`") from None
    if not tasks:
        raise ConfigError(f"task set {spec!r} has no tasks left after the filters")
    return tasks


def _find_task(tasks: Sequence[Any], name: str, where: str) -> Any:
    for task in tasks:
        if task.name == name:
            return task
    close = difflib.get_close_matches(name, [t.name for t in tasks], n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; see `agentenv tasks list --tasks {where}`"
    raise ConfigError(f"no task named {name!r} in {where}{hint}")


def _configure_logging(level: str, as_json: bool) -> None:
    try:
        from agentenv.log import configure_logging
    except ImportError:  # pragma: no cover - the log module ships with the package
        return
    configure_logging(level=level, json=as_json)


# -- run ---------------------------------------------------------------------------------------

def _default_out() -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path("runs") / stamp
    n = 2
    while out.exists():
        out = Path("runs") / f"{stamp}-{n}"
        n += 1
    return out


def _make_run_policy(args: argparse.Namespace, tasks: list[Any]) -> Any:
    from agentenv.policies import make_policy

    if args.policy == "openai":
        options: dict[str, Any] = {"model": args.model or "gpt-4o", "temperature": args.temperature}
        if args.base_url:
            options["base_url"] = args.base_url
        if args.max_tokens is not None:
            options["max_tokens"] = args.max_tokens
        if args.return_tokens:
            options["return_tokens"] = True
        return make_policy("openai", **options)
    if args.base_url or args.max_tokens is not None:
        raise ConfigError(f"--base-url and --max-tokens apply to --policy openai, not {args.policy!r}")
    return make_policy(args.policy, tasks=tasks)


def _summary_table(summary: dict[str, Any], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("", "episodes", "pass@1", "solve rate", "repair", "mean reward", "mean turns",
                   "tokens/episode"):
        table.add_column(column, justify="left" if not column else "right")

    def row(label: str, r: dict[str, Any]) -> None:
        table.add_row(label, str(r["episodes"]), _fmt(r["pass@1"]), _fmt(r["solve_rate"]),
                      _fmt(r["repair_rate"]), _fmt(r["mean_reward"]), _fmt(r["mean_turns"], 2),
                      _fmt(r["tokens"]["mean_per_episode"], 0))

    row("overall", summary)
    for r in summary["per_difficulty"]:
        row(r["difficulty"], r)
    return table


def _cmd_run(args: argparse.Namespace) -> int:
    from agentenv.rollout import RolloutConfig, run_rollouts

    tasks = _load_tasks(args)
    policy = _make_run_policy(args, tasks)
    if args.address and args.backend != "ray":
        raise ConfigError("--address applies to --backend ray")
    if args.prompts_dir is not None and not Path(args.prompts_dir).is_dir():
        raise ConfigError(f"--prompts-dir {args.prompts_dir} is not a directory")
    mode = "single_step" if args.single_step else "multi_turn"
    config = RolloutConfig(
        tasks=args.tasks, policy=args.policy,
        model=(args.model or "gpt-4o") if args.policy == "openai" else None,
        temperature=args.temperature if args.policy == "openai" else None,
        base_url=args.base_url, mode=mode, max_turns=1 if args.single_step else args.max_turns,
        samples=args.samples, seed=args.seed, concurrency=args.concurrency, timeout=args.timeout,
        token_budget=args.token_budget, prompts_dir=args.prompts_dir,
        feedback_from=args.feedback_from, stop_when=args.stop_when, backend=args.backend,
        address=args.address,
    )
    out = Path(args.out) if args.out else _default_out()
    if args.repair_tree is not None:
        return _run_repair_trees(args, tasks, policy, config, out)
    err = _stderr()
    turns = "single-step" if args.single_step else f"multi-turn, {args.max_turns} turns"
    err.print(f"agentenv run: {len(tasks)} tasks x {args.samples} sample(s), {args.policy} policy, "
              f"{turns}, {args.backend} backend -> {out}")

    progress = Progress(TextColumn("[bold]rollouts"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("mean reward {task.fields[reward]}"), TimeElapsedColumn(),
                        console=err, disable=args.no_progress, transient=False)
    bar = progress.add_task("rollouts", total=None, reward="-")
    state = {"n": 0, "reward": 0.0}

    def on_start(total: int, done: int) -> None:
        progress.update(bar, total=total, completed=done)
        if done:
            err.print(f"resuming: {done} of {total} episodes already in {out}")

    def on_episode(trajectory: Any, n_done: int, total: int) -> None:
        state["n"] += 1
        state["reward"] += trajectory.final_reward
        progress.update(bar, completed=n_done, reward=f"{state['reward'] / state['n']:.3f}")

    try:
        with progress:
            result = run_rollouts(tasks, policy, config, out, on_episode=on_episode, on_start=on_start)
    except KeyboardInterrupt:
        err.print(f"interrupted: finished episodes are saved in {out}; run the same command with "
                  f"--out {out} to resume")
        return EXIT_INTERRUPTED
    summary = result.summary
    _stdout().print(_summary_table(summary, f"{args.policy} on {args.tasks} ({turns})"))
    run_info = summary["run"]
    _stdout().print(f"{run_info['ran']} episode(s) run, {result.skipped} resumed, "
                    f"{run_info['seconds']:.1f}s; wrote {out / 'trajectories.jsonl'} and "
                    f"{out / 'summary.json'}")
    if result.errors:
        err.print(f"{len(result.errors)} episode(s) failed (first: {result.errors[0].episode_id}: "
                  f"{result.errors[0].error}); run the same command again to retry them")
        return EXIT_FAILURES
    return EXIT_OK


def _tree_shape(text: str) -> tuple[int, int]:
    try:
        initial, repairs = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N,M (e.g. 5,2), got {text!r}") from None
    if initial < 1 or repairs < 1:
        raise argparse.ArgumentTypeError(f"N and M must be >= 1, got {text!r}")
    return initial, repairs


def _run_repair_trees(args: argparse.Namespace, tasks: Any, policy: Any, config: Any, out: Path) -> int:
    from agentenv.rollout.tree import run_repair_trees

    initial, repairs = args.repair_tree
    _stderr().print(f"agentenv run: repair trees {initial},{repairs} over {len(tasks)} tasks, "
                    f"{args.policy} policy, {args.max_turns} turns -> {out}")
    result = run_repair_trees(tasks, policy, config, out, initial=initial, repairs=repairs)
    tree = result.summary["tree"]
    _stdout().print(_summary_table(result.summary, f"{args.policy} on {args.tasks} (repair trees)"))
    _stdout().print(f"{tree['roots']} roots, {tree['failed_roots']} failed and branched {repairs} ways; "
                    f"{tree['policy_calls']} policy calls ({tree['calls_saved_by_sharing']} saved by "
                    f"sharing first turns); wrote {out / 'trajectories.jsonl'}")
    return EXIT_OK


# -- tasks -------------------------------------------------------------------------------------

def _cmd_tasks_list(args: argparse.Namespace) -> int:
    tasks = _load_tasks(args)
    table = Table(title=f"{len(tasks)} task(s) in {args.tasks}", title_justify="left")
    for column in ("#", "name", "difficulty", "checks", "visible", "reference", "attempts", "tags"):
        table.add_column(column, justify="right" if column in ("#", "checks", "visible", "attempts") else "left")
    for i, task in enumerate(tasks):
        attempts = task.metadata.get("attempts") or ()
        table.add_row(str(i), task.name, task.difficulty or "-", str(len(task.checks)),
                      str(len(task.visible_checks)), "yes" if task.reference_solution else "no",
                      str(len(attempts)) if isinstance(attempts, list) else "-", ", ".join(task.tags))
    _stdout().print(table)
    return EXIT_OK


def _cmd_tasks_show(args: argparse.Namespace) -> int:
    from rich.syntax import Syntax

    tasks = _load_tasks(args)
    task = _find_task(tasks, args.name, args.tasks)
    out = _stdout()
    out.print(f"[bold]{task.name}[/bold]  difficulty={task.difficulty or '-'}  "
              f"entry_point={task.entry_point}  source={task.source}  tags={', '.join(task.tags) or '-'}")
    out.print("\n[bold]prompt[/bold]")
    out.print(task.prompt.strip(), markup=False)
    out.print(f"\n[bold]hidden checks[/bold] ({len(task.checks)})")
    for i, check in enumerate(task.checks):
        out.print(f"  {i}. {check}", markup=False)
    if task.visible_checks:
        out.print(f"\n[bold]visible checks[/bold] ({len(task.visible_checks)})")
        for i, check in enumerate(task.visible_checks):
            out.print(f"  {i}. {check}", markup=False)
    if task.setup_code.strip():
        out.print("\n[bold]setup code[/bold]")
        out.print(Syntax(task.setup_code.strip(), "python"))
    if task.reference_solution:
        out.print("\n[bold]reference solution[/bold]")
        out.print(Syntax(task.reference_solution.strip(), "python"))
    attempts = task.metadata.get("attempts") or []
    for i, attempt in enumerate(attempts if isinstance(attempts, list) else [], start=1):
        out.print(f"\n[bold]scripted attempt {i}[/bold]")
        out.print(Syntax(str(attempt).strip(), "python"))
    return EXIT_OK


def _validate_one(task: Any, timeout: float) -> dict[str, Any]:
    from agentenv.envs.scoring import score

    row: dict[str, Any] = {"task": task, "reference": None, "visible": None, "passing_attempts": []}
    if task.reference_solution is not None:
        scored = score(task, task.reference_solution, timeout=timeout)
        row["reference"], row["visible"] = scored.hidden, scored.visible
    attempts = task.metadata.get("attempts") or []
    for i, attempt in enumerate(attempts if isinstance(attempts, list) else [], start=1):
        if isinstance(attempt, str) and score(task, attempt, timeout=timeout).hidden.all_passed:
            row["passing_attempts"].append(i)
    return row


def _cmd_tasks_validate(args: argparse.Namespace) -> int:
    tasks = _load_tasks(args)
    err = _stderr()
    progress = Progress(TextColumn("[bold]validating"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err, disable=args.no_progress, transient=True)
    rows: list[dict[str, Any]] = []
    with progress, ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        bar = progress.add_task("validate", total=len(tasks))
        for row in pool.map(lambda t: _validate_one(t, args.timeout), tasks):
            rows.append(row)
            progress.advance(bar)
    failing = [r for r in rows if r["reference"] is not None and
               (not r["reference"].all_passed or (r["visible"] is not None and not r["visible"].all_passed))]
    missing = [r for r in rows if r["reference"] is None]
    passing_attempts = [r for r in rows if r["passing_attempts"]]
    out = _stdout()
    if failing:
        table = Table(title=f"{len(failing)} reference solution(s) fail", title_justify="left")
        for column in ("task", "hidden", "visible", "first failure"):
            table.add_column(column)
        for r in failing:
            ref, vis = r["reference"], r["visible"]
            first = (ref.failures or (vis.failures if vis is not None else ()) or (None,))[0]
            reason = f"[{first.kind}] {first.check}: {first.message}" if first is not None else "-"
            table.add_row(r["task"].name, f"{ref.passed}/{ref.total}",
                          f"{vis.passed}/{vis.total}" if vis is not None else "-", reason)
        out.print(table)
    for r in passing_attempts:
        out.print(f"warning: task {r['task'].name!r}: scripted attempt(s) {r['passing_attempts']} "
                  "pass every check; a scripted attempt is meant to be a realistic failure")
    checked = len(rows) - len(missing)
    out.print(f"{checked - len(failing)} of {checked} reference solution(s) pass"
              + (f"; {len(missing)} task(s) have no reference" if missing else ""))
    return EXIT_FAILURES if failing else EXIT_OK


# -- check -------------------------------------------------------------------------------------

def _cmd_check(args: argparse.Namespace) -> int:
    from agentenv.envs.scoring import score
    from agentenv.extract import extract_code
    from agentenv.records import classify_outcome
    from agentenv.rewards import dense_reward

    path = Path(args.code_file)
    if not path.is_file():
        raise ConfigError(f"no such file: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text") from None
    tasks = _load_tasks(args)
    task = _find_task(tasks, args.task, args.tasks)
    # A .py file is the code itself (a syntax error must reach the sandbox and be reported);
    # anything else is a model's answer, from which the code block is extracted.
    code = text if path.suffix == ".py" else extract_code(text, task.entry_point)
    scored = score(task, code, timeout=args.timeout)
    result = scored.hidden
    reward = dense_reward(result, code)
    out = _stdout()
    out.print(f"task {task.name}: {classify_outcome(code, result)}, passed {result.passed}/{result.total}, "
              f"reward {reward:.3f}" + (" (timed out)" if result.timed_out else "")
              + f"  [isolation: {result.isolation}]")
    if scored.visible is not None:
        out.print(f"visible checks: passed {scored.visible.passed}/{scored.visible.total}")
    if result.failures:
        table = Table(title="failures", title_justify="left")
        for column in ("#", "kind", "check", "message"):
            table.add_column(column)
        for f in result.failures:  # candidate text is data: escaped, and never read as markup
            table.add_row(str(f.index), f.kind, Text(printable(f.check)), Text(printable(f.message)))
        out.print(table)
    return EXIT_OK if result.all_passed else EXIT_FAILURES


# -- report / compare --------------------------------------------------------------------------

def _cmd_report(args: argparse.Namespace) -> int:
    from agentenv import report

    out = _stdout()
    if len(args.runs) == 1:
        metrics = report.write_report(args.runs[0], args.out, credit=not args.no_credit, gamma=args.gamma)
        out.print(report.format_report(metrics), markup=False)
        out.print("wrote " + ", ".join(sorted(metrics.get("files", {}).values())))
        return EXIT_OK
    if len(args.runs) != 2:
        raise ConfigError("report takes one run, or two (a single-step run and a multi-turn run)")
    modes = {run: report.run_mode(report.load_run(run)) for run in args.runs}
    single = [r for r, m in modes.items() if m == "single_step"]
    multi = [r for r, m in modes.items() if m != "single_step"]
    if not single:  # two multi-turn runs (or one twice): the first's first turns are the samples
        single, multi = [args.runs[0]], [args.runs[1]]
    if len(single) != 1 or len(multi) != 1:
        raise ConfigError("revise vs resample needs one single-step run (agentenv run --single-step "
                          f"--samples k) and one multi-turn run; got modes {sorted(modes.values())}")
    result = report.write_revise_report(single[0], multi[0], args.out, k=args.k)
    out.print(report.format_revise(result), markup=False)
    out.print("wrote " + ", ".join(sorted(result.get("files", {}).values())))
    return EXIT_OK


def _cmd_compare(args: argparse.Namespace) -> int:
    from agentenv import report

    if args.out:
        comparison = report.write_comparison(args.run_a, args.run_b, args.out, n_boot=args.boot,
                                             seed=args.seed)
    else:
        comparison = report.compare_runs(args.run_a, args.run_b, n_boot=args.boot, seed=args.seed)
    _stdout().print(report.format_comparison(comparison), markup=False)
    if args.out:
        _stdout().print("wrote " + ", ".join(sorted(comparison.get("files", {}).values())))
    return EXIT_OK


# -- entry point -------------------------------------------------------------------------------

def _dispatch(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.command == "run":
        return _cmd_run(args)
    if args.command == "tasks":
        actions = {"list": _cmd_tasks_list, "show": _cmd_tasks_show, "validate": _cmd_tasks_validate}
        if args.tasks_command not in actions:
            raise _UsageError("agentenv tasks: choose an action: list, show NAME or validate PATH")
        return actions[args.tasks_command](args)
    if args.command == "check":
        return _cmd_check(args)
    if args.command == "report":
        return _cmd_report(args)
    if args.command == "compare":
        return _cmd_compare(args)
    parser.print_help()
    return EXIT_USAGE


def _tolerant_output() -> None:
    """Task and candidate text may hold characters the terminal cannot encode (a lone
    surrogate): show them as escapes instead of failing."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if callable(reconfigure):
            with contextlib.suppress(ValueError, OSError):  # a stream that cannot change: leave it
                reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``agentenv`` command line; returns the exit code."""
    _tolerant_output()
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
        _configure_logging(args.log_level, args.log_json)
        return _dispatch(args, parser)
    except _UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except AgentEnvError as exc:
        print(f"agentenv: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, json.JSONDecodeError) as exc:
        print(f"agentenv: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except KeyboardInterrupt:
        print("agentenv: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except asyncio.CancelledError:  # pragma: no cover - a cancelled run, reported like Ctrl-C
        print("agentenv: cancelled", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
