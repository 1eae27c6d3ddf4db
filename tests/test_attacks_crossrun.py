"""Attacks on the resource accounting between runs: one submission must never change another's
verdict or budget, and no submission may escape its own CPU, memory or process accounting.

At GRPO scale samples of many tasks share one pool, run side by side on its workers and back to
back on each. So each attack here either runs on a pool of one worker, followed by honest work
that must score exactly what it earns alone (what the attack leaves behind lands on that worker),
or runs beside honest work on a second worker, or tries to do more work than its own limit allows
and must be a timeout. Figures compared are verdicts, CPU seconds the run itself reports and
counts of leftover processes, never wall-clock times. Runs at the strict level (as root in CI).
"""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from support.attacks import strict_pool
from support.hangs import prompt

from agentenv.errors import SandboxError
from agentenv.grading import RunResult, run_tests
from agentenv.sandbox import Limits, SandboxPool, _cgroup
from agentenv.sandbox.testing import leftover_processes

CHECK = ["assert f() == 1"]
BURN = """
import os, time
def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
"""
HONEST_CPU = BURN + "def f():\n    burn(0.3)\n    return 1\n"  # 0.3 s of CPU: passes a 1 s limit


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    """One strict worker: every run after an attack lands on the worker the attack ran on."""
    made = strict_pool(1, "the cross-run attacks")
    yield made
    made.close()


def honest_passes(pool: SandboxPool) -> RunResult:
    result = run_tests(HONEST_CPU, CHECK, timeout=1.0, pool=pool)
    assert result.fraction == 1.0 and not result.timed_out, result
    return result


# --------------------------------------------------------------------------- CPU nobody is charged

# 1.3 s of CPU, in 20 children of 0.065 s each, four at a time, under a 1 s limit. The first
# ways below make the kernel reap the children by itself, which adds their CPU time to nobody's:
# an accounting that reads /proc then sees none of it, and the slow solution passes.
AUTOREAP = BURN + """
import ctypes, signal
SA_NOCLDWAIT = 2
class Action(ctypes.Structure):
    _fields_ = [('handler', ctypes.c_void_p), ('flags', ctypes.c_ulong),
                ('restorer', ctypes.c_void_p), ('mask', ctypes.c_ulong * 16)]
def unwatched():
    try:
        if HOW == 'sig_ign':
            signal.signal(signal.SIGCHLD, signal.SIG_IGN)
        elif HOW == 'sa_nocldwait':
            libc = ctypes.CDLL(None, use_errno=True)
            act = Action(None, SA_NOCLDWAIT)
            if libc.syscall(13, int(signal.SIGCHLD), ctypes.byref(act), None, 8) != 0:
                raise OSError(ctypes.get_errno(), 'rt_sigaction')
        elif HOW == 'i386_sigaction':  # the 32-bit ABI's own sigaction, through int 0x80
            import mmap, struct
            libc = ctypes.CDLL(None, use_errno=True)
            libc.mmap.restype = ctypes.c_void_p
            libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_int, ctypes.c_long]
            page = libc.mmap(None, 4096, 7, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40, -1, 0)
            act = page + 2048  # below 4 GiB (MAP_32BIT): struct old_sigaction32 {SIG_IGN, 0, 0, 0}
            ctypes.memmove(act, struct.pack('<IIII', 1, 0, 0, 0), 16)
            code = (b'\\x53\\xb8' + struct.pack('<I', 67) + b'\\xbb' + struct.pack('<I', 17) + b'\\xb9'
                    + struct.pack('<I', act) + b'\\x31\\xd2\\xcd\\x80\\x5b\\xc3')
            ctypes.memmove(page, code, len(code))
            ctypes.CFUNCTYPE(ctypes.c_int)(page)()
    except OSError:
        pass  # refused: carry on all the same, the children are then reaped (or left) as usual
def burners(n):
    kids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            burn(0.065)
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        while True:
            try:
                os.kill(pid, 0)
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
            except (ProcessLookupError, ChildProcessError):
                break
            time.sleep(0.002)
def f():
    if HOW == 'short_lived_threads':
        import threading
        for _ in range(20):
            t = threading.Thread(target=burn, args=(0.065,))
            t.start()
            t.join()
        return 1
    if HOW == 'orphans_nobody_waits_for':  # their parent leaves at once: they are the init's
        r, w = os.pipe()
        for _ in range(5):
            if os.fork() == 0:
                for _ in range(4):
                    if os.fork() == 0:
                        burn(0.065)
                        os.write(w, b'1')
                        os._exit(0)
                os._exit(0)
        for _ in range(20):
            os.read(r, 1)
        return 1
    if HOW == 'in_a_middle_process':
        r, w = os.pipe()
        if os.fork() == 0:
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_IGN)
            except OSError:
                pass
            for _ in range(5):
                burners(4)
            os.write(w, b'1')
            os._exit(0)
        os.read(r, 1)
        return 1
    unwatched()
    for _ in range(5):
        burners(4)
    return 1
"""


