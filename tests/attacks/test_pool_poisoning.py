"""A pool that cannot be poisoned: whatever a run does to its worker (crashes, kills, stopped
processes, held pipes, memory, page cache or CPU debt, blocked zygotes, refused syscalls), the
next submission gets a healthy worker and honest work keeps exactly its verdict."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.util
import marshal
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from support.attacks import (
    ADD,
    ADD_FAST,
    ADD_LOOP,
    ADD_MULTI,
    ADD_ONE,
    AUTOREAP,
    BESIDE,
    CHECK,
    CONTINUE_EVERY_50US,
    DISK_HOARD,
    FORGERY,
    G_EXITS_MID_JUDGING,
    HALF,
    HALF_CODE,
    HONEST_ADD,
    HONEST_CHILDREN,
    HONEST_CPU,
    HONEST_IMPORTS,
    IPC_KEY,
    JUDGE_TEXT,
    KEEP_G_ALIVE,
    LEAPFROG,
    LOCALS,
    LOWER_THE_ZYGOTES_LIMITS,
    NEEDS_900_MIB,
    NEEDS_MEMORY,
    PLANT_EVERYWHERE,
    PLANT_IPC,
    PROBE,
    PROCESS_BOMB,
    REBIND_LOCALS,
    RESCHEDULE_THE_ZYGOTE,
    STDIO_3,
    STDIO_4,
    STDIO_FINALIZER_FORGES,
    STDIO_HONEST,
    STDIO_NEVER_ENDS,
    STILL_MOVING,
    STOP_THE_WORKER,
    STOP_THE_ZYGOTES_CHILDREN,
    THREAD_BOMB,
    TWO_CHILDREN,
    ZYGOTE_BLOCKERS,
    Attack,
    Case,
    attack,
    attack_scores_only_honest_work_and_leaves_nothing_behind,
    check_attack_scores_only_honest_work_and_leaves_nothing_behind,
    check_case,
    fallback,
    fill,
    honest_controls_pass,
    honest_cpu_passes,
    honest_plain_passes,
    honest_run_passes,
    inherited,
    judge_attack_scores_only_honest_work_and_leaves_nothing_behind,
    judge_case,
    judged,
    probe,
    run_on,
    strict_pool,
)
from support.hangs import HONEST, honest_passes, worker_waits

from agentenv.errors import IsolationUnavailable, SandboxError
from agentenv.grading import RunResult, run_tests
from agentenv.sandbox import Limits, SandboxPool, _cgroup, _isolation
from agentenv.sandbox.testing import host_figures, leftover_processes, process_table

ATTACKS = [
    attack("ctypes_segfault", """
import ctypes
def add(a, b):
    return ctypes.string_at(0)
"""),
    attack("kill_the_parent_and_everything_visible", """
import os, signal
for target in (os.getppid(), PARENT, 1, 2, -1, 0):
    for sig in (signal.SIGKILL, signal.SIGTERM):
        try: os.kill(target, sig)
        except OSError: pass
def add(a, b): return a - b
""", needs=("parent",)),
]


@pytest.mark.parametrize("case", ATTACKS, ids=lambda a: a.name)
def test_attack_scores_only_honest_work_and_leaves_nothing_behind(
        case: Attack, pool_with_secret: SandboxPool, listener: tuple[int, list[bytes]]) -> None:
    """Each attack scores its honest fraction and leaves nothing behind (see the helper)."""
    attack_scores_only_honest_work_and_leaves_nothing_behind(case, pool_with_secret, listener)


# Ends normally (its first process returns) while a child still holds most of the memory limit
# and the run's tmpfs holds 210 MiB more: the kernel frees all of it only as the run is torn
# down, which the worker does not wait for before the next job.
MEMORY_LEFT = """
import os, time
if os.fork() == 0:
    os.closerange(0, 256)  # the worker does not wait for what holds none of the run's pipes
    blob = bytearray(800 << 20)
    for i in range(0, len(blob), 4096):
        blob[i] = 1
    time.sleep(30)
    os._exit(0)
for k in range(7):
    with open(f'/tmp/fill{k}', 'wb') as handle:
        for _ in range(30):
            handle.write(b'x' * (1 << 20))
time.sleep(0.6)
def f():
    return 1
"""


@pytest.mark.slow
def test_memory_a_finished_run_leaves_is_never_charged_to_the_next(pool: SandboxPool) -> None:
    """After a run that ended with 1 GiB still held (a child, files in its tmpfs), honest work
    needing 900 MiB of its 1 GiB limit on the same worker passes, round after round."""
    if "memory" not in _cgroup.available()[0]:
        pytest.skip("no writable memory cgroup here: memory is per-process")
    for _round in range(3):
        assert run_tests(MEMORY_LEFT, CHECK, timeout=3.0, pool=pool).fraction == 1.0
        result = run_tests(NEEDS_900_MIB, CHECK, timeout=3.0, pool=pool)
        assert result.fraction == 1.0, result
    assert leftover_processes(pool) == []


# Ends normally while a child that has closed its copies of the run's pipes (so the worker does
# not wait for it) still holds 900 MiB: freed only moments after the worker has replied.
HOLDS_AT_THE_END = """
import os, time
if os.fork() == 0:
    os.closerange(0, 256)
    blob = bytearray(900 << 20)
    for i in range(0, len(blob), 4096):
        blob[i] = 1
    time.sleep(30)
    os._exit(0)
time.sleep(0.8)
def f():
    return 1
"""


@pytest.mark.slow
def test_a_smaller_memory_limit_right_after_a_big_run_keeps_the_worker(pool: SandboxPool) -> None:
    """The next run on the worker asks for a 256 MiB limit while the last one's 900 MiB is still
    being freed: it is graded on that same worker (the kernel refusing the lower limit for a
    moment is waited out, not taken for a dead worker), round after round."""
    if "memory" not in _cgroup.available()[0]:
        pytest.skip("no writable memory cgroup here: memory is per-process")
    small = Limits(memory=256 << 20)
    workers = pool.worker_pids
    for _round in range(3):
        assert run_tests(HOLDS_AT_THE_END, CHECK, timeout=3.0, pool=pool).fraction == 1.0
        result = run_tests("def f():\n    return 1\n", CHECK, pool=pool, limits=small)
        assert result.fraction == 1.0, result
        assert pool.worker_pids == workers  # never replaced
    assert leftover_processes(pool) == []


READ_FILES = """
import os
read = 0
for top in ('/usr', '/opt', '/root', '/home'):
    for root, dirs, files in os.walk(top):
        for name in files:
            try:
                with open(os.path.join(root, name), 'rb') as handle:
                    while True:
                        block = handle.read(1 << 20)
                        if not block:
                            break
                        read += len(block)
            except OSError:
                pass
            if read > 1300 << 20:
                break
        if read > 1300 << 20:
            break
