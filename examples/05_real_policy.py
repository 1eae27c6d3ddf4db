"""05 — A real policy: an LLM behind an OpenAI-compatible API, and nothing about the env changes.

The walk-through's two lines are the whole change from the mock:

    raw = openai_policy(obs, model="gpt-4o", temperature=0.2)
    _, reward, _, info = env.step(raw)

Then a full rollout over every task with ``run_rollouts`` (calls in flight at once, the
server's token usage in each record).

Run one of:
    OPENAI_API_KEY=sk-... python examples/05_real_policy.py            # OpenAI, gpt-4o
    python examples/05_real_policy.py --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-Coder-7B-Instruct
                                                                        # vLLM / Ollama / llama.cpp
    python examples/05_real_policy.py --demo                           # offline: a local stand-in model

Without a key or a --base-url it explains what to set and exits with code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator

from agentenv import TASKS, CodingEnv
from agentenv.log import configure_logging
from agentenv.policies import OpenAIPolicy
from agentenv.rollout import RolloutConfig, run_rollouts

HOW_TO = """\
This example calls a real model, and there is nothing to call yet. Choose one:

  * OpenAI:   export OPENAI_API_KEY=sk-...   then   python examples/05_real_policy.py
  * any OpenAI-compatible server (vLLM, Ollama, llama.cpp, SGLang), no key needed:
        python examples/05_real_policy.py --base-url http://127.0.0.1:8000/v1 --model MODEL
    (Ollama: --base-url http://127.0.0.1:11434/v1 --model qwen2.5-coder)
  * offline, a local stand-in model that makes a buggy first attempt:
        python examples/05_real_policy.py --demo
"""


@contextlib.contextmanager
def demo_server() -> Iterator[str]:
    """A local OpenAI-compatible server playing a scripted model (agentenv.testing)."""
    from agentenv.testing import ChatServer

    with ChatServer(latency=0.05) as server:
        yield server.url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Roll out a real LLM policy on the builtin tasks.")
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"),
                        help="OpenAI-compatible endpoint (default: OPENAI_BASE_URL or api.openai.com)")
    parser.add_argument("--model", default="gpt-4o", help="model id (default: gpt-4o)")
    parser.add_argument("--temperature", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=8, help="calls in flight at once")
    parser.add_argument("--demo", action="store_true", help="use a local stand-in model (offline)")
    args = parser.parse_args(argv)
    configure_logging("warning")

    if not args.demo and not args.base_url and not os.environ.get("OPENAI_API_KEY"):
        print(HOW_TO, file=sys.stderr)
        return 2  # nothing ran: a script chaining this example must not take it for success

    with demo_server() if args.demo else contextlib.nullcontext(args.base_url) as base_url:
        policy = OpenAIPolicy(args.model, base_url=base_url, temperature=args.temperature)
        where = base_url or "api.openai.com"
        print(f"policy: {args.model} at {where}, temperature {args.temperature}")
        if args.demo:
            print("(demo: a scripted stand-in whose first attempts are deliberately buggy; "
                  "examples/06_multiturn.py shows it revising from feedback)")
        print()

        # The walk-through's episode: one task, one call, one step.
        env = CodingEnv(tasks=TASKS, seed=0)
        obs = env.reset(task_index=0)
        raw = policy(obs)
        _, reward, _, info = env.step(raw)
        usage = getattr(raw, "usage", None) or {}
        print(f"task {info['task_name']}: reward={reward:.2f} passed={info['passed']}/{info['total']} "
              f"prompt_tokens={usage.get('prompt_tokens', '-')} "
              f"completion_tokens={usage.get('completion_tokens', '-')}")

        # A full rollout over every task, calls in flight concurrently.
        config = RolloutConfig(mode="single_step", concurrency=args.concurrency, model=args.model)
        result = run_rollouts(TASKS, policy, config)
    print(f"\n{'task':<22}{'difficulty':<12}{'reward':>7}{'tokens':>8}")
    for t in result.trajectories:
        turn = t.turns[0]
        tokens = (turn.usage or {}).get("completion_tokens", "-")
        print(f"{t.task_name:<22}{t.difficulty or '-':<12}{t.final_reward:>7.2f}{tokens!s:>8}")
    s = result.summary
    solved = sum(1 for t in result.trajectories if t.solved_turn is not None)
    print(f"\nsolved {solved}/{len(result.trajectories)} tasks, mean reward {s['mean_reward']:.3f}, "
          f"{result.seconds:.1f}s")
    for row in s["per_difficulty"]:
        print(f"  {row['difficulty']:<7} solve rate {row['solve_rate']:.2f}  mean reward {row['mean_reward']:.2f}")
    if result.errors:
        print(f"{len(result.errors)} call(s) failed, e.g. {result.errors[0].error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
