"""02 — The sandbox: any model output becomes a finite, scored result.

``run_tests`` runs candidate code and each check in a separate, isolated process with a hard
timeout. A wrong answer, a crash, a syntax error and an infinite loop all come back as data
(fraction 0.0), and the calling process never hangs or dies.

Run: python examples/02_sandbox.py
"""

from __future__ import annotations

import textwrap
import time

from agentenv import run_tests
from agentenv.log import configure_logging

checks = ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"]
cases = {
    "correct": "def add(a, b):\n    return a + b\n",
    "wrong": "def add(a, b):\n    return a - b\n",
    "crashes": "def add(a, b):\n    raise ValueError('boom')\n",
    "syntax error": "def add(a, b)\n    return a + b\n",
    "infinite loop": "def add(a, b):\n    while True: pass\n",
}


def main() -> None:
    configure_logging("warning")
    print(f"{'case':<14} {'fraction':>8} {'timed_out':>9} {'seconds':>7}  first failure")
    for label, code_str in cases.items():
        start = time.perf_counter()
        r = run_tests(code_str, checks, timeout=2.0)
        elapsed = time.perf_counter() - start
        first = f"[{r.failures[0].kind}] {r.failures[0].message}" if r.failures else ""
        # Shortened at a word boundary, never mid-word.
        print(f"{label:<14} {r.fraction:>8.2f} {r.timed_out!s:>9} {elapsed:>7.2f}  "
              f"{textwrap.shorten(first, width=72, placeholder=' …')}")
    print(f"\nisolation level here: {r.isolation}")


if __name__ == "__main__":
    main()
