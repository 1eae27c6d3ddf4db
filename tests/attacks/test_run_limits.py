"""Limits for the whole run, also as root: CPU time, memory, processes, threads and wall time are
bounded for all of a run's processes together (children, grandchildren, daemons, stopped or
traced ones), whatever the candidate ignores or catches, and a run's load never makes honest
work beside it or after it time out."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from support.attacks import (
    ADD,
    ADD_FAST,
    ADD_LOOP,
    AUTOREAP,
    BESIDE,
    BURN,
    CALLBACK_CHECKS,
    CHECK,
    FORGERY,
    HALF,
    HALF_CODE,
    HERMETIC_MARKER,
    HONEST_ADD,
    HONEST_CHILDREN,
    HONEST_CPU,
    KEEP_G_ALIVE,
    LOCALS,
    NEEDS_900_MIB,
    PROCESS_BOMB,
    REBIND_LOCALS,
    STDIO_3,
    STDIO_NEVER_ENDS,
    THREAD_BOMB,
    TWO_CHILDREN,
    Attack,
    Case,
    assert_honest_scores,
    attack,
    attack_scores_only_honest_work_and_leaves_nothing_behind,
    check_attack_scores_only_honest_work_and_leaves_nothing_behind,
    check_case,
    counted,
    honest_controls_pass,
    honest_cpu_passes,
    honest_plain_passes,
    judge_attack_scores_only_honest_work_and_leaves_nothing_behind,
    judge_case,
    needs_memory_cgroup,
    probe,
    run_on,
    run_sampled,
    strict_pool,
)
from support.hangs import prompt
from test_load_independence import LOOP, honest

from agentenv.errors import IsolationUnavailable
from agentenv.grading import RunResult, run_tests
from agentenv.sandbox import Limits, SandboxPool, _cgroup, _isolation
from agentenv.sandbox.testing import leftover_processes, process_table

ATTACKS = [
    # --- never ending ----------------------------------------------------------------------
    attack("threads_that_never_end", """
import threading
def spin():
    while True:
        pass
for _ in range(4):
    threading.Thread(target=spin).start()
def add(a, b): return a - b
"""),
    attack("ignore_sigterm_and_catch_everything", """
import signal
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM, signal.SIGXCPU):
    signal.signal(sig, signal.SIG_IGN)
def add(a, b):
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass
""", timeout=0.5),
    attack("grandchild_holds_the_pipes", """
import subprocess, sys
subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', 'MARKER'])
def add(a, b): return a - b
"""),
    # --- resource exhaustion ----------------------------------------------------------------
    attack("bounded_fork_bomb", """
import os, sys
children = 0
for _ in range(400):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', 'MARKER'])
    children += 1
def add(a, b): return -children
"""),
    attack("memory_bomb", """
hog = []
def add(a, b):
    blob = bytearray(8 * 2 ** 30)
    return a + b
while len(hog) < 10 ** 6:
    hog.append(b'x' * 10 ** 7)
"""),
    attack("cpu_bound_c_call_that_ignores_signals", """
import re
def add(a, b):
    return len(re.findall(r'(a+)+$', 'a' * 64 + 'b'))
""", timeout=0.5),
]


@pytest.mark.parametrize("case", ATTACKS, ids=lambda a: a.name)
def test_attack_scores_only_honest_work_and_leaves_nothing_behind(
        case: Attack, pool_with_secret: SandboxPool, listener: tuple[int, list[bytes]]) -> None:
    """Each attack scores its honest fraction and leaves nothing behind (see the helper)."""
    attack_scores_only_honest_work_and_leaves_nothing_behind(case, pool_with_secret, listener)


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
    honest_cpu_passes(pool)


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


def test_one_process_cannot_hold_more_than_the_memory_limit(pool: SandboxPool) -> None:
    """1150 MiB in one process, under the default 1 GiB limit: killed, not a pass (the worker's
    cgroup allows the limit plus what the idle worker holds, 17 MiB here, and a little slack for
    its buffers, not a fixed allowance that would hand the rest to the run). 960 MiB still
    passes."""
    if "memory" not in _cgroup.available()[0]:
        pytest.skip("no writable memory cgroup here: memory is per-process")
    result = run_tests(NEEDS_900_MIB.replace("900", "1150"), CHECK, timeout=3.0, pool=pool)
    assert result.fraction == 0.0, result
    assert run_tests(NEEDS_900_MIB.replace("900", "960"), CHECK, timeout=3.0, pool=pool).fraction == 1.0


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


def test_a_thousand_threads_are_stopped_at_the_process_limit(pool: SandboxPool) -> None:
    """Threads count against the run's process limit (pids cgroup and RLIMIT_NPROC, which binds
    because the sandbox is never host uid 0); the host's task count comes back after."""
    result, host = run_sampled("1,000 threads", pool, THREAD_BOMB)
    started = counted(result)
    assert 0 < started < 64, started
    assert host.after is not None and host.after.tasks <= host.before.tasks + 100
    assert result.enforced["processes"] in ("cgroup+rlimit", "rlimit", "cgroup")
    assert_honest_scores(pool)


