"""Rollout throughput against a latency-bound model server, at concurrency 1, 8 and 64.

    python benchmarks/rollout_concurrency.py [--episodes 64] [--latency 0.1] [--repeats 3]
        [--concurrency 1,8,64] [--transports aiohttp]

A local OpenAI-compatible server (``python -m agentenv.testing``, in its own process like a
real inference server) answers every request after a fixed latency (100 ms by default), so the
model's cost is pure waiting. Each episode is one policy call (``OpenAIPolicy`` over real HTTP, async) and
one graded submission. The ideal is latency-bound: ``ceil(episodes / c)`` rounds of ``latency``
seconds at concurrency ``c``. Two settings are measured:

- ``policy-bound``: submissions are graded by an instant stub grader, so the table shows what the
  runner, the async client and the env add on top of the model's latency. Target: >= 80% of
  the ideal at concurrency 64.
- ``end-to-end``: submissions run in the real sandbox. Its ideal is also bounded by the sandbox:
  the CPU seconds that grading takes spread over the sandbox's worker pool (measured here on the
  same submissions). On a 2-core machine that, not the model, bounds concurrency 64.

Every point is measured for each of ``--transports`` (OpenAIPolicy's HTTP clients; today there
is one, aiohttp), in one run against the same server, interleaved repeat by repeat; the first
transport is the baseline, and each table prints the others' throughput as a ratio of it. The median over the
repeats is reported (the best is printed too).

Prints one table per setting (time, episodes/s, ideal, % of ideal) and the sandbox bound.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentenv.envs.multiturn import MultiTurnCodingEnv
from agentenv.extract import extract_code
from agentenv.grading.result import RunResult
from agentenv.grading.scoring import Scored, score
from agentenv.policies import OpenAIPolicy
from agentenv.policies.scripted import scripted_answer
from agentenv.rollout import RolloutConfig, run_rollouts
from agentenv.tasks import Task
from agentenv.tasks.builtin import builtin_tasks

CONCURRENCY = (1, 8, 64)


class InstantGrader:
    """Grades every submission as passing at once: isolates the runner's own overhead."""

    def _scored(self, task: Task) -> Scored:
        n = len(task.checks)
        return Scored(hidden=RunResult.from_counts(n, n, timed_out=False), visible=None)

    def score(self, task: Task, code: str, *, timeout: float) -> Scored:
        return self._scored(task)

    async def ascore(self, task: Task, code: str, *, timeout: float) -> Scored:
        return self._scored(task)


def stub_env(config: RolloutConfig, tasks: Sequence[Task], seed: int) -> Any:
    return MultiTurnCodingEnv(tasks=tasks, max_turns=1, seed=seed, grader=InstantGrader())


def sandbox_env(config: RolloutConfig, tasks: Sequence[Task], seed: int) -> Any:
    return MultiTurnCodingEnv(tasks=tasks, max_turns=1, seed=seed, timeout=config.timeout)


