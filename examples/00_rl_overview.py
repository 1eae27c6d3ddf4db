"""00 — RL in twenty minutes: reset/step on a number-guessing game.

The agent guesses; the environment says higher or lower (the observation narrows) and rewards
a hit with 1.0. No labels anywhere, only rewards and observations. A better policy (binary
search) needs fewer steps for the same return than a worse one (random guessing): that gap is
what an RL algorithm climbs.

Run: python examples/00_rl_overview.py
"""

from __future__ import annotations

import statistics

from agentenv import NumberGuessEnv
from agentenv.log import configure_logging
from agentenv.toy import RandomGuessPolicy, binary_search_policy, play_episode


def main() -> None:
    configure_logging("warning")

    # One episode, step by step, with the binary-search policy.
    env = NumberGuessEnv(seed=5)
    obs = env.reset()
    steps, ret, done, info = 0, 0.0, False, {}
    while not done:
        guess = binary_search_policy(obs)
        obs, reward, done, info = env.step(guess)
        steps += 1
        ret += reward
        if done:
            print(f"  guess {guess:>3} -> hit")
        else:
            print(f"  guess {guess:>3} -> secret is in [{obs['low']}, {obs['high']}]")
    print(f"solved in {steps} guesses, secret was {info['secret']}, return={ret}")

    # Same game, two policies, many seeded episodes.
    episodes = 500
    for name, policy in [("binary search", binary_search_policy), ("random", RandomGuessPolicy(seed=1))]:
        env = NumberGuessEnv(seed=42)
        lengths = [play_episode(env, policy)[0] for _ in range(episodes)]
        print(f"{name:>13}: mean {statistics.mean(lengths):.2f} guesses "
              f"(max {max(lengths)}) over {episodes} episodes, return 1.0 each")
    print("Same reward, fewer steps: the better policy is what an RL algorithm climbs towards.")


if __name__ == "__main__":
    main()