def f():
    return read >> 20
"""


ALLOCATE = """
import os
def f():
    before = os.times()
    blob = bytearray(960 << 20)
    for i in range(0, len(blob), 4096):
        blob[i] = 1
    after = os.times()
    return round(1000 * (after.user - before.user + after.system - before.system))
"""


def reported(result: RunResult) -> int:
    """The int ``f()`` returned, from the failed ``f() == -1`` check that carries it."""
    assert result.failures and "returned " in result.failures[0].message, result
    return int(result.failures[0].message.rsplit("returned ", 1)[1].split(",")[0])


def charged(pool: SandboxPool) -> int:
    """Bytes charged to the (only) worker's memory cgroup now, read from the trusted side."""
    (worker,) = pool._workers
    assert worker.cgroup is not None
    usage = worker.cgroup.usage()
    assert usage is not None
    return usage


@pytest.mark.slow
def test_page_cache_a_run_leaves_is_not_reclaimed_on_the_next_runs_clock(pool: SandboxPool) -> None:
    """A run reads over a gigabyte of files, whose page cache stays charged to the worker's
    cgroup; it is given back from the trusted side before the next run starts, so the next run,
    allocating 960 MiB of its 1 GiB limit, never pays for reclaiming it on its own CPU clock.

    Asserted on what stays charged to the cgroup (deterministic, so one round shows it); the
    CPU milliseconds the allocation took are printed for the record, never compared (they swing
    by 3x on a shared machine)."""
    if "memory" not in _cgroup.available()[0]:
        pytest.skip("no writable memory cgroup here: memory is per-process")
    probe = ["assert f() == -1"]
    # Files already cached stay charged to whoever read them first (another test, another
        # process): drop the machine's clean page cache (as root, as CI runs) so that this
        # run's reads are charged to its worker.
    with contextlib.suppress(OSError), open("/proc/sys/vm/drop_caches", "w") as handle:
        handle.write("1")
    read = reported(run_tests(READ_FILES, probe, timeout=60.0, pool=pool))
    if read < 800:
        pytest.skip(f"only {read} MiB of files are readable in the sandbox here")
    left = charged(pool)
    if left < 512 << 20:
        pytest.skip(f"the kernel kept only {left >> 20} MiB of that page cache charged here")
    after = reported(run_tests(ALLOCATE, probe, timeout=30.0, pool=pool))
    # The next run's allocation was freed at its end: whatever is charged now beyond the idle
    # worker is what nobody reclaimed, the page cache the reading run left.
    assert charged(pool) <= _cgroup.LEFTOVER + (64 << 20), (left >> 20, charged(pool) >> 20)
    print(f"[memory] CPU ms to allocate 960 MiB after reading a gigabyte: {after}")


SPINNERS = """
import os
for _ in range(8):
    if os.fork() == 0:
        while True:
            pass
while True:
    pass
def f():
    return 1
"""


@pytest.mark.slow
def test_a_cpu_hog_killed_at_its_limit_leaves_no_debt_for_the_next_run(pool: SandboxPool) -> None:
    """Eight spinning processes run into the quota until killed; the next run on that worker
    gets its whole budget (no throttling carried over, the CPU weight back to an ordinary one)."""
    for _round in range(2):
        hog = run_tests(SPINNERS, CHECK, timeout=1.0, pool=pool)
        assert hog.timed_out and hog.fraction == 0.0
        honest_cpu_passes(pool)
    for worker in list(pool._workers):
        if worker.cgroup is not None and "cpu" in worker.cgroup.dirs:
            name = "cpu.shares" if worker.cgroup.version == 1 else "cpu.weight"
            with open(f"{worker.cgroup.dirs['cpu']}/{name}") as handle:
                assert int(handle.read()) in (100, 1024)
    assert leftover_processes(pool) == []


# Fills the run's process allowance with what usually outlives a parent: unreaped zombies,
# stopped children, a traced child stopped under ptrace, a setsid daemon; then ends normally.
PROCESSES_LEFT = """
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
made = 0
for k in range(200):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        if k % 4 == 1:
            os.kill(os.getpid(), signal.SIGSTOP)
        elif k % 4 == 2:
            libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME, then stop under the tracer
            os.kill(os.getpid(), signal.SIGSTOP)
        elif k % 4 == 3:
            os.setsid()
            time.sleep(60)
        os._exit(0)
    made += 1
time.sleep(0.2)
def f():
    return 1 if made > 20 else 0
"""


FORKS_50 = """
import os
def f():
    kids = []
    for _ in range(50):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)
    return 1
"""


def test_zombies_stopped_and_traced_children_never_use_up_the_next_runs_processes(
        pool: SandboxPool) -> None:
    """What a run leaves of its process allowance is gone for the next: 50 forks pass."""
    for _round in range(2):
        assert run_tests(PROCESSES_LEFT, CHECK, timeout=2.0, pool=pool).fraction == 1.0
        result = run_tests(FORKS_50, CHECK, timeout=2.0, pool=pool)
        assert result.fraction == 1.0, result
    assert leftover_processes(pool) == []


@pytest.mark.slow
def test_an_attack_on_one_worker_does_not_time_out_honest_work_on_another() -> None:
    """A fork storm, memory churn at the limit and page-cache churn, each on its own worker
    beside honest work needing 0.3 s of its 1 s: the honest work passes every time.

    The attacks have the honest run's own limit: what is tested is what one worker's resource
    use does to another. Attacks with a longer limit than the honest run's are the next test."""
    made = strict_pool(4, "the side-by-side attacks")
    with made:
        verdicts: list[tuple[str, float, bool]] = []
        attacks: list[RunResult] = []

        def attack(code: str) -> None:
            attacks.append(run_tests(code + "def f():\n    return 1\n", CHECK, timeout=1.0, pool=made))

        for name, code in BESIDE.items():
            threads = [threading.Thread(target=attack, args=(code,)) for _ in range(2)]
            for t in threads:
                t.start()
            honest = run_tests(HONEST_CPU, CHECK, timeout=1.0, pool=made)
            verdicts.append((name, honest.fraction, honest.timed_out))
            for t in threads:
                t.join(timeout=60)
        assert all(fraction == 1.0 and not timed_out for _, fraction, timed_out in verdicts), verdicts
        assert len(attacks) == 2 * len(BESIDE) and all(a.fraction == 0.0 for a in attacks)
        assert leftover_processes(made) == []


