"""Attacks on hermeticity, on run-wide limits as root, on the pool, and on the fallback.

Each class of attack the sandbox v3 defends (issue 9, items 1, 2, 6, 7) gets named attacks
here, with honest controls run right after them on the same worker: a run that plants files,
IPC objects, keys or processes for later runs, that shadows the standard library, that tries to
exhaust threads, processes, memory or disk, or that leaves a tree nobody can clean must change
nothing for the next submission, which scores exactly what honest work earns. The pool under
attack has one worker, so every run after an attack lands where the attack ran. Host figures
(MemAvailable, task count) are measured before, during and after the exhaustion attacks and
printed (``pytest -s`` shows them; the machine may have other users, so what is asserted is
what the run itself saw, and that the host's figures come back afterwards). Runs at the strict level, as root in
CI (``AGENTENV_REQUIRE_STRICT=1``).
"""

from __future__ import annotations

import ast
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from support.attacks import strict_pool

from agentenv.errors import IsolationUnavailable
from agentenv.grading import RunResult, run_tests
from agentenv.sandbox import Limits, SandboxPool, _cgroup, _isolation
from agentenv.sandbox.testing import HostFigures, host_figures, leftover_processes, process_table

MARKER = f"agentenv-hermetic-{os.getpid()}-{int(time.time())}"
HONEST = "def add(a, b):\n    return a + b\n"
ADD = ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"]
# An honest solution that imports standard modules a plant might shadow, some not preloaded.
HONEST_IMPORTS = (
    "import json, random, fractions, decimal, statistics, csv, string, collections\n"
    "def add(a, b):\n"
    "    assert json.loads(json.dumps([a, b])) == [a, b]\n"
    "    assert fractions.Fraction(a, 1) + b == a + b and decimal.Decimal(a) + b == a + b\n"
    "    assert statistics.mean([a, b]) * 2 == a + b and random.Random(0).random() < 1\n"
    "    assert list(csv.reader(['x,y'])) == [['x', 'y']] and string.digits\n"
    "    return collections.Counter({'s': a + b})['s']\n"
)
# Everywhere a run might write: the root, system dirs, the runner's own dir, /tmp, /dev/shm.
PLANT_DIRS = ["/", "/etc", "/dev", "/opt", "/opt/agentenv", "/usr", "/tmp", "/tmp/run", "/dev/shm",
              "/proc", "/root", "/var", "/home"]
SHADOWED = ["json", "random", "fractions", "decimal", "statistics", "csv", "string", "collections",
            "_runner", "_wire", "encodings", "sitecustomize"]
LIBC = "import ctypes, ctypes.util\nlibc = ctypes.CDLL(None, use_errno=True)\n"
IPC_KEY = 0x5EED


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    """One strict worker: every run after an attack lands on the worker the attack ran on."""
    made = strict_pool(1, "the hermetic attacks")
    yield made
    made.close()


def value_of(result: RunResult) -> str:
    """What ``probe()`` returned: the attack scripts report through a deliberately failed check."""
    assert result.failures, "the probe check should fail and carry the value"
    message = result.failures[0].message
    assert message.startswith("probe() returned "), message
    return message[len("probe() returned "):]


def probe(pool: SandboxPool, code: str, timeout: float = 3.0, limits: Limits | None = None) -> str:
    return value_of(run_tests(code, ["assert probe() == '<never>'"], timeout=timeout, pool=pool,
                              limits=limits))


def assert_honest_scores(pool: SandboxPool) -> None:
    """The controls: plain honest work and honest work importing the standard library."""
    assert run_tests(HONEST, ADD, pool=pool).fraction == 1.0
    assert run_tests(HONEST_IMPORTS, ADD, pool=pool).fraction == 1.0


# --------------------------------------------------------------------------- files anywhere

PLANT_EVERYWHERE = """
import ast
import os
PLANTED = []
for d in DIRS:
    for name in ['MARKER'] + [m + '.py' for m in SHADOWED]:
        try:
            with open(os.path.join(d, name), 'w') as f:
                f.write('raise SystemExit("planted")\\n')
            PLANTED.append(os.path.join(d, name))
        except OSError:
            pass
    try:
        os.makedirs(os.path.join(d, 'MARKER-dir', 'json'), exist_ok=True)
        PLANTED.append(os.path.join(d, 'MARKER-dir'))
    except OSError:
        pass
def probe():
    return sorted({os.path.dirname(p) for p in PLANTED})
"""