def test_six_hundred_processes_are_stopped_at_the_process_limit(pool: SandboxPool) -> None:
    """Forks stop at the run's limit, and every child dies with the run."""
    result, host = run_sampled("600 processes", pool, PROCESS_BOMB)
    children = counted(result)
    assert 0 < children < 64, children
    assert leftover_processes(pool) == []
    assert host.after is not None and host.after.tasks <= host.before.tasks + 100
    assert_honest_scores(pool)


@pytest.mark.parametrize("size_mib", [700, 1126], ids=["two_children_of_0.7_GiB", "two_children_of_1.1_GB"])
def test_memory_is_capped_for_all_the_runs_processes_together(pool: SandboxPool, size_mib: int) -> None:
    """Each child is within the per-process address-space limit; together they are over the
    run's memory limit (1 GiB), so they never both hold their memory, and the host's
    MemAvailable never drops by much more than the limit and comes back."""
    needs_memory_cgroup()
    code = TWO_CHILDREN.replace("SIZE", str(size_mib * 1024**2))
    result, host = run_sampled(f"two children of {size_mib} MiB", pool, code, timeout=5.0)
    assert counted(result) in (-1, 0, 1), result
    assert result.enforced["memory"] == "cgroup"
    assert host.after is not None
    assert host.after.mem_available > host.before.mem_available - 1024**3  # others use it too
    assert_honest_scores(pool)


CPU_BURNERS = """
import os, time
def probe():
    start = time.monotonic()
    kids = []
    for _ in range(8):
        pid = os.fork()
        if pid == 0:
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                pass
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)
    wall = time.monotonic() - start
    cpu = os.times().children_user + os.times().children_system
    return f'{cpu:.3f} {wall:.3f}'
"""


def test_the_cpu_time_of_all_the_runs_processes_is_bounded_by_its_wall_time(pool: SandboxPool) -> None:
    """Eight processes spinning for a second use at most CPU_SHARE CPUs between them."""
    if "cpu" not in _cgroup.available()[0]:
        pytest.skip("this machine offers no writable cpu cgroup")
    cpu, wall = map(float, probe(pool, CPU_BURNERS, timeout=4.0).strip("'").split())
    print(f"[cpu] 8 spinning processes: {cpu:.2f} CPU-s in {wall:.2f} s wall "
          f"(cap {_cgroup.CPU_SHARE} CPUs, {os.cpu_count()} cores)")
    assert cpu <= _cgroup.CPU_SHARE * wall * 1.15 + 0.1


def test_the_sandbox_never_runs_as_host_root(pool: SandboxPool) -> None:
    """Every process of a worker and of a run has an unprivileged host uid, also when we are root."""
    code = (f"import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'import time; "
            f"time.sleep(3)', '{HERMETIC_MARKER}-uid'])\nimport time\ntime.sleep(0.3)\n" + HONEST_ADD)
    seen: dict[int, int] = {}

    def watch() -> None:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and not seen:
            for info in process_table().values():
                if f"{HERMETIC_MARKER}-uid" in info.cmdline:
                    with open(f"/proc/{info.pid}/status") as handle:
                        uid = next(int(line.split()[1]) for line in handle if line.startswith("Uid:"))
                    seen[info.pid] = uid
            time.sleep(0.02)

    thread = threading.Thread(target=watch)
    thread.start()
    assert run_tests(code, ADD, timeout=2.0, pool=pool).fraction == 1.0
    thread.join()
    assert seen and set(seen.values()) == {_isolation.SANDBOX_UID}, seen
    for pid in pool.worker_pids:
        with open(f"/proc/{pid}/status") as handle:
            assert next(line for line in handle if line.startswith("Uid:")).split()[1:] == \
                [str(_isolation.SANDBOX_UID)] * 4


