"""Verdicts do not depend on how loaded the machine is.

A candidate's time limit is judged on the CPU time its run used, with a wall-clock backstop at a
multiple of the limit; runs in flight are not bounded by the core count; a run that has had its
share of CPU yields to newer runs. So an honest solution that needs half its time limit of CPU
passes while many looping candidates hold the machine, and a loop is always a timeout.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest

from agentenv.grading import run_tests
from agentenv.sandbox import SandboxPool

pytestmark = pytest.mark.slow

# Four loops a core, 16 at most (8 on a 2-core CI box): far more runs in flight than cores,
# which is all the property needs; each loop costs a second of CPU, so more only adds time.
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
LOOPS = min(16, 4 * max(2, CORES))
LOOP = "def f():\n    while True:\n        pass\n"


def _iterations_for(cpu_seconds: float) -> int:
    """How many iterations of the honest candidate's loop take ``cpu_seconds`` of CPU here."""
    n, spent = 200_000, 0.0
    while spent < 0.05:
        start = time.process_time()
        total = 0
        for i in range(n):
            total += i * i
        spent = time.process_time() - start
        if spent < 0.05:
            n *= 2
    return int(n * cpu_seconds / spent)


def honest(cpu_seconds: float) -> str:
    n = _iterations_for(cpu_seconds)
    return (f"def f():\n    total = 0\n    for i in range({n}):\n        total += i * i\n"
            "    return 1\n")


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    """A pool with every worker started, as a trainer's pool is after its first batch."""
    with SandboxPool(size=LOOPS + 4) as p:
        warm = [threading.Thread(target=run_tests, args=("import time\ntime.sleep(0.5)\n", []),
                                 kwargs={"pool": p}) for _ in range(LOOPS + 4)]
        for t in warm:
            t.start()
        for t in warm:
            t.join(timeout=120)
        yield p


def test_an_honest_half_budget_solution_passes_while_four_loops_a_core_share_the_machine(
        pool: SandboxPool) -> None:
    """0.5 s of CPU under a 1 s limit, submitted while LOOPS loops run (four per core): it
    passes, every time."""
    code = honest(0.5)
    loop_results = []

    def loop() -> None:
        loop_results.append(run_tests(LOOP, ["assert f() == 1"], timeout=1.0, pool=pool))

    verdicts = []
    for _round in range(2):
        loop_results.clear()
        loops = [threading.Thread(target=loop) for _ in range(LOOPS)]
        for t in loops:
            t.start()
        time.sleep(0.3)  # the loops are running and have used some of their CPU
        verdicts.append(run_tests(code, ["assert f() == 1"], timeout=1.0, pool=pool))
        for t in loops:
            t.join(timeout=120)
        assert len(loop_results) == LOOPS
        assert all(r.timed_out and r.fraction == 0.0 for r in loop_results)
    assert all(v.fraction == 1.0 and not v.timed_out for v in verdicts), [
        (v.fraction, v.timed_out, v.failures, v.exec_seconds) for v in verdicts]


def test_verdicts_are_the_same_idle_and_loaded(pool: SandboxPool) -> None:
    """A mix of honest, slow-honest, wrong and looping submissions: the same verdicts alone as
    when all of them run at once."""
    subs = [honest(0.3), "def f():\n    return 2\n", LOOP, "def f():\n    return 1\n",
            honest(0.3), LOOP, "import time\ndef f():\n    time.sleep(0.5)\n    return 1\n"] * 2
    alone = [run_tests(code, ["assert f() == 1"], timeout=1.0, pool=pool).fraction
             for code in subs]
    together: dict[int, float] = {}

    def one(i: int) -> None:
        together[i] = run_tests(subs[i], ["assert f() == 1"], timeout=1.0, pool=pool).fraction

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(subs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert [together[i] for i in range(len(subs))] == alone
    assert alone == [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0] * 2


def test_cpu_left_over_from_an_earlier_run_is_never_charged_to_the_next() -> None:
    """A process that started before the job was sent (a run the zygote has not reaped yet,
    whatever it left behind) is not the run's; one the run started afterwards is."""
    import os
    import subprocess
    import sys

    from agentenv.sandbox import _monitor

    burn = [sys.executable, "-c",
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
            "time.sleep(60)\n"]
    earlier = subprocess.Popen(burn)
    def cpu_used(since: int) -> float:
        return _monitor.cpu_used(_monitor.processes(
            [], since, namespaces=True, zygote_pid=earlier.pid + 10**7))  # no such zygote
    def burnt(pid: int) -> float:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
        fields = data[data.rindex(b")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def wait_until_burnt(pid: int) -> None:
        deadline = time.monotonic() + 60
        while burnt(pid) < 0.29 and time.monotonic() < deadline:
            time.sleep(0.02)

    try:
        wait_until_burnt(earlier.pid)
        since = int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK")) + 1
        time.sleep(0.05)
        assert cpu_used(since) < 0.05
        later = subprocess.Popen(burn)
        try:
            wait_until_burnt(later.pid)
            assert cpu_used(since) >= 0.25  # what it burnt counts
        finally:
            later.kill()
            later.wait()
    finally:
        earlier.kill()
        earlier.wait()
