"""The fixed cost of one sandbox run against the floor: fork, call a function, write a pipe.

    python benchmarks/run_floor.py [--runs 300] [--ballast-mib 32]

Both measured side by side in one run, interleaved in blocks so load elsewhere hits both alike:

- **floor**: from a process holding ``--ballast-mib`` of touched memory (about what a worker's
  zygote holds), ``os.fork()``; the child calls a trivial function, writes its result to a
  pipe and ``os._exit``s; the parent reads it and reaps the child. CPU = this process's CPU
  plus the reaped children's (``RUSAGE_CHILDREN``). No isolation at all: the least any
  fork-per-run design pays;
- **agentenv**: ``run_tests`` on the same trivial function at strict isolation (per-run user,
  pid, mount and IPC namespaces, its own tmpfs and /proc, cgroups, the wire, the judge on
  the trusted side). CPU = this process's CPU plus the pool's workers, zygotes and reaped runs.

Printed: median CPU ms per run of each, and the ratio (the performance issue's target is 1.6x).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from collections.abc import Sequence

from agentenv.grading import run_tests
from agentenv.log import configure_logging
from agentenv.sandbox import SandboxPool
from agentenv.sandbox.testing import pool_cpu_seconds

CODE = "def f(x):\n    return x + 1\n"
CHECKS = ["assert f(1) == 2"]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def floor_block(n: int) -> float:
    """CPU seconds per run of ``n`` fork + function + pipe runs."""
    def f(x: int) -> int:
        return x + 1

    own, kids = time.process_time(), children_cpu()
    for _ in range(n):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.write(w, str(f(1)).encode())
            os._exit(0)
        os.close(w)
        while os.read(r, 64):
            pass
        os.close(r)
        os.waitpid(pid, 0)
    return (time.process_time() - own + children_cpu() - kids) / n


def agentenv_block(pool: SandboxPool, n: int) -> float:
    own, helpers = time.process_time(), pool_cpu_seconds(pool)
    for _ in range(n):
        result = run_tests(CODE, CHECKS, timeout=5.0, pool=pool)
        assert result.fraction == 1.0, result
    return (time.process_time() - own + pool_cpu_seconds(pool) - helpers) / n


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--ballast-mib", type=int, default=32)
    args = parser.parse_args(argv)
    configure_logging()
    ballast = bytearray(args.ballast_mib * 1024**2)
    for i in range(0, len(ballast), 4096):  # touched, so a fork copies its page tables
        ballast[i] = 1
    floor: list[float] = []
    ours: list[float] = []
    with SandboxPool(size=1, isolation="strict") as pool:
        agentenv_block(pool, 20)  # the worker started and warm
        for _ in range(max(1, args.runs // args.block)):
            floor.append(floor_block(args.block))
            ours.append(agentenv_block(pool, args.block))
    f, a = statistics.median(floor) * 1000, statistics.median(ours) * 1000
    print(f"CPU per trivial run, median of {len(floor)} blocks of {args.block} "
          f"({os.cpu_count()} cores, {args.ballast_mib} MiB ballast)\n")
    print(f"{'floor: fork + function + pipe':40s} {f:8.2f} ms")
    print(f"{'agentenv run_tests (strict)':40s} {a:8.2f} ms")
    print(f"{'ratio agentenv / floor':40s} {a / f:8.2f}x   (target 1.6x)")
    return {"floor_ms": f, "agentenv_ms": a, "ratio": a / f}


if __name__ == "__main__":
    main()