def test_required_limits_run_where_cgroups_hold_them(pool: SandboxPool) -> None:
    """Limits.require names run-wide limits; RunResult says what enforced each."""
    layout, _ = _cgroup.available()
    if not {"memory", "pids"} <= set(layout):
        pytest.skip("this machine offers no writable memory and pids cgroups")
    result = run_tests(HONEST_ADD, ADD, pool=pool, limits=Limits(require=("processes", "memory")))
    assert result.fraction == 1.0
    assert result.enforced == {"processes": "cgroup+rlimit", "memory": "cgroup",
                               "cpu": "cgroup" if "cpu" in layout else "per-process",
                               "cpu_time": "worker", "wall": "worker", "disk": "tmpfs"}


def test_a_required_limit_nobody_can_enforce_raises_instead_of_running(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without cgroups, requiring a run-wide memory limit is refused with a clear message."""
    monkeypatch.setattr(_cgroup, "create", lambda: None)
    try:
        made = SandboxPool(size=1, isolation="strict")
    except IsolationUnavailable:  # pragma: no cover
        pytest.skip("needs strict isolation")
    with made:
        with pytest.raises(IsolationUnavailable, match="memory=per-process"):
            run_tests(HONEST_ADD, ADD, pool=made, limits=Limits(require=("memory",)))
        plain = run_tests(HONEST_ADD, ADD, pool=made)
        assert plain.fraction == 1.0 and plain.enforced["processes"] == "rlimit"
    with pytest.raises(ValueError, match="unknown limits"):
        Limits(require=("gpu",))


JUDGE_ATTACKS = [
    # --- hanging or dying inside a proxy call (the two decomposable checks still count) ----------
    judge_case("busy_loop_inside_a_proxy_call", r"""
def add(a, b):
    while a == 99:
        pass
    return a + b
""", (*ADD_FAST, ADD_LOOP), expected=2 / 3),
    judge_case("sleep_with_signals_ignored_inside_a_proxy_call", r"""
import signal, time
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM):
    signal.signal(sig, signal.SIG_IGN)
def add(a, b):
    if a == 99:
        time.sleep(1000)
    return a + b
""", (*ADD_FAST, ADD_LOOP), expected=2 / 3),
    judge_case("candidate_calls_a_callback_forever", r"""
def apply(fn, x):
    while True:
        fn(x)
""", CALLBACK_CHECKS[:1]),
]


@pytest.mark.parametrize("attack", JUDGE_ATTACKS, ids=lambda a: a.name)
def test_judge_attack_scores_only_honest_work_and_leaves_nothing_behind(
        attack: Case, pool_of_two: SandboxPool) -> None:
    """Each judged attack scores its honest fraction and leaves nothing behind (see the helper)."""
    judge_attack_scores_only_honest_work_and_leaves_nothing_behind(attack, pool_of_two)


CHECK_ATTACKS = [
    check_case("sigstop_itself_and_a_stopped_child_holding_the_pipes", r"""
import os, signal, time
def add(a, b):
    if os.fork() == 0:
        os.kill(os.getpid(), signal.SIGSTOP)
        time.sleep(60)
        os._exit(0)
    os.kill(os.getpid(), signal.SIGSTOP)
    return None
