"""Red team 11: the fallback level after aa3f5ad / f54a2f9 (the parent's SIGCONT ticks to the
worker's process group, a SIGSTOPped process in state D counted as still, the give-up that kills
everything below the zygote, and the health check on the zygote's scheduling).

Candidate runs at this level share the zygote's uid (root without capabilities here, since the
suite runs as root with ``allow_root_fallback=True``). The attacks here reach the zygote's other
inherited attributes (its resource limits, which ``prlimit`` lowers for any same-uid caller
without a capability), keep a stray "moving" with SIGCONT timers so the sweep never sees it
still, hold a stray in state D that SIGKILL does not end (a cgroup-v1 freezer), and check the
new defences for false positives (a run that reschedules itself) and for a stray that tries to
join the worker's process group to ride the parent's SIGCONT ticks. Each test asserts the honest
control (plain and judged: exactly 1.0, not timed out, no worker waited out) after its attack.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator

import pytest
from support.attacks import STOP_THE_ZYGOTES_CHILDREN, strict_pool
from support.hangs import honest_passes

from agentenv.grading import run_tests
from agentenv.sandbox import SandboxPool

CHECK = ["assert f() == 1"]


def fallback(size: int = 1) -> SandboxPool:
    return SandboxPool(size=size, isolation="rlimits", allow_root_fallback=True)


def worker_pids(pool: SandboxPool) -> set[int]:
    return {handle.proc.pid for handle in pool._workers}


@pytest.fixture(scope="module")
def strict() -> Iterator[SandboxPool]:
    made = strict_pool(1, "the red team 11 attacks at the strict level")
    yield made
    made.close()


# --------------------------------------------------------------------------- the zygote's rlimits

# G lowers the zygote's hard RLIMIT_AS to 64 MiB with prlimit(2): a same-uid caller may lower
# (never raise) another process's limits without CAP_SYS_RESOURCE, and no capability check of the
# cap_safe_nice kind guards it. Every run the zygote forks afterwards inherits the limit, and the
# runner's apply_limits takes min(job's, inherited hard) without a word.
LOWER_THE_ZYGOTES_LIMITS = """
import os, resource
ZYGOTE = os.getppid()
resource.prlimit(ZYGOTE, resource.RLIMIT_AS, (64 << 20, 64 << 20))
def f():
    return 0
"""

# An honest solution that needs 200 MiB, well within the default memory limit (1 GiB).
NEEDS_MEMORY = "def f():\n    block = bytearray(200 << 20)\n    return len(block) >> 20\n"


def test_rlimits_a_run_cannot_lower_later_runs_limits() -> None:
    """A run lowered the zygote's hard limits (prlimit: same uid, no capability needed) and every
    later run inherited them (an honest 200 MiB solution then scored 0.0 on that worker for
    good). No run may set another process's limits now (the syscall filter)."""
    made = fallback()
    try:
        before = run_tests(NEEDS_MEMORY, ["assert f() == 200"], timeout=2.0, pool=made)
        assert before.fraction == 1.0, before.failures
        attacked = run_tests(LOWER_THE_ZYGOTES_LIMITS, CHECK, timeout=1.0, pool=made)
        assert attacked.fraction == 0.0
        honest_passes(made)
        after = run_tests(NEEDS_MEMORY, ["assert f() == 200"], timeout=2.0, pool=made)
        assert after.fraction == 1.0, after.failures
    finally:
        made.close()


# --------------------------------------------------------------------------- a stray never still

# A setsid stray with a POSIX interval timer whose signal is SIGCONT, every 50 us: each SIGSTOP the
# sweep sends is undone within 50 us, so a look (milliseconds over /proc) almost never finds it in
# state T; the sweep never kills, spends SWEEP_BUDGET and gives up. One process, default Limits.
CONTINUE_EVERY_50US = """
import ctypes, os, signal, time
_libc = ctypes.CDLL(None, use_errno=True)
class _sigevent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                ("pad", ctypes.c_byte * 48)]
class _timespec(ctypes.Structure):
    _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
class _itimerspec(ctypes.Structure):
    _fields_ = [("interval", _timespec), ("value", _timespec)]
ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    event = _sigevent(None, int(signal.SIGCONT), 0)  # SIGEV_SIGNAL
    timer = ctypes.c_void_p()
    _libc.timer_create(1, ctypes.byref(event), ctypes.byref(timer))
    every = _itimerspec(_timespec(0, 50000), _timespec(0, 50000))
    _libc.timer_settime(timer, 0, ctypes.byref(every), None)
    os.write(ready_w, b"!")
    end = time.time() + 20
    while time.time() < end:
        time.sleep(0.01)
    os._exit(0)
os.read(ready_r, 1)
def f():
    return 0
"""


