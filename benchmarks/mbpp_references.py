"""Score MBPP's reference solutions through agentenv's loader and sandbox, and explain failures.

    python benchmarks/mbpp_references.py [--path ../shared/data/mbpp.jsonl] [--workers 2]

Loads every problem with ``load_tasks("mbpp", path=...)``, runs each ``reference_solution``
against its checks with ``agentenv.grading.run_tests`` (setup code after the solution, as the
Task contract says), and prints how many score 1.0. Every reference that does not is then run
outside agentenv too: a plain ``exec`` of the code, the setup and each assert in a fresh
interpreter, so the table separates problems whose data is wrong (they fail everywhere) from
problems agentenv grades differently (they pass under plain exec).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agentenv.grading import RunResult, run_tests
from agentenv.tasks import Task, load_tasks

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "shared" / "data" / "mbpp.jsonl"

# Runs in a fresh interpreter: the code, then the setup, then each assert on its own.
_PLAIN = r"""
import json, sys
job = json.loads(sys.stdin.read())
ns = {"__name__": "__main__"}
out = {"load": None, "asserts": []}
try:
    exec(compile(job["code"], "<solution>", "exec"), ns)
    exec(compile(job["setup"], "<setup>", "exec"), ns)
except BaseException as exc:
    out["load"] = f"{type(exc).__name__}: {exc}"
else:
    for check in job["checks"]:
        try:
            exec(compile(check, "<check>", "exec"), ns)
            out["asserts"].append(None)
        except BaseException as exc:
            out["asserts"].append(f"{type(exc).__name__}: {exc}"[:200])
print(json.dumps(out))
"""


def plain_exec(task: Task, timeout: float) -> str:
    """Verdict of a plain exec outside agentenv: 'pass', or why it fails."""
    job = json.dumps({"code": task.reference_solution or "", "setup": task.setup_code,
                      "checks": [c for c in task.checks if isinstance(c, str)]})
    try:
        proc = subprocess.run([sys.executable, "-c", _PLAIN], input=job, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"times out after {timeout:g} s"
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return f"crashes (exit {proc.returncode}): {proc.stderr.strip()[-200:]}"
    if out["load"]:
        return f"solution/setup raises {out['load']}"
    failed = [(i, msg) for i, msg in enumerate(out["asserts"]) if msg]
    if not failed:
        return "pass"
    return "; ".join(f"check {i} {msg or 'AssertionError'}" for i, msg in failed)


def describe(result: RunResult) -> str:
    return "; ".join(f"check {f.index} {f.kind}: {f.message[:160]}" for f in result.failures) \
        or ("timed out" if result.timed_out else "no failure recorded")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, default=Path(os.environ.get("AGENTENV_MBPP_PATH", DEFAULT_PATH)))
    parser.add_argument("--timeout", type=float, default=5.0, help="sandbox timeout per task (s)")
    parser.add_argument("--workers", type=int, default=2, help="concurrent sandbox runs")
    parser.add_argument("--include-challenge", action="store_true",
                        help="also run challenge_test_list")
    args = parser.parse_args(argv)

    tasks = load_tasks("mbpp", path=args.path, include_challenge=args.include_challenge)
    start = time.perf_counter()

    def score(task: Task) -> RunResult:
        return run_tests(task.reference_solution or "", task.checks, args.timeout,
                         setup_code=task.setup_code, float_tolerance=task.float_tolerance,
                         equality=task.equality, prelude=task.prelude)

    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(score, tasks))
    elapsed = time.perf_counter() - start
    perfect = sum(r.all_passed for r in results)
    isolation = sorted({r.isolation for r in results})
    in_child = sum(r.graded_in_child for r in results)
    total_checks = sum(r.total for r in results)
    print(f"MBPP references scoring 1.0: {perfect}/{len(tasks)} "
          f"({elapsed:.1f} s, {1000 * elapsed / len(tasks):.1f} ms/task wall with {args.workers} "
          f"workers; isolation {', '.join(isolation)}; {in_child}/{total_checks} checks graded in child)")
    failures = [(t, r) for t, r in zip(tasks, results, strict=True) if not r.all_passed]
    if failures:
        print(f"\n{'task':<10} {'agentenv':<8} {'outside agentenv (plain exec)'}")
        fail_everywhere = 0
        for task, result in failures:
            outside = plain_exec(task, timeout=max(10.0, 2 * args.timeout))
            fail_everywhere += outside != "pass"
            print(f"{task.name:<10} {result.passed}/{result.total:<6} {outside}")
            print(f"{'':<10} agentenv: {describe(result)}")
        print(f"\n{fail_everywhere} of the {len(failures)} failing references fail under plain exec "
              f"too (data problems); {len(failures) - fail_everywhere} pass under plain exec and are "
              f"graded differently by agentenv.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
