"""``agentenv run``: rollouts of a policy on a task set into a run directory (resumed when it
exists), with a progress bar, the summary table and what to do next."""

from __future__ import annotations

import math
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agentenv import settings
from agentenv.choices import Backend, FeedbackSource, Mode, PolicyKind, StopWhen, values
from agentenv.cli.common import (
    EXIT_FAILURES,
    EXIT_INTERRUPTED,
    EXIT_OK,
    NONNEG_FLOAT,
    NONNEG_INT,
    POSITIVE_FLOAT,
    POSITIVE_INT,
    Command,
    TaskSelection,
    TreeShape,
    fmt,
    load_tasks,
    plural,
    quiet,
    stderr,
    stdout,
    task_options,
)
from agentenv.errors import ConfigError


@dataclass(frozen=True)
class RunOptions:
    """``agentenv run``'s options but the task set's."""

    policy: str
    model: str | None
    base_url: str | None
    temperature: float | None
    max_tokens: int | None
    policy_timeout: float | None
    max_retries: int | None
    breaker_failures: int | None
    breaker_seconds: float | None
    stream: bool
    return_tokens: bool
    max_turns: int
    single_step: bool
    samples: int
    seed: int
    concurrency: int
    backend: str
    address: str | None
    token_budget: int | None
    tokenizer: str | None
    prompts_dir: str | None
    feedback_from: str
    repair_tree: tuple[int, int] | None
    stop_when: str
    timeout: float
    out: str | None
    no_progress: bool

    @property
    def turns(self) -> int:
        return 1 if self.single_step else self.max_turns

    @property
    def temperature_or_default(self) -> float:
        return 0.2 if self.temperature is None else float(self.temperature)


_OPENAI_ONLY = (("--model", "model"), ("--base-url", "base_url"), ("--temperature", "temperature"),
                ("--max-tokens", "max_tokens"), ("--policy-timeout", "policy_timeout"),
                ("--max-retries", "max_retries"), ("--breaker-failures", "breaker_failures"),
                ("--breaker-seconds", "breaker_seconds"), ("--stream", "stream"),
                ("--return-tokens", "return_tokens"))


@click.command("run", cls=Command, help="Run episodes of a policy on a task set. With no options: builtin "
               "tasks, scripted policy, multi-turn with 3 turns, offline, into runs/<timestamp>/.",
               short_help="run rollouts and write trajectories and a summary")
@click.option("--policy", default=settings.DEFAULT_POLICY,
              help=f"{' | '.join(values(PolicyKind))} | package.module:name (default: {settings.DEFAULT_POLICY})")
