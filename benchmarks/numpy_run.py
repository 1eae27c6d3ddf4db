"""A numpy task's run against a standard-library task's run, numpy preloaded in the zygote.

    python benchmarks/numpy_run.py [--repeats 15] [--preload numpy]

Both tasks are one function and one check: ``np.arange(n).sum()`` (``import numpy as np`` at
the top of the candidate's code) against ``sum(range(n))``. ``AGENTENV_SANDBOX_PRELOAD`` is set
from ``--preload`` before the pool starts (empty: no preload, each numpy run imports it).
Interleaved per repeat; printed: the median wall ms of ``run_tests`` for each, and the ratio
(target: within 2x).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

NUMPY = ("import numpy as np\n\ndef total(n):\n    return int(np.arange(n).sum())\n")
STDLIB = "def total(n):\n    return sum(range(n))\n"
CHECKS = ["assert total(10) == 45", "assert total(1000) == 499500"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--preload", default="numpy")
    args = parser.parse_args()
    os.environ["AGENTENV_SANDBOX_PRELOAD"] = args.preload
    from agentenv.grading import run_tests

    def timed(code: str) -> float:
        start = time.perf_counter()
        result = run_tests(code, CHECKS, timeout=10)
        seconds = time.perf_counter() - start
        if not result.all_passed:
            raise SystemExit(f"an honest task failed: {result.failures}")
        return seconds

    timed(NUMPY), timed(STDLIB)  # the pool started, both paths warm
    numpy_runs, stdlib_runs = [], []
    for i in range(args.repeats):
        pair = [(numpy_runs, NUMPY), (stdlib_runs, STDLIB)]
        for runs, code in (pair if i % 2 == 0 else pair[::-1]):
            runs.append(timed(code))
    n, s = statistics.median(numpy_runs), statistics.median(stdlib_runs)
    print(f"preload={args.preload!r} repeats={args.repeats} (median wall ms per run_tests)")
    print(f"numpy task   {n * 1000:8.1f} ms")
    print(f"stdlib task  {s * 1000:8.1f} ms")
    print(f"ratio numpy / stdlib: {n / s:.2f}x (target <= 2x)")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