HONEST_BATCH = [
    HONEST_CPU,
    "def f():\n    return 2\n",  # wrong: fails alone and beside the attacks alike
    NEEDS_900_MIB.replace("900", "600"),
    HONEST_CHILDREN,
    "import time\ndef f():\n    time.sleep(0.3)\n    return 1\n",
]


ATTACK_BATCH = [
    AUTOREAP.replace("HOW", repr("sig_ign")),
    MEMORY_LEFT,
    HOLDS_AT_THE_END,
    SPINNERS,
    PROCESSES_LEFT,
    READ_FILES,
    BESIDE["fork_storm"] + "def f():\n    return 1\n",
]


@pytest.mark.slow
def test_a_batch_scores_the_same_alone_and_mixed_with_every_attack_above() -> None:
    """GRPO's shape: honest samples share a pool with the attacks of ATTACK_BATCH, side by side
    and back to back on the same workers; each honest sample scores exactly what it scores alone."""
    made = strict_pool(6, "the mixed batch")
    with made:
        alone = [run_tests(code, CHECK, timeout=2.0, pool=made).fraction for code in HONEST_BATCH]
        assert alone == [1.0, 0.0, 1.0, 1.0, 1.0], alone
        mixed: dict[int, float] = {}

        def honest(i: int) -> None:
            for _ in range(2):  # back to back, after whatever ran on that worker before
                mixed[i] = min(mixed.get(i, 1.0), run_tests(HONEST_BATCH[i], CHECK, timeout=2.0,
                                                              pool=made).fraction)

        def attack(code: str) -> None:
            run_tests(code, CHECK, timeout=1.5, pool=made)

        threads = [threading.Thread(target=attack, args=(code,)) for code in ATTACK_BATCH]
        threads += [threading.Thread(target=honest, args=(i,)) for i in range(len(HONEST_BATCH))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert [mixed[i] for i in range(len(HONEST_BATCH))] == alone
        assert leftover_processes(made) == []


class _Zygoteless:
    """What the run monitor asks of the worker, for a run that is a plain child here."""

    def __init__(self) -> None:
        self.later: list[int] = []

    def exited(self, pid: int) -> bool:
        return False

    def reap(self, pid: int) -> int:
        return -9

    def reap_later(self, pid: int) -> None:
        self.later.append(pid)

    def processes(self, pids: Sequence[int], since: int, delays: bool = False) -> list[Any]:
        return []


def test_the_worker_answers_once_every_result_pipe_ends_with_finished() -> None:
    """The run monitor on a process that wrote STARTED, a done frame and FINISHED and then
    lingers holding its pipes (as G does for a moment while the kernel tears it down): the
    answer comes before the deadline (3 s; the child sleeps 10 s), so it is not a timeout:
    reaching the deadline would have made it one."""
    from agentenv.sandbox import _candidate, _kernel, _monitor, _worker

    res_r, res_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-c", "import os, sys, time\n"
         "os.write(int(sys.argv[1]), bytes.fromhex(sys.argv[2]))\ntime.sleep(10)\n", str(res_w),
         (_candidate.STARTED + (_candidate.ended("0" * 32) or b"")).hex()],
        pass_fds=(res_w,), stdout=out_w, stderr=err_w, start_new_session=True)
    _kernel.close_fds(res_w, out_w, err_w)
    run = _worker._Prepared(child.pid, [-1, res_r, out_r, err_r])
    supervisor = _Zygoteless()
    clock = _monitor.Clock(time.monotonic(), 5.0, 1.0, time.monotonic() + 3.0)
    try:
        outcome = _monitor.watch([run], {res_r: 1 << 20, out_r: 1 << 16, err_r: 1 << 16}, clock, 0,
                                 supervisor, ends={res_r: _candidate.ended("0" * 32)},
                                 started=_candidate.STARTED)
    finally:
        child.kill()
        child.wait()
        run.close()
    assert outcome["timed_out"] is False, outcome
    assert supervisor.later == [child.pid]  # a normal end: reaped between runs


# A child of the candidate's process splices from an empty socket into the run's stdout pipe:
# while the socket has no data the kernel holds that pipe's lock (splice_file_to_pipe keeps
# pipe_lock across the socket's blocking read), and any read of the pipe, O_NONBLOCK or not,
# sleeps on that lock uninterruptibly (state D) until the splice returns.
SPLICE_HOLDS_STDOUT = """
import os, socket, time
a, b = socket.socketpair()
if os.fork() == 0:
    try:
        os.splice(a.fileno(), 1, 1 << 16)  # never returns: nobody writes to b
    finally:
        os._exit(0)
time.sleep(0.1)
"""


def test_a_splice_holding_the_stdout_pipe_at_a_normal_end_is_torn_down_with_the_run(
        pool: SandboxPool) -> None:
    """Contained: the splicing child holds the stdout pipe's lock while the candidate's process
    returns normally. Its FINISHED comes only as it exits, and its exit (the run's pid namespace
    init) kills the splicer, so the worker's reads never wait on the lock: the check passes at
    once (measured 0.21 s) and the next run on the worker is unaffected."""
    workers = pool.worker_pids
    result = run_tests(SPLICE_HOLDS_STDOUT + "def f():\n    return 1\n", CHECK, timeout=0.5,
                       pool=pool)
    assert (result.fraction, result.timed_out) == (1.0, False), result.failures
    honest_cpu_passes(pool)
    assert pool.worker_pids == workers
    assert leftover_processes(pool) == []


def test_a_forged_finished_marker_with_the_stdout_pipe_locked_does_not_wedge_the_worker(
        pool: SandboxPool) -> None:
    """The same splicing child, then the candidate writes FINISHED on fd 3 and sleeps: a plain 0
    within its cap, on the same worker (a read of a pipe whose lock a splice holds would sleep
    in state D). Shut three ways: the run is killed before anything is read, pipes are read
    only when ``select`` reports them, and the zygote's syscall filter refuses ``splice`` (and
    ``tee``, ``vmsplice``, ``sendfile``, ``io_uring``) to every run, so no process of a run can
    sit on such a lock at all (see test_syscalls_that_can_hold_a_pipes_lock_...)."""
    limits = Limits(starved_factor=1.0)
    workers = pool.worker_pids
    try:
        outcome: RunResult | SandboxError = run_tests(
            SPLICE_HOLDS_STDOUT + "os.write(3, b'+finished\\n')\ntime.sleep(30)\n"
            "def f():\n    return 1\n", CHECK, timeout=0.2, limits=limits, pool=pool)
    except SandboxError as exc:
        outcome = exc
    honest_cpu_passes(pool)
    assert leftover_processes(pool) == []
    assert isinstance(outcome, RunResult), outcome  # the hole: a SandboxError (wedged worker)
    assert outcome.fraction == 0.0, outcome.failures
    assert pool.worker_pids == workers


