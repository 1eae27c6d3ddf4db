"""SkyRL: agentenv's multi-turn env as a SkyRL-gym env class (``agentenv_coding``).

    python examples/recipes/skyrl_env.py

Importing ``agentenv.integrations.skyrl`` registers the env class; rows from
``to_skyrl_records`` name it, and SkyRL's generator makes one env per rollout with
``skyrl_gym.make(row["env_class"], env_config=..., extras=row)``. This script plays that loop
with the scripted policy (a buggy attempt, then the fix) and prints each step. In a SkyRL
training script, import the adapter before the trainer starts and write the rows as parquet.
Needs ``pip install -e ".[skyrl]"`` in a clone (published: ``pip install "agentenv-coding[skyrl]"``). The part of ``main`` between the ``README`` markers
is the README's snippet (tests/test_recipes.py checks it).
"""

from __future__ import annotations


def main() -> None:
    # README >>>
    import skyrl_gym
    from omegaconf import OmegaConf

    from agentenv import TASKS
    from agentenv.integrations.skyrl import to_skyrl_records  # registers "agentenv_coding"
    from agentenv.policies.scripted import scripted_answer  # stands in for the policy

    task = TASKS[1]
    row = to_skyrl_records([task], max_turns=3)[0]      # SkyRL dataset row: prompt, env_class, task
    env = skyrl_gym.make(row["env_class"], env_config=OmegaConf.create({"feedback_from": "all"}),
                         extras=row)
    chat, _ = env.init(row["prompt"])
    for turn in range(1, 4):                            # SkyRL's generator loop, scripted policy
        out = env.step(scripted_answer(task, turn))     # graded in the sandbox
        chat += out["observations"]                     # the feedback, as a user message
        print(f"turn {turn}: reward {out['reward']:.2f} done {out['done']} "
              f"outcome {out['metadata']['outcome']}")
        if out["done"]:
            break
    print("metrics", env.get_metrics())
    # <<< README


if __name__ == "__main__":
    main()