@pytest.mark.parametrize("how", ["sig_ign", "i386_sigaction", *(
    pytest.param(how, marks=pytest.mark.slow)
    for how in ("sa_nocldwait", "in_a_middle_process", "short_lived_threads", "orphans_nobody_waits_for"))])
def test_cpu_burnt_in_processes_and_threads_that_are_gone_still_counts(
        pool: SandboxPool, how: str) -> None:
    """Children reaped by the kernel (their parent ignores SIGCHLD, or asks for SA_NOCLDWAIT,
    through the native ABI or the 32-bit one, in the run's first process or any other) would take
    their CPU time with them; threads that have exited, and orphans left as zombies, must not
    either: a solution that needs 1.3 s of CPU done that way under a 1 s limit is a timeout."""
    if how == "i386_sigaction" and platform.machine() not in ("x86_64", "amd64"):
        pytest.skip("int 0x80 is x86_64's way into the 32-bit ABI")
    result = run_tests(AUTOREAP.replace("HOW", repr(how)), CHECK, timeout=1.0, pool=pool)
    assert result.timed_out and result.fraction == 0.0, result
    assert leftover_processes(pool) == []
    honest_passes(pool)


HONEST_CHILDREN = BURN + """
import multiprocessing, subprocess, sys
def work(queue):
    burn(0.05)
    queue.put(1)
def f():
    out = subprocess.run([sys.executable, '-c', 'print(1)'], capture_output=True, text=True)
    queue = multiprocessing.get_context('fork').Queue()
    procs = [multiprocessing.get_context('fork').Process(target=work, args=(queue,)) for _ in range(4)]
    for p in procs:
        p.start()
    got = sum(queue.get(timeout=5) for _ in procs)
    for p in procs:
        p.join()
    import signal
    assert signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL
    return int(out.stdout) if got == 4 else 0
"""


def test_children_waited_for_as_usual_still_work(pool: SandboxPool) -> None:
    """The control: subprocess and multiprocessing children, reaped the ordinary way."""
    result = run_tests(HONEST_CHILDREN, CHECK, timeout=2.0, pool=pool)
    assert result.fraction == 1.0, result


# Two children burn 0.6 s of CPU each at once: 1.2 s under a 1 s limit, all of it before the
# first check a worker pacing its checks for a 1.5-CPU quota would make (at 0.67 s).
PARALLEL = BURN + """
def f():
    kids = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            burn(0.6)
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)
    times = os.times()
    return 1 if times.children_user + times.children_system >= 1.15 else 0
"""


def test_without_a_cpu_quota_the_checks_keep_up_with_every_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker with no cgroup (so no CPU quota) may use every core at once: its CPU checks
    must come as often as that could spend the budget, so 1.2 s of CPU on two cores is a timeout
    under a 1 s limit, however soon it ends."""
    monkeypatch.setattr(_cgroup, "create", lambda: None)
    made = strict_pool(1, "a quota-free worker")
    with made:
        assert dict(run_tests("def f():\n    return 1\n", CHECK, pool=made).limits_enforced)["cpu"] \
            == "per-process"
        for _round in range(2):
            result = run_tests(PARALLEL, CHECK, timeout=1.0, pool=made)
            assert result.timed_out and result.fraction == 0.0, result
        assert leftover_processes(made) == []


# --------------------------------------------------------------------------- left for the next run

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
NEEDS_900_MIB = """
def f():
    blob = bytearray(900 << 20)
    for i in range(0, len(blob), 4096):
        blob[i] = 1
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


def test_one_process_cannot_hold_more_than_the_memory_limit(pool: SandboxPool) -> None:
    """1150 MiB in one process, under the default 1 GiB limit: killed, not a pass (the worker's
    cgroup allows the limit plus what the idle worker holds, 17 MiB here, and a little slack for
    its buffers; a fixed 192 MiB allowance handed the rest to the run). 960 MiB still passes."""
    if "memory" not in _cgroup.available()[0]:
        pytest.skip("no writable memory cgroup here: memory is per-process")
    result = run_tests(NEEDS_900_MIB.replace("900", "1150"), CHECK, timeout=3.0, pool=pool)
    assert result.fraction == 0.0, result
    assert run_tests(NEEDS_900_MIB.replace("900", "960"), CHECK, timeout=3.0, pool=pool).fraction == 1.0


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
        honest_passes(pool)
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