def test_rlimits_a_stray_continued_by_its_timer_is_swept_without_a_give_up() -> None:
    """Contained: the sweep's first SIGSTOP drops the timer's pending SIGCONT, and an interval
    POSIX timer is re-armed only when its signal is dequeued, so the timer falls silent and the
    stray stands still at the next look: swept in milliseconds, no give-up."""
    made = fallback()
    try:
        attacked = run_tests(CONTINUE_EVERY_50US, CHECK, timeout=1.0, pool=made)
        assert attacked.fraction == 0.0
        honest_passes(made)
    finally:
        made.close()


# --------------------------------------------------------------------------- D that SIGKILL does not end

# As root without capabilities the run may write the cgroup tree: it makes a cgroup-v1 freezer
# group, moves a setsid child into it and freezes it. A frozen task is in state D and a SIGKILL
# does not end it until it is thawed: _strays.sweep counts it still once sent SIGSTOP ("SIGKILL ends
# such a wait" does not hold), kills it in vain until SWEEP_BUDGET, and _give_up kills it in vain
# for a second more. FREEZER is thawed and removed by the test. (Here the mkdir is refused.)
FREEZER_ROOT = "/sys/fs/cgroup/freezer"
@pytest.fixture
def freezer() -> Iterator[str]:
    if not os.path.isdir(FREEZER_ROOT):
        pytest.skip("no cgroup-v1 freezer hierarchy here")
    path = os.path.join(FREEZER_ROOT, f"rt11-{uuid.uuid4().hex[:8]}")
    yield path
    if os.path.isdir(path):
        with contextlib.suppress(OSError), open(os.path.join(path, "freezer.state"), "w") as h:
            h.write("THAWED")
        for _ in range(100):
            try:
                os.rmdir(path)
                break
            except OSError:
                time.sleep(0.05)


FREEZE = """
import os, time
FREEZER = "FREEZER_DIR"
ready_r, ready_w = os.pipe()
child = os.fork()
if child == 0:
    os.setsid()
    os.write(ready_w, b"!")
    while True:
        time.sleep(1)
os.read(ready_r, 1)
try:
    os.mkdir(FREEZER)
    with open(FREEZER + "/cgroup.procs", "w") as handle:
        handle.write(str(child))
    with open(FREEZER + "/freezer.state", "w") as handle:
        handle.write("FROZEN")
except OSError:
    pass
def f():
    return 0
"""


def test_rlimits_a_frozen_stray_does_not_delay_the_next_submission(freezer: str) -> None:
    """Contained here only by file modes: the cgroup-v1 roots are 0555 root, and a run has no
    CAP_DAC_OVERRIDE, so its mkdir fails (EACCES). Where a run could write a freezer hierarchy,
    a frozen stray (state D, unkillable until thawed) would defeat the sweep's D exception
    ("SIGKILL ends such a wait") and cost SWEEP_BUDGET plus the give-up per submission."""
    made = fallback()
    try:
        attacked = run_tests(FREEZE.replace("FREEZER_DIR", freezer), CHECK, timeout=1.0, pool=made)
        assert attacked.fraction == 0.0
        honest_passes(made)
    finally:
        if os.path.isdir(freezer):  # thaw first: the pool's close would wait on it
            with contextlib.suppress(OSError), open(os.path.join(freezer, "freezer.state"), "w") as h:
                h.write("THAWED")
        made.close()


# --------------------------------------------------------------------------- the health check's false positives

