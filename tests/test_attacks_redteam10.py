"""Red team 10: the judge's CPU pinning (ff5433f) and the fallback zygote's stop-until-still
sweep, its give-up and the worker's SIGCONT ticks (fd77111).

At the rlimits level the zygote's sweep SIGSTOPs every stray until all of them stand still
(/proc state T, t, Z or X), then kills them children first; when ``SWEEP_BUDGET`` (5 s) runs out
first, it kills its prepared runs and exits (``_give_up``) and the pool replaces the worker. The
worker SIGCONTs the zygote every 0.1 s it waits for it. The attacks here keep a stray "moving"
forever (a parent waiting in ``clone(CLONE_VFORK)`` sits in state D, which no SIGSTOP ends), let
a stray outlive the give-up (a POSIX timer's SIGCONT wakes it once no sweep is left to stop it
again), stop the worker itself (nothing sends it SIGCONT), and reach the zygote's scheduling
attributes, which every later run inherits. The judge's pinning is attacked from the candidate's
side at the strict level, and honest programs are checked against the new syscall refusals and
the give-up. Each test asserts the honest control afterwards: plain and judged, exactly 1.0, not
timed out, with no worker waited out or given up on. The three holes found (the stopped worker, the stray in vfork's
wait, the stray that outlived the give-up) are shut by the commit that merged these tests; a
fourth defence came with them: a worker whose zygote's scheduling was changed reports itself
unhealthy.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
import time
from collections.abc import Iterator

import pytest
from support.attacks import CLONE, STOP_THE_WORKER, strict_pool
from support.hangs import HONEST, HONEST_CHECKS, honest_passes, worker_waits

from agentenv.grading import run_tests
from agentenv.sandbox import SandboxPool, _cgroup, _pool

CHECK = ["assert f() == 1"]


def fallback(size: int = 1) -> SandboxPool:
    return SandboxPool(size=size, isolation="rlimits", allow_root_fallback=True)


@pytest.fixture(scope="module")
def strict() -> Iterator[SandboxPool]:
    made = strict_pool(1, "the red team 10 attacks at the strict level")
    yield made
    made.close()


@pytest.fixture
def pidfile() -> Iterator[str]:
    """A file where strays write their pids, each killed (by pid) when the test ends: at the
    fallback level without a cgroup nothing else would end what escaped."""
    fd, path = tempfile.mkstemp(prefix="rt10-pids-")
    os.close(fd)
    os.chmod(path, 0o666)
    yield path
    with open(path) as handle:
        pids = [int(word) for word in handle.read().split()]
    pids += leftovers_of_this_process()
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    os.unlink(path)


def leftovers_of_this_process() -> list[int]:
    """Fallback workers' processes of this test process's pools (their config names it) that
    were orphaned or left stopped: without a cgroup, the runs a stray stopped outlive their pool."""
    mark = f'"parent_pid": {os.getpid()}'.encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                if mark not in handle.read():
                    continue
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] in (b"T", b"t") or fields[1] == b"1":
            found.append(int(name))
    return found


# Shared candidate-side helpers.

# One-shot POSIX timers whose signal is SIGCONT: generating SIGCONT resumes a stopped process,
# whoever stopped it. Several, spread out: one that fires while the sweep still runs is undone
# by its next SIGSTOP (which also drops a SIGCONT still pending), a later one is not.
WAKE_UP_LATER = """
import ctypes, signal
_libc = ctypes.CDLL(None, use_errno=True)
class _sigevent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                ("pad", ctypes.c_byte * 48)]
class _timespec(ctypes.Structure):
    _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
class _itimerspec(ctypes.Structure):
    _fields_ = [("interval", _timespec), ("value", _timespec)]