# --------------------------------------------------------------------------- beside another run

BESIDE = {
    "fork_storm": "import os\nwhile True:\n    try:\n        pid = os.fork()\n    except OSError:\n"
                  "        continue\n    if pid == 0:\n        os._exit(0)\n    os.waitpid(pid, 0)\n",
    "memory_churn": "while True:\n    blob = bytearray(700 << 20)\n    for i in range(0, len(blob), 4096):\n"
                    "        blob[i] = 1\n    del blob\n",
    "page_cache_churn": "import os\nwhile True:\n    for root, _, files in os.walk('/usr/lib'):\n"
                        "        for name in files:\n            try:\n"
                        "                with open(os.path.join(root, name), 'rb') as h:\n"
                        "                    while h.read(1 << 20):\n                        pass\n"
                        "            except OSError:\n                pass\n",
}


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


@pytest.mark.slow
def test_memory_churn_with_a_longer_limit_on_other_workers_does_not_time_out_honest_work() -> None:
    """Two memory-churn attacks of a 3 s task, then an honest sample of a 1 s task needing
    0.3 s of CPU, two rounds, while the host runs one busy process per core outside the
    sandbox (a trainer's own CPU use): the honest sample passes every time. Alone under the
    same host load it needs about 0.3 s of wall time; beside the attacks the scheduler's
    per-timeout ageing gives it little CPU, and what keeps its verdict is that the time it
    waits for a core does not count toward its backstop (Limits.starved_factor)."""
    made = strict_pool(3, "the side-by-side attacks")
    host_load = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                 for _ in range(os.cpu_count() or 1)]
    try:
        _rounds_beside_churn(made)
    finally:
        for process in host_load:
            process.kill()
            process.wait()


def _rounds_beside_churn(made: SandboxPool) -> None:
    with made:
        verdicts: list[tuple[float, bool]] = []
        for _round in range(2):
            threads = [threading.Thread(target=run_tests,
                                        args=(BESIDE["memory_churn"] + "def f():\n    return 1\n", CHECK),
                                        kwargs={"timeout": 3.0, "pool": made}) for _ in range(2)]
            for t in threads:
                t.start()
            honest = run_tests(HONEST_CPU, CHECK, timeout=1.0, pool=made)
            verdicts.append((honest.fraction, honest.timed_out))
            for t in threads:
                t.join(timeout=60)
        assert leftover_processes(made) == []
        assert verdicts == [(1.0, False)] * 2, verdicts


# Spins for 1.6 s of wall-clock time and then passes: under a 3 s limit it is honest, if greedy.
HOG = "import time\nend = time.monotonic() + 1.6\nwhile time.monotonic() < end:\n    pass\n"
QUICK = BURN + "def f():\n    burn(0.1)\n    return 1\n"  # 0.1 s of CPU: passes a 0.3 s limit


@pytest.mark.slow
def test_samples_of_a_long_limit_task_do_not_starve_a_short_limit_tasks_honest_sample() -> None:
    """Enough greedy samples of a 3 s task to fill every core, then an honest sample of a 0.3 s
    task needing a third of its limit: it passes, as it does beside as many samples of its own
    task's limit (which are killed at their limit, see test_load_independence)."""
    cores = os.cpu_count() or 1
    hogs = max(6, int(cores / _cgroup.CPU_SHARE) + 4)
    made = strict_pool(hogs + 1, "the scheduler attack")
    with made:
        warm = [threading.Thread(target=run_tests, args=("import time\ntime.sleep(0.3)\n", []),
                                 kwargs={"pool": made}) for _ in range(hogs + 1)]
        for t in warm:
            t.start()
        for t in warm:
            t.join(timeout=60)
        verdicts = []
        seen: list[tuple[float, tuple[Any, ...]]] = []  # the honest runs' seconds and failures
        for _round in range(2):
            greedy: list[RunResult] = []

            def hog(into: list[RunResult]) -> None:
                into.append(run_tests(HOG + "def f():\n    return 1\n", CHECK, timeout=3.0, pool=made))

            threads = [threading.Thread(target=hog, args=(greedy,)) for _ in range(hogs)]
            for t in threads:
                t.start()
            time.sleep(0.2)  # the greedy samples are running
            honest = run_tests(QUICK, CHECK, timeout=0.3, pool=made)
            verdicts.append((honest.fraction, honest.timed_out))
            seen.append((honest.exec_seconds, honest.failures[:1]))
            for t in threads:
                t.join(timeout=60)
            assert [g.fraction for g in greedy] == [1.0] * hogs, [
                (g.fraction, g.timed_out, g.exec_seconds, g.failures[:1]) for g in greedy]
        assert verdicts == [(1.0, False)] * 2, (verdicts, seen)


