"""Red team 9: the fallback zygote's whole-tree sweep (b1b78c7) and the worker's bounded wait for
its prepared runs.

At the rlimits level the zygote is a child subreaper; after each run it stops, then kills, every
process that descends from it but not through a run it forked, round after round for at most
``SWEEP_BUDGET`` (5 s), then resumes its prepared runs. The attacks here try to escape the tree
walk (siblings made with ``CLONE_PARENT`` hopping ahead of each look, a ``comm`` that spells a
fake end of the name, a thread group whose leader has exited), to outlast the budget (a fork
bomb that is woken by ``PR_SET_PDEATHSIG`` when its parent is killed) and to make the zygote
block (a stopped zygote, a candidate whose zombie a tracer holds). Each asserts that the honest
run after it, plain and judged, scores exactly 1.0, not timed out and without waiting out a
frozen worker or a sweep that gave up (no worker reported unhealthy).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from support.attacks import CLONE, STOP_THE_ZYGOTES_CHILDREN, strict_pool
from support.hangs import HONEST, HONEST_CHECKS, honest_passes, worker_waits

from agentenv.grading import run_tests
from agentenv.sandbox import Limits, SandboxPool, _pool

CHECK = ["assert f() == 1"]


def fallback() -> SandboxPool:
    return SandboxPool(size=1, isolation="rlimits", allow_root_fallback=True)


@pytest.fixture
def short_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker stuck between runs is replaced after 3 s, not 10: the same hole, cheaper to show."""
    monkeypatch.setattr(_pool, "IDLE_TIMEOUT", 3.0)


# --------------------------------------------------------------------------- escaping the walk

# Four setsid processes, each a direct child of the zygote (CLONE_PARENT from G), that hop for
# 1.5 s: each makes its successor a sibling (another direct child of the zygote, outside every
# subtree the sweep took) and exits at once; a chain whose every hop came between a look and the
# stop outlives the sweep and then stops the next runs.
LEAPFROG = """
import os, signal, time
ZYGOTE = os.getppid()
""" + STOP_THE_ZYGOTES_CHILDREN + CLONE + """
T0 = time.time()
ready_r, ready_w = os.pipe()
for _ in range(4):
    if clone_parent() == 0:
        os.setsid()
        os.write(ready_w, b"!")
        while time.time() < T0 + 1.5:
            pid = clone_parent()
            if pid > 0:
                os._exit(0)
            if pid < 0:
                time.sleep(0.0002)
        stop_the_zygotes_children(ZYGOTE, T0 + 4.0)
        os._exit(0)
for _ in range(4):
    os.read(ready_r, 1)
def f():
    return 0
"""


def test_rlimits_siblings_that_hop_ahead_of_the_sweep_are_all_caught() -> None:
    """Contained: four chains of CLONE_PARENT siblings, each exiting as soon as its successor
    exists, never outran the look-stop-kill rounds (caught in well under a second)."""
    made = fallback()
    began = time.monotonic()
    try:
        attacked = run_tests(LEAPFROG, CHECK, timeout=1.0, pool=made)
        assert attacked.fraction == 0.0
        time.sleep(max(0.0, 1.8 - (time.monotonic() - began)))  # the chains have stopped hopping
        honest_passes(made)
    finally:
        made.close()  # the worker's cgroup goes with it: no survivor outlives the test


# A setsid daemon whose name spells the end of a stat line ("x) S 1 1 1 1"): a parser that took
# the first ")" would read the wrong parent; rsplit on the last one does not.
BRACKET_NAME = """
import os, signal, time, ctypes
ZYGOTE = os.getppid()
""" + STOP_THE_ZYGOTES_CHILDREN + """
libc = ctypes.CDLL(None, use_errno=True)
ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    libc.prctl(15, ctypes.c_char_p(b"x) S 1 1 1 1 1"), 0, 0, 0)  # PR_SET_NAME
    if os.fork() == 0:
        libc.prctl(15, ctypes.c_char_p(b") R 1 0 0 0 0"), 0, 0, 0)
        os.write(ready_w, b"!")
        stop_the_zygotes_children(ZYGOTE, time.time() + 3.0)
        os._exit(0)
    while True:
        time.sleep(1)
os.read(ready_r, 1)
def f():
    return 0
"""