# Every syscall that can make the kernel hold a pipe's lock while it waits on something else
# (or stall a kernel copy from user memory): refused by the zygote's filter, inherited by the
# candidate's process and everything it forks (the child tries too), with EPERM.
LOCK_HOLDING_SYSCALLS = """
import ctypes, os, platform, socket
NUMBERS = {"x86_64": {"sendfile": 40, "splice": 275, "tee": 276, "vmsplice": 278,
                      "userfaultfd": 323, "io_uring_setup": 425},
           "aarch64": {"sendfile": 71, "splice": 76, "tee": 77, "vmsplice": 75,
                       "userfaultfd": 282, "io_uring_setup": 425}}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
a, b = socket.socketpair()
r, w = os.pipe()
def attempts():
    seen = {}
    for name, number in sorted(NUMBERS.items()):
        args = {"sendfile": (1, a.fileno(), 0, 1), "splice": (a.fileno(), 0, 1, 0, 1 << 16, 0),
                "tee": (r, w, 1, 0), "vmsplice": (w, 0, 0, 0),
                "userfaultfd": (0,), "io_uring_setup": (1, 0)}[name]
        ctypes.set_errno(0)
        out = libc.syscall(number, *[ctypes.c_long(x) for x in args])
        seen[name] = ctypes.get_errno() if out == -1 else "allowed"
    return seen
mine = attempts()
rd, wr = os.pipe()
if os.fork() == 0:
    os.write(wr, repr(attempts()).encode())
    os._exit(0)
os.close(wr)
child = eval(os.read(rd, 4096).decode())
os.wait()
def f():
    return (mine, child)
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="syscall numbers")
def test_syscalls_that_can_hold_a_pipes_lock_are_refused_to_every_process_of_a_run(
        pool: SandboxPool) -> None:
    """``splice`` from a socket with no data into stdout would hold the stdout pipe's lock for as
    long as the socket stays empty, and the worker's next read of that pipe would sleep on the
    lock (state D), past every deadline it keeps; ``tee``, ``vmsplice``, ``sendfile`` and
    ``io_uring`` reach the same kernel paths, and ``userfaultfd`` can stall a kernel copy from
    user memory. Each fails with EPERM in the candidate's process and in a child it forks
    (none gets as far as blocking), and the worker answers the next run as usual."""
    import errno

    script = LOCK_HOLDING_SYSCALLS + "\nprint(f())\n"
    result = run_tests(script, ["assert f()[0] == f()[1]"], timeout=2.0, pool=pool)
    assert (result.fraction, result.timed_out) == (1.0, False), (result.failures, result.stdout)
    mine = ast.literal_eval(result.stdout.strip())[0]
    assert mine == dict.fromkeys(mine, errno.EPERM) and len(mine) == 6, mine
    honest_cpu_passes(pool)
    assert leftover_processes(pool) == []


def test_copying_files_still_works_where_sendfile_is_refused(pool: SandboxPool) -> None:
    """Honest control: ``shutil.copyfile`` tries ``sendfile`` first and falls back to plain reads
    and writes when it is refused, so a candidate that copies a file in its tmpfs still gets
    the bytes (1 MiB, compared whole)."""
    code = ("import os, shutil\n"
            "def f():\n"
            "    data = os.urandom(1 << 20)\n"
            "    with open('/tmp/a.bin', 'wb') as handle:\n"
            "        handle.write(data)\n"
            "    shutil.copyfile('/tmp/a.bin', '/tmp/b.bin')\n"
            "    with open('/tmp/b.bin', 'rb') as handle:\n"
            "        return handle.read() == data\n")
    result = run_tests(code, ["assert f() is True"], timeout=2.0, pool=pool)
    assert (result.fraction, result.timed_out) == (1.0, False), result.failures


DEEP_TREE = """
import ast
import os
def probe():
    depth = 0
    fd = os.open(BASE, os.O_RDONLY)
    try:
        while depth < 6000:
            os.mkdir('d', 0o700, dir_fd=fd)
            nfd = os.open('d', os.O_RDONLY, dir_fd=fd)
            if depth % 500 == 0:
                os.close(os.open('f', os.O_CREAT | os.O_WRONLY, 0o000, dir_fd=nfd))
            os.close(fd)
            fd = nfd
            depth += 1
    except OSError:
        pass
    os.chmod('.', 0)
    return depth