# --------------------------------------------------------------------------- what the worker counts

BURN_THEN_WAIT = ("import time\nt = time.process_time()\nwhile time.process_time() - t < SECONDS: pass\n"
                  "print('burnt', flush=True)\ntime.sleep(60)\n")


def test_the_worker_counts_the_runs_processes_by_parentage_not_by_pid(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``_monitor.cpu_used`` charges a run, with this test process standing in for the zygote:
    a zygote child forked during the run (a prepared run) is not the run's, and a process of the
    run is, even when its pid is one the worker has seen before (pids are reused: a run can
    cycle through all 32768 of a small pid space in seconds)."""
    import subprocess
    import sys

    from agentenv.sandbox import _monitor

    tick = os.sysconf("SC_CLK_TCK")
    since = int(time.clock_gettime(time.CLOCK_BOOTTIME) * tick)
    time.sleep(2 / tick)
    # A zygote child started during the run, as a prepared run forked while it goes on is.
    prepared = subprocess.Popen([sys.executable, "-c", BURN_THEN_WAIT.replace("SECONDS", "0.6")],
                                stdout=subprocess.PIPE)
    # A process of the run (not a zygote child) whose pid the worker also holds as an earlier
    # run's, handed to the zygote to reap.
    middle = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys\n"
                               f"p = subprocess.Popen([sys.executable, '-c', "
                               f"{BURN_THEN_WAIT.replace('SECONDS', '0.3')!r}])\n"
                               "print(p.pid, flush=True)\np.wait()\n"], stdout=subprocess.PIPE)
    try:
        assert prepared.stdout is not None and middle.stdout is not None
        assert prepared.stdout.readline().strip() == b"burnt"
        run_pid = int(middle.stdout.readline())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the run's process has burnt its 0.3 s
            with open(f"/proc/{run_pid}/stat", "rb") as handle:
                data = handle.read()
            if sum(int(x) for x in data[data.rindex(b")") + 2:].split()[11:13]) >= 0.29 * tick:
                break
            time.sleep(0.02)
        listed = [str(p) for p in (prepared.pid, middle.pid, run_pid)]
        real_listdir = os.listdir
        monkeypatch.setattr(_monitor.os, "listdir",
                            lambda path=".": listed if path == "/proc" else real_listdir(path))
        used = _monitor.cpu_used(_monitor.processes([], since, namespaces=True,
                                                       zygote_pid=os.getpid()))
        monkeypatch.undo()
        assert 0.28 <= used < 0.5, used  # the run's 0.3 s; not the prepared run's 0.6 s
    finally:
        for proc in (prepared, middle):
            proc.kill()
            proc.wait()
        with contextlib.suppress(ProcessLookupError, NameError):
            os.kill(run_pid, 9)


# --------------------------------------------------------------------------- a mixed batch

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
    """GRPO's shape: honest samples share a pool with the attacks of this file, side by side
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


# --------------------------------------------------------------------------- the FINISHED marker

# The worker may answer once every result pipe of the run ends with FINISHED (b"+finished\n"),
# which the candidate can write to fd 3 itself, at any moment, or end a judge's frame with (an
# exception message is the last field of a verdict frame).
FORGED_FINISHED = {
    "then_sleeps": "import os, time\nos.write(3, b'+finished\\n')\ntime.sleep(30)\n",
    "then_loops": "import os\nos.write(3, b'+finished\\n')\nwhile True:\n    pass\n",
    "child_floods_stdout": "import os\nif os.fork() == 0:\n    while True:\n"
                           "        os.write(1, b'LEAK' * 4096)\nos.write(3, b'+finished\\n')\n"
                           "while True:\n    pass\n",
}


def test_a_forged_finished_marker_gains_nothing_and_leaves_nothing_for_the_next_run(
        pool: SandboxPool) -> None:
    """A candidate that writes the worker's FINISHED marker on the result channel before its
    checks, then sleeps, loops, or keeps a child flooding stdout: the worker answers on the
    marker and kills the run, so each scores 0 (its check never reported: no result, or a
    timeout when the marker is cut across reads), and honest work next on the same worker
    scores what it earns alone with none of the attack's output."""
    for name, code in FORGED_FINISHED.items():
        result = run_tests(code + "def f():\n    return 1\n", CHECK, timeout=0.5, pool=pool)
        assert result.fraction == 0.0, (name, result.failures)
        assert result.timed_out or result.failures[0].kind == "no_result", (name, result.failures)
        after = run_tests("def f():\n    print('mine')\n    return 1\n", CHECK, pool=pool)
        assert (after.fraction, after.timed_out, after.stdout) == (1.0, False, "mine\n"), name
    assert leftover_processes(pool) == []


FINISHED_IN_A_VERDICT = """
import os
os.write(3, b'+finished\\n')
def g():
    raise ValueError('boom\\n+finished')
def f():
    return 1
"""
JUDGED = ["for _ in range(1):\n    assert g() == 1", "for _ in range(1):\n    assert f() == 1"]


def test_a_judge_frame_ending_in_the_finished_marker_does_not_cut_the_judges_verdicts(
        pool: SandboxPool) -> None:
    """The candidate's process writes FINISHED first and makes the judge's first verdict frame
    end with it too (its exception message): the judge's later verdicts still count (exactly
    one of two checks passes), and the next run on the worker is unaffected."""
    result = run_tests(FINISHED_IN_A_VERDICT, JUDGED, pool=pool)
    assert (result.fraction, result.timed_out) == (0.5, False), result.failures
    assert [f.index for f in result.failures] == [0]
    honest_passes(pool)
    assert leftover_processes(pool) == []


SCHED_IDLE_LOOP = ("import os\nos.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
                   "def f():\n    while True:\n        pass\n")


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="no SCHED_IDLE here")
def test_a_loop_that_starves_itself_under_host_load_is_still_stopped_within_its_cap() -> None:
    """A loop that puts itself under SCHED_IDLE stays runnable (state R) while it gets little
    CPU once the host is busy (one busy process per core outside the sandbox): the backstop
    moves by the time it waits for a core and is re-checked while it is runnable, so it lasts
    longer than a plain loop (measured ~1.9 s against ~0.5 s under a 0.5 s limit), but never
    past Limits.wall_cap_seconds, and it is a timeout. Under deliberate host load, time is not
    asserted beyond the suite's shared stall guard (support.hangs.prompt): what proves it was
    stopped by its limit is the timeout the sandbox reports."""
    made = strict_pool(1, "the self-starving loop")
    host_load = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                 for _ in range(os.cpu_count() or 1)]
    try:
        with made:
            for _round in range(2):
                with prompt("a self-starving loop under a 0.5 s limit"):
                    result = run_tests(SCHED_IDLE_LOOP, CHECK, timeout=0.5, pool=made)
                assert (result.fraction, result.timed_out) == (0.0, True), result.failures
            assert leftover_processes(made) == []
    finally:
        for process in host_load:
            process.kill()
            process.wait()


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
    honest_passes(pool)
    assert pool.worker_pids == workers
    assert leftover_processes(pool) == []


