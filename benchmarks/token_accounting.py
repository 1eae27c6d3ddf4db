"""Per-step overhead of MultiTurnCodingEnv at turn 1 and turn 50: token counting is incremental.

    python benchmarks/token_accounting.py [--episodes 60] [--turns 50] [--tokenizer gpt-4o]

The sandbox is taken out through the env's documented ``grader=`` seam: a stub grader returns a
fixed failing result instantly, so the time measured is the env's own work per step (code
extraction, reward, feedback rendering, token counting, the record, the observation). Each
episode is an always-wrong policy run for ``--turns`` steps with no budget; the step at turn 1
and the step at turn 50 are timed in every episode.

If the conversation were re-counted every step, turn 50 would cost ~50x turn 1's counting; the
env counts each message once, when it is added, so the ratio should stay near 1. For contrast
the script also times what one full re-count of the turn-50 history costs.

Counting is measured for real: the tokenizer is the tiktoken encoding behind a plain wrapper
(agentenv caches counts only for tiktoken's own types), and every turn's response differs, so
neither the steps nor the re-count are served from a count cache.

Prints the median step time at turn 1 and at turn ``--turns``, their ratio, and the re-count.
"""

from __future__ import annotations

import argparse
import statistics
import time

from agentenv.envs.multiturn import MultiTurnCodingEnv
from agentenv.grading.result import Failure, RunResult
from agentenv.grading.scoring import Scored
from agentenv.log import configure_logging
from agentenv.tasks import Task
from agentenv.tokens import get_tokenizer

TASK = Task(
    name="add_bench",
    prompt="Write a Python function `add(a, b)` that returns the sum of two numbers.",
    entry_point="add",
    checks=tuple(f"assert add({i}, {i + 1}) == {2 * i + 1}" for i in range(8)),
    visible_checks=("assert add(0, 1) == 1",),
)
WRONG = "Let me try again ({turn}).\n\n```python\ndef add(a, b):\n    return a - b  # try {turn}\n```"


class UncachedTokenizer:
    """A tokenizer agentenv does not cache counts for: every count really encodes."""

    def __init__(self, name: str) -> None:
        self._encoding = get_tokenizer(name)
        self.name = f"{getattr(self._encoding, 'name', name)} (uncached)"

    def encode(self, text: str) -> list[int]:
        return list(self._encoding.encode_ordinary(text))  # type: ignore[attr-defined]


class StubGrader:
    """Grades every submission as failing 6 of 8 checks, instantly (no process is started)."""

    def __init__(self, task: Task) -> None:
        failures = tuple(
            Failure(index=i, check=str(task.checks[i]), kind="assertion",
                    message=f"assert {-1} == {2 * i + 1}")
            for i in range(2, 8)
        )
        hidden = RunResult.from_counts(2, 8, timed_out=False, failures=failures,
                                       passed_indices=(0, 1))
        visible = RunResult.from_counts(1, 1, timed_out=False, passed_indices=(0,))
        self.scored = Scored(hidden=hidden, visible=visible)

    def score(self, task: Task, code: str, *, timeout: float) -> Scored:
        return self.scored

    async def ascore(self, task: Task, code: str, *, timeout: float) -> Scored:
        return self.scored


def measure(episodes: int, turns: int, tokenizer: str) -> tuple[list[float], list[float], float, int]:
    env = MultiTurnCodingEnv(tasks=[TASK], max_turns=turns + 1, tokenizer=UncachedTokenizer(tokenizer),
                             grader=StubGrader(TASK))
    first: list[float] = []
    last: list[float] = []
    recount: list[float] = []
    history_tokens = 0
    for _ in range(episodes):
        obs = env.reset()
        for turn in range(1, turns + 1):
            start = time.perf_counter()
            obs, _, done, _ = env.step(WRONG.format(turn=turn))
            elapsed = time.perf_counter() - start
            assert not done
            if turn == 1:
                first.append(elapsed)
            elif turn == turns:
                last.append(elapsed)
        start = time.perf_counter()
        history_tokens = env.counter.count_chat(obs["messages"])  # the API's prompt_tokens
        recount.append(time.perf_counter() - start)
        assert history_tokens == obs["tokens_used"]  # the incremental count is exact
    return first, last, statistics.median(recount), history_tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--tokenizer", default="gpt-4o",
                        help="model or encoding name for tiktoken (offline: the bundled fallback)")
    args = parser.parse_args()
    configure_logging("error")  # the offline tokenizer fallback warning is expected here

    measure(3, 5, args.tokenizer)  # warm up: tokenizer load, template compilation
    first, last, recount, tokens = measure(args.episodes, args.turns, args.tokenizer)
    t1, tn = statistics.median(first), statistics.median(last)
    print(f"episodes: {args.episodes}, stub grader (no sandbox), tokenizer: {args.tokenizer}")
    print(f"median step at turn 1:  {t1 * 1e6:8.1f} µs")
    print(f"median step at turn {args.turns}: {tn * 1e6:8.1f} µs")
    print(f"ratio turn {args.turns} / turn 1: {tn / t1:.2f}   (target: near 1)")
    print(f"for contrast, re-counting the whole turn-{args.turns} history once "
          f"({tokens} tokens, {2 * args.turns + 2} messages): {recount * 1e6:.1f} µs")


if __name__ == "__main__":
    main()