# A setsid daemon whose leader thread exits (SYS_exit: a zombie leader) while another thread of
# the group forks children and stops the zygote's children.
ZOMBIE_LEADER = """
import os, signal, time, ctypes, threading
ZYGOTE = os.getppid()
""" + STOP_THE_ZYGOTES_CHILDREN + """
libc = ctypes.CDLL(None, use_errno=True)
ready_r, ready_w = os.pipe()
def the_thread():
    time.sleep(0.02)
    if os.fork() == 0:
        stop_the_zygotes_children(ZYGOTE, time.time() + 3.0)
        os._exit(0)
    os.write(ready_w, b"!")
    stop_the_zygotes_children(ZYGOTE, time.time() + 3.0)
    os._exit(0)
if os.fork() == 0:
    os.setsid()
    threading.Thread(target=the_thread).start()
    libc.syscall(60, 0)  # SYS_exit: only the leader thread ends
os.read(ready_r, 1)
def f():
    return 0
"""


@pytest.mark.parametrize("name", ["bracket_name", "zombie_leader"])
def test_rlimits_strays_with_odd_names_or_exited_leaders_are_swept(name: str) -> None:
    """Contained: the stat parser takes the last ")" (a name of ") R 1 0 0 0 0" changes
    nothing), and a group whose leader has exited is still listed, signalled and reaped."""
    code = {"bracket_name": BRACKET_NAME, "zombie_leader": ZOMBIE_LEADER}[name]
    made = fallback()
    try:
        attacked = run_tests(code, CHECK, timeout=1.0, pool=made)
        assert attacked.fraction == 0.0
        honest_passes(made)
    finally:
        made.close()


# --------------------------------------------------------------------------- outlasting the budget

# A fork bomb left behind (setsid), each process forking as fast as it can and asking for
# SIGCONT when its parent dies (PR_SET_PDEATHSIG), so a stopped child whose parent is killed
# first wakes and forks into the freed slots before its own kill. It bombs until the zygote
# forks a run of its own again (the sweep has given up), then stops the zygote's children.
FORK_BOMB = """
import os, signal, time, ctypes
ZYGOTE = os.getppid()
""" + STOP_THE_ZYGOTES_CHILDREN + """
libc = ctypes.CDLL(None, use_errno=True)
T0 = time.time()
before = set()
for name in os.listdir("/proc"):
    if name.isdigit():
        before.add(int(name))
def the_sweep_gave_up():
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in before:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2:].split()
        if int(fields[1]) == ZYGOTE and b"(bomb)" not in data:
            return True  # a run the zygote prepared after its sweep
    return False
def bomb():
    libc.prctl(15, ctypes.c_char_p(b"bomb"), 0, 0, 0)
    libc.prctl(1, int(signal.SIGCONT), 0, 0, 0)  # PDEATHSIG
    n = 0
    while time.time() < T0 + 7.0:
        n += 1
        if n % 64 == 0 and time.time() > T0 + 4.0 and the_sweep_gave_up():
            break
        try:
            if os.fork() == 0:
                libc.prctl(1, int(signal.SIGCONT), 0, 0, 0)
                n = 0
        except OSError:
            time.sleep(0.0002)
    stop_the_zygotes_children(ZYGOTE, T0 + 11.0)
    os._exit(0)
ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    os.write(ready_w, b"!")
    bomb()
os.read(ready_r, 1)
def f():
    return 0
"""


def test_rlimits_fork_bomb_that_outlasts_the_sweep_budget() -> None:
    """The sweep resumed the prepared runs when its budget ran out with strays alive, and they
    stopped the next run (0.0, a timeout). Now it stops every stray before it kills any, and
    where that cannot finish in SWEEP_BUDGET the zygote gives up and the pool replaces the
    worker. What is left open: 400 runnable strays starve the sweep of CPU, so the next
    submission still waits for it (seconds, within the budget; a latency this test does not
    measure); it scores exactly 1.0, and no worker is waited out as frozen."""
    made = fallback()
    began = time.monotonic()
    try:
        attacked = run_tests(FORK_BOMB, CHECK, timeout=1.0, pool=made,
                             limits=Limits(processes=400))
        assert attacked.fraction == 0.0
        with worker_waits() as waits:
            result = run_tests(HONEST, HONEST_CHECKS, timeout=1.0, pool=made)
        assert (result.fraction, result.timed_out) == (1.0, False), result.failures
        # a give-up may replace the worker; a worker left frozen (waited out) may not
        assert not [w for w in waits if "did not answer in time" in w], waits
        time.sleep(max(0.0, 7.5 - (time.monotonic() - began)))
        honest_passes(made, times=1)  # after the budget: a survivor would stop this run
    finally:
        made.close()