def test_a_forged_finished_marker_with_the_stdout_pipe_locked_does_not_wedge_the_worker(
        pool: SandboxPool) -> None:
    """The same splicing child, then the candidate writes FINISHED on fd 3 and sleeps: a plain 0
    within its cap, on the same worker. Once an open hole (the early answer read every open
    pipe, and a read of a pipe whose lock a splice holds sleeps in state D: SandboxError after
    ~22 s); now shut three ways: the run is killed before anything is read, pipes are read only
    when ``select`` reports them, and the zygote's syscall filter refuses ``splice`` (and
    ``tee``, ``vmsplice``, ``sendfile``, ``io_uring``) to every run, so no process of a run can
    sit on such a lock at all (see the test below)."""
    limits = Limits(starved_factor=1.0)
    workers = pool.worker_pids
    try:
        outcome: RunResult | SandboxError = run_tests(
            SPLICE_HOLDS_STDOUT + "os.write(3, b'+finished\\n')\ntime.sleep(30)\n"
            "def f():\n    return 1\n", CHECK, timeout=0.2, limits=limits, pool=pool)
    except SandboxError as exc:
        outcome = exc
    honest_passes(pool)
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
    import ast
    import errno

    script = LOCK_HOLDING_SYSCALLS + "\nprint(f())\n"
    result = run_tests(script, ["assert f()[0] == f()[1]"], timeout=2.0, pool=pool)
    assert (result.fraction, result.timed_out) == (1.0, False), (result.failures, result.stdout)
    mine = ast.literal_eval(result.stdout.strip())[0]
    assert mine == dict.fromkeys(mine, errno.EPERM) and len(mine) == 6, mine
    honest_passes(pool)
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
