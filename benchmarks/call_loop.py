"""A check that calls the candidate in a loop: agentenv's run_tests against plain ``exec``.

    python benchmarks/call_loop.py [--calls 100000] [--repeats 3]

The candidate is ``def f(x): return x * x``; the check is
``for i in range(CALLS): assert f(i) == i * i`` (a loop, so the judge process runs it and every
``f(i)`` crosses into the candidate's process). Two ways, interleaved per repeat:

- **agentenv**: ``run_tests`` (the default pool: strict level when bubblewrap works here);
- **plain exec**: ``exec`` of the same code and check in a fresh namespace of this process (no
  interpreter start: the cost of the calls themselves).

Printed: the median wall seconds of each, the per-call cost, and agentenv's ratio over plain
exec (the target is 3x at 100,000 calls), plus the bare round trip of the channel's framing
between two processes here (``_rpc.send``/``recv`` over a socket pair), the floor of any
design that crosses once per call.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
from pathlib import Path

CODE = "def f(x):\n    return x * x\n"


def check(calls: int) -> str:
    return f"for i in range({calls}):\n    assert f(i) == i * i"


def plain_exec(calls: int) -> float:
    start = time.perf_counter()
    namespace: dict[str, object] = {}
    exec(CODE, namespace)
    exec(check(calls), namespace)
    return time.perf_counter() - start


def agentenv_run(calls: int) -> float:
    from agentenv.grading import run_tests

    start = time.perf_counter()
    result = run_tests(CODE, [check(calls)], timeout=max(30.0, calls / 1000))
    seconds = time.perf_counter() - start
    if result.passed != 1:
        raise SystemExit(f"agentenv did not pass the honest loop: {result.failures}")
    return seconds


def bare_round_trip(n: int = 5000) -> float:
    """Seconds per request/reply between two processes over the channel's own framing."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agentenv" / "sandbox"))
    import _rpc
    import _wire

    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the answering side
        a.close()
        while True:
            try:
                message = _rpc.recv(b.fileno())
            except _rpc.ChannelClosed:
                os._exit(0)
            _rpc.send(b.fileno(), {"r": ["v", _wire.encode_value(message["a"][0])]})
    b.close()
    start = time.perf_counter()
    for i in range(n):
        _rpc.send(a.fileno(), {"op": "call", "f": ["n", "f"], "a": [i], "k": []})
        _rpc.recv(a.fileno())
    seconds = (time.perf_counter() - start) / n
    a.close()
    os.waitpid(pid, 0)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    agentenv_run(10)  # the pool's worker, started
    ours, plain = [], []
    for _ in range(args.repeats):
        ours.append(agentenv_run(args.calls))
        plain.append(plain_exec(args.calls))
    a, p = statistics.median(ours), statistics.median(plain)
    trip = bare_round_trip()
    print(f"calls={args.calls} repeats={args.repeats} (median wall seconds)")
    print(f"agentenv    {a:8.3f} s   {a / args.calls * 1e6:7.1f} us per call")
    print(f"plain exec  {p:8.3f} s   {p / args.calls * 1e6:7.1f} us per call")
    print(f"ratio agentenv / plain exec: {a / p:.1f}x (target <= 3x)")
    print(f"bare channel round trip between two processes here: {trip * 1e6:.1f} us")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