FIND_PLANTS = """
import ast
import os
def probe():
    found = []
    for d in DIRS:
        for name in ['MARKER', 'MARKER-dir'] + [m + '.py' for m in SHADOWED]:
            path = os.path.join(d, name)
            try:
                planted = name.startswith('MARKER') or b'planted' in open(path, 'rb').read()
            except OSError:
                planted = os.path.lexists(path)
            if planted and os.path.lexists(path):
                found.append(path)
    return found
"""


def fill(code: str) -> str:
    return (code.replace("MARKER", MARKER).replace("DIRS", repr(PLANT_DIRS))
            .replace("SHADOWED", repr(SHADOWED)))


def test_files_planted_anywhere_are_gone_for_the_next_run(pool: SandboxPool) -> None:
    """A run may write only its own /tmp and /dev/shm; nothing it writes is there next run."""
    writable = set(ast.literal_eval(probe(pool, fill(PLANT_EVERYWHERE))))
    assert writable <= {"/tmp", "/tmp/run", "/dev/shm"}, writable
    assert "/tmp/run" in writable and "/dev/shm" in writable  # the work area does work
    assert probe(pool, fill(FIND_PLANTS)) == "[]"
    assert_honest_scores(pool)


def test_stdlib_shadowing_modules_planted_in_the_work_dir_do_not_shadow(pool: SandboxPool) -> None:
    """json.py, random.py ... in the candidate's own cwd and /tmp, then honest imports in the same
    run and the next one: the runner's directory never comes before the standard library."""
    shadow_now = fill(PLANT_EVERYWHERE) + "\n" + HONEST_IMPORTS.replace("def add", "def _add")
    run_tests(shadow_now, ADD, pool=pool)
    assert run_tests(HONEST_IMPORTS, ADD, pool=pool).fraction == 1.0
    order = ast.literal_eval(probe(pool, (
        "import sys\ndef probe():\n"
        "    ours = [i for i, p in enumerate(sys.path) if 'agentenv' in p or p in ('', '.')]\n"
        "    return [sys.path[i] for i in ours], ours == list(range(len(sys.path) - len(ours), len(sys.path)))")))
    # the runner's directory, then the exposed packages' (when numpy is installed), after the rest
    assert order[0][0] == "/opt/agentenv" and set(order[0][1:]) <= {"/opt/agentenv-packages"}
    assert order[1] is True


def test_the_runner_and_system_paths_are_read_only(pool: SandboxPool) -> None:
    """Writes to /, /etc, /dev, the runner's directory and the worker's own /tmp all fail."""
    code = ("import os, errno\n"
            "def probe():\n"
            "    out = []\n"
            "    for path in ['/x', '/etc/x', '/dev/x', '/opt/agentenv/x', '/opt/agentenv/_runner.py',"
            " '/root/x', '/usr/x']:\n"
            "        try:\n"
            "            open(path, 'a').close(); out.append(path)\n"
            "        except OSError as exc:\n"
            "            out.append(errno.errorcode[exc.errno])\n"
            "    open('/dev/null', 'w').write('fine')\n"
            "    return out\n")
    outcome = ast.literal_eval(probe(pool, code))
    assert all(code in ("EROFS", "EACCES", "EPERM", "ENOENT") for code in outcome), outcome


# --------------------------------------------------------------------------- IPC left behind

