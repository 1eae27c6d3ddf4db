"""01 — The environment skeleton: the coding env has the number game's exact shape.

``reset()`` poses a task (the hidden tests are not in the observation); ``step()`` takes the
policy's raw text, runs it against the hidden tests and returns the reward plus diagnostics.
The scripted mock policy only knows how to solve ``add``, so every other task scores zero.

Run: python examples/01_env_skeleton.py
"""

from __future__ import annotations

from agentenv import CodingEnv, mock_policy
from agentenv.log import configure_logging


def main() -> None:
    configure_logging("warning")
    env = CodingEnv(seed=0)

    obs = env.reset(task_index=0)        # task 0 is `add`
    print("observation keys:", sorted(obs))
    action = mock_policy(obs)            # the 'policy': observation -> raw text
    print("policy output:\n" + action)
    _, reward, done, info = env.step(action)
    print(f"reward={reward} done={done} info={{task_name={info['task_name']!r}, "
          f"passed={info['passed']}, total={info['total']}, timed_out={info['timed_out']}}}\n")

    print(f"{'task':<24} {'difficulty':<10} reward")
    total = 0.0
    for i, task in enumerate(env.tasks):
        obs = env.reset(task_index=i)
        _, reward, _, _ = env.step(mock_policy(obs))
        total += reward
        print(f"{task.name:<24} {task.difficulty or '-':<10} {reward:.2f}")
    print(f"\nmean reward {total / len(env.tasks):.3f}: the mock only knows `add`.")


if __name__ == "__main__":
    main()
