"""The caller's memory while ``code_reward`` grades a batch of large answers.

    python benchmarks/batch_memory.py [--rows 16] [--kind int|str|pair] [--budget 512M]

Each of ``--rows`` distinct completions returns a list of a million elements (``int``: ints,
``str``: short strings, ``pair``: 300k (int, int) tuples) and its check compares it with the
same list built by the check. Printed: this process's resident memory (RSS) before the batch,
its peak while grading (sampled every 2 ms), and after; the budget on decoded values in force
(``AGENTENV_VALUES_BUDGET``, set from ``--budget``; see ``agentenv.grading.memory``).

What the budget bounds is the decoded candidate values; the peak also holds each run's raw
result bytes (up to ``Limits.max_result_bytes`` per run in flight) and the checks' own expected
values. "After" is what glibc's per-thread malloc arenas keep of freed memory, not live objects
(``MALLOC_MMAP_THRESHOLD_=131072`` makes it give big blocks back).
"""

from __future__ import annotations

import argparse
import os
import threading
import time

EXPRESSIONS = {"int": "list(range(1000000))", "str": "list(map(str, range(1000000)))",
               "pair": "list(zip(range(300000), range(300000)))"}


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--kind", choices=sorted(EXPRESSIONS), default="int")
    parser.add_argument("--budget", default=None, help="AGENTENV_VALUES_BUDGET for this run")
    args = parser.parse_args()
    if args.budget:
        os.environ["AGENTENV_VALUES_BUDGET"] = args.budget
    from agentenv.integrations.trl import code_reward

    try:
        from agentenv.grading.memory import default_values_budget
        budget = f"{default_values_budget().capacity / 2**20:,.0f} MiB"
    except ImportError:  # a version without the batch budget
        budget = "none"

    n, expr = args.rows, EXPRESSIONS[args.kind]
    code_reward(completions=[f"```python\ndef f():\n    return {i}\n```" for i in range(n)],
                checks=[["assert f() >= 0"]] * n, entry_point=["f"] * n)  # the pool's workers
    base, peak, done = rss_mib(), [0.0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_mib())
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    completions = [f"```python\ndef f():\n    # sample {i}\n    return {expr}\n```" for i in range(n)]
    start = time.perf_counter()
    rewards = code_reward(completions=completions, checks=[[f"assert f() == {expr}"]] * n,
                          entry_point=["f"] * n)
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    passed = sum(1 for r in rewards if r == 1.0)
    print(f"rows={n} kind={args.kind} budget={budget} "
          f"passed={passed}/{n} seconds={seconds:.2f}")
    print(f"RSS before {base:.0f} MiB, peak {peak[0]:.0f} MiB (+{peak[0] - base:.0f}), "
          f"after {rss_mib():.0f} MiB (+{rss_mib() - base:.0f})")


if __name__ == "__main__":
    main()
