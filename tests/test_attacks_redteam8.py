"""Red team 8: the fallback zygote's sweep of what a run leaves behind (6d3832d), the worker's
wait for its prepared runs, and the stdio program's end when the same job also ran function
checks in ``G``.

At the rlimits level nothing dies with ``G``: the zygote is a child subreaper and, after each
run, kills what the run left. A sweep that killed one generation a round (64 rounds at most)
let a chain of processes deeper than that outlive its run and SIGSTOP the runs prepared for
the next submissions, and the worker then waited without end for their reports. The attacks
here build chains deeper than any round bound and trees that refill themselves as they are
killed; each asserts the honest runs after it score exactly 1.0, not slowed."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from support.attacks import STOP_THE_ZYGOTES_CHILDREN, strict_pool
from support.hangs import worker_waits

from agentenv.grading import run_tests
from agentenv.sandbox import Limits, SandboxPool
from agentenv.tasks.schema import StdioCase

CHECK = ["assert f() == 1"]
JUDGED = "for _ in (1,):\n    assert f() == 1"  # graded by the judge process, a second run
HONEST = "def f():\n    return 1\n"
MANY = Limits(processes=400)  # room for a chain far deeper than the old 64-round bound

# A setsid chain DEPTH processes deep, each waiting on its child; the deepest one stops the
# zygote's children for 3 s. Killing one generation a round needs DEPTH rounds.
DEEP_CHAIN = """
import os, signal, time
ZYGOTE = os.getppid()
""" + STOP_THE_ZYGOTES_CHILDREN + """
ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    for depth in range({depth}):
        if os.fork() != 0:
            while True:
                time.sleep(60)
    os.write(ready_w, b"!")
    stop_the_zygotes_children(ZYGOTE, time.time() + 3.0)
    os._exit(0)
os.read(ready_r, 1)
def f():
    return 0
"""

# A tree that refills itself: each of WIDTH setsid processes forks a replacement child as soon as
# it has none, and every process also stops the zygote's children; killing some of them at a
# time only makes room for new ones.
REFILLING = """
import os, signal, time
ZYGOTE = os.getppid()
""" + STOP_THE_ZYGOTES_CHILDREN + """
ready_r, ready_w = os.pipe()
def keeper(level):
    end = time.time() + 3.0
    while time.time() < end:
        try:
            pid = os.fork()
        except OSError:
            time.sleep(0.001)
            continue
        if pid == 0:
            if level < 3:
                keeper(level + 1)
            stop_the_zygotes_children(ZYGOTE, time.time() + 3.0)
            os._exit(0)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    os._exit(0)
if os.fork() == 0:
    os.setsid()
    for _ in range(8):
        if os.fork() == 0:
            keeper(0)
    os.write(ready_w, b"!")
    stop_the_zygotes_children(ZYGOTE, time.time() + 3.0)
    os._exit(0)
os.read(ready_r, 1)
time.sleep(0.05)
def f():
    return 0
"""

LEFT_BEHIND = {"chain_100_deep": DEEP_CHAIN.replace("{depth}", "100"),
               "chain_300_deep": DEEP_CHAIN.replace("{depth}", "300"),
               "tree_that_refills_itself": REFILLING}


@pytest.mark.parametrize("name", sorted(LEFT_BEHIND))
def test_rlimits_processes_left_behind_at_any_depth_never_touch_the_next_runs(name: str) -> None:
    """What a run leaves behind (a setsid chain deeper than any round bound, or a tree that
    forks a replacement for each process killed) is all killed before the next run: the honest
    runs after it, plain and judged, score exactly 1.0 and none waits on a stopped process."""
    made = SandboxPool(size=1, isolation="rlimits", allow_root_fallback=True)
    began = time.monotonic()
    try:
        attacked = run_tests(LEFT_BEHIND[name], CHECK, timeout=2.0, pool=made, limits=MANY)
        assert attacked.fraction == 0.0
        with worker_waits() as waits:
            for _ in range(3):
                result = run_tests(HONEST, [CHECK[0], JUDGED], timeout=1.0, pool=made)
                assert (result.fraction, result.timed_out) == (1.0, False), result.failures
        assert waits == [], waits  # no worker waited out as stuck or given up on
    finally:
        time.sleep(max(0.0, 3.5 - (time.monotonic() - began)))  # whatever survived, its own end
        made.close()


# --------------------------------------------------------------------------- stdio's atexit

@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    made = strict_pool(1, "the red team 8 stdio attacks")
    yield made
    made.close()


# A task with function checks and a stdio case: G runs the code for the checks (registering
# the handler there), then forks the stdio program, which runs it again as __main__.
ATEXIT_PROGRAM = ("import atexit\natexit.register(print, 'bye')\ndef f():\n    return 1\n"
                  "if __name__ == '__main__':\n    n = int(input())\n    print(n * n)\n")


@pytest.mark.parametrize("isolation", ["strict", "rlimits"])
def test_atexit_handlers_of_the_checks_run_never_reach_the_stdio_program(
        pool: SandboxPool, isolation: str) -> None:
    """The stdio program inherited the handlers G had registered running the function checks,
    so an honest program that prints at exit printed twice and scored 0.5."""
    used = pool if isolation == "strict" else SandboxPool(
        size=1, isolation="rlimits", allow_root_fallback=True)
    try:
        result = run_tests(ATEXIT_PROGRAM, [CHECK[0], StdioCase(stdin="3\n",
                                                                 expected_stdout="9\nbye")],
                           timeout=1.0, pool=used)
        assert (result.fraction, result.timed_out) == (1.0, False), result.failures
    finally:
        if used is not pool:
            used.close()