""", (*ADD_FAST, ADD_LOOP)),
]


@pytest.mark.parametrize("attack", CHECK_ATTACKS, ids=lambda a: a.name)
def test_check_attack_scores_only_honest_work_and_leaves_nothing_behind(
        attack: Case, pool_of_two: SandboxPool) -> None:
    """Each attack scores its honest fraction and leaves nothing behind (see the helper)."""
    check_attack_scores_only_honest_work_and_leaves_nothing_behind(attack, pool_of_two)


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _warm(pool: SandboxPool, size: int) -> None:
    """Start every worker of ``pool`` (as a trainer's pool is after its first batch)."""
    warm = [threading.Thread(target=run_tests, args=("import time\ntime.sleep(0.3)\n", []),
                             kwargs={"pool": pool}) for _ in range(size)]
    for t in warm:
        t.start()
    for t in warm:
        t.join(timeout=120)


def _together(pool: SandboxPool, subs: list[str], timeout: float = 1.0) -> list[RunResult]:
    """Grade ``subs`` released at the same moment, one thread each (a GRPO batch)."""
    gate = threading.Barrier(len(subs))
    out: dict[int, RunResult] = {}

    def one(i: int) -> None:
        gate.wait(timeout=60)
        out[i] = run_tests(subs[i], ["assert f() == 1"], timeout=timeout, pool=pool)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(subs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return [out[i] for i in range(len(subs))]


@pytest.mark.slow
@pytest.mark.skipif(_cores() > 4, reason="the batch scales with the cores; too heavy above four")
def test_an_honest_sample_released_with_a_batch_of_loops_keeps_its_verdict() -> None:
    """8 loops per core and one honest half-budget sample released at once: all equally old,
    so the honest one gets 1/(n+1) of the cores and needs about twice its wall backstop. The
    backstop does not count the time it waited for a core (Limits.starved_factor), so it keeps
    its verdict; the loops are stopped at their CPU limit."""
    loops = 8 * _cores()
    code = honest(0.5)
    with strict_pool(loops + 1, "the simultaneous-batch scheduler attack") as pool:
        _warm(pool, loops + 1)
        alone = run_tests(code, ["assert f() == 1"], timeout=1.0, pool=pool)
        assert alone.fraction == 1.0 and not alone.timed_out, alone.failures
        batch = _together(pool, [LOOP] * loops + [code])
        assert all(r.timed_out and r.fraction == 0.0 for r in batch[:-1])
        assert (batch[-1].fraction, batch[-1].timed_out) == (1.0, False), batch[-1].exec_seconds


@pytest.mark.slow
@pytest.mark.skipif(_cores() > 4, reason="the burst scales with the cores; too heavy above four")
def test_an_honest_sample_already_running_when_a_burst_of_loops_arrives_keeps_its_verdict(
        ) -> None:
    """An honest sample 0.2 s into its 0.5 s of CPU when 8 loops per core arrive: the
    scheduler favours the younger loops (about 3% of the cores for the honest run until they
    are stopped at their CPU limit), but its wait for a core does not count toward its
    backstop, so it keeps its verdict."""
    loops = 8 * _cores()
    code = honest(0.5)
    with strict_pool(loops + 1, "the younger-burst scheduler attack") as pool:
        _warm(pool, loops + 1)
        alone = run_tests(code, ["assert f() == 1"], timeout=1.0, pool=pool)
        assert alone.fraction == 1.0 and not alone.timed_out, alone.failures
        burst: list[RunResult] = []
        first: list[RunResult] = []
        lead = threading.Thread(target=lambda: first.append(
            run_tests(code, ["assert f() == 1"], timeout=1.0, pool=pool)))
        lead.start()
        time.sleep(0.2)  # the honest run has had 0.2 s of a core
        burst.extend(_together(pool, [LOOP] * loops))
        lead.join(timeout=120)
        assert all(r.timed_out and r.fraction == 0.0 for r in burst)
        assert (first[0].fraction, first[0].timed_out) == (1.0, False), first[0].exec_seconds


class _Group:
    """A worker cgroup that records the CPU weight the scheduler gives it."""

    def __init__(self) -> None:
        self.weight: int | None = None

    def set_weight(self, weight: int) -> None:
        self.weight = weight


class _OneTick:
    """A stop event that lets the scheduler run exactly one round."""

    def __init__(self) -> None:
        self.calls = 0

    def wait(self, _seconds: float) -> bool:
        self.calls += 1
        return self.calls > 1


def _weights(started_ago: dict[str, float], timeout: float = 1.0) -> dict[str, int | None]:
    """The weights one scheduling round gives runs started the given seconds ago."""
    now = time.monotonic()
    pool = object.__new__(SandboxPool)
    groups = {name: _Group() for name in started_ago}
    pool._workers = [SimpleNamespace(busy=(now - ago, timeout), cgroup=groups[name])  # type: ignore[assignment]
                     for name, ago in started_ago.items()]
    pool._lock = threading.Lock()
    pool._stop = _OneTick()  # type: ignore[assignment]
    pool._schedule()
    return {name: group.weight for name, group in groups.items()}


def test_a_stream_of_fresh_idle_runs_does_not_take_an_honest_runs_lead_over_older_loops() -> None:
    """Sleepers submitted after the honest run are the youngest; they cost no CPU and must not
    level the honest run (0.5 s old) with loops 0.3 s older than it."""
    runs = {"loop": 0.8, "honest": 0.5, **{f"sleeper{i}": i / 10 for i in range(5)}}
    weights = _weights(runs)
    assert weights["honest"] is not None and weights["loop"] is not None
    assert weights["honest"] >= 8 * weights["loop"]


@pytest.mark.xfail(strict=True, reason=(
    "SandboxPool._schedule anchors every weight on the oldest run in flight and caps it at "
    "10000 after 7 halvings, so one idle run (a sleeper, no CPU) submitted 0.75 s before a burst "
    "of loops gives the loops and the honest run 0.3 s younger the same capped weight. Since "
    "the wall backstop stopped counting time spent waiting for a core (Limits.starved_factor) "
    "this costs the honest run latency, not its verdict; the weights still want an anchor idle "
    "runs cannot move (runs' own CPU use, read from their cgroups' cpu.stat)."))
def test_an_idle_run_older_than_the_rest_does_not_level_an_honest_run_with_older_loops() -> None:
    weights = _weights({"sleeper": 1.55, "loop": 0.8, "honest": 0.5})
    assert weights["honest"] is not None and weights["loop"] is not None
    assert weights["honest"] >= 8 * weights["loop"]


BLOCKING = {
    # Short sleeps adding up to most of the limit, then real work: CPU well inside the limit.
    "short_sleeps": "import time\ndef f():\n    for _ in range(40):\n        time.sleep(0.02)\n"
                    "    total = 0\n    for i in range(ITER):\n        total += i * i\n    return 1\n",
    # File I/O on the run's tmpfs: 16 MiB written, synced, read back.
    "tmpfs_io": "import os\ndef f():\n    block = os.urandom(1 << 20)\n"
                "    with open('/tmp/data', 'wb') as h:\n        for _ in range(16):\n"
                "            h.write(block)\n        h.flush()\n        os.fsync(h.fileno())\n"
                "    with open('/tmp/data', 'rb') as h:\n        back = h.read()\n"
                "    os.unlink('/tmp/data')\n    return int(back == block * 16)\n",
    # Many threads that each sleep and work a little.
    "threads": "import threading, time\ndef f():\n    out = []\n    def one():\n"
               "        time.sleep(0.1)\n        out.append(sum(i * i for i in range(ITER // 64)))\n"
               "    ts = [threading.Thread(target=one) for _ in range(32)]\n"
               "    for t in ts:\n        t.start()\n    for t in ts:\n        t.join()\n"
               "    return int(len(out) == 32)\n",
    # A child interpreter and a pipe.
    "subprocess": "import subprocess, sys\ndef f():\n    got = [subprocess.run([sys.executable, '-I', '-S', "
                  "'-c', 'print(6 * 7)'], capture_output=True, text=True, timeout=5).stdout "
                  "for _ in range(3)]\n    return int(got == ['42\\n'] * 3)\n",
    # Two child processes working at once: 0.6 s of CPU between them, the run's own count.
    "parallel_children": "import subprocess, sys\ndef f():\n    burn = ('import time\\nt = time.process_time()\\n'"
                         "\n            'while time.process_time() - t < 0.3: pass\\nprint(1)')\n"
                         "    kids = [subprocess.Popen([sys.executable, '-I', '-S', '-c', burn], "
                         "stdout=subprocess.PIPE, text=True) for _ in range(2)]\n"
                         "    return int([k.communicate(timeout=5)[0] for k in kids] == ['1\\n'] * 2)\n",
    # One sleep longer than the limit itself (the limit is on CPU time; the backstop is 2.0 s).
    "long_sleep": "import time\ndef f():\n    time.sleep(1.2)\n    return 1\n",
    # Controls: a blocking wrong answer and a loop.
    "wrong_after_sleeping": "import time\ndef f():\n    time.sleep(0.6)\n    return 2\n",
    "loop": LOOP,
}


@pytest.mark.slow
def test_honest_solutions_that_block_keep_their_verdicts_beside_sixteen_loops() -> None:
    """Sleeps, tmpfs I/O, threads and subprocesses near the limit: the verdicts each earns
    alone are the verdicts it earns when all run at once, started 0.3 s after 16 loops."""
    iterations = str(int(honest(0.3).split("range(")[1].split(")")[0]))
    subs = [code.replace("ITER", iterations) for code in BLOCKING.values()]
    loops = 16
    with strict_pool(loops + len(subs), "the blocking-honest load attack") as pool:
        _warm(pool, loops + len(subs))
        alone = [run_tests(code, ["assert f() == 1"], timeout=1.0, pool=pool) for code in subs]
        assert [r.fraction for r in alone] == [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0], [
            (name, r.failures, r.stderr[-300:]) for name, r in zip(BLOCKING, alone, strict=True)]
        background: list[RunResult] = []
        threads = [threading.Thread(target=lambda: background.append(
            run_tests(LOOP, ["assert f() == 1"], timeout=1.0, pool=pool))) for _ in range(loops)]
        for t in threads:
            t.start()
        time.sleep(0.3)  # the loops are running and have used some of their CPU
        loaded = _together(pool, subs)
        for t in threads:
            t.join(timeout=120)
        assert len(background) == loops and all(r.timed_out for r in background)
        assert [(r.fraction, r.timed_out) for r in loaded] == [
            (r.fraction, r.timed_out) for r in alone], [
            (name, r.fraction, r.timed_out, r.failures) for name, r in zip(BLOCKING, loaded, strict=True)]


BURN_AND_JUNK = """
def burn():
    while True:
        pass
threading.Thread(target=burn, daemon=True).start()
W["FINISHED"] = b"+finished\\n\\n"  # G's last write: a newline after the marker
"""


@pytest.mark.parametrize("how", sorted(KEEP_G_ALIVE))
def test_g_kept_alive_after_its_last_bytes_is_stopped_by_the_runs_limits(
        pool: SandboxPool, how: str) -> None:
    """Contained: G kept alive past FINISHED (or kept from writing it) while a thread burns
    CPU is stopped by the run's CPU or wall limit like any loop (no longer than a candidate
    whose f spins), scores exactly its earned work (0.5: f right, g wrong; the frames were all
    sent before), and the next honest run on the same worker scores 1.0, no worker waited out.
    A stuck flush (G never writes FINISHED) is a timeout; G lingering after FINISHED is ended
    once G has closed its pipes; with only the junk after the marker G lingers its 50 ms and
    exits (not a timeout)."""
    workers = pool.worker_pids
    code = FORGERY + KEEP_G_ALIVE[how] + BURN_AND_JUNK + HALF_CODE
    result = run_on(pool, code, HALF, timeout=0.5)
    assert result.fraction == 0.5, (how, result.failures)
    if how == "flush_never_returns":  # G never wrote FINISHED: only the time limit ends it
        assert result.timed_out is True, result
    honest_plain_passes(pool)
    assert pool.worker_pids == workers
    assert leftover_processes(pool) == []


@pytest.mark.parametrize("how", sorted(LOCALS))
def test_g_end_rebound_through_its_frame_is_stopped_by_the_runs_limits(
        pool: SandboxPool, how: str) -> None:
    """The values G's end holds in locals (held "before any candidate code runs") can still be
    rebound through the frame; that only keeps the candidate's own run going: G lingering or
    sleeping instead of exiting ends the run once G has closed its pipes, a close that never
    returns is a timeout; each scores exactly its earned work (f right, g wrong: 0.5), within
    the run's limits."""
    code = REBIND_LOCALS.replace("CHANGES", LOCALS[how])
    result = run_on(pool, code, ["assert f() == 1", "assert g() == 2"], timeout=0.5)
    assert result.fraction == 0.5, (how, result.failures)
    if how == "close_sleeps":  # G never gets past its close: only the time limit ends it
        assert result.timed_out is True, result
    honest_controls_pass(pool)
    assert leftover_processes(pool) == []


@pytest.mark.parametrize("name", sorted(STDIO_NEVER_ENDS))
def test_stdio_program_that_never_ends_is_a_timeout_not_a_hang(pool: SandboxPool, name: str) -> None:
    """Right output, then a thread, a finalizer or a replaced threading module that never
    returns (or a child forked at finalization that keeps fd 1 open): the program never ends,
    as under python3, so its case never reports: 0.0, a timeout (its test's own limit or the
    run's), and the next honest runs are untouched."""
    code = "print(int(input()) ** 2)\n" + STDIO_NEVER_ENDS[name]
    result = run_on(pool, code, [STDIO_3], timeout=0.5)
    assert result.fraction == 0.0, (name, result.failures)
    assert [f.kind for f in result.failures] == ["timeout"], (name, result.failures)
    honest_controls_pass(pool)
    assert leftover_processes(pool) == []
