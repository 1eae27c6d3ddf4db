"""Fast input under agentenv and under plain ``python3``, side by side.

A program reads 2x10^5 lines (one integer each) with ``sys.stdin.buffer.readline``,
``sys.stdin.readline`` or ``input()`` and prints their sum. Each reader runs ``--repeat`` times
under plain ``python3 solution.py < input`` (a subprocess) and under agentenv's ``run_tests``
(one stdio case), interleaved; the program times its own reading loop (CPU seconds, so other
load on the machine counts little) and writes that to stderr. Printed per reader: the median
reading time both ways and their ratio (the target is at most 1.5x), and the
median wall time of a whole grading (``run_tests``) against a whole ``python3`` run.

    PYTHONPATH=$PWD python benchmarks/fast_input.py [--lines N] [--repeat K]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READERS = {
    "sys.stdin.buffer.readline": "import sys\nreadline = sys.stdin.buffer.readline\n",
    "sys.stdin.readline": "import sys\nreadline = sys.stdin.readline\n",
    "input()": "readline = input\n",
}
PROGRAM = """{setup}import sys, time
start = time.process_time()
n = int(readline())
total = 0
for _ in range(n):
    total += int(readline())
elapsed = time.process_time() - start
print(total)
sys.stderr.write("read_seconds=%.6f\\n" % elapsed)
"""
_READ = re.compile(r"read_seconds=([0-9.]+)")


def _plain(code: str, stdin: bytes) -> tuple[float, float, str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "solution.py"
        path.write_text(code)
        (Path(tmp) / "input.txt").write_bytes(stdin)
        with open(Path(tmp) / "input.txt", "rb") as handle:
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, str(path)], stdin=handle, capture_output=True, check=True)
            wall = time.perf_counter() - start
    match = _READ.search(proc.stderr.decode())
    assert match, proc.stderr
    return float(match.group(1)), wall, proc.stdout.decode()


def _agentenv(code: str, stdin: str, expected: str) -> tuple[float, float]:
    from agentenv.grading import run_tests
    from agentenv.tasks.schema import StdioCase

    start = time.perf_counter()
    result = run_tests(code, [StdioCase(stdin, expected)], timeout=10.0)
    wall = time.perf_counter() - start
    assert result.passed == 1, result.failures
    match = _READ.search(result.stderr)
    assert match, result.stderr
    return float(match.group(1)), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    numbers = [(i * 7919) % 1_000_003 for i in range(args.lines)]
    stdin = f"{args.lines}\n" + "".join(f"{x}\n" for x in numbers)
    expected = f"{sum(numbers)}\n"
    print(f"{args.lines:,} lines, median of {args.repeat} runs (cpu count {os.cpu_count()})")
    print(f"{'reader':<27} {'read: python3':>13} {'agentenv':>9} {'ratio':>6}   "
          f"{'whole: python3':>14} {'run_tests':>9} {'ratio':>6}")
    worst = 0.0
    for name, setup in READERS.items():
        code = PROGRAM.format(setup=setup)
        plain, ours = [], []
        for _ in range(args.repeat):  # interleaved, so a change in the machine's load hits both alike
            plain.append(_plain(code, stdin.encode()))
            ours.append(_agentenv(code, stdin, expected))
        assert plain[0][2] == expected
        read_p, read_a = statistics.median(p[0] for p in plain), statistics.median(a[0] for a in ours)
        wall_p, wall_a = statistics.median(p[1] for p in plain), statistics.median(a[1] for a in ours)
        worst = max(worst, read_a / read_p)
        print(f"{name:<27} {read_p * 1000:>11.1f}ms {read_a * 1000:>7.1f}ms {read_a / read_p:>5.2f}x   "
              f"{wall_p * 1000:>12.1f}ms {wall_a * 1000:>7.1f}ms {wall_a / wall_p:>5.2f}x")
    print(f"\nworst reading ratio {worst:.2f}x (target <= 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
