"""The ``agentenv`` command line: run rollouts, inspect and validate tasks, score a file, report.

Commands::

    agentenv run [options]                  rollouts into runs/<timestamp>/ (offline by default)
    agentenv tasks list [SET]               the tasks of a set (SET or --tasks SET, as run takes it)
    agentenv tasks show NAME [--tasks SET]  one task in full
    agentenv tasks validate [SET]           every problem of every task, then every reference solution run
    agentenv check CODE_FILE --task NAME    score one file against a task, failures shown
    agentenv report RUN_DIR [RUN_DIR2]      text + HTML + rollout browser for a run, plots with
                                            matplotlib (two runs: revise vs resample)
    agentenv compare RUN_A RUN_B            per-task paired differences with bootstrap intervals

``--log-level``, ``--log-json`` and ``-q`` (errors only) go before or after the subcommand.
Nothing printed is read as rich markup, so text in square brackets is shown as written.
This module only parses options, calls the library and prints; it is the one place (with the
examples) that configures logging. Every error a user can cause (a bad flag, a missing or
malformed file, a missing API key) ends as one line on stderr and a non-zero exit code:
2 for usage and configuration errors, 1 when the work ran but found failures (a run whose
episodes mostly ended in ``policy_error``, the server refusing the requests, is one), 130 on
Ctrl-C. An error points to the help of the subcommand it was given to.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from agentenv import settings
from agentenv.choices import (
    Backend,
    FeedbackSource,
    IsolationLevel,
    Mode,
    PolicyKind,
    StopWhen,
    values,
)
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

def _whole_number(text: str, minimum: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    return _whole_number(text, 1, "a positive integer")


def _nonneg_int(text: str) -> int:
    return _whole_number(text, 0, "a whole number >= 0")


def _positive_float(text: str) -> float:
    value = _nonneg_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def _nonneg_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _add_task_options(p: argparse.ArgumentParser, default: str | None = "builtin") -> None:
    """Options that choose a task set and filter it; the same on every subcommand that loads tasks."""
    p.add_argument("--tasks", default=default, metavar="SET",
                   help="builtin | humaneval | mbpp | livecodebench | apps | PATH.jsonl | PATH.toml | DIR "
                        "(default: builtin)")
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


def _add_set_argument(p: argparse.ArgumentParser) -> None:
    """``[SET]`` or ``--tasks SET`` (as ``run`` takes it), with the loader options and filters."""
    p.add_argument("set", nargs="?", default=None, metavar="SET",
                   help="the task set, as --tasks takes it (either form; default: builtin)")
    _add_task_options(p, default=None)


def _resolve_set(args: argparse.Namespace) -> None:
    """``args.tasks`` from ``[SET]`` or ``--tasks`` (refusing two different ones)."""
    if args.set is not None:
        if args.tasks not in (None, args.set):
            raise _UsageError(f"agentenv tasks {args.tasks_command}: two task sets given ({args.set!r} "
                              f"and --tasks {args.tasks!r}); give one (see `agentenv tasks "
                              f"{args.tasks_command} --help`)")
        args.tasks = args.set
    args.tasks = args.tasks or "builtin"


def _global_options(suppress: bool) -> _Parser:
    """--log-level, --log-json and -q, accepted before or after any subcommand.

    The subcommands' copies default to SUPPRESS, so a value given before the subcommand is not
    overwritten by the subcommand's default."""
    p = _Parser(add_help=False)

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    p.add_argument("--log-level", default=default("warning"),
                   help="debug | info | warning | error (default: warning)")
    p.add_argument("--log-json", action="store_true", default=default(False),
                   help="log as JSON lines on stderr")
    p.add_argument("-q", "--quiet", action="store_true", default=default(False),
                   help="errors only: no progress bar, notes or log lines below error")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="agentenv", parents=[_global_options(suppress=False)],
                     description="RL environments for LLM coding agents: rollouts, tasks, reports.")
    from agentenv._version import __version__

    parser.add_argument("--version", action="version", version=f"agentenv {__version__}")
    common = [_global_options(suppress=True)]
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = sub.add_parser("run", parents=common, help="run rollouts and write trajectories and a summary",
                         description="Run episodes of a policy on a task set. With no options: "
                                     "builtin tasks, scripted policy, multi-turn with 3 turns, "
                                     "offline, into runs/<timestamp>/.")
    run.add_argument("--policy", default=settings.DEFAULT_POLICY,
                     help=f"{' | '.join(values(PolicyKind))} | package.module:name "
                          f"(default: {settings.DEFAULT_POLICY})")
    run.add_argument("--model", default=None, help="model id for --policy openai (default gpt-4o)")
    run.add_argument("--base-url", default=None,
                     help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (vLLM, Ollama)")
    run.add_argument("--temperature", type=_nonneg_float, default=None,
                     help="sampling temperature for --policy openai (default: 0.2)")
    run.add_argument("--max-tokens", type=_positive_int, default=None,
                     help="cap on generated tokens per call for --policy openai")
    run.add_argument("--policy-timeout", type=_positive_float, default=None,
                     help="seconds per model request for --policy openai "
                          f"(default: {settings.DEFAULT_POLICY_TIMEOUT:g})")
    run.add_argument("--max-retries", type=_nonneg_int, default=None,
                     help="retries of a failed model request for --policy openai "
                          f"(default: {settings.DEFAULT_MAX_RETRIES})")
    run.add_argument("--breaker-failures", type=_nonneg_int, default=None, metavar="N",
                     help="stop the run once N model requests in a row found the server down "
                          "(timeouts, refused connections, 5xx), across episodes; 0: never "
                          f"(--policy openai; default: {settings.DEFAULT_BREAKER_FAILURES})")
    run.add_argument("--breaker-seconds", type=_nonneg_float, default=None, metavar="S",
                     help="and only once those --breaker-failures span at least S seconds "
                          f"(--policy openai; default: {settings.DEFAULT_BREAKER_SECONDS:g})")
    run.add_argument("--stream", action="store_true", help="stream answers (--policy openai)")
    run.add_argument("--return-tokens", action="store_true",
                     help="ask a vLLM-style server for token ids and logprobs (--policy openai), "
                          "recorded per turn for trainer exports")
    _add_task_options(run)
    run.add_argument("--max-turns", type=_positive_int, default=settings.DEFAULT_MAX_TURNS,
                     help=f"turns per episode (default: {settings.DEFAULT_MAX_TURNS})")
    run.add_argument("--single-step", action="store_true",
                     help="one-turn episodes with CodingEnv (a bandit) instead of multi-turn")
    run.add_argument("--samples", type=_positive_int, default=1, help="episodes per task (default: 1)")
    run.add_argument("--seed", type=int, default=0, help="run seed; episode seeds derive from it")
    run.add_argument("--concurrency", type=_positive_int, default=settings.DEFAULT_CONCURRENCY,
                     help=f"policy calls in flight at once (default: {settings.DEFAULT_CONCURRENCY})")
    run.add_argument("--backend", choices=values(Backend), default=Backend.LOCAL.value,
                     help="where episodes run (default: local)")
    run.add_argument("--address", default=None, help="Ray cluster address for --backend ray")
    run.add_argument("--token-budget", type=_positive_int, default=None,
                     help="end an episode when its conversation would exceed this many tokens")
    run.add_argument("--tokenizer", default=None, metavar="PATH_OR_NAME",
                     help="count tokens with this tokenizer, through its chat template when it has "
                          "one: a local Hugging Face tokenizer directory, a model id in the local "
                          "Hugging Face cache, or a tiktoken name (default: --model's tiktoken "
                          "encoding); loaded offline")
    run.add_argument("--prompts-dir", default=None, help="directory of Jinja templates overriding "
                                                         "system.j2 / task.j2 / feedback.j2")
    run.add_argument("--feedback-from", choices=values(FeedbackSource), default=FeedbackSource.ALL.value,
                     help="which failing checks the feedback shows (default: all)")
    run.add_argument("--repair-tree", type=_tree_shape, default=None, metavar="N,M",
                     help="repair trees: N first programs per task, M repairs from each failing "
                          "one (the shared first turn is generated once); --max-turns 2 is one repair")
    run.add_argument("--stop-when", choices=values(StopWhen), default=StopWhen.HIDDEN.value,
                     help="which checks end an episode when they pass; the reward always comes "
                          "from the hidden ones (default: hidden)")
    run.add_argument("--timeout", type=_nonneg_float, default=settings.DEFAULT_TIMEOUT,
                     help=f"sandbox seconds per submission (default: {settings.DEFAULT_TIMEOUT:g})")
    run.add_argument("--out", default=None,
                     help="run directory (default: runs/<timestamp>); an existing one is resumed")
    run.add_argument("--no-progress", action="store_true", help="no live progress bar")

    tasks = sub.add_parser("tasks", parents=common, help="list, show or validate tasks")
    tasks_sub = tasks.add_subparsers(dest="tasks_command", metavar="ACTION", parser_class=_Parser)
    t_list = tasks_sub.add_parser("list", parents=common, help="list the tasks of a set")
    _add_set_argument(t_list)
    t_show = tasks_sub.add_parser("show", parents=common, help="show one task in full")
    t_show.add_argument("name", help="task name")
    _add_task_options(t_show)
    t_validate = tasks_sub.add_parser("validate", parents=common,
                                      help="check every task file and run every reference solution; "
                                           "report every problem")
    _add_set_argument(t_validate)
    t_validate.add_argument("--timeout", type=_nonneg_float, default=10.0,
                            help="sandbox seconds per task (default: 10)")
    t_validate.add_argument("--no-progress", action="store_true", help="no live progress bar")

    check = sub.add_parser("check", parents=common, help="score one code file against a task")
    check.add_argument("code_file", help="a .py file, or a text/Markdown answer with a code block")
    check.add_argument("--task", required=True, help="task name")
    _add_task_options(check)
    check.add_argument("--timeout", type=_nonneg_float, default=settings.DEFAULT_TIMEOUT,
                       help=f"sandbox seconds (default: {settings.DEFAULT_TIMEOUT:g})")
    check.add_argument("--isolation", choices=values(IsolationLevel), default=None,
                       help="the isolation level required (default: the best available)")

    report = sub.add_parser("report", parents=common, help="plots and an HTML page for a run; with two runs (one "
                                           "single-step with --samples k, one multi-turn) revise "
                                           "vs resample")
    report.add_argument("runs", nargs="+", metavar="RUN_DIR", help="one run, or two for revise vs resample")
    report.add_argument("--out", default=None, help="output directory (default: inside the run)")
    report.add_argument("--k", type=_positive_int, default=None,
                        help="budget in calls for revise vs resample (default: the multi-turn max_turns)")
    report.add_argument("--no-credit", action="store_true", help="do not export credit.jsonl")
    report.add_argument("--gamma", type=_nonneg_float, default=1.0, help="discount for credit export")

    compare = sub.add_parser("compare", parents=common, help="per-task paired differences of two runs (B - A)")
    compare.add_argument("run_a", metavar="RUN_A")
    compare.add_argument("run_b", metavar="RUN_B")
    compare.add_argument("--out", default=None, help="also write compare.json/compare.txt here")
    compare.add_argument("--boot", type=_positive_int, default=10_000, help="bootstrap resamples")
    compare.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    return parser


# -- helpers -----------------------------------------------------------------------------------

def _console(stderr: bool) -> Console:
    # markup=False: nothing we print is read as rich markup, so "[syntax]" or "[isolation:
    # strict]" (from us or from a run) always reaches the screen as written.
    console = Console(stderr=stderr, highlight=False, soft_wrap=True, markup=False)
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


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


_OPENAI_ONLY = (("--model", "model"), ("--base-url", "base_url"), ("--temperature", "temperature"),
                ("--max-tokens", "max_tokens"), ("--policy-timeout", "policy_timeout"),
                ("--max-retries", "max_retries"), ("--breaker-failures", "breaker_failures"),
                ("--breaker-seconds", "breaker_seconds"), ("--stream", "stream"),
                ("--return-tokens", "return_tokens"))


def _command_prog(args: argparse.Namespace | None) -> str:
    """The command line's subcommand, as its help is asked for: ``agentenv tasks list``."""
    words = ["agentenv"]
    for attr in ("command", "tasks_command"):
        value = getattr(args, attr, None) if args is not None else None
        if value:
            words.append(str(value))
    return " ".join(words)


def _loader_option(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--option takes KEY=VALUE, got {text!r}")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return key.strip(), value


def _load_tasks(args: argparse.Namespace, spec: str | None = None,
                problems: list[str] | None = None) -> list[Any]:
    """Load the task set named on the command line, with its loader options and filters
    (``problems``: collect what does not load instead of raising, see ``load_tasks``)."""
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
        tasks = load_tasks(spec, problems=problems, **options)
    except TypeError as exc:  # an option the chosen loader does not take
        raise ConfigError(f"task set {spec!r} does not take these options ({exc}); "
                          f"see `{_command_prog(args)} --help`") from None
    if not tasks and not problems:
        raise ConfigError(f"task set {spec!r} has no tasks left after the filters")
    return tasks


def _find_task(tasks: Sequence[Any], name: str, where: str) -> Any:
    from agentenv.tasks.select import index_of

    return tasks[index_of(tasks, name, where=where)]


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


def _temperature(args: argparse.Namespace) -> float:
    return 0.2 if args.temperature is None else float(args.temperature)


def _importable_from_cwd(spec: str) -> None:
    """``--policy mymodule:Class`` finds ``mymodule.py`` in the current directory, as
    ``python -m`` would (the ``agentenv`` script's own directory is on the path instead)."""
    if ":" not in spec:
        return
    cwd = os.getcwd()
    if not any(entry in ("", ".", cwd) for entry in sys.path):
        sys.path.insert(0, cwd)


def _make_run_policy(args: argparse.Namespace, tasks: list[Any]) -> Any:
    from agentenv.policies import make_policy

    _importable_from_cwd(args.policy)

    if args.policy == "openai":
        options: dict[str, Any] = {"model": args.model or "gpt-4o", "temperature": _temperature(args)}
        if args.base_url:
            options["base_url"] = args.base_url
        for flag, key in (("max_tokens", "max_tokens"), ("policy_timeout", "timeout"),
                          ("max_retries", "max_retries"), ("breaker_failures", "breaker_threshold"),
                          ("breaker_seconds", "breaker_seconds")):
            if getattr(args, flag) is not None:  # 0 retries is a choice, not a default
                options[key] = getattr(args, flag)
        if args.stream:
            options["stream"] = True
        if args.return_tokens:
            options["return_tokens"] = True
        policy = make_policy("openai", **options)
        policy.preflight()  # one cheap request: a wrong URL or model fails here, in one line
        return policy
    given = [flag for flag, attr in _OPENAI_ONLY if getattr(args, attr) not in (None, False)]
    if given:  # refused rather than silently ignored
        verb, pronoun = ("applies", "it") if len(given) == 1 else ("apply", "them")
        raise ConfigError(f"{', '.join(given)} {verb} only to --policy openai, not "
                          f"{args.policy!r}; drop {pronoun} or use --policy openai")
    if args.policy in ("scripted", "reader") and not any(t.metadata.get("attempts") for t in tasks):
        raise ConfigError(f"--policy {args.policy} replays each task's scripted buggy attempts, and no "
                          f"task of {args.tasks!r} has any (it would only play the reference "
                          "solutions); use --policy reference for that upper bound, or --policy "
                          "openai for a model")
    return make_policy(args.policy, tasks=tasks)


_UNCERTAIN = ("pass@1", "solve_rate", "mean_reward")


def _summary_table(summary: Mapping[str, Any], title: str, turns: int) -> Table:
    """The run's headline numbers; rates and the reward carry a 95% interval over tasks. The
    columns are named as `agentenv report` names them."""
    from agentenv.report.stats import mean_halfwidth
    from agentenv.report.text import TOKEN_COLUMNS, metric_columns

    table = Table(title=title, title_justify="left")
    for column in ("", "tasks", "episodes", *metric_columns(turns), TOKEN_COLUMNS[-1]):
        table.add_column(column, justify="left" if not column else "right")

    def row(label: str, r: Mapping[str, Any], tasks: list[dict[str, Any]]) -> None:
        cells = {}
        for key in _UNCERTAIN:
            half = mean_halfwidth([t[key] for t in tasks if t[key] is not None])
            cells[key] = _fmt(r[key]) + (f" ± {half:.3f}" if half is not None else "")
        table.add_row(label, str(len(tasks)), str(r["episodes"]), cells["pass@1"],
                      cells["solve_rate"], _fmt(r["repair_rate"]), cells["mean_reward"],
                      _fmt(r["mean_turns"], 2), _fmt(r["tokens"]["mean_per_episode"], 0))

    per_task = summary["per_task"]
    row("overall", summary, per_task)
    if len(summary["per_difficulty"]) > 1:  # a single level would repeat the overall row
        for r in summary["per_difficulty"]:
            level = r["difficulty"]
            row(level, r, [t for t in per_task if (t["difficulty"] or "unknown") == level])
    return table


def _column_notes(turns: int) -> str:
    horizon = "the first turn" if turns == 1 else f"any of the {turns} turns"
    return (f"pass@1: solved on the first turn; solve@{turns}: solved on " + horizon + "; repair: "
            "solved later, of the episodes that failed turn 1; mean reward: the final turn's, in "
            "[0, 1]; ± : 95% interval over tasks (1.96 standard errors); conv tok: tokens of the "
            "final conversation per episode, every message once")


def _resumed_rewards(out: Path, tasks: list[Any], args: argparse.Namespace) -> tuple[list[float], int]:
    """Final rewards of the episodes of this run's plan already finished in ``out`` (for the
    progress bar), and how many more are partial there (to be continued)."""
    from agentenv.rollout.plan import plan_episodes
    from agentenv.rollout.store import read_trajectories

    wanted = {s.episode_id for s in plan_episodes(tasks, args.samples, args.seed)}
    stored = [t for t in read_trajectories(out, partial=True) if t.episode_id in wanted]
    return [t.final_reward for t in stored if not t.partial], sum(1 for t in stored if t.partial)


def _writable_dir(out: Path) -> None:
    """Make ``out`` (or find it) and prove a file can be created there, before any progress bar."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory; choose a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        raise ConfigError(f"cannot write the run directory {out}: {exc.strerror or exc}; choose "
                          "a writable --out") from None


def _cmd_run(args: argparse.Namespace) -> int:
    from agentenv.rollout import RolloutConfig, run_rollouts

    tasks = _load_tasks(args)
    policy = _make_run_policy(args, tasks)
    if args.address and args.backend != Backend.RAY:
        raise ConfigError("--address applies to --backend ray")
    if args.prompts_dir is not None and not Path(args.prompts_dir).is_dir():
        raise ConfigError(f"--prompts-dir {args.prompts_dir} is not a directory")
    mode = Mode.SINGLE_STEP.value if args.single_step else Mode.MULTI_TURN.value
    tokenizer = None
    if args.tokenizer is not None:  # loaded here, so that a wrong one fails before any episode
        from agentenv.tokens import load_tokenizer

        tokenizer = load_tokenizer(args.tokenizer)
    config = RolloutConfig(
        tasks=args.tasks, policy=args.policy,
        model=(args.model or "gpt-4o") if args.policy == "openai" else None,
        temperature=_temperature(args) if args.policy == "openai" else None,
        base_url=args.base_url, mode=mode, max_turns=1 if args.single_step else args.max_turns,
        samples=args.samples, seed=args.seed, concurrency=args.concurrency, timeout=args.timeout,
        token_budget=args.token_budget, prompts_dir=args.prompts_dir,
        feedback_from=args.feedback_from, stop_when=args.stop_when, backend=args.backend,
        address=args.address, tokenizer=args.tokenizer,
    )
    out = Path(args.out) if args.out else _default_out()
    _writable_dir(out)
    if args.repair_tree is not None:
        return _run_repair_trees(args, tasks, policy, config, out)
    err = _stderr()
    quiet = args.quiet
    turns = "single-step" if args.single_step else f"multi-turn, {args.max_turns} turns"
    if not quiet:
        err.print(f"agentenv run: {_plural(len(tasks), 'task')} x {_plural(args.samples, 'sample')}, "
                  f"{args.policy} policy, {turns}, {args.backend} backend -> {out}")
    unscripted = [t for t in tasks if not t.metadata.get("attempts")]
    if args.policy in ("scripted", "reader") and unscripted and not quiet:
        err.print(f"note: {len(unscripted)} of {_plural(len(tasks), 'task')} without scripted "
                  f"attempts: the {args.policy} policy answers them with the reference solution")
    if args.token_budget is not None and mode == Mode.MULTI_TURN and not quiet:
        from agentenv.tokens import DEFAULT_MODEL, OFFLINE_ENCODING, approximation

        counted_with = config.tokenizer or config.model or DEFAULT_MODEL
        is_tiktoken = tokenizer is None or type(tokenizer).__module__.startswith("tiktoken")
        why = approximation(counted_with) if is_tiktoken else None
        if why:  # one short line: the clause without its details (--log-level debug has them)
            err.print(f"note: the token budget is counted with {OFFLINE_ENCODING}: "
                      f"{why.split(' (')[0]}")

    progress = Progress(TextColumn("[bold]rollouts"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("mean reward {task.fields[reward]}"), TimeElapsedColumn(),
                        console=err, disable=args.no_progress or quiet, transient=False)
    bar = progress.add_task("rollouts", total=None, reward="-")
    state = {"n": 0, "reward": 0.0}

    def on_start(total: int, done: int) -> None:
        if (out / "trajectories.jsonl").is_file():  # the bar's mean covers every finished episode, as the summary does
            prior, partial = _resumed_rewards(out, tasks, args)
            state["n"], state["reward"] = len(prior), math.fsum(prior)
            if (done or partial) and not quiet:
                more = (f"; continuing {_plural(partial, 'partial episode')} from "
                        f"{'its' if partial == 1 else 'their'} last graded turn" if partial else "")
                err.print(f"resuming: {done} of {total} episodes already in {out}{more}")
        mean = f"{state['reward'] / state['n']:.3f}" if state["n"] else "-"
        progress.update(bar, total=total, completed=done, reward=mean)
        progress.start()  # only now: an error before the plan is known shows no empty bar

    def on_episode(trajectory: Any, n_done: int, total: int) -> None:
        state["n"] += 1
        state["reward"] += trajectory.final_reward
        progress.update(bar, completed=n_done, reward=f"{state['reward'] / state['n']:.3f}")

    try:
        result = run_rollouts(tasks, policy, config, out, on_episode=on_episode, on_start=on_start)
    except KeyboardInterrupt:
        progress.stop()  # before the message, so it is not drawn over
        err.print(f"interrupted: finished episodes are saved in {out}; run the same command with "
                  f"--out {shlex.quote(str(out))} to resume")
        return EXIT_INTERRUPTED
    finally:
        progress.stop()
    summary = result.summary
    stdout = _stdout()
    stdout.print(_summary_table(summary, f"{args.policy} on {args.tasks} ({turns})",
                                1 if args.single_step else args.max_turns))
    stdout.print(_column_notes(1 if args.single_step else args.max_turns))
    run_info = summary["run"]
    continued = f" ({result.continued} continued from a partial record)" if result.continued else ""
    stdout.print(f"{_plural(run_info['ran'], 'episode')} run{continued}, {result.skipped} resumed, "
                 f"{run_info['seconds']:.1f}s; wrote {out / 'trajectories.jsonl'} and "
                 f"{out / 'summary.json'}")
    kept = ""  # partial episodes: stopped midway, their graded turns saved, not in the table
    if result.partial:
        graded = sum(len(t.turns) for t in result.partial)
        kept = (f"{_plural(len(result.partial), 'partial episode')} ({_plural(graded, 'graded turn')}, "
                "not in the table)")
    if result.stopped:
        err.print(f"stopped: {result.stopped}; {len(result.trajectories)} finished episode(s)"
                  f"{' and ' + kept if kept else ''} are "
                  f"saved in {out}; once the server answers again, run the same command with "
                  f"--out {shlex.quote(str(out))} to resume (partial episodes go on from their last graded turn)",
                  markup=False)
        return EXIT_FAILURES
    if summary.get("stop_reasons", {}).get("context_length"):
        err.print(f"{summary['stop_reasons']['context_length']} episode(s) ended when the conversation "
                  "outgrew the model's context; cap it with --token-budget", markup=False)
    if result.errors:
        err.print(f"{len(result.errors)} episode(s) failed (first: {result.errors[0].episode_id}: "
                  f"{result.errors[0].error}){'; saved ' + kept if kept else ''}; run the same command "
                  "again to retry them (partial episodes go on from their last graded turn)")
        return EXIT_FAILURES
    if _policy_errors(summary, result.trajectories, err):
        return EXIT_FAILURES
    # Quoted for a shell: the line is meant to be pasted as it is, whatever the directory's name.
    stdout.print(f"next: agentenv report {shlex.quote(str(out))}   (HTML report and a browser of every episode)")
    return EXIT_OK


def _policy_errors(summary: Mapping[str, Any], trajectories: Sequence[Any], err: Console) -> bool:
    """Say how many episodes ended because the server rejected the model's request
    (``policy_error``): a warning for a few, an error when they are most of the run (its
    numbers are then the server's refusals, not the model's work). True for the error."""
    count = int(summary.get("stop_reasons", {}).get("policy_error") or 0)
    if not count:
        return False
    episodes = int(summary.get("episodes") or 0)
    first = next((str(t.metadata.get("policy_error")) for t in trajectories
                  if t.stop_reason == "policy_error" and t.metadata.get("policy_error")), "")
    why = f" (first: {first})" if first else ""
    if 2 * count > episodes:
        err.print(f"error: {count} of {_plural(episodes, 'episode')} ended with stop reason "
                  f"policy_error: the server rejected the model's requests{why}; the table's "
                  "numbers are those refusals, not the model's work: fix the request and run again")
        return True
    err.print(f"warning: {count} of {_plural(episodes, 'episode')} ended with stop reason "
              f"policy_error: the server rejected the model's request{why}")
    return False


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
    _stdout().print(_summary_table(result.summary, f"{args.policy} on {args.tasks} (repair trees)",
                                   args.max_turns))
    _stdout().print(f"each root counts once (its branches share its weight): pass@1: the first "
                    f"programs' pass rate; solve@{args.max_turns}: a root with one repair (a random "
                    "branch); repair: a branch's chance to repair its failed root")
    rate = tree["tree_solve_rate"]
    _stdout().print(f"{tree['roots']} roots, {tree['failed_roots']} failed and branched {repairs} ways; "
                    f"tree solve rate (first program or any of {repairs} repairs) "
                    f"{_fmt(rate)}; "
                    f"{tree['policy_calls']} policy calls ({tree['calls_saved_by_sharing']} saved by "
                    f"sharing first turns); wrote {out / 'trajectories.jsonl'}")
    return EXIT_OK


# -- tasks -------------------------------------------------------------------------------------

def _cmd_tasks_list(args: argparse.Namespace) -> int:
    _resolve_set(args)
    tasks = _load_tasks(args)
    table = Table(title=f"{len(tasks)} task(s) in {args.tasks}", title_justify="left")
    for column in ("#", "name", "difficulty", "checks", "visible", "reference", "attempts", "tags"):
        table.add_column(column, justify="right" if column in ("#", "checks", "visible", "attempts") else "left")
    for i, task in enumerate(tasks):
        attempts = task.metadata.get("attempts") or ()
        table.add_row(str(i), printable(task.name), printable(task.difficulty or "-"),
                      str(len(task.checks)), str(len(task.visible_checks)),
                      "yes" if task.reference_solution else "no",
                      str(len(attempts)) if isinstance(attempts, list) else "-",
                      printable(", ".join(task.tags)))
    _stdout().print(table)
    return EXIT_OK


def _cmd_tasks_show(args: argparse.Namespace) -> int:
    from rich.syntax import Syntax

    tasks = _load_tasks(args)
    task = _find_task(tasks, args.name, args.tasks)
    out = _stdout()
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


def _validation_problems(args: argparse.Namespace) -> tuple[list[Any], list[str]]:
    """The tasks that load, and one line per problem of those that do not: every task file of
    a directory and every record of a file is read, so one broken task hides no other."""
    from agentenv.errors import TaskFormatError

    problems: list[str] = []
    try:
        tasks = _load_tasks(args, problems=problems)
    except TaskFormatError as exc:  # the file as a whole (or a named benchmark's record)
        return [], problems + exc.lines()
    return tasks, problems


def _cmd_tasks_validate(args: argparse.Namespace) -> int:
    _resolve_set(args)
    tasks, problems = _validation_problems(args)
    out = _stdout()
    if problems:
        out.print(f"{_plural(len(problems), 'problem')} in the task files:")
        for line in problems:
            out.print(Text(f"  {printable(line)}"))
    if not tasks:
        return EXIT_FAILURES
    err = _stderr()
    progress = Progress(TextColumn("[bold]validating"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err, disable=args.no_progress or args.quiet,
                        transient=True)
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
            table.add_row(printable(r["task"].name), f"{ref.passed}/{ref.total}",
                          f"{vis.passed}/{vis.total}" if vis is not None else "-", printable(reason))
        out.print(table)
    for r in rows:
        for index, missing in r["unresolved"]:
            out.print(f"warning: task {printable(repr(r['task'].name))}: check {index} reads "
                      f"{printable(', '.join(sorted(missing)))}, which neither the task nor what it asks "
                      "the candidate to define binds (a NameError, or the candidate's own helper)")
    for r in passing_attempts:
        out.print(f"warning: task {printable(repr(r['task'].name))}: scripted attempt(s) {r['passing_attempts']} "
                  "pass every check; a scripted attempt is meant to be a realistic failure")
    _print_hackable(out, tasks)
    checked = len(rows) - len(missing)
    out.print(f"{checked - len(failing)} of {checked} reference solution(s) pass"
              + (f"; {len(missing)} task(s) have no reference" if missing else ""))
    return EXIT_FAILURES if failing or problems else EXIT_OK


def _print_hackable(out: Any, tasks: Sequence[Any]) -> None:
    """The checks only the candidate's own ``__eq__`` decides (agentenv.grading.hackable)."""
    from agentenv.grading.hackable import hackable_checks

    found = [h for task in tasks for h in hackable_checks(task)]
    if not found:
        return
    table = Table(title=f"{_plural(len(found), 'hackable check')} (Python's verdict is kept: "
                        "the candidate's __eq__ decides these)", title_justify="left")
    for column in ("task", "check", "compares", "why"):
        table.add_column(column)
    for h in found:
        table.add_row(printable(h.task), printable(h.check), printable(h.comparison), printable(h.why))
    out.print(table)


# -- check -------------------------------------------------------------------------------------

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


def _cmd_check(args: argparse.Namespace) -> int:
    from agentenv.extract import extract_code
    from agentenv.grading.scoring import score
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
    scored = score(task, code, timeout=args.timeout, isolation=args.isolation)
    result = scored.hidden
    reward = dense_reward(result, code)
    out = _stdout()
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


# -- report / compare --------------------------------------------------------------------------

def _cmd_report(args: argparse.Namespace) -> int:
    from agentenv import report

    out = _stdout()
    if len(args.runs) == 1:
        metrics = report.write_report(args.runs[0], args.out, credit=not args.no_credit, gamma=args.gamma)
        out.print(report.format_report(metrics))
        _print_written(metrics, args.quiet)
        return EXIT_OK
    if len(args.runs) != 2:
        raise ConfigError("report takes one run, or two (a single-step run and a multi-turn run)")
    modes = {run: report.run_mode(report.load_run(run)) for run in args.runs}
    single = [r for r, m in modes.items() if m == Mode.SINGLE_STEP]
    multi = [r for r, m in modes.items() if m != Mode.SINGLE_STEP]
    if not single:  # two multi-turn runs (or one twice): the first's first turns are the samples
        single, multi = [args.runs[0]], [args.runs[1]]
    if len(single) != 1 or len(multi) != 1:
        raise ConfigError("revise vs resample needs one single-step run (agentenv run --single-step "
                          f"--samples k) and one multi-turn run; got modes {sorted(modes.values())}")
    result = report.write_revise_report(single[0], multi[0], args.out, k=args.k)
    out.print(report.format_revise(result))
    _print_written(result, args.quiet)
    return EXIT_OK


def _print_written(result: Mapping[str, Any], quiet: bool) -> None:
    files = result.get("files", {})
    _stdout().print("wrote " + ", ".join(sorted(files.values())))
    if not quiet:
        for note in result.get("notes", []):
            _stderr().print(f"note: {note}")
    page = files.get("html")
    if page:
        browse = f"; every episode: {files['episodes']}" if files.get("episodes") else ""
        _stdout().print(f"open {page} in a browser{browse}")


def _cmd_compare(args: argparse.Namespace) -> int:
    from agentenv import report

    if args.out:
        comparison = report.write_comparison(args.run_a, args.run_b, args.out, n_boot=args.boot,
                                             seed=args.seed)
    else:
        comparison = report.compare_runs(args.run_a, args.run_b, n_boot=args.boot, seed=args.seed)
    _stdout().print(report.format_comparison(comparison))
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
            raise _UsageError("agentenv tasks: choose an action: list, show NAME or validate SET "
                              "(see `agentenv tasks --help`)")
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
    args: argparse.Namespace | None = None
    try:
        args, extra = parser.parse_known_args(list(argv) if argv is not None else None)
        if extra:  # said by the subcommand that was given, pointing to its own help
            prog = _command_prog(args)
            raise _UsageError(f"{prog}: unrecognized arguments: {' '.join(extra)} (see `{prog} --help`)")
        _configure_logging("error" if args.quiet else args.log_level, args.log_json)
        return _dispatch(args, parser)
    except _UsageError as exc:
        print(printable(f"error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:  # an option's value: where the options are described
        prog = _command_prog(args)
        hint = "" if "--help" in str(exc) or prog == "agentenv" else f" (see `{prog} --help`)"
        print(printable(f"agentenv: error: {exc}{hint}"), file=sys.stderr)
        return EXIT_USAGE
    except AgentEnvError as exc:
        print(printable(f"agentenv: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except (OSError, json.JSONDecodeError) as exc:
        print(printable(f"agentenv: error: {exc}"), file=sys.stderr)
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