def wake_up_at(*seconds_from_now):
    for seconds in seconds_from_now:
        event = _sigevent(None, int(signal.SIGCONT), 0)  # SIGEV_SIGNAL
        timer = ctypes.c_void_p()
        _libc.timer_create(1, ctypes.byref(event), ctypes.byref(timer))  # CLOCK_MONOTONIC
        when = _itimerspec(_timespec(0, 0), _timespec(int(seconds), int(seconds % 1 * 1e9)))
        _libc.timer_settime(timer, 0, ctypes.byref(when), None)
"""

# What a stray that got free does: find this pool's processes by the worker's command line (its
# config names the pool's process: "parent_pid": N), and SIGSTOP every run a zygote of the pool
# has prepared (a child of a child of a worker), so the next job goes to a stopped process.
STOP_THE_POOLS_RUNS = """
import os, signal, time
with open("/proc/self/cmdline", "rb") as _handle:
    _cmd = _handle.read()
MARK = _cmd[_cmd.index(b'"parent_pid"'):].split(b",")[0].split(b"}")[0]
def _ours(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return MARK in handle.read()
    except OSError:
        return False
def _parent(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError):
        return 0
def _ended(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except OSError:
        return True
def stop_the_pools_runs(until, spare):
    while time.time() < until:
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in spare or not _ours(name):
                continue
            zygote = _parent(int(name))
            if _ours(zygote) and _ours(_parent(zygote)):
                try:
                    os.kill(int(name), signal.SIGSTOP)
                except OSError:
                    pass
        time.sleep(0.002)
"""


# --------------------------------------------------------------------------- the worker's SIGCONT ticks

# STOP_THE_WORKER (support.attacks): a stray stops the worker and the zygote once its run ended.


def test_rlimits_a_stopped_worker_never_delays_the_next_submission(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A stray stopped the worker itself (the zygote's SIGCONT ticks came from the worker):
    the next submission waited IDLE_TIMEOUT. The parent now sends a fallback worker's process
    group SIGCONT every 0.1 s it waits for it."""
    monkeypatch.setattr(_pool, "IDLE_TIMEOUT", 4.0)  # the same hole, cheaper to show
    made = fallback()
    try:
        attacked = run_tests(STOP_THE_WORKER, CHECK, timeout=1.0, pool=made)
        assert attacked.fraction == 0.0
        honest_passes(made)
    finally:
        made.close()


# --------------------------------------------------------------------------- a stray that never stands still

# A setsid stray whose vfork child sleeps: the child stops at the first SIGSTOP, but the parent
# waits for it in state D, which the sweep counts as moving and no SIGSTOP ends, so the sweep
# never kills, and gives up after SWEEP_BUDGET; two processes, default Limits.
STILL_MOVING = CLONE + """
import os, time
ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if vfork_copy() == 0:
        os.write(ready_w, b"!")
        time.sleep(20)
    os._exit(0)
os.read(ready_r, 1)
def f():
    return 0
"""


def test_rlimits_a_stray_in_vfork_wait_is_swept_without_a_give_up() -> None:
    """A vfork parent waits in state D, which no SIGSTOP ends: the sweep counted it as moving
    and gave up after SWEEP_BUDGET every time. A process already sent SIGSTOP now counts as
    still in state D (it runs no code before it stops, and SIGKILL ends that wait)."""
    made = fallback()
    try:
        attacked = run_tests(STILL_MOVING, CHECK, timeout=1.0, pool=made)
        assert attacked.fraction == 0.0
        honest_passes(made)
    finally:
        made.close()


# --------------------------------------------------------------------------- outliving the give-up

# The vfork pair above holds the sweep until it gives up; the child has set one-shot SIGCONT
# timers for 5.4-10 s later. When the zygote has given up (it is a zombie or gone), nothing stops
# the child again: it stops every run the pool prepares from then on, for 10 s. Its pids go to
# PIDFILE for the test's clean-up.
ESCAPE = CLONE + WAKE_UP_LATER + STOP_THE_POOLS_RUNS + """
ZYGOTE = os.getppid()
ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if vfork_copy() == 0:
        with open("PIDFILE", "a") as handle:
            handle.write(f"{os.getpid()} {os.getppid()}\\n")
        wake_up_at(*(5.4 + 0.2 * i for i in range(24)))
        os.write(ready_w, b"!")
        while not _ended(ZYGOTE):
            time.sleep(0.01)
        stop_the_pools_runs(time.time() + 10.0, {os.getpid(), os.getppid()})
    os._exit(0)
os.read(ready_r, 1)
def f():
    return 0
"""

# An honest submission that takes a second of wall time (sleeping): it holds a second worker
# while the attack runs, so the attacked worker is not the next one taken.
HOLD = "import time\ndef f():\n    time.sleep(1.2)\n    return 1\n"


def honest_until(pool: SandboxPool, until: float) -> None:
    """Honest submissions one after another until ``until`` (monotonic): each must pass, and
    none may wait out a frozen worker (the zygote's give-up replaces its worker: allowed)."""
    while time.monotonic() < until:
        with worker_waits() as waits:
            result = run_tests(HONEST, HONEST_CHECKS, timeout=1.0, pool=pool)
        assert (result.fraction, result.timed_out) == (1.0, False), result.failures
        assert not [w for w in waits if "did not answer in time" in w], waits
        time.sleep(0.2)


@pytest.mark.parametrize("setting", ["cgroup_two_workers", "no_cgroup_one_worker"])
def test_rlimits_no_stray_outlives_the_give_up(
        setting: str, pidfile: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The zygote gave up and exited with strays alive; one woken later by its own timer
    stopped the runs of the pool's other workers (honest runs scored 0.0 and 0.5). Giving up
    now kills everything below the zygote, whatever its state, before it exits."""
    if setting == "no_cgroup_one_worker":
        monkeypatch.setattr(_cgroup, "create", lambda: None)  # a host without writable cgroups
    made = fallback(size=2 if setting == "cgroup_two_workers" else 1)
    try:
        began = time.monotonic()
        holder = None
        if setting == "cgroup_two_workers":
            holder = threading.Thread(target=run_tests, args=(HOLD, CHECK),
                                      kwargs={"timeout": 1.0, "pool": made})
            holder.start()
            time.sleep(0.4)
        attacked = run_tests(ESCAPE.replace("PIDFILE", pidfile), CHECK, timeout=1.0, pool=made)
        assert attacked.fraction == 0.0
        if holder is not None:
            holder.join()  # its worker goes back on top of the idle stack: the next one taken
        honest_until(made, began + 9.0)
    finally:
        made.close()


# --------------------------------------------------------------------------- scheduling the zygote

# G changes the zygote's scheduling (same uid): SCHED_IDLE, nice 19, one CPU. Every run forked
# after that inherits all three. PROBE is an honest program that reports its own.
RESCHEDULE_THE_ZYGOTE = """
import os
ZYGOTE = os.getppid()
for change in (lambda: os.sched_setaffinity(ZYGOTE, {min(os.sched_getaffinity(0))}),
               lambda: os.setpriority(os.PRIO_PROCESS, ZYGOTE, 19),
               lambda: os.sched_setscheduler(ZYGOTE, os.SCHED_IDLE, os.sched_param(0))):
    try:
        change()
    except OSError:
        pass
def f():
    return 0
"""
def inherited() -> tuple[int, int, int]:
    """The scheduling a run gets from this process through the worker: PROBE's answer."""
    return (os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0),
            len(os.sched_getaffinity(0)))


PROBE = ("import os\n"
         "def f():\n"
         "    return (os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0),\n"
         "            len(os.sched_getaffinity(0)))\n")


def test_rlimits_a_run_cannot_reschedule_later_runs() -> None:
    """Contained here, and only by the capability gap: the worker (as root) keeps capabilities
    the run has dropped, and the kernel refuses a scheduling change (affinity, nice, policy) of
    a process whose permitted set is not a subset of the caller's (cap_safe_nice) unless the
    caller has CAP_SYS_NICE. Where the worker has no capabilities (a non-root caller, or root's
    fallback as uid 65534) nothing stops this, and the zygote never resets what it was given."""
    made = fallback()
    try:
        before = run_tests(PROBE, ["assert f() == f()"], timeout=1.0, pool=made)
        assert before.fraction == 1.0
        expected = inherited()
        attacked = run_tests(RESCHEDULE_THE_ZYGOTE, CHECK, timeout=1.0, pool=made)
        assert attacked.fraction == 0.0
        # where the worker lacks CAP_SYS_NICE the change lands and the worker is replaced at once
        honest_passes(made, times=1, replaced_for="scheduling was changed")
        after = run_tests(PROBE, [f"assert f() == {expected!r}"], timeout=1.0, pool=made)
        assert after.fraction == 1.0, after.failures
    finally:
        made.close()


# --------------------------------------------------------------------------- the judge's CPU (strict)

# In a judged check, f (called from J over the channel) learns the CPU the judge pinned itself
# to (G's serving thread was pinned there too) and forks three spinners pinned to it, so J,
# unable to move to another CPU, gets a quarter of one; it also tries to move the affinity of
# every pid it can name. It gains nothing: J is only slower, and the loop's last call is wrong.
STARVE_THE_JUDGE = """
import os
calls = 0
def f():
    global calls
    calls += 1
    cpus = os.sched_getaffinity(0)
    if calls == 1 and len(cpus) == 1:
        for _ in range(3):
            if os.fork() == 0:
                os.sched_setaffinity(0, cpus)
                while True:
                    pass
        for pid in range(1, 64):
            try:
                os.sched_setaffinity(pid, {max(os.sched_getaffinity(pid))})
            except OSError:
                pass
    return 1 if calls < 20 else 0  # right until the last call
"""
JUDGED = ["for _ in range(20):\n    assert f() == 1"]


def test_strict_a_candidate_that_crowds_the_judges_cpu_gains_nothing(strict: SandboxPool) -> None:
    """Contained: G cannot name J (another pid namespace), its spinners die with its namespace,
    and a starved judge only makes the run slower: 0.0, and the next runs are unaffected."""
    attacked = run_tests(STARVE_THE_JUDGE, JUDGED, timeout=1.0, pool=strict)
    assert attacked.fraction == 0.0
    honest_passes(strict)
    probe = run_tests(PROBE, [f"assert f()[2] == {len(os.sched_getaffinity(0))}"], timeout=1.0,
                      pool=strict)
    assert probe.fraction == 1.0, probe.failures  # no pin reaches a later run


# --------------------------------------------------------------------------- the strict level

@pytest.mark.parametrize("name", ["stop_the_worker", "still_moving", "reschedule_the_zygote"])
def test_strict_level_is_unaffected(strict: SandboxPool, name: str) -> None:
    """Contained: in its own pid namespace G's parent is not nameable (getppid() is 0), so it
    cannot stop the worker or reschedule the zygote, and a vfork pair dies with G's namespace."""
    code = {"stop_the_worker": STOP_THE_WORKER, "still_moving": STILL_MOVING,
            "reschedule_the_zygote": RESCHEDULE_THE_ZYGOTE}[name]
    attacked = run_tests(code, CHECK, timeout=1.0, pool=strict)
    assert attacked.fraction == 0.0
    honest_passes(strict)
    probe = run_tests(PROBE, [f"assert f() == {inherited()!r}"], timeout=1.0, pool=strict)
    assert probe.fraction == 1.0, probe.failures


# --------------------------------------------------------------------------- honest programs

# What honest solutions commonly do that touches processes: subprocess (vfork + exec), a
# multiprocessing pool (fork), faulthandler's dump of every thread, concurrent.futures threads,
# os.posix_spawn. None needs ptrace, process_vm_readv/writev or pidfd_getfd.
STDLIB_PROCESSES = """
import concurrent.futures, faulthandler, multiprocessing, os, subprocess, sys, tempfile
def square(x):
    return x * x
def f():
    out = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True)
    with multiprocessing.get_context("fork").Pool(2) as pool:
        squares = pool.map(abs, [0, -1, 4, -9, 16])
    with tempfile.TemporaryFile() as handle:
        faulthandler.dump_traceback(handle, all_threads=True)
        handle.seek(0)
        dumped = b"Current thread" in handle.read() or True
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        threads = list(ex.map(square, range(3)))
    pid = os.posix_spawn(sys.executable, [sys.executable, "-c", "pass"], {})
    spawned = os.waitpid(pid, 0)[1] == 0
    return (out.stdout.strip(), squares, dumped, threads, spawned)
"""
STDLIB_CHECK = ["assert f() == ('42', [0, 1, 4, 9, 16], True, [0, 1, 4], True)"]

# An honest program that leaves processes behind when its run ends: a multiprocessing pool never
# closed and a `sleep` child. The sweep must end them quickly, never give up.
HONEST_LEFTOVERS = """
import multiprocessing, subprocess, sys
_pool = multiprocessing.get_context("fork").Pool(2)
_pool.map(abs, range(4))
_child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
def f():
    return 1
"""


@pytest.mark.parametrize("level", ["strict", "rlimits"])
def test_honest_process_work_survives_the_syscall_refusals(strict: SandboxPool, level: str) -> None:
    """Contained: the refusals break nothing of the standard library an honest run uses."""
    pool = strict if level == "strict" else fallback()
    try:
        result = run_tests(STDLIB_PROCESSES, STDLIB_CHECK, timeout=5.0, pool=pool)
        assert (result.fraction, result.timed_out) == (1.0, False), result.failures
        honest_passes(pool, times=1)
    finally:
        if pool is not strict:
            pool.close()


# Through the x32 table (x86_64 numbers | 0x40000000; ptrace is x32's 521, process_vm_readv 539)
# or the plain numbers with high bits set in the upper word: all refused.
OTHER_DOORS = """
import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def refused(number, *args):
    ctypes.set_errno(0)
    ret = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
    return ret == -1 and ctypes.get_errno() == 1  # EPERM, from the filter
def f():
    if platform.machine() != "x86_64":
        return True
    me = os.getpid()
    doors = {"x32 ptrace": (0x40000000 | 521, 2, me, 0, 0),   # PTRACE_PEEKDATA: harmless
             "x32 process_vm_readv": (0x40000000 | 539, me, 0, 0, 0, 0, 0),
             "x32-bit plain ptrace": (0x40000000 | 101, 2, me, 0, 0),
             "x32-bit pidfd_getfd": (0x40000000 | 438, -1, -1, 0),
             "high word ptrace": (0x100000000 | 101, 2, me, 0, 0),
             "high word process_vm_writev": (0x100000000 | 311, me, 0, 0, 0, 0, 0)}
    open_doors = [name for name, call in doors.items() if not refused(*call)]
    return open_doors or True
"""


@pytest.mark.parametrize("level", ["strict", "rlimits"])
def test_the_refused_syscalls_have_no_other_door(strict: SandboxPool, level: str) -> None:
    """Contained: the x32 numbers are refused outright; the kernel reads a syscall number as
    32 bits, so high bits name the same (refused) syscall."""
    pool = strict if level == "strict" else fallback()
    try:
        result = run_tests(OTHER_DOORS, ["assert f() is True"], timeout=1.0, pool=pool)
        assert (result.fraction, result.timed_out) == (1.0, False), result.failures
    finally:
        if pool is not strict:
            pool.close()


def test_rlimits_honest_leftovers_are_swept_without_a_give_up() -> None:
    """Contained: an honest run's leftover pool workers and child are stopped and killed in
    milliseconds; the next run comes at once (no false give-up)."""
    made = fallback()
    try:
        result = run_tests(HONEST_LEFTOVERS, CHECK, timeout=2.0, pool=made)
        assert (result.fraction, result.timed_out) == (1.0, False), result.failures
        honest_passes(made)
    finally:
        made.close()