PLANT_IPC = LIBC + """
import mmap, os, socket, time
made = []
shm = libc.shmget(KEY, 1 << 20, 0o1666)
if shm >= 0:
    made.append('sysv-shm')
if libc.msgget(KEY, 0o1666) >= 0:
    made.append('sysv-msg')
if libc.semget(KEY, 1, 0o1666) >= 0:
    made.append('sysv-sem')
try:
    fd = os.open('/dev/shm/MARKER', os.O_CREAT | os.O_RDWR, 0o666)
    os.write(fd, b'left for later')
    made.append('posix-shm')
except OSError:
    pass
rt = ctypes.CDLL(ctypes.util.find_library('rt') or None, use_errno=True)
rt.mq_open.restype = ctypes.c_int
if rt.mq_open(b'/MARKER', os.O_CREAT | os.O_RDWR, 0o666, None) >= 0:
    made.append('posix-mq')
# A key in the session keyring the run inherited (add_key, keyring -3 = session).
libc.syscall.restype = ctypes.c_long
if libc.syscall(248, b'user', b'MARKER', b'secret', 6, -3) >= 0:
    made.append('session-key')
# A daemon listening on an abstract unix socket, for later runs to talk to.
if os.fork() == 0:
    s = socket.socket(socket.AF_UNIX)
    s.bind('\\0MARKER')
    s.listen()
    time.sleep(30)
    os._exit(0)
time.sleep(0.2)
def probe():
    return made
"""

FIND_IPC = LIBC + """
import os, socket
def probe():
    found = []
    if libc.shmget(KEY, 0, 0) >= 0: found.append('sysv-shm')
    if libc.msgget(KEY, 0) >= 0: found.append('sysv-msg')
    if libc.semget(KEY, 0, 0) >= 0: found.append('sysv-sem')
    if os.path.exists('/dev/shm/MARKER'): found.append('posix-shm')
    rt = ctypes.CDLL(ctypes.util.find_library('rt') or None, use_errno=True)
    if rt.mq_open(b'/MARKER', os.O_RDONLY) >= 0: found.append('posix-mq')
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(249, b'user', b'MARKER', None, 0) >= 0: found.append('session-key')
    if libc.syscall(250, 10, -3, b'user', b'MARKER', 0) >= 0: found.append('session-key')
    try:
        socket.socket(socket.AF_UNIX).connect('\\0MARKER'); found.append('abstract-socket')
    except OSError:
        pass
    for table in ('shm', 'msg', 'sem'):
        try:
            rows = open(f'/proc/sysvipc/{table}').read().splitlines()[1:]
            found += [f'{table}-in-proc'] * len(rows)
        except OSError:
            pass
    return sorted(set(found))
"""


def test_ipc_objects_keys_and_daemons_die_with_the_run(pool: SandboxPool) -> None:
    """SysV shm, message queues and semaphores, POSIX shm and message queues, a session key and
    an abstract-socket daemon, all made by one run: the next run finds none of them."""
    plant = PLANT_IPC.replace("MARKER", MARKER[-20:]).replace("KEY", str(IPC_KEY))
    made = ast.literal_eval(probe(pool, plant))
    print(f"[ipc] the planting run made: {made}")
    assert {"sysv-shm", "sysv-msg", "sysv-sem", "posix-shm"} <= set(made), made  # they were real
    assert probe(pool, FIND_IPC.replace("MARKER", MARKER[-20:]).replace("KEY", str(IPC_KEY))) == "[]"
    assert leftover_processes(pool) == []
    assert_honest_scores(pool)