# G and a setsid child it leaves behind each take the lowest nice value, SCHED_IDLE and one CPU
# for themselves: none of it is the zygote's, so the worker stays healthy and is kept.
RESCHEDULE_MYSELF = """
import os
def idle_on_one_cpu():
    for change in (lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}),
                   lambda: os.setpriority(os.PRIO_PROCESS, 0, 19),
                   lambda: os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))):
        try:
            change()
        except OSError:
            pass
idle_on_one_cpu()
if os.fork() == 0:
    os.setsid()
    idle_on_one_cpu()
    import time
    time.sleep(5)
    os._exit(0)
def f():
    return 0
"""
PROBE = ("import os\n"
         "def f():\n"
         "    return (os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0),\n"
         "            len(os.sched_getaffinity(0)))\n")


def test_rlimits_a_run_that_reschedules_itself_keeps_its_worker() -> None:
    """Contained: only the zygote's scheduling is compared, so a run (and what it leaves) that
    reschedules itself does not mark the worker unhealthy, and later runs get the usual one."""
    made = fallback()
    try:
        expected = (os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0),
                    len(os.sched_getaffinity(0)))
        honest_passes(made, times=1)
        workers = worker_pids(made)
        attacked = run_tests(RESCHEDULE_MYSELF, CHECK, timeout=1.0, pool=made)
        assert attacked.fraction == 0.0
        honest_passes(made)
        assert worker_pids(made) == workers  # not replaced
        probe = run_tests(PROBE, [f"assert f() == {expected!r}"], timeout=1.0, pool=made)
        assert probe.fraction == 1.0, probe.failures
    finally:
        made.close()


# --------------------------------------------------------------------------- riding the SIGCONT ticks

# A setsid stray tries to move into the worker's process group (the one the parent's SIGCONT
# ticks reach), then stops the zygote's children for 2 s. setpgid across sessions is refused
# (EPERM), so the ticks never continue what the sweep stopped. The errno goes to OUT.
JOIN_THE_WORKERS_GROUP = """
import os, signal, time
ZYGOTE = os.getppid()
""" + STOP_THE_ZYGOTES_CHILDREN + """
ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    answers = []
    for target in (ZYGOTE, os.getpgid(ZYGOTE)):
        try:
            os.setpgid(0, target)
            answers.append("joined")
        except OSError as error:
            answers.append(error.errno)
    with open("OUT", "w") as handle:
        handle.write(repr(answers))
    os.write(ready_w, b"!")
    stop_the_zygotes_children(ZYGOTE, time.time() + 2.0)
    os._exit(0)
os.read(ready_r, 1)
def f():
    return 0
"""


def test_rlimits_a_stray_cannot_join_the_workers_process_group(tmp_path: object) -> None:
    """Contained: the worker and zygote form a session of their own and every run starts its
    own (setsid), so no stray can enter the group the parent's SIGCONT ticks reach."""
    out = os.path.join(str(tmp_path), "answers")
    os.chmod(str(tmp_path), 0o777)
    made = fallback()
    try:
        attacked = run_tests(JOIN_THE_WORKERS_GROUP.replace("OUT", out), CHECK, timeout=1.0,
                             pool=made)
        assert attacked.fraction == 0.0
        honest_passes(made)
        with open(out) as handle:
            assert handle.read() == "[1, 1]"  # EPERM twice
    finally:
        made.close()


# --------------------------------------------------------------------------- the strict level

@pytest.mark.parametrize("name", ["lower_the_zygotes_limits", "continue_every_50us"])
def test_strict_level_is_unaffected(strict: SandboxPool, name: str) -> None:
    """Contained: G's parent is not nameable in its pid namespace (getppid() is 0: prlimit(0)
    is G itself) and its strays die with its namespace, timers and all."""
    code = {"lower_the_zygotes_limits": LOWER_THE_ZYGOTES_LIMITS,
            "continue_every_50us": CONTINUE_EVERY_50US}[name]
    attacked = run_tests(code, CHECK, timeout=1.0, pool=strict)
    assert attacked.fraction == 0.0
    honest_passes(strict)
    after = run_tests(NEEDS_MEMORY, ["assert f() == 200"], timeout=2.0, pool=strict)
    assert after.fraction == 1.0, after.failures
