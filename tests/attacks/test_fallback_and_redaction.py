"""Safe fallback and redaction: at the rlimits level a run cannot lower later runs' limits,
reschedule or stop the worker, or leave strays that outlive the sweep; the fallback refuses to
run as root unless allowed and gives candidates an empty environment; secrets are redacted from
every result on the trusted side."""

from __future__ import annotations

import ast
import contextlib
import os
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from support.attacks import (
    ADD,
    CHECK,
    CLONE,
    CONTINUE_EVERY_50US,
    FORGED_ENDS,
    HONEST_ADD,
    LEAPFROG,
    LOWER_THE_ZYGOTES_LIMITS,
    NEEDS_MEMORY,
    RESCHEDULE_THE_ZYGOTE,
    SIBLINGS,
    STILL_MOVING,
    STOP_THE_WORKER,
    STOP_THE_ZYGOTES_CHILDREN,
    ZYGOTE_BLOCKERS,
    Attack,
    attack,
    attack_scores_only_honest_work_and_leaves_nothing_behind,
    inherited,
    judged,
    probe,
    run_on,
)
from support.hangs import HONEST, HONEST_CHECKS, honest_passes, worker_waits

from agentenv.errors import IsolationUnavailable
from agentenv.grading import run_tests
from agentenv.sandbox import Limits, SandboxPool, _cgroup, _isolation, _pool

ATTACKS = [
    attack("environment_exfiltration", """
import os
print(dict(os.environ))
for path in ('/proc/self/environ', '/proc/1/environ', '/proc/2/environ'):
    try: print(open(path, 'rb').read())
    except OSError: pass
def add(a, b):
    raise RuntimeError(str(dict(os.environ)))
"""),
]


@pytest.mark.parametrize("case", ATTACKS, ids=lambda a: a.name)
def test_attack_scores_only_honest_work_and_leaves_nothing_behind(
        case: Attack, pool_with_secret: SandboxPool, listener: tuple[int, list[bytes]]) -> None:
    """Each attack scores its honest fraction and leaves nothing behind (see the helper)."""
    attack_scores_only_honest_work_and_leaves_nothing_behind(case, pool_with_secret, listener)


def test_the_fallback_refuses_to_run_as_root_unless_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """As root, isolation='rlimits' raises and says how to opt in; opted in, it runs."""
    if os.geteuid() != 0:
        pytest.skip("the refusal applies to root callers")
    monkeypatch.delenv(_isolation.ALLOW_ROOT_FALLBACK, raising=False)
    with pytest.raises(IsolationUnavailable, match=_isolation.ALLOW_ROOT_FALLBACK):
        SandboxPool(size=1, isolation="rlimits")
    with SandboxPool(size=1, isolation="rlimits", allow_root_fallback=True) as made:
        assert run_tests(HONEST_ADD, ADD, pool=made).fraction == 1.0