def test_a_planted_spy_cannot_read_a_later_runs_inputs(pool: SandboxPool) -> None:
    """Run 1 leaves a daemon and planted files meant to copy whatever later runs write; run 2 is
    honest and writes its input to its work dir; run 3 looks everywhere for run 2's input."""
    secret = f"input-{MARKER}"
    spy = ("import os, time, glob\n"
           "for d in ('/tmp', '/dev/shm', '/tmp/run'):\n"
           "    try: open(os.path.join(d, 'spy.py'), 'w').write('x = 1')\n"
           "    except OSError: pass\n"
           "if os.fork() == 0:\n"
           "    os.setsid()\n"
           "    end = time.time() + 20\n"
           "    while time.time() < end:\n"
           "        for path in glob.glob('/tmp/**', recursive=True) + glob.glob('/proc/*/cmdline'):\n"
           "            try: data = open(path, 'rb').read(4096)\n"
           "            except OSError: continue\n"
           "            for d in ('/dev/shm', '/tmp'):\n"
           "                try: open(os.path.join(d, 'stolen'), 'ab').write(data)\n"
           "                except OSError: pass\n"
           "        time.sleep(0.01)\n"
           "    os._exit(0)\n"
           "def probe():\n    return 'planted'\n")
    assert probe(pool, spy) == "'planted'"
    victim = (f"open('input.txt', 'w').write({secret!r})\n"
              f"open('/tmp/input.txt', 'w').write({secret!r})\n"
              "import time\ntime.sleep(0.2)\n" + HONEST)
    assert run_tests(victim, ADD, pool=pool).fraction == 1.0
    look = ("import os\n"
            "def probe():\n"
            "    hits = []\n"
            "    for top in ('/tmp', '/dev/shm', '/opt', '/'):\n"
            "        for root, dirs, files in os.walk(top):\n"
            "            dirs[:] = [d for d in dirs if root != '/' or d in ('tmp', 'opt', 'etc', 'var')]\n"
            "            for name in files:\n"
            "                try: data = open(os.path.join(root, name), 'rb').read(1 << 20)\n"
            "                except OSError: continue\n"
            f"                if {secret.encode()!r} in data: hits.append(os.path.join(root, name))\n"
            "    return hits\n")
    assert probe(pool, look) == "[]"
    assert leftover_processes(pool) == []


# --------------------------------------------------------------------------- limits, also as root

@dataclass
class Sampler:
    """Host figures sampled while a run is in flight: the worst seen, next to before and after."""

    before: HostFigures
    lowest_memory: int = 0
    most_tasks: int = 0
    after: HostFigures | None = None

    def report(self, name: str) -> str:
        assert self.after is not None
        line = (f"[host] {name}: before {self.before}; during: MemAvailable low "
                f"{self.lowest_memory / 1024**2:.0f} MiB, tasks high {self.most_tasks}; "
                f"after {self.after}")
        print(line)
        return line


def run_sampled(name: str, pool: SandboxPool, code: str, timeout: float = 4.0,
                limits: Limits | None = None) -> tuple[RunResult, Sampler]:
    """Run ``code`` while a thread samples the host every 10 ms; wait for the host to settle."""
    sampler = Sampler(before=host_figures())
    sampler.lowest_memory, sampler.most_tasks = sampler.before.mem_available, sampler.before.tasks
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            now = host_figures()
            sampler.lowest_memory = min(sampler.lowest_memory, now.mem_available)
            sampler.most_tasks = max(sampler.most_tasks, now.tasks)
            time.sleep(0.01)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        result = run_tests(code, ["assert probe() == '<never>'"], timeout=timeout, pool=pool,
                           limits=limits)
    finally:
        done.set()
        thread.join()
    deadline = time.monotonic() + 5.0
    while True:  # the kernel frees a killed run's memory asynchronously
        sampler.after = host_figures()
        if (sampler.after.mem_available >= sampler.before.mem_available - 256 * 1024**2
                and sampler.after.tasks <= sampler.before.tasks + 40) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    sampler.report(name)
    return result, sampler


def needs_memory_cgroup() -> None:
    """Memory held by several processes, or by no process (SysV shm), is only capped by a cgroup."""
    if "memory" not in _cgroup.available()[0]:
        pytest.skip(f"no writable memory cgroup here ({_cgroup.available()[1]}): "
                    "RunResult.limits_enforced reports memory as per-process")


def counted(result: RunResult) -> int:
    """The count an exhaustion attack reports, or -1 when the run died before reporting."""
    if result.failures and result.failures[0].message.startswith("probe() returned "):
        return int(value_of(result))
    return -1


THREAD_BOMB = """
import threading, time
started = 0
def hold():
    time.sleep(5)
for _ in range(1000):
    try:
        threading.Thread(target=hold, daemon=True).start()
        started += 1
    except RuntimeError:
        break
def probe():
    time.sleep(0.3)  # hold them while the host is sampled
    return started
"""

PROCESS_BOMB = """
import os, time
children = 0
for _ in range(600):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    children += 1
def probe():
    time.sleep(0.3)  # hold them while the host is sampled
    return children
"""


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


