"""A model server killed in the middle of a multi-turn run: how fast the run stops, what it keeps,
and what the resume costs, with partial episodes against redoing the episodes in flight.

    python benchmarks/server_kill_resume.py [--episodes 56] [--latency 0.1] [--concurrency 8]
        [--kill-after 10] [--repeats 3] [--breaker-seconds 2.0]

The stand-in server (``python -m agentenv.testing``: the scripted model over the builtin tasks,
a buggy attempt then the fix, in its own process like a real inference server) answers after
``--latency`` seconds. A multi-turn run (``--max-turns 3``) of ``OpenAIPolicy`` over it gets the
server killed (SIGKILL) once ``--kill-after`` episodes have finished, so episodes are in flight
mid-conversation. Measured per repeat: seconds from the kill to the run's return (the circuit
breaker opening, then the stop grace for episodes being graded), the finished episodes and the
graded turns kept in partial records. The server is then started again and the same run resumed:
its model calls are counted, against the calls a resume would make if it redid the episodes in
flight from their first turn (the baseline: every turn of those episodes asked again). Every
resumed trajectory is checked turn by turn against an uninterrupted run of the same settings.

Prints one row per repeat and the medians; the ratio column is resume calls / redo calls.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from agentenv.policies import OpenAIPolicy
from agentenv.rollout import RolloutConfig, run_rollouts
from agentenv.tasks.builtin import builtin_tasks


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(port: int, latency: float) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "agentenv.testing", "--port", str(port),
                             "--latency", str(latency)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the stand-in server did not come up")


def comparable(trajectory: Any) -> list[dict[str, Any]]:
    out = []
    for turn in trajectory.turns:
        record = turn.to_dict()
        record.pop("exec_seconds")
        out.append(record)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=56)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--kill-after", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--breaker-seconds", type=float, default=2.0)
    args = parser.parse_args()
    tasks = builtin_tasks()
    samples = max(1, -(-args.episodes // len(tasks)))
    config = RolloutConfig(max_turns=3, samples=samples, concurrency=args.concurrency)
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"

    def policy() -> OpenAIPolicy:
        return OpenAIPolicy("agentenv-test", base_url=url, breaker_seconds=args.breaker_seconds)

    server = serve(port, args.latency)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            baseline = run_rollouts(tasks, policy(), config, Path(tmp) / "baseline")
    finally:
        server.kill()
        server.wait()
    expected = {t.episode_id: comparable(t) for t in baseline.trajectories}
    print(f"{len(expected)} episodes, {sum(len(t.turns) for t in baseline.trajectories)} turns uninterrupted; "
          f"latency {args.latency:g} s, concurrency {args.concurrency}, kill after {args.kill_after} "
          f"finished, breaker {policy().breaker_threshold} failures over >= {args.breaker_seconds:g} s")
    print(f"{'repeat':>6} {'stop s':>7} {'finished':>8} {'partial':>7} {'kept turns':>10} "
          f"{'resume calls':>12} {'redo calls':>10} {'ratio':>6} {'same':>5}")
    rows = []
    for repeat in range(1, args.repeats + 1):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run"
            server = serve(port, args.latency)
            killed: dict[str, float] = {}

            def on_episode(_t: Any, n_done: int, _total: int, server: Any = server,
                           killed: dict[str, float] = killed) -> None:
                if n_done == args.kill_after and not killed:
                    server.kill()
                    killed["at"] = time.perf_counter()

            first = run_rollouts(tasks, policy(), config, out, on_episode=on_episode)
            stop_seconds = time.perf_counter() - killed["at"]
            server.wait()
            kept_turns = sum(len(t.turns) for t in first.partial)
            continued = {t.episode_id for t in first.partial}
            server = serve(port, args.latency)
            try:
                resumed = run_rollouts(tasks, policy(), config, out)
            finally:
                server.kill()
                server.wait()
            new = [t for t in resumed.trajectories if t.episode_id not in {x.episode_id for x in first.trajectories}]
            redo_calls = sum(len(t.turns) for t in new)
            resume_calls = redo_calls - kept_turns
            same = all(comparable(t) == expected[t.episode_id] for t in resumed.trajectories) and \
                len(resumed.trajectories) == len(expected) and resumed.continued == len(continued)
            rows.append((stop_seconds, len(first.trajectories), len(first.partial), kept_turns,
                         resume_calls, redo_calls))
            print(f"{repeat:>6} {stop_seconds:>7.2f} {len(first.trajectories):>8} {len(first.partial):>7} "
                  f"{kept_turns:>10} {resume_calls:>12} {redo_calls:>10} {resume_calls / redo_calls:>6.2f} "
                  f"{'yes' if same else 'NO':>5}")
    med = [statistics.median(col) for col in zip(*rows, strict=True)]
    print(f"{'median':>6} {med[0]:>7.2f} {med[1]:>8.0f} {med[2]:>7.0f} {med[3]:>10.0f} {med[4]:>12.0f} "
          f"{med[5]:>10.0f} {med[4] / med[5]:>6.2f}")


if __name__ == "__main__":
    main()