# --------------------------------------------------------------------------- blocking the zygote

# G stops its own parent, the zygote (same uid at this level): the worker's next request to it
# (reap the run, then sweep) never gets an answer.
STOP_THE_ZYGOTE = """
import os, signal
os.kill(os.getppid(), signal.SIGSTOP)
def f():
    return 0
"""

# G makes itself dumpable and a setsid child of it seizes it with ptrace. A traced process's
# zombie is its tracer's to reap: the zygote's waitpid(G, 0), which comes before its sweep,
# blocks until the tracer (which the sweep would kill) waits on G or goes.
TRACED_CANDIDATE = """
import os, time, ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
G = os.getpid()
ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    seized = libc.ptrace(0x4206, G, None, None) == 0  # PTRACE_SEIZE
    os.write(ready_w, b"1" if seized else b"0")
    time.sleep(8)  # never waits on G
    os._exit(0)
assert os.read(ready_r, 1) == b"1"
def f():
    return 0
"""

ZYGOTE_BLOCKERS = {"stopped_zygote": STOP_THE_ZYGOTE, "traced_candidate": TRACED_CANDIDATE}


@pytest.mark.parametrize("name", sorted(ZYGOTE_BLOCKERS))
def test_rlimits_candidate_that_blocks_the_zygote_never_delays_the_next_run(
        name: str, short_idle: None) -> None:
    made = fallback()
    try:
        attacked = run_tests(ZYGOTE_BLOCKERS[name], CHECK, timeout=1.0, pool=made)
        assert attacked.fraction == 0.0
        honest_passes(made)
    finally:
        made.close()


# --------------------------------------------------------------------------- the strict level

@pytest.fixture(scope="module")
def strict() -> Iterator[SandboxPool]:
    made = strict_pool(1, "the red team 9 attacks at the strict level")
    yield made
    made.close()


@pytest.mark.parametrize("name", ["stopped_zygote", "traced_candidate", "leapfrog"])
def test_strict_level_is_unaffected(strict: SandboxPool, name: str) -> None:
    """Contained: in its own pid namespace G has no parent it can name (getppid() is 0), a
    tracer G forks dies with G's namespace, and CLONE_PARENT siblings of G are refused (G is
    its namespace's init) or die with it."""
    code = {**ZYGOTE_BLOCKERS, "leapfrog": LEAPFROG}[name]
    attacked = run_tests(code, CHECK, timeout=1.0, pool=strict)
    assert attacked.fraction == 0.0
    honest_passes(strict)


# --------------------------------------------------------------------------- reaching into processes

# Each reports whether the kernel refused it (EPERM, from the sandbox's syscall filter).
REACH_IN = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def refused(ret):
    return ret == -1 and ctypes.get_errno() == 1
def f():
    found = {}
    found["ptrace_traceme"] = refused(libc.ptrace(0, 0, None, None))
    found["ptrace_seize_self_parent"] = refused(libc.ptrace(0x4206, os.getppid(), None, None))
    buf = ctypes.create_string_buffer(8)
    iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)
    found["process_vm_readv"] = refused(libc.process_vm_readv(os.getpid(), iov, 1, iov, 1, 0))
    found["pidfd_getfd"] = refused(libc.syscall(438, 0, 0, 0))
    return found
"""
EVERY_WAY_REFUSED = ("assert f() == {'ptrace_traceme': True, 'ptrace_seize_self_parent': True, "
                     "'process_vm_readv': True, 'pidfd_getfd': True}")


@pytest.mark.parametrize("level", ["strict", "rlimits"])
def test_no_run_can_trace_or_reach_into_another_process(strict: SandboxPool, level: str) -> None:
    """ptrace, process_vm_readv/writev and pidfd_getfd are refused to every run (the traced
    candidate above held the fallback zygote in waitpid: a tracee's zombie is its tracer's)."""
    pool = strict if level == "strict" else fallback()
    try:
        result = run_tests(REACH_IN, [EVERY_WAY_REFUSED], timeout=1.0, pool=pool)
        assert (result.fraction, result.timed_out) == (1.0, False), result.failures
    finally:
        if pool is not strict:
            pool.close()
