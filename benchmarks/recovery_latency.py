"""How long the honest submission right after a hostile one waits, at the fallback level.

    python benchmarks/recovery_latency.py [--repeats 5]

The fallback attack tests (tests/attacks/test_fallback_and_redaction.py) assert what the pool
reports after an attack (the verdict, no timeout, no worker waited out or replaced), never how
long it took: the machines they run on are shared and noisy. This measures the time itself. For each case, on a
fresh one-worker pool at the rlimits level (as root it needs
``AGENTENV_SANDBOX_ALLOW_ROOT_FALLBACK=1``): one hostile run, then one honest run (a plain and a
judged check), timed from the call to its answer; the same after an honest run as the baseline.

- **baseline**: an honest run first;
- **stopped_worker**: a stray SIGSTOPs the worker and the zygote once its run has ended (the
  parent's SIGCONT every NUDGE seconds is what keeps the next submission from waiting
  IDLE_TIMEOUT);
- **leftover_children**: twenty sleeping children left behind, which the zygote's sweep kills
  before the next run.

Printed: median and worst wall milliseconds of the honest run per case.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from agentenv.grading import run_tests
from agentenv.sandbox import SandboxPool

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.attacks import STOP_THE_WORKER

HONEST = "def f():\n    return 1\n"
HONEST_CHECKS = ["assert f() == 1", "for _ in (1,):\n    assert f() == 1"]
CHECK = ["assert f() == 1"]


LEFTOVER_CHILDREN = """
import os, time
for _ in range(20):
    if os.fork() == 0:
        os.setsid()
        time.sleep(60)
        os._exit(0)
def f():
    return 0
"""

CASES = {"baseline": HONEST, "stopped_worker": STOP_THE_WORKER, "leftover_children": LEFTOVER_CHILDREN}


def one(first: str) -> float:
    """Seconds the honest run took right after ``first`` on a fresh one-worker fallback pool."""
    with SandboxPool(size=1, isolation="rlimits", allow_root_fallback=True) as pool:
        run_tests(HONEST, CHECK, timeout=1.0, pool=pool)  # the worker is up
        run_tests(first, CHECK, timeout=1.0, pool=pool)
        began = time.perf_counter()
        result = run_tests(HONEST, HONEST_CHECKS, timeout=1.0, pool=pool)
        took = time.perf_counter() - began
        if (result.fraction, result.timed_out) != (1.0, False):
            raise SystemExit(f"the honest run failed: {result.failures}")
        return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for name, code in CASES.items():
        times = [one(code) for _ in range(args.repeats)]
        print(f"{name:18s} median {1000 * statistics.median(times):7.1f} ms   "
              f"worst {1000 * max(times):7.1f} ms   ({args.repeats} runs)")


if __name__ == "__main__":
    main()