"""


@pytest.mark.parametrize("level", ["strict", "rlimits"])
def test_a_deep_directory_tree_does_not_wedge_the_worker(level: str, pool: SandboxPool) -> None:
    """6,000 nested directories without permissions, in the work dir: cleanup never raises and
    the next honest submission on the same worker scores 1.0."""
    made = pool if level == "strict" else SandboxPool(size=1, isolation="rlimits",
                                                      allow_root_fallback=True)
    try:
        for _round in range(2):
            assert int(probe(made, DEEP_TREE.replace("BASE", "'.'"), timeout=4.0)) > 500
            assert run_tests(HONEST_ADD, ADD, pool=made).fraction == 1.0
    finally:
        if made is not pool:
            made.close()


HOSTILE_ON_ONE_WORKER = {
    "plants_everywhere": fill(PLANT_EVERYWHERE),
    "ipc_and_daemons": PLANT_IPC.replace("MARKER", "rounds").replace("KEY", str(IPC_KEY + 1)),
    "thread_bomb": THREAD_BOMB,
    "process_bomb": PROCESS_BOMB,
    "deep_tree": DEEP_TREE.replace("BASE", "'/tmp'").replace("6000", "1500"),
    "fill_the_disk": DISK_HOARD.replace("CAP", str(300 << 20)),
    "kill_everything_visible": ("import os, signal\nfor pid in [-1] + [int(p) for p in os.listdir('/proc')"
                                " if p.isdigit()]:\n    try: os.kill(pid, signal.SIGKILL)\n"
                                "    except OSError: pass\ndef probe():\n    return 0\n"),
    "close_and_flood_descriptors": ("import os\nfor fd in range(3, 256):\n    try: os.write(fd, b'x' * 65536)\n"
                                    "    except OSError: pass\n    try: os.close(fd)\n    except OSError: pass\n"
                                    "def probe():\n    return 0\n"),
    "memory_hog": TWO_CHILDREN.replace("SIZE", str(700 * 1024**2)),
}


def test_alternating_hostile_and_honest_submissions_on_one_pool(pool: SandboxPool) -> None:
    """Many rounds of hostile then honest on one worker: every honest run scores exactly 1.0,
    none sees SandboxError, and the host has its memory and tasks back at the end."""
    before = host_figures()
    honest_scores = []
    for _cycle in range(2):
        for name, code in HOSTILE_ON_ONE_WORKER.items():
            hostile = run_tests(code, ["assert probe() == '<never>'"], timeout=1.5, pool=pool)
            assert hostile.fraction == 0.0, name
            honest = run_tests(HONEST_IMPORTS if len(honest_scores) % 2 else HONEST_ADD, ADD, pool=pool)
            honest_scores.append((name, honest.fraction, honest.failures))
    deadline = time.monotonic() + 5.0
    while True:  # killed runs' memory is freed asynchronously
        after = host_figures()
        if after.mem_available > before.mem_available - 256 * 1024**2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    print(f"[host] {len(honest_scores)} hostile/honest rounds: before {before}; after {after}")
    assert [score for _, score, _ in honest_scores] == [1.0] * len(honest_scores), honest_scores
    assert leftover_processes(pool) == []
    assert after.tasks <= before.tasks + 100, (before, after)  # the machine may have other users


def test_a_worker_that_fails_its_health_check_is_replaced_before_use() -> None:
    """Kill a worker's zygote from outside: the run already prepared still scores 1.0, the
    worker's next idle report says it is unhealthy, and the submission after that gets a
    fresh worker (never SandboxError)."""
    try:
        made = SandboxPool(size=1, isolation="strict")
    except IsolationUnavailable:  # pragma: no cover - CI installs bubblewrap
        pytest.skip("needs strict isolation")
    with made:
        assert run_tests(HONEST_ADD, ADD, pool=made).fraction == 1.0
        old = made.worker_pids
        table = process_table()
        server = [info.pid for info in table.values() if "_worker.py" in info.cmdline
                  and _under(info.pid, old[0], table) and table[info.ppid].cmdline.startswith(
                      ("bwrap", "/usr/bin/bwrap", _isolation.bwrap_path() or "bwrap"))]
        zygotes = [info.pid for info in table.values() if server and info.ppid == server[0]
                   and "_worker.py" in info.cmdline]
        assert len(zygotes) == 1, (server, zygotes)
        os.kill(zygotes[0], 9)
        scores = [run_tests(HONEST_ADD, ADD, pool=made).fraction for _ in range(3)]
        assert scores == [1.0, 1.0, 1.0]
        assert made.worker_pids != old


def _under(pid: int, root: int, table: dict) -> bool:  # type: ignore[type-arg]
    while pid in table and pid != root:
        pid = table[pid].ppid
    return pid == root


JUDGE_ATTACKS = [
    judge_case("kill_everything_visible_from_inside_a_proxy_call", r"""
import os, signal
def add(a, b):
    for pid in [-1] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return a + b
""", (*ADD_FAST, ADD_LOOP, ADD_MULTI), expected=1.0),
]


@pytest.mark.parametrize("attack", JUDGE_ATTACKS, ids=lambda a: a.name)
def test_judge_attack_scores_only_honest_work_and_leaves_nothing_behind(
        attack: Case, pool_of_two: SandboxPool) -> None:
    """Each judged attack scores its honest fraction and leaves nothing behind (see the helper)."""
    judge_attack_scores_only_honest_work_and_leaves_nothing_behind(attack, pool_of_two)


CHECK_ATTACKS = [
    check_case("close_every_pipe_then_keep_running", r"""
import os, time
def add(a, b):
    for fd in range(0, 256):
        try:
            os.close(fd)
        except OSError:
            pass
    time.sleep(30)
""", (*ADD_FAST, ADD_LOOP)),
]


@pytest.mark.parametrize("attack", CHECK_ATTACKS, ids=lambda a: a.name)
def test_check_attack_scores_only_honest_work_and_leaves_nothing_behind(
        attack: Case, pool_of_two: SandboxPool) -> None:
    """Each attack scores its honest fraction and leaves nothing behind (see the helper)."""
    check_attack_scores_only_honest_work_and_leaves_nothing_behind(attack, pool_of_two)


def test_bytecode_removed_from_the_host_after_it_was_compiled_never_stops_a_later_worker(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The .pyc are found once per process; a cleaner (``find -name __pycache__ -delete``,
    systemd-tmpfiles aging out the private directory, a forked child's atexit) may remove them
    while the process lives on. A worker started afterwards must still come up and grade."""
    monkeypatch.setattr(_isolation, "_pycs", None)
    first = _isolation.compiled_sandbox_files()
    for pyc in first.values():
        os.unlink(pyc)
    with strict_pool(1, "the removed-bytecode case") as pool:
        result = run_tests(HONEST_ADD, ADD_ONE, pool=pool)
        assert result.fraction == 1.0, result.failures
    for name, pyc in _isolation.compiled_sandbox_files().items():  # bound again, current
        assert _isolation._current(pyc, str(_isolation.SANDBOX_DIR / name))


