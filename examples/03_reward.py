"""03 — The reward: dense shaping, the sparse alternative, and how a policy games it.

Four attempts at ``is_palindrome``, from nothing to fully correct, score under the dense reward
(format gate, then the fraction of hidden tests passed) and under a sparse one (1.0 only when
all pass). Dense climbs; sparse collapses three of them into the same zero. Then an attempt
that special-cases the prompt's example: the hidden tests catch most of it, yet it still earns
partial credit. That gap is what reward hacking exploits.

Run: python examples/03_reward.py
"""

from __future__ import annotations

from agentenv import TASKS, extract_code, run_tests
from agentenv.log import configure_logging
from agentenv.rewards import dense_reward, sparse_reward


def main() -> None:
    configure_logging("warning")
    task = next(t for t in TASKS if t.name == "is_palindrome")
    attempts = task.metadata["reward_demo"]
    labels = ["no code at all", "naive reversal", "almost right", "fully correct"]
    print(f"{'attempt':<16} {'passed':>7} {'dense':>6} {'sparse':>6}")
    for label, raw in zip(labels, attempts, strict=True):
        code = extract_code(raw, task.entry_point)
        result = run_tests(code, task.checks, timeout=2.0)
        print(f"{label:<16} {result.passed:>3}/{result.total:<3} "
              f"{dense_reward(result, code):>6.2f} {sparse_reward(result, code):>6.2f}")

    print("\nSpecial-casing the prompt's example:")
    hack = task.metadata["special_case"]
    result = run_tests(hack, task.checks, timeout=2.0)
    print(hack.strip())
    print(f"-> passes {result.passed}/{result.total} hidden checks, dense reward "
          f"{dense_reward(result, hack):.2f}: partial credit for a solution that solves nothing.")


if __name__ == "__main__":
    main()