@contextlib.contextmanager
def model_server(latency: float) -> Iterator[str]:
    """The test server in a child process; yields its base URL."""
    proc = subprocess.Popen([sys.executable, "-m", "agentenv.testing", "--port", "0",
                             "--latency", str(latency)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if " at " not in line:
            raise SystemExit(f"the test server did not start: {line!r}")
        yield line.split(" at ", 1)[1].split()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def sandbox_bound(tasks: Sequence[Task], samples: int) -> float:
    """Wall seconds to grade every episode's submission with nothing else running (pool-wide)."""
    jobs = [(t, extract_code(scripted_answer(t, 1), t.entry_point)) for t in tasks for _ in range(samples)]
    workers = max(1, os.cpu_count() or 1)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers * 2) as pool:
        list(pool.map(lambda job: score(job[0], job[1], timeout=5.0), jobs))
    return time.perf_counter() - started


TRANSPORTS: list[str] = ["aiohttp"]


def one_run(tasks: Sequence[Task], samples: int, url: str, concurrency: int, env_factory: Any,
            transport: str) -> float:
    policy = OpenAIPolicy("bench", base_url=url, max_retries=0, timeout=30.0, transport=transport)
    config = RolloutConfig(mode="multi_turn", max_turns=1, samples=samples, concurrency=concurrency,
                           model=None)
    started = time.perf_counter()
    result = run_rollouts(tasks, policy, config, env_factory=env_factory)
    elapsed = time.perf_counter() - started
    if result.errors or len(result.trajectories) != len(tasks) * samples:
        raise SystemExit(f"benchmark run failed ({transport}): {result.errors[:1]}")
    return elapsed


def measure(tasks: Sequence[Task], samples: int, url: str, concurrency: int, env_factory: Any,
            repeats: int) -> dict[str, tuple[float, float]]:
    """(median, best) wall time per transport over ``repeats`` runs of every episode,
    the transports taking turns so that drift on a shared machine hits them alike."""
    times: dict[str, list[float]] = {t: [] for t in TRANSPORTS}
    for _ in range(repeats):
        for transport in TRANSPORTS:
            times[transport].append(one_run(tasks, samples, url, concurrency, env_factory, transport))
    return {t: (statistics.median(v), min(v)) for t, v in times.items()}


def table(title: str, rows: list[tuple[int, dict[str, tuple[float, float]], float]], episodes: int) -> str:
    base = TRANSPORTS[0]
    lines = [title, f"{'concurrency':>11}  {'transport':>9}  {'median s':>8}  {'best s':>7}  "
                    f"{'episodes/s':>10}  {'ideal/s':>8}  {'% of ideal':>10}  {'vs ' + base:>12}"]
    for c, by_transport, ideal_seconds in rows:
        for transport, (median, best) in by_transport.items():
            ratio = by_transport[base][0] / median
            lines.append(f"{c:>11}  {transport:>9}  {median:>8.3f}  {best:>7.3f}  {episodes / median:>10.1f}  "
                         f"{episodes / ideal_seconds:>8.1f}  {100 * ideal_seconds / median:>9.1f}%  "
                         f"{ratio:>11.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=64, help="episodes per measurement (default 64)")
    parser.add_argument("--latency", type=float, default=0.1, help="server latency in seconds (default 0.1)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per point; the median is reported")
    parser.add_argument("--skip-sandbox", action="store_true", help="only the policy-bound setting")
    parser.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)),
                        help="comma-separated concurrency levels (default 1,8,64)")
    parser.add_argument("--transports", default="aiohttp",
                        help="OpenAIPolicy HTTP clients to compare, the first is the baseline "
                             "(default aiohttp, the only one)")
    parser.add_argument("--no-long-run", action="store_true", help="skip the 4x-episodes run")
    args = parser.parse_args(argv)
    TRANSPORTS[:] = [t.strip() for t in args.transports.split(",") if t.strip()]
    levels = [int(c) for c in args.concurrency.split(",")]

    from agentenv.log import configure_logging

    configure_logging("error")
    all_tasks = builtin_tasks()
    samples = 4
    n_tasks = max(1, args.episodes // samples)
    tasks = (all_tasks * math.ceil(n_tasks / len(all_tasks)))[:n_tasks]
    if len({t.name for t in tasks}) != len(tasks):
        raise SystemExit(f"--episodes {args.episodes} needs more than {len(all_tasks)} x {samples} episodes")
    episodes = len(tasks) * samples
    print(f"{episodes} one-call episodes ({len(tasks)} tasks x {samples} samples), server latency "
          f"{args.latency * 1000:.0f} ms, {os.cpu_count()} cores, median of {args.repeats}, "
          f"transports {', '.join(TRANSPORTS)}")

    with model_server(args.latency) as url:
        # Warm-up: tokenizer, HTTP client, sandbox pool.
        measure(tasks[:2], 1, url, 2, sandbox_env, 1)
        rows = []
        for c in levels:
            ideal = math.ceil(episodes / c) * args.latency
            rows.append((c, measure(tasks, samples, url, c, stub_env, args.repeats), ideal))
        print()
        print(table("policy-bound (grading stubbed): the runner against the latency ideal", rows, episodes))
        for transport, (median, _best) in rows[-1][1].items():
            reached = rows[-1][2] / median
            print(f"{transport} at concurrency {rows[-1][0]} reaches {100 * reached:.1f}% of ideal "
                  f"(target >= 80%): {'met' if reached >= 0.8 else 'NOT met'}")
        if not args.no_long_run:
            # The same at 4x the episodes: one-off costs (building the pooled envs, opening
            # connections) are paid in the first round only, as in any long run.
            ideal = math.ceil(4 * episodes / 64) * args.latency
            print()
            print(table(f"over {4 * episodes} episodes", [(64, measure(
                tasks, 4 * samples, url, 64, stub_env, args.repeats), ideal)], 4 * episodes))
        if args.skip_sandbox:
            return 0

        bound = sandbox_bound(tasks, samples)
        rows = []
        for c in levels:
            ideal = max(math.ceil(episodes / c) * args.latency, bound)
            rows.append((c, measure(tasks, samples, url, c, sandbox_env, args.repeats), ideal))
        print()
        print(f"sandbox bound: grading the {episodes} submissions alone takes {bound:.3f} s "
              f"({1000 * bound / episodes:.1f} ms per submission pool-wide)")
        print(table("end-to-end (real sandbox): ideal = max(latency rounds, sandbox bound)", rows, episodes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