@click.option("--model", default=None, help="model id for --policy openai (default gpt-4o)")
@click.option("--base-url", default=None,
              help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (vLLM, Ollama)")
@click.option("--temperature", type=NONNEG_FLOAT, default=None,
              help="sampling temperature for --policy openai (default: 0.2)")
@click.option("--max-tokens", type=POSITIVE_INT, default=None,
              help="cap on generated tokens per call for --policy openai")
@click.option("--policy-timeout", type=POSITIVE_FLOAT, default=None,
              help=f"seconds per model request for --policy openai (default: {settings.DEFAULT_POLICY_TIMEOUT:g})")
@click.option("--max-retries", type=NONNEG_INT, default=None,
              help=f"retries of a failed model request for --policy openai (default: {settings.DEFAULT_MAX_RETRIES})")
@click.option("--breaker-failures", type=NONNEG_INT, default=None, metavar="N",
              help="stop the run once N model requests in a row found the server down (timeouts, refused "
                   "connections, 5xx), across episodes; 0: never "
                   f"(--policy openai; default: {settings.DEFAULT_BREAKER_FAILURES})")
@click.option("--breaker-seconds", type=NONNEG_FLOAT, default=None, metavar="S",
              help="and only once those --breaker-failures span at least S seconds "
                   f"(--policy openai; default: {settings.DEFAULT_BREAKER_SECONDS:g})")
@click.option("--stream", is_flag=True, help="stream answers (--policy openai)")
@click.option("--return-tokens", is_flag=True,
              help="ask a vLLM-style server for token ids and logprobs (--policy openai), recorded per "
                   "turn for trainer exports")
@task_options()
@click.option("--max-turns", type=POSITIVE_INT, default=settings.DEFAULT_MAX_TURNS,
              help=f"turns per episode (default: {settings.DEFAULT_MAX_TURNS})")
@click.option("--single-step", is_flag=True,
              help="one-turn episodes with CodingEnv (a bandit) instead of multi-turn")
@click.option("--samples", type=POSITIVE_INT, default=1, help="episodes per task (default: 1)")
@click.option("--seed", type=int, default=0, help="run seed; episode seeds derive from it")
@click.option("--concurrency", type=POSITIVE_INT, default=settings.DEFAULT_CONCURRENCY,
              help=f"policy calls in flight at once (default: {settings.DEFAULT_CONCURRENCY})")
@click.option("--backend", type=click.Choice(values(Backend)), default=Backend.LOCAL.value,
              help="where episodes run (default: local)")
@click.option("--address", default=None, help="Ray cluster address for --backend ray")
@click.option("--token-budget", type=POSITIVE_INT, default=None,
              help="end an episode when its conversation would exceed this many tokens")
@click.option("--tokenizer", default=None, metavar="PATH_OR_NAME",
              help="count tokens with this tokenizer, through its chat template when it has one: a local "
                   "Hugging Face tokenizer directory, a model id in the local Hugging Face cache, or a "
                   "tiktoken name (default: --model's tiktoken encoding); loaded offline")
@click.option("--prompts-dir", default=None,
              help="directory of Jinja templates overriding system.j2 / task.j2 / feedback.j2")
@click.option("--feedback-from", type=click.Choice(values(FeedbackSource)), default=FeedbackSource.ALL.value,
              help="which failing checks the feedback shows (default: all)")
@click.option("--repair-tree", type=TreeShape(), default=None, metavar="N,M",
              help="repair trees: N first programs per task, M repairs from each failing one (the shared "
                   "first turn is generated once); --max-turns 2 is one repair")
@click.option("--stop-when", type=click.Choice(values(StopWhen)), default=StopWhen.HIDDEN.value,
              help="which checks end an episode when they pass; the reward always comes from the hidden "
                   "ones (default: hidden)")
@click.option("--timeout", type=NONNEG_FLOAT, default=settings.DEFAULT_TIMEOUT,
              help=f"sandbox seconds per submission (default: {settings.DEFAULT_TIMEOUT:g})")
@click.option("--out", default=None,
              help="run directory (default: runs/<timestamp>); an existing one is resumed")
@click.option("--no-progress", is_flag=True, help="no live progress bar")
def run_command(selection: TaskSelection, **options: Any) -> int:
    return run(selection, RunOptions(**options))


def run(selection: TaskSelection, opts: RunOptions) -> int:
    from agentenv.rollout import RolloutConfig, run_rollouts

    tasks = load_tasks(selection)
    policy = _make_run_policy(opts, selection, tasks)
    if opts.address and opts.backend != Backend.RAY:
        raise ConfigError("--address applies to --backend ray")
    if opts.prompts_dir is not None and not Path(opts.prompts_dir).is_dir():
        raise ConfigError(f"--prompts-dir {opts.prompts_dir} is not a directory")
    mode = Mode.SINGLE_STEP.value if opts.single_step else Mode.MULTI_TURN.value
    tokenizer = None
    if opts.tokenizer is not None:  # loaded here, so that a wrong one fails before any episode
        from agentenv.tokens import load_tokenizer

        tokenizer = load_tokenizer(opts.tokenizer)
    openai = opts.policy == "openai"
    config = RolloutConfig(
        tasks=selection.spec, policy=opts.policy,
        model=(opts.model or "gpt-4o") if openai else None,
        temperature=opts.temperature_or_default if openai else None,
        base_url=opts.base_url, mode=mode, max_turns=opts.turns,
        samples=opts.samples, seed=opts.seed, concurrency=opts.concurrency, timeout=opts.timeout,
        token_budget=opts.token_budget, prompts_dir=opts.prompts_dir,
        feedback_from=opts.feedback_from, stop_when=opts.stop_when, backend=opts.backend,
        address=opts.address, tokenizer=opts.tokenizer,
    )
    out = Path(opts.out) if opts.out else _default_out()
    _writable_dir(out)
    if opts.repair_tree is not None:
        return _run_repair_trees(opts, selection, tasks, policy, config, out)
    err = stderr()
    silent = quiet()
    turns = "single-step" if opts.single_step else f"multi-turn, {opts.max_turns} turns"
    if not silent:
        err.print(f"agentenv run: {plural(len(tasks), 'task')} x {plural(opts.samples, 'sample')}, "
                  f"{opts.policy} policy, {turns}, {opts.backend} backend -> {out}")
    unscripted = [t for t in tasks if not t.metadata.get("attempts")]
    if opts.policy in ("scripted", "reader") and unscripted and not silent:
        err.print(f"note: {len(unscripted)} of {plural(len(tasks), 'task')} without scripted "
                  f"attempts: the {opts.policy} policy answers them with the reference solution")
    if opts.token_budget is not None and mode == Mode.MULTI_TURN and not silent:
        from agentenv.tokens import DEFAULT_MODEL, OFFLINE_ENCODING, approximation

        counted_with = config.tokenizer or config.model or DEFAULT_MODEL
        is_tiktoken = tokenizer is None or type(tokenizer).__module__.startswith("tiktoken")
        why = approximation(counted_with) if is_tiktoken else None
        if why:  # one short line: the clause without its details (--log-level debug has them)
            err.print(f"note: the token budget is counted with {OFFLINE_ENCODING}: {why.split(' (')[0]}")

    progress = Progress(TextColumn("[bold]rollouts"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("mean reward {task.fields[reward]}"), TimeElapsedColumn(),
                        console=err, disable=opts.no_progress or silent, transient=False)
    bar = progress.add_task("rollouts", total=None, reward="-")
    state = {"n": 0, "reward": 0.0, "partial": 0}

    def on_resume(finished: Sequence[Any], partial: Sequence[Any]) -> None:
        # The bar's mean covers every finished episode, as the summary does.
        state["n"], state["reward"] = len(finished), math.fsum(t.final_reward for t in finished)
        state["partial"] = len(partial)

    def on_start(total: int, done: int) -> None:
        partial = int(state["partial"])
        if (done or partial) and not silent:
            more = (f"; continuing {plural(partial, 'partial episode')} from "
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
        result = run_rollouts(tasks, policy, config, out, on_episode=on_episode, on_start=on_start,
                              on_resume=on_resume)
    except KeyboardInterrupt:
        progress.stop()  # before the message, so it is not drawn over
        err.print(f"interrupted: finished episodes are saved in {out}; run the same command with "
                  f"--out {shlex.quote(str(out))} to resume")
        return EXIT_INTERRUPTED
    finally:
        progress.stop()
    return _report_run(opts, selection, result, out, err, turns)


def _report_run(opts: RunOptions, selection: TaskSelection, result: Any, out: Path, err: Console,
                turns: str) -> int:
    """The summary table, the run's line, and what went wrong or what to do next."""
    summary = result.summary
    printer = stdout()
    printer.print(_summary_table(summary, f"{opts.policy} on {selection.spec} ({turns})", opts.turns))
    printer.print(_column_notes(opts.turns))
    run_info = summary["run"]
    continued = f" ({result.continued} continued from a partial record)" if result.continued else ""
    printer.print(f"{plural(run_info['ran'], 'episode')} run{continued}, {result.skipped} resumed, "
                  f"{run_info['seconds']:.1f}s; wrote {out / 'trajectories.jsonl'} and "
                  f"{out / 'summary.json'}")
    kept = ""  # partial episodes: stopped midway, their graded turns saved, not in the table
    if result.partial:
        graded = sum(len(t.turns) for t in result.partial)
        kept = (f"{plural(len(result.partial), 'partial episode')} ({plural(graded, 'graded turn')}, "
                "not in the table)")
    if result.stopped:
        err.print(f"stopped: {result.stopped}; {len(result.trajectories)} finished episode(s)"
                  f"{' and ' + kept if kept else ''} are "
                  f"saved in {out}; once the server answers again, run the same command with "
                  f"--out {shlex.quote(str(out))} to resume (partial episodes go on from their last graded turn)")
        return EXIT_FAILURES
    if summary.get("stop_reasons", {}).get("context_length"):
        err.print(f"{summary['stop_reasons']['context_length']} episode(s) ended when the conversation "
                  "outgrew the model's context; cap it with --token-budget")
    if result.errors:
        err.print(f"{len(result.errors)} episode(s) failed (first: {result.errors[0].episode_id}: "
                  f"{result.errors[0].error}){'; saved ' + kept if kept else ''}; run the same command "
                  "again to retry them (partial episodes go on from their last graded turn)")
        return EXIT_FAILURES
    if _policy_errors(summary, result.trajectories, err):
        return EXIT_FAILURES
    # Quoted for a shell: the line is meant to be pasted as it is, whatever the directory's name.
    printer.print(f"next: agentenv report {shlex.quote(str(out))}   (HTML report and a browser of every episode)")
    return EXIT_OK


# -- helpers --------------------------------------------------------------------------------------

def _default_out() -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path("runs") / stamp
    n = 2
    while out.exists():
        out = Path("runs") / f"{stamp}-{n}"
        n += 1
    return out


def _importable_from_cwd(spec: str) -> None:
    """``--policy mymodule:Class`` finds ``mymodule.py`` in the current directory, as
    ``python -m`` would (the ``agentenv`` script's own directory is on the path instead)."""
    if ":" not in spec:
        return
    cwd = os.getcwd()
    if not any(entry in ("", ".", cwd) for entry in sys.path):
        sys.path.insert(0, cwd)


def _make_run_policy(opts: RunOptions, selection: TaskSelection, tasks: list[Any]) -> Any:
    from agentenv.policies import make_policy

    _importable_from_cwd(opts.policy)
    if opts.policy == "openai":
        options: dict[str, Any] = {"model": opts.model or "gpt-4o", "temperature": opts.temperature_or_default}
        if opts.base_url:
            options["base_url"] = opts.base_url
        for flag, key in (("max_tokens", "max_tokens"), ("policy_timeout", "timeout"),
                          ("max_retries", "max_retries"), ("breaker_failures", "breaker_threshold"),
                          ("breaker_seconds", "breaker_seconds")):
            if getattr(opts, flag) is not None:  # 0 retries is a choice, not a default
                options[key] = getattr(opts, flag)
        if opts.stream:
            options["stream"] = True
        if opts.return_tokens:
            options["return_tokens"] = True
        policy = make_policy("openai", **options)
        policy.preflight()  # one cheap request: a wrong URL or model fails here, in one line
        return policy
    given = [flag for flag, attr in _OPENAI_ONLY if getattr(opts, attr) not in (None, False)]
    if given:  # refused rather than silently ignored
        verb, pronoun = ("applies", "it") if len(given) == 1 else ("apply", "them")
        raise ConfigError(f"{', '.join(given)} {verb} only to --policy openai, not "
                          f"{opts.policy!r}; drop {pronoun} or use --policy openai")
    if opts.policy in ("scripted", "reader") and not any(t.metadata.get("attempts") for t in tasks):
        raise ConfigError(f"--policy {opts.policy} replays each task's scripted buggy attempts, and no "
                          f"task of {selection.spec!r} has any (it would only play the reference "
                          "solutions); use --policy reference for that upper bound, or --policy "
                          "openai for a model")
    return make_policy(opts.policy, tasks=tasks)


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
            cells[key] = fmt(r[key]) + (f" ± {half:.3f}" if half is not None else "")
        table.add_row(label, str(len(tasks)), str(r["episodes"]), cells["pass@1"],
                      cells["solve_rate"], fmt(r["repair_rate"]), cells["mean_reward"],
                      fmt(r["mean_turns"], 2), fmt(r["tokens"]["mean_per_episode"], 0))

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
        err.print(f"error: {count} of {plural(episodes, 'episode')} ended with stop reason "
                  f"policy_error: the server rejected the model's requests{why}; the table's "
                  "numbers are those refusals, not the model's work: fix the request and run again")
        return True
    err.print(f"warning: {count} of {plural(episodes, 'episode')} ended with stop reason "
              f"policy_error: the server rejected the model's request{why}")
    return False


def _run_repair_trees(opts: RunOptions, selection: TaskSelection, tasks: Any, policy: Any, config: Any,
                      out: Path) -> int:
    from agentenv.rollout.tree import run_repair_trees

    assert opts.repair_tree is not None
    initial, repairs = opts.repair_tree
    stderr().print(f"agentenv run: repair trees {initial},{repairs} over {len(tasks)} tasks, "
                   f"{opts.policy} policy, {opts.max_turns} turns -> {out}")
    result = run_repair_trees(tasks, policy, config, out, initial=initial, repairs=repairs)
    tree = result.summary["tree"]
    printer = stdout()
    printer.print(_summary_table(result.summary, f"{opts.policy} on {selection.spec} (repair trees)",
                                 opts.max_turns))
    printer.print(f"each root counts once (its branches share its weight): pass@1: the first "
                  f"programs' pass rate; solve@{opts.max_turns}: a root with one repair (a random "
                  "branch); repair: a branch's chance to repair its failed root")
    printer.print(f"{tree['roots']} roots, {tree['failed_roots']} failed and branched {repairs} ways; "
                  f"tree solve rate (first program or any of {repairs} repairs) {fmt(tree['tree_solve_rate'])}; "
                  f"{tree['policy_calls']} policy calls ({tree['calls_saved_by_sharing']} saved by "
                  f"sharing first turns); wrote {out / 'trajectories.jsonl'}")
    return EXIT_OK