TWO_CHILDREN = """
import os, time
def probe():
    r, w = os.pipe()
    kids = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            blob = bytearray(SIZE)
            for i in range(0, SIZE, 4096):
                blob[i] = 1
            os.write(w, b'x')
            time.sleep(3)
            os._exit(0)
        kids.append(pid)
    os.close(w)
    reported = 0
    while reported < 2 and os.read(r, 1):
        reported += 1
    if reported < 2:
        return 0
    # Holding means: it touched all its pages, reported, and is still alive half a second
    # later (a child the OOM killer chose may take a moment to finish dying).
    time.sleep(0.5)
    return sum(1 for pid in kids if os.waitpid(pid, os.WNOHANG)[0] == 0)
"""


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


SYSV_HOARD = LIBC + """
libc.shmat.restype = ctypes.c_void_p
def probe():
    held = 0
    for key in range(4):  # 4 x 768 MiB, touched, then detached: held only by the IPC namespace
        sid = libc.shmget(0x7000 + key, 768 << 20, 0o1600)
        if sid < 0:
            break
        addr = libc.shmat(sid, None, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            break
        ctypes.memset(addr, 1, 768 << 20)
        libc.shmdt(ctypes.c_void_p(addr))
        held += 768
    return held
"""

DISK_HOARD = """
import errno, os
def probe():
    total = 0
    block = b'x' * (1 << 20)
    for d in ('/tmp', '/dev/shm', '/', '/opt/agentenv', '/etc', '/dev'):
        written = 0
        for k in range(64):  # many files: RLIMIT_FSIZE caps each one, not their sum
            try:
                with open(os.path.join(d, f'hoard{k}'), 'wb') as f:
                    while written < CAP:
                        f.write(block)
                        written += 1 << 20
            except OSError as exc:
                if exc.errno != errno.EFBIG:
                    break
            if written >= CAP:
                break
        total += written
    import time
    time.sleep(0.3)  # hold it while the host is sampled
    return total >> 20
"""


def test_gigabytes_into_sysv_shm_are_capped_and_freed_with_the_run(pool: SandboxPool) -> None:
    """SysV segments live in the run's IPC namespace and count against its memory: 3 GiB
    cannot be held, and what was held is freed when the run ends."""
    needs_memory_cgroup()
    result, host = run_sampled("3 GiB of SysV shm", pool, SYSV_HOARD, timeout=6.0)
    held = counted(result)
    assert held < 3 * 768, result
    assert host.after is not None
    assert host.after.mem_available > host.before.mem_available - 1024**3  # others use it too
    assert probe(pool, FIND_IPC.replace("MARKER", "nothing").replace("KEY", "0x7000")) == "[]"
    assert_honest_scores(pool)


def test_gigabytes_written_anywhere_are_capped_by_the_runs_tmpfs(pool: SandboxPool) -> None:
    """/tmp and /dev/shm share one tmpfs of Limits.disk bytes; everything else is read-only."""
    result, host = run_sampled("2 GiB of files", pool, DISK_HOARD.replace("CAP", str(2 << 30)),
                               timeout=6.0)
    written = counted(result)
    assert 0 < written <= Limits().disk >> 20, written
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
            f"time.sleep(3)', '{MARKER}-uid'])\nimport time\ntime.sleep(0.3)\n" + HONEST)
    seen: dict[int, int] = {}

    def watch() -> None:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and not seen:
            for info in process_table().values():
                if f"{MARKER}-uid" in info.cmdline:
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


# --------------------------------------------------------------------------- the pool

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
            assert run_tests(HONEST, ADD, pool=made).fraction == 1.0
    finally:
        if made is not pool:
            made.close()


