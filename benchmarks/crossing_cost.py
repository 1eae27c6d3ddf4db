"""What one crossing into the candidate costs, side by side: the judge's CPU, the candidate
process's CPU, and the wall time, outside the sandbox (no bubblewrap, no pool).

    python benchmarks/crossing_cost.py [--calls 20000] [--profile]

A forked child serves the candidate ``def f(x): return x * x`` (``_runner.serve_judge``); this
process runs the judge (``_judge.run_judge``) on ``for i in range(CALLS): assert f(i) == i * i``,
so every ``f(i)`` is one request and one reply over the socket pair. Printed per call: wall
microseconds, the judge's CPU and the server's CPU; what is left of the wall time is the two
context switches of each round trip. ``--profile`` adds the judge side's cProfile (top 15).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agentenv" / "sandbox"))

import _judge  # the sandbox modules, loaded by path as inside the sandbox
import _runner
import _schema


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    n = args.calls
    ours, theirs = socket.socketpair()
    report_r, report_w = os.pipe()
    verdict_r, verdict_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the candidate's process
        ours.close()
        namespace: dict[str, object] = {"__name__": "__main__"}
        exec("def f(x):\n    return x * x\n", namespace)
        start = time.process_time()
        _runner.serve_judge(namespace, theirs.fileno())
        os.write(report_w, f"{time.process_time() - start}".encode())
        os._exit(0)
    theirs.close()
    os.close(report_w)
    job = {"nonce": "n", "checks": [{_schema.ITEM_INDEX: 0, _schema.CHECK_SOURCE:
                                     f"for i in range({n}):\n    assert f(i) == i * i"}]}
    profile = cProfile.Profile() if args.profile else None
    wall, cpu = time.perf_counter(), time.process_time()
    if profile is not None:
        profile.enable()
    _judge.run_judge(job, verdict_w, ours.fileno())
    if profile is not None:
        profile.disable()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    os.close(verdict_w)
    verdicts = os.read(verdict_r, 1 << 16)
    server_cpu = float(os.read(report_r, 64) or 0)
    os.waitpid(pid, 0)
    print(f"calls={n}: wall {wall / n * 1e6:.1f} us per call; judge CPU {cpu / n * 1e6:.1f} us, "
          f"candidate process CPU {server_cpu / n * 1e6:.1f} us; verdict frames {len(verdicts)} bytes")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if profile is not None:
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