def test_fallback_candidates_get_an_empty_environment_and_no_root_when_possible(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No variable of the caller reaches a fallback candidate; it runs as the sandbox uid
    wherever that uid can run the interpreter (as root only when it cannot, opted in)."""
    monkeypatch.setenv("AGENTENV_HERMETIC_API_KEY", "sk-not-for-candidates")
    with SandboxPool(size=1, isolation="rlimits", allow_root_fallback=True) as made:
        got = probe(made, "import os\ndef probe():\n    return [sorted(os.environ), os.getuid()]")
    names, uid = ast.literal_eval(got)
    assert names == ["HOME", "TMPDIR"]
    if os.geteuid() == 0 and _isolation.fallback_uid() is not None:
        assert uid == _isolation.SANDBOX_UID
    elif os.geteuid() != 0:
        assert uid == os.geteuid()


def test_a_secret_a_fallback_candidate_prints_is_redacted_from_its_result(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate that knows a secret of the caller's environment (it was in its prompt) and
    prints it, raises it and returns it: the result carries none of it, at the fallback level
    as at the strict one (redaction is on the trusted side)."""
    secret = "sk-known-to-the-policy-9001"
    monkeypatch.setenv("AGENTENV_FALLBACK_TEST_API_KEY", secret)
    code = (f"import sys\nprint({secret!r})\nsys.stderr.write({secret!r})\n"
            f"def probe():\n    raise ValueError({secret!r})\n"
            f"def add(a, b):\n    return {secret!r}\n")
    with SandboxPool(size=1, isolation="rlimits", allow_root_fallback=True) as made:
        for checks in (["assert probe() == 1"], ADD):
            result = run_tests(code, checks, pool=made)
            shown = repr(result)
            assert secret not in shown, shown
            assert result.fraction == 0.0


STEAL_THE_JUDGES_NONCE = SIBLINGS + """
import re
_wire, _schema = sys.modules["_wire"], sys.modules["_schema"]
PATTERN = re.compile(rb'"role": "judge", "nonce": "([0-9a-f]{32})"')
def nonce_of(pid):
    with open(f"/proc/{pid}/maps") as handle:
        regions = [line.split() for line in handle]
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for region in regions:
            low, high = (int(x, 16) for x in region[0].split("-"))
            if "rw" not in region[1] or high - low > (64 << 20):
                continue
            try:
                mem.seek(low)
                found = PATTERN.search(mem.read(high - low))
            except (OSError, ValueError, OverflowError):
                continue
            if found:
                return found.group(1).decode()
deadline = time.time() + 1.0
done = False
while not done and time.time() < deadline:
    for pid in siblings():
        try:
            nonce = nonce_of(pid)
        except OSError:
            continue
        if nonce:  # the judge's own result pipe, and verdicts bound to its nonce
            fd = os.open(f"/proc/{pid}/fd/3", os.O_WRONLY)
            os.write(fd, b"".join(_wire.encode_frame(nonce, {_schema.TYPE: _schema.CHECK,
                                                            _schema.INDEX: i, _schema.OK: True})
                                  for i in range(8)))
            done = True
            break
    time.sleep(0.01)
def f(x):
    return -1
"""


ROOT_FALLBACK = os.geteuid() == 0 and _isolation.fallback_uid() is None


@pytest.mark.skipif(not ROOT_FALLBACK, reason="needs candidates running as root (the root "
                    "fallback where the sandbox uid cannot run the interpreter)")
def test_rlimits_root_candidate_cannot_forge_the_judges_verdicts(fallback_pool: SandboxPool) -> None:
    """At the fallback level as root (an opt-in), G runs as uid 0; with CAP_SYS_PTRACE it could
    override the judge's non-dumpable flag, read the judge's nonce from /proc/J/mem and write OK
    verdicts into /proc/J/fd/3 (a wrong f scoring 1.0). G and J drop every capability, the
    bounding set included, with the securebits locked: the wrong f scores 0."""
    checks = [judged("f"), "y = f(3)\nassert y == 3"]
    result = run_on(fallback_pool, FORGED_ENDS + STEAL_THE_JUDGES_NONCE, checks, timeout=2.0)
    assert result.fraction == 0.0, result.failures


@pytest.fixture
def short_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker stuck between runs is replaced after 3 s, not 10: the same hole, cheaper to show."""
    monkeypatch.setattr(_pool, "IDLE_TIMEOUT", 3.0)


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
    """A fork bomb that outlasts the sweep's budget: the sweep stops every stray before it
    kills any, and where that cannot finish in SWEEP_BUDGET the zygote gives up and the pool
    replaces the worker; strays never resume to stop the next run. 400 runnable strays starve
    the sweep of CPU, so the next submission waits for it (seconds, within the budget; a
    latency this test does not measure); it scores exactly 1.0, and no worker is waited out as
    frozen."""
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


@pytest.fixture
def pidfile() -> Iterator[str]:
    """A file where strays write their pids, each killed (by pid) when the test ends: at the
    fallback level without a cgroup nothing else would end what escaped."""
    fd, path = tempfile.mkstemp(prefix="stray-pids-")
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


def test_rlimits_a_stopped_worker_never_delays_the_next_submission(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A stray that stops the worker itself (the zygote's SIGCONT ticks come from the worker)
    does not make the next submission wait IDLE_TIMEOUT: the parent sends a fallback worker's
    process group SIGCONT every 0.1 s it waits for it."""
    monkeypatch.setattr(_pool, "IDLE_TIMEOUT", 4.0)  # a shorter wait shows the same thing
    made = fallback()
    try:
        attacked = run_tests(STOP_THE_WORKER, CHECK, timeout=1.0, pool=made)
        assert attacked.fraction == 0.0
        honest_passes(made)
    finally:
        made.close()


def test_rlimits_a_stray_in_vfork_wait_is_swept_without_a_give_up() -> None:
    """A vfork parent waits in state D, which no SIGSTOP ends; the sweep must not count it as
    moving (and give up after SWEEP_BUDGET): a process already sent SIGSTOP counts as still in
    state D (it runs no code before it stops, and SIGKILL ends that wait)."""
    made = fallback()
    try:
        attacked = run_tests(STILL_MOVING, CHECK, timeout=1.0, pool=made)
        assert attacked.fraction == 0.0
        honest_passes(made)
    finally:
        made.close()


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
    """A zygote that gives up its sweep kills everything below it, whatever its state, before
    it exits: no stray woken later by its own timer stops the runs of the pool's other workers
    (the honest runs there keep 1.0)."""
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


def fallback(size: int = 1) -> SandboxPool:
    return SandboxPool(size=size, isolation="rlimits", allow_root_fallback=True)


def worker_pids(pool: SandboxPool) -> set[int]:
    return {handle.proc.pid for handle in pool._workers}


def test_rlimits_a_run_cannot_lower_later_runs_limits() -> None:
    """A run that lowers the zygote's hard limits (prlimit: same uid, no capability needed)
    would have every later run inherit them (an honest 200 MiB solution scoring 0.0 on that
    worker for good): no run may set another process's limits (the syscall filter)."""
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
    path = os.path.join(FREEZER_ROOT, f"stray-freezer-{uuid.uuid4().hex[:8]}")
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