HOSTILE_ROUNDS = {
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
        for name, code in HOSTILE_ROUNDS.items():
            hostile = run_tests(code, ["assert probe() == '<never>'"], timeout=1.5, pool=pool)
            assert hostile.fraction == 0.0, name
            honest = run_tests(HONEST_IMPORTS if len(honest_scores) % 2 else HONEST, ADD, pool=pool)
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
        assert run_tests(HONEST, ADD, pool=made).fraction == 1.0
        old = made.worker_pids
        table = process_table()
        server = [info.pid for info in table.values() if "_worker.py" in info.cmdline
                  and _under(info.pid, old[0], table) and table[info.ppid].cmdline.startswith(
                      ("bwrap", "/usr/bin/bwrap", _isolation.bwrap_path() or "bwrap"))]
        zygotes = [info.pid for info in table.values() if server and info.ppid == server[0]
                   and "_worker.py" in info.cmdline]
        assert len(zygotes) == 1, (server, zygotes)
        os.kill(zygotes[0], 9)
        scores = [run_tests(HONEST, ADD, pool=made).fraction for _ in range(3)]
        assert scores == [1.0, 1.0, 1.0]
        assert made.worker_pids != old


def _under(pid: int, root: int, table: dict) -> bool:  # type: ignore[type-arg]
    while pid in table and pid != root:
        pid = table[pid].ppid
    return pid == root


# --------------------------------------------------------------------------- limits required

def test_required_limits_run_where_cgroups_hold_them(pool: SandboxPool) -> None:
    """Limits.require names run-wide limits; RunResult says what enforced each."""
    layout, _ = _cgroup.available()
    if not {"memory", "pids"} <= set(layout):
        pytest.skip("this machine offers no writable memory and pids cgroups")
    result = run_tests(HONEST, ADD, pool=pool, limits=Limits(require=("processes", "memory")))
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
            run_tests(HONEST, ADD, pool=made, limits=Limits(require=("memory",)))
        plain = run_tests(HONEST, ADD, pool=made)
        assert plain.fraction == 1.0 and plain.enforced["processes"] == "rlimit"
    with pytest.raises(ValueError, match="unknown limits"):
        Limits(require=("gpu",))


# --------------------------------------------------------------------------- the fallback

def test_the_fallback_refuses_to_run_as_root_unless_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """As root, isolation='rlimits' raises and says how to opt in; opted in, it runs."""
    if os.geteuid() != 0:
        pytest.skip("the refusal applies to root callers")
    monkeypatch.delenv(_isolation.ALLOW_ROOT_FALLBACK, raising=False)
    with pytest.raises(IsolationUnavailable, match=_isolation.ALLOW_ROOT_FALLBACK):
        SandboxPool(size=1, isolation="rlimits")
    with SandboxPool(size=1, isolation="rlimits", allow_root_fallback=True) as made:
        assert run_tests(HONEST, ADD, pool=made).fraction == 1.0


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


def test_paths_only_root_can_reach_are_staged_for_the_unprivileged_sandbox(tmp_path: object) -> None:
    """As root, every bind source the sandbox uid could not traverse to is re-bound by the
    launcher; reachable ones are bound as they are; nothing runs bubblewrap as root."""
    if os.geteuid() != 0:
        pytest.skip("staging applies to root callers")
    private = os.path.join(str(tmp_path), "private")
    os.makedirs(os.path.join(private, "inner"))
    os.chmod(private, 0o700)
    assert not _isolation.reachable_by(os.path.join(private, "inner"), _isolation.SANDBOX_UID,
                                       _isolation.SANDBOX_UID)
    assert _isolation.reachable_by("/usr/bin", _isolation.SANDBOX_UID, _isolation.SANDBOX_UID)
    argv = _isolation.strict_command("/usr/bin/bwrap", "{}", [])
    assert argv[argv.index("--") + 1] == "/usr/bin/bwrap"  # the launcher execs bubblewrap
    config = ast.literal_eval(argv[argv.index("--") - 1].replace("true", "True").replace(
        "false", "False"))
    assert config["uid"] == config["gid"] == _isolation.SANDBOX_UID
    staged = {stage for _source, stage in config["binds"]}
    bwrap = argv[argv.index("--") + 1:]
    sources = [bwrap[i + 1] for i, arg in enumerate(bwrap[:-1]) if arg == "--ro-bind"]
    for source in sources:  # what bubblewrap (unprivileged) opens: reachable, or staged for it
        assert source in staged or _isolation.reachable_by(source, _isolation.SANDBOX_UID,
                                                           _isolation.SANDBOX_UID), source
    for source, _stage in config["binds"]:
        assert not _isolation.reachable_by(source, _isolation.SANDBOX_UID, _isolation.SANDBOX_UID)


# --------------------------------------------------------------------------- the fallback as root

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