@pytest.mark.skipif(os.geteuid() != 0, reason="the launcher stages binds only for a root caller")
def test_bytecode_the_sandbox_uid_cannot_reach_is_staged_by_the_root_launcher(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytecode under a directory only root can traverse (a venv under /root) is bound like any
    other unreachable path: through the launcher's staging, so the worker still gets it."""
    hidden = tmp_path / "hidden"
    hidden.mkdir(mode=0o700)
    os.chmod(hidden, 0o700)
    moved = {}
    for name, pyc in _isolation.compiled_sandbox_files().items():
        target = hidden / os.path.basename(pyc)
        shutil.copy2(pyc, target)
        moved[name] = str(target)
    monkeypatch.setattr(_isolation, "_pycs", dict(moved))
    assert not any(_isolation.reachable_by(p, _isolation.SANDBOX_UID, _isolation.SANDBOX_UID)
                   for p in moved.values())
    argv = _isolation.strict_command(shutil.which("bwrap") or "/usr/bin/bwrap", "{}", [])
    staged_sources = {pair[0] for pair in __import__("json").loads(argv[5])["binds"]}
    assert set(moved.values()) <= staged_sources
    digests = {importlib.util.cache_from_source(f"{_isolation.INSIDE_DIR}/{name}"):
               hashlib.sha256(Path(p).read_bytes()).hexdigest() for name, p in moved.items()}
    code = ("import hashlib\n"
            "def f():\n"
            f"    return {{p: hashlib.sha256(open(p, 'rb').read()).hexdigest() for p in {sorted(digests)!r}}}\n")
    with strict_pool(1, "staged bytecode") as pool:
        result = run_tests(code, [f"assert f() == {digests!r}"], pool=pool)
        assert result.fraction == 1.0, result.failures


def test_a_sandbox_file_edited_after_its_bytecode_was_compiled_gets_fresh_bytecode(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stale bytecode is never bound: an edit (an editable install, a long-lived trainer) since
    the first compile makes the next worker start compile that file again."""
    copy = tmp_path / "sandbox"
    copy.mkdir()
    for name in _isolation.SANDBOX_FILES:
        shutil.copy(_isolation.SANDBOX_DIR / name, copy / name)
    monkeypatch.setattr(_isolation, "SANDBOX_DIR", copy)
    monkeypatch.setattr(_isolation, "_pycs", None)
    first = _isolation.compiled_sandbox_files()
    edited = copy / "_rpc.py"
    edited.write_text(edited.read_text() + "\nEDITED = True\n")
    second = _isolation.compiled_sandbox_files()
    assert sorted(second) == sorted(first)
    for name, pyc in second.items():
        assert _isolation._current(pyc, str(copy / name))
    code = marshal.loads(Path(second["_rpc.py"]).read_bytes()[16:])
    assert "EDITED" in code.co_names


BIG_OUTPUT = """
import fcntl, os, subprocess, sys
GROW = GROW_TO
if GROW:
    fcntl.fcntl(1, 1031, GROW)  # F_SETPIPE_SZ
    fcntl.fcntl(2, 1031, GROW)
sys.stdout.write("o" * OUT)
sys.stderr.write("e" * ERR)
sys.stdout.flush(); sys.stderr.flush()
subprocess.run([sys.executable, "-c", "import sys; sys.stdout.write('c' * CHILD)"], check=True)
def f():
    return 1
"""


@pytest.mark.parametrize("grow", [0, 1 << 20])
def test_output_up_to_the_cap_written_before_a_normal_end_all_comes_back(
        pool: SandboxPool, grow: int) -> None:
    """Honest control: 1.5 MiB of stdout, 0.9 MiB of stderr and 0.2 MiB of a waited child's
    stdout, with the pipes left at 64 KiB or grown to 1 MiB (the most an unprivileged process
    may ask), all come back whole under a 4 MiB cap: at FINISHED what is left in each pipe is at
    most its size, and 16 reads of 64 KiB drain 1 MiB."""
    out, err, child = 3 << 19, 900_000, 200_000
    code = (BIG_OUTPUT.replace("GROW_TO", str(grow)).replace("OUT", str(out))
            .replace("ERR", str(err)).replace("CHILD", str(child)))
    result = run_tests(code, CHECK, timeout=5.0, pool=pool, limits=Limits(max_output=4 << 20))
    assert (result.fraction, result.timed_out) == (1.0, False), result.failures
    assert result.stdout == "o" * out + "c" * child, len(result.stdout)
    assert result.stderr == "e" * err, len(result.stderr)
    honest_run_passes(pool)


FLOOD_AFTER_END = """
import os, sys
if os.fork() == 0:  # never waited for: floods stdout and stderr until it is killed
    chunk = b"x" * 65536
    while True:
        try:
            os.write(1, chunk)
            os.write(2, chunk)
        except OSError:
            pass
FORGE
def f():
    return 1
"""


@pytest.mark.parametrize("forge", ["", "os.write(3, b'+finished\\n')"])
def test_a_child_flooding_the_pipes_past_the_end_neither_wedges_nor_delays_the_worker(
        pool: SandboxPool, forge: str) -> None:
    """A child the candidate never waits for writes 64 KiB chunks to stdout and stderr without
    end, and the candidate ends normally (or first forges FINISHED on fd 3). Each read of the
    drain finds more (16 rounds at most, then the answer); the run is killed first, so the
    flood stops with the pid namespace. Contained: the honest run passes (the forged marker
    at most cuts the candidate's own run short: 0 or 1), the flooded run is answered before its
    time limit (not a timeout), on the same worker, and nothing is left."""
    workers = pool.worker_pids
    result = run_tests(FLOOD_AFTER_END.replace("FORGE", forge), CHECK, timeout=1.0, pool=pool)
    # the forged marker ends the run only if the worker reads it before the frames behind it
    assert result.fraction in ((0.0, 1.0) if forge else (1.0,)), result.failures
    assert result.timed_out is False, result
    assert len(result.stdout) <= 64 * 1024 + 100
    honest_run_passes(pool)
    assert pool.worker_pids == workers
    assert leftover_processes(pool) == []


SLOW_TEARDOWN = """
import mmap, os, signal
def hog():
    # Sparse: one touched page per 2 MiB, so each page also costs a page table.
    size = 1 << 30
    area = mmap.mmap(-1, size)
    for at in range(0, size, 1 << 21):
        area[at] = 1
kids = []
for _ in range(40):
    pid = os.fork()
    if pid == 0:
        try:
            hog()
        finally:
            os.write(1, b"k")
            while True:
                signal.pause()
    kids.append(pid)
import time
time.sleep(0.5)
def f():
    return 1
"""


def test_a_run_that_is_slow_to_tear_down_only_delays_the_next_run_on_its_worker(
        pool: SandboxPool) -> None:
    """40 processes that each map 1 GiB and touch one page per 2 MiB (512 pages and 512 page
    tables each), left alive at a normal end: the idle report waits until the zygote has
    reaped the run. Contained if the next honest run passes on the same worker, the idle report
    in before IDLE_TIMEOUT (10 s; missing it makes the pool log the worker unhealthy and replace
    it)."""
    workers = pool.worker_pids
    result = run_tests(SLOW_TEARDOWN, CHECK, timeout=2.0, pool=pool)
    with worker_waits() as waits:
        honest_run_passes(pool)
    assert result.fraction == 1.0, (result.failures, result.stderr[-500:])
    assert waits == [], waits
    assert pool.worker_pids == workers
    assert leftover_processes(pool) == []


PACKETS = """
import fcntl, os
fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_DIRECT)  # packet mode
fcntl.fcntl(1, 1031, 1 << 20)  # F_SETPIPE_SZ: 256 slots, one packet each
for i in range(200):
    os.write(1, b"%04d\\n" % i)
def f():
    return 1
"""


def test_output_in_a_packet_mode_pipe_written_before_a_normal_end_all_comes_back(
        pool: SandboxPool) -> None:
    """A pipe whose write end has O_DIRECT is in packet mode: every write is a buffer slot of its
    own and every read returns at most one slot. The early answer on FINISHED reads each pipe
    a bounded number of times (DRAIN_ROUNDS), and 200 lines of 5 bytes (1000 bytes, far under
    the cap) written before a normal end must all come back. Only the candidate's own stdout
    and stderr are at stake (its result channel carries frames the parent checks), and only by
    its own choice, so no verdict changes; the drain must read as many times as a pipe can have
    slots (256 at the default pipe-max-size of 1 MiB)."""
    limits = Limits(max_output=1 << 20)
    for _ in range(3):
        result = run_tests(PACKETS, CHECK, timeout=2.0, pool=pool, limits=limits)
        assert result.fraction == 1.0, result.failures
        assert result.stdout == "".join(f"{i:04d}\n" for i in range(200)), len(result.stdout) // 5


LOAD_BEHIND = """
import mmap, os, threading
def spin():
    while True:
        pass
for _ in range(4):
    threading.Thread(target=spin, daemon=True).start()
for _ in range(20):
    if os.fork() == 0:
        area = mmap.mmap(-1, 16 << 20)
        for at in range(0, 16 << 20, 4096):
            area[at] = 1
        spin()
def f():
    return 1
"""


def test_a_run_ending_early_with_load_behind_it_charges_nothing_to_the_next_run(
        pool: SandboxPool) -> None:
    """Four spinning threads in G and twenty spinning children holding 16 MiB each, alive at
    a normal (early) end: the worker kills G while they run. Alternated three times with an
    honest run on the same worker: the honest run scores exactly 1.0, not timed out, and
    nothing of the hostile run is left to share a core or be counted (no leftovers)."""
    workers = pool.worker_pids
    for _ in range(3):
        result = run_on(pool, LOAD_BEHIND, CHECK, timeout=2.0)
        assert result.fraction == 1.0, result.failures
        honest_plain_passes(pool)
        assert leftover_processes(pool) == []
    assert pool.worker_pids == workers


def test_alternating_every_attack_with_honest_runs_keeps_every_honest_verdict(
        pool: SandboxPool) -> None:
    """Every hostile end G forges (FORGERY) in a row, each followed by the honest control."""
    hostile = [
        FORGERY + "os.write(3, END)\ntime.sleep(0.3)\n" + HALF_CODE,
        FORGERY + "after_finished(lambda: os.write(SAVED, forged_call(0, 1) + END))\n" + HALF_CODE,
        FORGERY + KEEP_G_ALIVE["linger_forever"] + "after_finished(lambda: os.write(SAVED, b'x'))\n"
        + HALF_CODE,
        FORGERY + "after_finished(lambda: os.write(SAVED, END * 1000))\n" + HALF_CODE,
    ]
    for code in hostile:
        result = run_on(pool, code, HALF, timeout=0.5)
        assert result.fraction <= 0.5, result.failures
        honest_plain_passes(pool)


# A daemon that escapes G's process group (setsid) outlives its run at the rlimits level and
# stops every process the zygote forks afterwards: the next runs (prepared while it watches).
DAEMON = """
import os, signal, time
ZYGOTE, ME = os.getppid(), os.getpid()
ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(ready_w, b"!")  # out of G's group before G's run can end
        end = time.time() + 3
        while time.time() < end:
            for name in os.listdir("/proc"):
                if not name.isdigit() or int(name) == ME:
                    continue
                try:
                    with open(f"/proc/{name}/stat", "rb") as handle:
                        data = handle.read()
                    if int(data[data.rindex(b")") + 2:].split()[1]) == ZYGOTE:
                        os.kill(int(name), signal.SIGSTOP)
                except (OSError, ValueError):
                    pass
            time.sleep(0.0005)
        os._exit(0)
    os._exit(0)
os.read(ready_r, 1)
def f():
    return 0
"""


def test_rlimits_daemon_left_by_one_run_never_touches_the_next() -> None:
    """A setsid daemon that escapes the kill of G's process group and outlives its run to
    SIGSTOP each process the zygote forks next gains nothing: the zygote is a subreaper at this
    level, kills what a run left behind before the next run and resumes the runs it prepared
    meanwhile, so the following honest runs score 1.0."""
    made = SandboxPool(size=1, isolation="rlimits", allow_root_fallback=True)
    began = time.monotonic()
    try:
        run_on(made, DAEMON, CHECK)
        for _ in range(2):
            result = run_on(made, HONEST, [CHECK[0], "for _ in (1,):\n    assert f() == 1"])
            assert (result.fraction, result.timed_out) == (1.0, False), result.failures
    finally:
        time.sleep(max(0.0, 3.5 - (time.monotonic() - began)))  # the daemon's own end
        made.close()


FDS = """
import os
def f(*_):
    found = []
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            found.append((int(name), os.readlink(f"/proc/self/fd/{name}").split(":")[0]))
        except OSError:
            pass
    return found
"""


def test_no_descriptor_of_the_warm_up_reaches_the_job(pool: SandboxPool) -> None:
    """The warm-up opens /dev/null as its sink and passes it over a socket pair: the real job
    holds stdin (/dev/null), its three pipes, and (judged) the judge channel, nothing more."""
    plain = [(0, "/dev/null"), (1, "pipe"), (2, "pipe"), (3, "pipe")]
    for _ in range(3):
        result = run_tests(FDS + "def g():\n    return f()\n", [f"assert g() == {plain!r}"],
                           pool=pool)
        assert result.fraction == 1.0, result.failures
        result = run_tests(FDS, [f"for _ in (1,):\n    found = f()\n    assert found[:4] == "
                                 f"{plain!r} and [k for _, k in found[4:]] == ['socket']"],
                           pool=pool)
        assert result.fraction == 1.0, result.failures


def test_back_to_back_honest_runs_arriving_during_the_warm_up_all_score_one(
        pool: SandboxPool) -> None:
    """Thirty runs in a row on one worker (plain, judged, stdio, with output): each job arrives
    while the runs prepared after the last one are still warming up; every score is exactly 1.0
    and every output exactly the run's own."""
    kinds = [
        ("import sys\nprint('plain', end='')\ndef f():\n    return 1\n", CHECK, "plain"),
        ("print('judged', end='')\ndef f(x):\n    return x\n", [judged("f")], "judged"),
        (STDIO_HONEST["plain"], [STDIO_3, STDIO_4], ""),
    ]
    for round_ in range(30):
        code, checks, out = kinds[round_ % len(kinds)]
        result = run_tests(code, checks, timeout=1.0, pool=pool)
        assert (result.fraction, result.timed_out) == (1.0, False), (round_, result.failures)
        assert result.stdout == out, (round_, result.stdout)


HOSTILE_SUBMISSIONS = {
    "judge_text": (JUDGE_TEXT, [judged("f"), judged("g"), judged("ok"), judged("hang")], 0.25),
    "g_exits_mid_judging": (G_EXITS_MID_JUDGING, [judged("ok"), judged("g"), judged("ok")], 1 / 3),
    "locals_rebound": (REBIND_LOCALS.replace("CHANGES", LOCALS["linger_forever"]),
                       ["assert f() == 1", "assert g() == 2"], 0.5),
    "stdio_thread_forever": ("print(int(input()) ** 2)\n"
                             + STDIO_NEVER_ENDS["non_daemon_thread_sleeps_forever"], [STDIO_3], 0.0),
    "stdio_finalizer_fork": ("print(int(input()) ** 2)\n"
                             + STDIO_NEVER_ENDS["finalizer_forks_a_child_holding_stdout"],
                             [STDIO_3], 0.0),
    "stdio_finalizer_forges": (STDIO_FINALIZER_FORGES, [STDIO_3, STDIO_4], 0.0),
}


def test_alternating_hostile_and_honest_submissions_keep_every_honest_verdict(
        pool: SandboxPool) -> None:
    """Every submission of HOSTILE_SUBMISSIONS in a row, twice, each followed by the honest
    controls (plain, judged, stdio): each hostile one scores at most its earned work, each
    honest one exactly 1.0 with no worker waited out."""
    workers = pool.worker_pids
    for _cycle in range(2):
        for name, (code, checks, most) in HOSTILE_SUBMISSIONS.items():
            result = run_on(pool, code, checks, timeout=0.5)
            assert result.fraction <= most + 1e-9, (name, result.failures)
            honest_controls_pass(pool)
    assert pool.worker_pids == workers
    assert leftover_processes(pool) == []


JUDGED_ONCE = "for _ in (1,):\n    assert f() == 1"  # graded by the judge process, a second run


MANY = Limits(processes=400)  # room for a chain far deeper than any fixed bound of sweeps


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
    """What a run leaves behind (a setsid chain deeper than any fixed bound, or a tree that
    forks a replacement for each process killed) is all killed before the next run: the honest
    runs after it, plain and judged, score exactly 1.0 and none waits on a stopped process."""
    made = SandboxPool(size=1, isolation="rlimits", allow_root_fallback=True)
    began = time.monotonic()
    try:
        attacked = run_tests(LEFT_BEHIND[name], CHECK, timeout=2.0, pool=made, limits=MANY)
        assert attacked.fraction == 0.0
        with worker_waits() as waits:
            for _ in range(3):
                result = run_tests(HONEST, [CHECK[0], JUDGED_ONCE], timeout=1.0, pool=made)
                assert (result.fraction, result.timed_out) == (1.0, False), result.failures
        assert waits == [], waits  # no worker waited out as stuck or given up on
    finally:
        time.sleep(max(0.0, 3.5 - (time.monotonic() - began)))  # whatever survived, its own end
        made.close()


@pytest.mark.parametrize("name", ["stopped_zygote", "traced_candidate", "leapfrog"])
def test_strict_level_is_unaffected_by_zygote_blockers_and_leapfrogs(pool: SandboxPool, name: str) -> None:
    """Contained: in its own pid namespace G has no parent it can name (getppid() is 0), a
    tracer G forks dies with G's namespace, and CLONE_PARENT siblings of G are refused (G is
    its namespace's init) or die with it."""
    code = {**ZYGOTE_BLOCKERS, "leapfrog": LEAPFROG}[name]
    attacked = run_tests(code, CHECK, timeout=1.0, pool=pool)
    assert attacked.fraction == 0.0
    honest_passes(pool)


@pytest.mark.parametrize("name", ["stop_the_worker", "still_moving", "reschedule_the_zygote"])
def test_strict_level_is_unaffected_by_a_stopped_worker_or_a_rescheduled_zygote(pool: SandboxPool, name: str) -> None:
    """Contained: in its own pid namespace G's parent is not nameable (getppid() is 0), so it
    cannot stop the worker or reschedule the zygote, and a vfork pair dies with G's namespace."""
    code = {"stop_the_worker": STOP_THE_WORKER, "still_moving": STILL_MOVING,
            "reschedule_the_zygote": RESCHEDULE_THE_ZYGOTE}[name]
    attacked = run_tests(code, CHECK, timeout=1.0, pool=pool)
    assert attacked.fraction == 0.0
    honest_passes(pool)
    probe = run_tests(PROBE, [f"assert f() == {inherited()!r}"], timeout=1.0, pool=pool)
    assert probe.fraction == 1.0, probe.failures


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


@pytest.mark.parametrize("level", ["strict", "rlimits"])
def test_honest_process_work_survives_the_syscall_refusals(pool: SandboxPool, level: str) -> None:
    """Contained: the refusals break nothing of the standard library an honest run uses."""
    pool = pool if level == "strict" else fallback()
    try:
        result = run_tests(STDLIB_PROCESSES, STDLIB_CHECK, timeout=5.0, pool=pool)
        assert (result.fraction, result.timed_out) == (1.0, False), result.failures
        honest_passes(pool, times=1)
    finally:
        if pool is not pool:
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
def test_the_refused_syscalls_have_no_other_door(pool: SandboxPool, level: str) -> None:
    """Contained: the x32 numbers are refused outright; the kernel reads a syscall number as
    32 bits, so high bits name the same (refused) syscall."""
    pool = pool if level == "strict" else fallback()
    try:
        result = run_tests(OTHER_DOORS, ["assert f() is True"], timeout=1.0, pool=pool)
        assert (result.fraction, result.timed_out) == (1.0, False), result.failures
    finally:
        if pool is not pool:
            pool.close()


@pytest.mark.parametrize("name", ["lower_the_zygotes_limits", "continue_every_50us"])
def test_strict_level_is_unaffected_by_lowered_limits_or_timers(pool: SandboxPool, name: str) -> None:
    """Contained: G's parent is not nameable in its pid namespace (getppid() is 0: prlimit(0)
    is G itself) and its strays die with its namespace, timers and all."""
    code = {"lower_the_zygotes_limits": LOWER_THE_ZYGOTES_LIMITS,
            "continue_every_50us": CONTINUE_EVERY_50US}[name]
    attacked = run_tests(code, CHECK, timeout=1.0, pool=pool)
    assert attacked.fraction == 0.0
    honest_passes(pool)
    after = run_tests(NEEDS_MEMORY, ["assert f() == 200"], timeout=2.0, pool=pool)
    assert after.fraction == 1.0, after.failures
