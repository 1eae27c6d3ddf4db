"""Does the token budget bind? Over-budget episodes on the builtin tasks, this tree against a baseline.

Every builtin task is played for ``--max-turns`` turns under each budget by two offline
policies: ``scripted`` (each task's buggy attempts, then the reference) and ``verbose`` (the same
answers after ~250 tokens of prose, so replies overrun small budgets). Every request is recounted
here, independently of the env, with OpenAI's documented chat accounting (3 tokens a message plus
role and content, 3 priming the reply) and the tokenizer's encoding; a point is over budget when
a request's prompt plus its reply exceeds the budget. Per budget it prints the episodes, those
over budget at any point, the replies graded beyond the allowance, the episodes whose feedback
was trimmed, how many of those then left fewer than 64 tokens for a reply, and how many lost the
"attempts left" line.

    python benchmarks/token_budget.py                       # this tree only
    python benchmarks/token_budget.py --baseline /work/main # side by side with another checkout
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

BUDGETS = (260, 300, 400, 600)
PROSE = "Let me reason about this carefully before writing the code. " * 25


def exact_prompt(encoding: Any, messages: list[dict[str, str]]) -> int:
    return sum(3 + len(encoding.encode_ordinary(m["role"])) + len(encoding.encode_ordinary(m["content"]))
               for m in messages) + 3


def measure(max_turns: int) -> dict[str, Any]:
    from agentenv.envs.multiturn import MultiTurnCodingEnv
    from agentenv.errors import ConfigError
    from agentenv.policies import ScriptedPolicy
    from agentenv.tasks.builtin import builtin_tasks
    from agentenv.tokens import get_tokenizer

    tasks = builtin_tasks()
    scripted = ScriptedPolicy(tasks)
    policies = {"scripted": scripted, "verbose": lambda obs: PROSE + "\n\n" + scripted(obs)}
    encoding = get_tokenizer()
    out: dict[str, Any] = {}
    for name, policy in policies.items():
        for budget in BUDGETS:
            row = {"episodes": 0, "refused": 0, "over_budget": 0, "graded_past_allowance": 0,
                   "trimmed": 0, "trimmed_no_reply_room": 0, "trimmed_lost_attempts_line": 0}
            for index in range(len(tasks)):
                env = MultiTurnCodingEnv(tasks=tasks, max_turns=max_turns, token_budget=budget,
                                         tokenizer=encoding)
                try:
                    obs = env.reset(task_index=index)
                except ConfigError:
                    row["refused"] += 1
                    continue
                row["episodes"] += 1
                over = past = trimmed = no_room = lost = False
                done = False
                while not done:
                    prompt = exact_prompt(encoding, obs["messages"])
                    allowance = obs.get("max_tokens")
                    reply = policy(obs)
                    obs, _, done, info = env.step(reply)
                    graded = env.trajectory.turns[-1].response_text  # type: ignore[union-attr]
                    graded_tokens = len(encoding.encode_ordinary(graded))
                    over |= prompt + graded_tokens > budget
                    past |= graded_tokens > (allowance if allowance is not None else budget - prompt)
                    if info["feedback_trimmed"]:
                        trimmed = True
                        room = budget - exact_prompt(encoding, obs["messages"])
                        no_room |= room < 64
                        lost |= "attempt" not in obs["feedback"].rsplit("\n\n", 1)[-1]
                row["over_budget"] += over
                row["graded_past_allowance"] += past
                row["trimmed"] += trimmed
                row["trimmed_no_reply_room"] += trimmed and no_room
                row["trimmed_lost_attempts_line"] += trimmed and lost
            out[f"{name}@{budget}"] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", help="another checkout (its package dir is put first on sys.path)")
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # child mode
    args = parser.parse_args()
    os.environ.setdefault("AGENTENV_OFFLINE", "1")
    if args.json:
        print(json.dumps(measure(args.max_turns)))
        return
    here = measure(args.max_turns)
    base = None
    if args.baseline:
        env = {**os.environ, "PYTHONPATH": args.baseline}
        done = subprocess.run([sys.executable, __file__, "--json", "--max-turns", str(args.max_turns)],
                              env=env, capture_output=True, text=True, check=True, cwd=args.baseline)
        base = json.loads(done.stdout.strip().splitlines()[-1])
    columns = ("episodes", "over_budget", "graded_past_allowance", "trimmed", "trimmed_no_reply_room",
               "trimmed_lost_attempts_line")
    print(f"{'policy@budget':16}" + "".join(f"{c:>28}" for c in columns))
    for key, row in here.items():
        cells = []
        for c in columns:
            cells.append(f"{row[c]:>5}" if base is None else f"{base[key][c]:>5} -> {row[c]:<5}")
        print(f"{key:16}" + "".join(f"{cell:>28}" for cell in cells))
    if base is not None:
        over_before = sum(r["over_budget"] for r in base.values())
        over_after = sum(r["over_budget"] for r in here.values())
        print(f"over-budget episodes, all rows: baseline {over_before}, this tree {over_after} "
              f"(ratio {over_after / over_before if over_before else float('nan'):.3f})")


if __name__ == "__main__":
    main()
