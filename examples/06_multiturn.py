"""06 — Multi-turn agents: submit, read which tests failed, revise; and who gets the credit.

``MultiTurnCodingEnv`` keeps everything from the bandit version, except that ``done`` is only
True once the hidden tests pass or the turns (or tokens) run out, and each ``step()`` feeds
back which tests failed. The walk-through's loop, as written:

    env = MultiTurnCodingEnv(max_turns=3, seed=0)
    obs = env.reset(task_index=idx)
    done = False
    while not done:
        raw = policy(obs)
        obs, reward, done, info = env.step(raw)

This script compares best-of-one (one single-step attempt, ``CodingEnv``) with the multi-turn
final reward on the same tasks. Offline it uses ``ScriptedPolicy``: each builtin task's
realistic buggy attempts, then its reference solution, so revision has something to fix. It
then shows the per-turn records and the returns each credit scheme assigns to them.

Run:
    python examples/06_multiturn.py                      # offline, scripted policy
    OPENAI_API_KEY=sk-... python examples/06_multiturn.py --model gpt-4o   # also a real model
    python examples/06_multiturn.py --base-url http://127.0.0.1:8000/v1 --model M   # vLLM, Ollama...
    python examples/06_multiturn.py --demo               # also a local stand-in model over HTTP
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from agentenv import TASKS, CodingEnv, MultiTurnCodingEnv
from agentenv.credit import SCHEMES, turn_returns
from agentenv.log import configure_logging
from agentenv.policies import OpenAIPolicy, ScriptedPolicy, openai_policy
from agentenv.records import Trajectory
from agentenv.tasks import Task

Policy = Callable[[dict[str, Any]], str]


def walkthrough_episode(policy: Policy, tasks: Sequence[Task], idx: int, max_turns: int) -> Trajectory:
    """One episode with the walk-through's loop, printing what each turn saw and earned."""
    env = MultiTurnCodingEnv(tasks=tasks, max_turns=max_turns, seed=0)
    obs = env.reset(task_index=idx)
    print(f"task {obs['task_name']!r}: up to {obs['turns_left']} turns, "
          f"{obs['tokens_used']} tokens in the opening messages")
    done = False
    while not done:
        raw = policy(obs)
        obs, reward, done, info = env.step(raw)
        assert env.trajectory is not None
        # The turn's reward (its dense score, as in the table below); step() pays its change.
        turn_reward = env.trajectory.turns[-1].reward
        print(f"  turn {info['turn']}: reward={turn_reward:.2f} step returned {reward:+.2f} "
              f"passed={info['passed']}/{info['total']} outcome={info['outcome']}")
        if not done:  # what the policy reads next, as the last user message
            print("    feedback:\n" + "\n".join("      | " + line for line in obs["feedback"].splitlines()))
    used = f"{info['turn']} of {max_turns} turn(s)"
    print(f"  -> {'solved' if info['terminated'] else 'not solved'} after {used}: "
          f"stop_reason={info['stop_reason']} terminated={info['terminated']} "
          f"truncated={info['truncated']} tokens_used={obs['tokens_used']}")
    assert env.trajectory is not None
    return env.trajectory


def compare(policy: Policy, tasks: Sequence[Task], max_turns: int) -> list[Trajectory]:
    """Best-of-one vs multi-turn final reward, task by task; returns the multi-turn trajectories."""
    single = CodingEnv(tasks=tasks, seed=0)
    multi = MultiTurnCodingEnv(tasks=tasks, max_turns=max_turns, seed=0)
    trajectories: list[Trajectory] = []
    print(f"{'task':<22}{'difficulty':<11}{'best-of-1':>10}{'multi-turn':>11}  "
          f"{'turns':>5}  stop_reason   per-turn rewards")
    for idx, task in enumerate(tasks):
        obs = single.reset(task_index=idx)
        _, one_shot, _, _ = single.step(policy(obs))
        obs = multi.reset(task_index=idx)
        done = False
        while not done:
            obs, _, done, _ = multi.step(policy(obs))
        traj = multi.trajectory
        assert traj is not None
        trajectories.append(traj)
        rewards = " ".join(f"{r:.2f}" for r in traj.rewards)
        print(f"{task.name:<22}{task.difficulty or '-':<11}{one_shot:>10.2f}{traj.final_reward:>11.2f}  "
              f"{len(traj.turns):>5}  {traj.stop_reason:<13} {rewards}")
        traj.metadata["best_of_one"] = one_shot
    n = len(trajectories)
    best_of_one = sum(t.metadata["best_of_one"] for t in trajectories) / n
    final = sum(t.final_reward for t in trajectories) / n
    first_pass = sum(t.first_turn_solved for t in trajectories)
    solved = sum(t.solved_turn is not None for t in trajectories)
    repaired = sum(t.solved_turn is not None and not t.first_turn_solved for t in trajectories)
    print(f"\nmean reward: best-of-one {best_of_one:.3f}  vs  multi-turn final {final:.3f}")
    print(f"solved on turn 1: {first_pass}/{n}; solved by turn {max_turns}: {solved}/{n}; "
          f"repaired after a failed first turn: {repaired}/{n - first_pass}")
    return trajectories


def show_credit(trajectories: Sequence[Trajectory], gamma: float) -> None:
    """The returns each scheme gives the turns of the longest solved episode."""
    solved = [t for t in trajectories if t.solved_turn is not None]
    if not solved:
        return
    traj = max(solved, key=lambda t: len(t.turns))
    print(f"\ncredit for the turns of {traj.task_name!r} (rewards "
          f"{', '.join(f'{r:.2f}' for r in traj.rewards)}; deltas "
          f"{', '.join(f'{t.delta:+.2f}' for t in traj.turns)}), gamma={gamma}:")
    for scheme in SCHEMES:
        returns = ", ".join(f"{g:+.3f}" for g in turn_returns(traj, scheme, gamma))
        print(f"  {scheme:<12} returns per turn: {returns}")
    print("  (group-normalised GRPO advantages, agentenv.credit.group_advantages, need several "
          "samples per task: `agentenv run --samples k`)")


@contextlib.contextmanager
def real_policy(args: argparse.Namespace) -> Iterator[tuple[str, Policy] | None]:
    """The real model to run, if any: OPENAI_API_KEY, --base-url, or --demo (a local stand-in)."""
    if args.demo:
        from agentenv.testing import ChatServer

        with ChatServer() as server:
            yield f"stand-in model at {server.url}", OpenAIPolicy(
                args.model, base_url=server.url, api_key="demo", temperature=0.4)
        return
    if args.base_url:
        yield f"{args.model} at {args.base_url}", OpenAIPolicy(
            args.model, base_url=args.base_url, temperature=0.4)
        return
    if os.environ.get("OPENAI_API_KEY"):
        yield f"{args.model} (OpenAI)", functools.partial(openai_policy, model=args.model,
                                                          temperature=0.4)
        return
    yield None


def main() -> None:
    parser = argparse.ArgumentParser(description="Best-of-one vs multi-turn revision on the builtin tasks.")
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--gamma", type=float, default=0.9, help="discount for the credit table")
    parser.add_argument("--model", default="gpt-4o")
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible server to also run")
    parser.add_argument("--demo", action="store_true",
                        help="also run a local stand-in model over HTTP (offline)")
    args = parser.parse_args()
    configure_logging("warning")
    tasks = TASKS

    print("== the walk-through's loop, scripted policy ==")
    scripted = ScriptedPolicy(tasks)
    walkthrough_episode(scripted, tasks, 0, args.max_turns)

    print(f"\n== best-of-one vs multi-turn (max_turns={args.max_turns}), scripted policy ==")
    trajectories = compare(scripted, tasks, args.max_turns)
    show_credit(trajectories, args.gamma)

    with real_policy(args) as real:
        if real is None:
            print("\n(set OPENAI_API_KEY, or pass --base-url URL or --demo, to also run a real model)")
            return
        name, policy = real
        print(f"\n== best-of-one vs multi-turn (max_turns={args.max_turns}), {name} ==")
        compare(policy, tasks, args.max_turns)


if __name__ == "__main__":
    main()
