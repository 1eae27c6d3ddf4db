"""What the sandbox suites share: an attack case, candidate code that finds its sockets, stops
the zygote's children or forks with clone flags of its own, and a strict pool that skips
outside CI and fails in it."""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agentenv import settings
from agentenv.errors import IsolationUnavailable
from agentenv.grading import RunResult, plan_checks, run_tests
from agentenv.sandbox import Limits, SandboxPool, _cgroup
from agentenv.sandbox._isolation import SANDBOX_DIR, SANDBOX_FILES
from agentenv.sandbox.testing import (
    HostFigures,
    host_figures,
    leftover_processes,
    processes_matching,
)
from agentenv.tasks.schema import StdioCase
from support.hangs import HONEST, worker_waits

# Candidate-side helper: the socket descriptors this process holds (the judge channel among them).
FIND_SOCKETS = """
import os, stat
def sockets():
    found = []
    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                found.append(fd)
        except OSError:
            pass
    return found
"""

# Candidate-side helper, for what a run leaves behind at the fallback level: stop every child of
# the zygote (the runs it prepares for the next submissions) but those in ``mine``, until ``end``.
STOP_THE_ZYGOTES_CHILDREN = """
import os, signal, time
def stop_the_zygotes_children(zygote, end, mine=()):
    me = os.getpid()
    while time.time() < end:
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me or int(name) in mine:
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    data = handle.read()
                if int(data[data.rindex(b")") + 2:].split()[1]) == zygote:
                    os.kill(int(name), signal.SIGSTOP)
            except (OSError, ValueError):
                pass
        time.sleep(0.0005)
"""

# Candidate-side helper: clone(flags | SIGCHLD) through the interpreter's fork hooks.
# clone_parent(): CLONE_PARENT, the child is the caller's sibling (a child of the zygote's when
# the caller is one, and in no stray's subtree). vfork_copy(): CLONE_VFORK without CLONE_VM, a
# plain fork (memory copied) whose parent waits in state D (TASK_KILLABLE) until the child exits
# or execs; SIGSTOP never ends that wait.
# A stray waits until G is dead (the run has been answered), then stops the worker W (the
# zygote's parent, same uid) and the zygote. The ticks that would continue the zygote come from
# W, and nothing continues W: the parent waits IDLE_TIMEOUT for the idle report.
STOP_THE_WORKER = """
import os, signal, time
ZYGOTE = os.getppid()
with open(f"/proc/{ZYGOTE}/stat", "rb") as handle:
    WORKER = int(handle.read().rsplit(b")", 1)[1].split()[1])
G = os.getpid()
def alive(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False
if os.fork() == 0:
    os.setsid()
    while alive(G):
        time.sleep(0.0005)
    os.kill(WORKER, signal.SIGSTOP)
    os.kill(ZYGOTE, signal.SIGSTOP)
    os._exit(0)
def f():
    return 0
"""

CLONE = """
import ctypes
_api = ctypes.pythonapi
_syscall = ctypes.PyDLL(None, use_errno=True).syscall
_syscall.restype = ctypes.c_long
def clone_with(flags):
    _api.PyOS_BeforeFork()
    pid = _syscall(ctypes.c_long(56), ctypes.c_ulong(flags | 17), ctypes.c_void_p(0),
                   ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_void_p(0))
    if pid == 0:
        _api.PyOS_AfterFork_Child()
        return 0
    _api.PyOS_AfterFork_Parent()
    return pid
def clone_parent():
    return clone_with(0x8000)
def vfork_copy():
    return clone_with(0x4000)
"""


@dataclass(frozen=True)
class Case:
    """One attack (or control): code, checks, setup, and exactly what honest work scores."""

    name: str
    code: str
    checks: tuple[str, ...]
    expected: float = 0.0
    setup: str = ""
    timeout: float = 1.0


def make_case(marker: str, name: str, code: str, checks: tuple[str, ...], **kwargs: object) -> Case:
    """A Case whose code has ``MARKER`` replaced by this run's marker."""
    return Case(name, code.replace("MARKER", marker), checks, **kwargs)  # type: ignore[arg-type]


def strict_pool(size: int, what: str) -> SandboxPool:
    """A strict pool; where bubblewrap cannot run, a skip naming ``what`` needs it, except in CI
    (``AGENTENV_REQUIRE_STRICT=1``), where a missing sandbox must fail the build instead."""
    try:
        return SandboxPool(size=size, isolation="strict")
    except IsolationUnavailable as exc:  # pragma: no cover - CI installs bubblewrap
        if settings.require_strict():
            raise
        pytest.skip(f"{what} need(s) strict isolation: {exc}")


# The attack class files' shared programs, checks, controls and harnesses (tests/attacks/).

MARKER = f"agentenv-attack-{os.getpid()}-{int(time.time())}"


SECRET = f"sk-{MARKER}-secret"


TOKENS = [f"tok-{hashlib.sha256(f'{MARKER}{i}'.encode()).hexdigest()[:16]}" for i in range(3)]


ADD_CHECKS = ["assert add(2, 3) == 5", "assert add(-1, 1) == 0", "assert add(10, 20) == 30",
              "assert add(7, -7) == 0"]


REPO = Path(__file__).resolve().parents[2]


HOST_DIRS = [Path("/tmp"), Path.home(), REPO, Path.cwd()]


@dataclass(frozen=True)
class Attack:
    """One named attack: its code, the checks it faces and what honest work would score."""

    name: str
    code: str
    checks: tuple[str, ...] = tuple(ADD_CHECKS)
    expected: float = 0.0
    timeout: float = 1.0
    needs: tuple[str, ...] = field(default=())


def attack(name: str, code: str, **kwargs: object) -> Attack:
    return Attack(name, code.replace("MARKER", MARKER).replace("SECRETS_HERE", repr(TOKENS)),
                  **kwargs)  # type: ignore[arg-type]


def runner_digest() -> str:
    return hashlib.sha256(b"".join((SANDBOX_DIR / n).read_bytes() for n in SANDBOX_FILES)).hexdigest()


DIGEST = runner_digest()


def host_files_with_marker() -> list[Path]:
    found = []
    for directory in HOST_DIRS:
        with contextlib.suppress(OSError):
            found += [p for p in directory.iterdir() if MARKER in p.name]
    return found


def all_text(result: RunResult) -> str:
    return " ".join([result.stdout, result.stderr, *(f.message for f in result.failures)])


def attack_scores_only_honest_work_and_leaves_nothing_behind(
        case: Attack, pool_with_secret: SandboxPool, listener: tuple[int, list[bytes]]) -> None:
    """Score == honest fraction, no process/file/secret left, parent and pool fine (a run that
    never ends is pytest-timeout's to catch; nothing here is timed)."""
    port, accepted = listener
    code = (case.code.replace("PORT", str(port)).replace("REPO", str(REPO))
            .replace("PARENT", str(os.getpid())))
    result = run_tests(code, list(case.checks), timeout=case.timeout, pool=pool_with_secret)

    assert result.fraction == case.expected, result.failures
    assert result.passed == round(case.expected * len(case.checks))
    assert result.isolation == "strict"
    assert leftover_processes(pool_with_secret) == []
    assert processes_matching(MARKER, wait=0.2) == []
    assert host_files_with_marker() == []
    assert SECRET not in all_text(result)
    assert len(result.stdout) <= 64 * 1024 + 100 and len(result.stderr) <= 64 * 1024 + 100
    assert accepted == []
    assert runner_digest() == DIGEST
    # The parent is alive (we are running) and the pool still grades honest work.
    assert run_tests("def add(a, b):\n    return a + b\n", ADD_CHECKS, pool=pool_with_secret).fraction == 1.0


# Expected values the candidate cannot compute: only reading them from the grader would pass.
SECRET_CHECKS = [f"assert secret({i}) == {tok!r}" for i, tok in enumerate(TOKENS)]


CHECK = ["assert f() == 1"]


BURN = """
import os, time
def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
"""


HONEST_CPU = BURN + "def f():\n    burn(0.3)\n    return 1\n"  # 0.3 s of CPU: passes a 1 s limit


def honest_cpu_passes(pool: SandboxPool) -> RunResult:
    result = run_tests(HONEST_CPU, CHECK, timeout=1.0, pool=pool)
    assert result.fraction == 1.0 and not result.timed_out, result
    return result


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


NEEDS_900_MIB = """
def f():
    blob = bytearray(900 << 20)
    for i in range(0, len(blob), 4096):
        blob[i] = 1
    return 1
"""


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


HERMETIC_MARKER = f"agentenv-hermetic-{os.getpid()}-{int(time.time())}"


HONEST_ADD = "def add(a, b):\n    return a + b\n"


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
    assert run_tests(HONEST_ADD, ADD, pool=pool).fraction == 1.0
    assert run_tests(HONEST_IMPORTS, ADD, pool=pool).fraction == 1.0


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


def fill(code: str) -> str:
    return (code.replace("MARKER", HERMETIC_MARKER).replace("DIRS", repr(PLANT_DIRS))
            .replace("SHADOWED", repr(SHADOWED)))


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


JUDGE_MARKER = f"agentenv-judge-attack-{os.getpid()}-{int(time.time())}"


ADD_FAST = ("assert add(2, 3) == 5", "assert add(-1, 1) == 0")


ADD_LOOP = "for a in (1, 2, 99):\n    assert add(a, 1) == a + 1"


CALLBACK_CHECKS = ("assert apply(lambda v: v * 2, 3) == 6",
                   "def again(x):\n    return apply(again, x)\nassert apply(again, 1) == 1")


def judge_case(name: str, code: str, checks: tuple[str, ...], **kwargs: object) -> Case:
    return make_case(JUDGE_MARKER, name, code, checks, **kwargs)


def judge_attack_scores_only_honest_work_and_leaves_nothing_behind(
        attack: Case, pool_of_two: SandboxPool) -> None:
    """Score == honest fraction, graded_in_child == 0, nothing left, pool fine (not timed: a
    run that never ends is pytest-timeout's to catch)."""
    plan = plan_checks(attack.checks, setup_code=attack.setup)
    assert plan.needs_judge  # every case has checks only the judge process can grade
    result = run_tests(attack.code, list(attack.checks), timeout=attack.timeout,
                       setup_code=attack.setup, pool=pool_of_two)

    assert result.fraction == attack.expected, result.failures
    assert result.passed == round(attack.expected * len(attack.checks))
    assert result.graded_in_child == 0
    assert result.isolation == "strict"
    assert all(len(f.message) <= 520 for f in result.failures)
    assert leftover_processes(pool_of_two) == []
    assert processes_matching(JUDGE_MARKER, wait=0.2) == []
    assert run_tests("def add(a, b):\n    return a + b\n", [*ADD_FAST, ADD_LOOP],
                     pool=pool_of_two).fraction == 1.0


ADD_MULTI = "x = add(99, 2)\ny = add(x, 1)\nassert y == 102"


CASE_MARKER = f"agentenv-check-attack-{os.getpid()}-{int(time.time())}"


def check_case(name: str, code: str, checks: tuple[str, ...], **kwargs: object) -> Case:
    return make_case(CASE_MARKER, name, code, checks, **kwargs)


def check_attack_scores_only_honest_work_and_leaves_nothing_behind(
        attack: Case, pool_of_two: SandboxPool) -> None:
    """Score == honest fraction, nothing left, the pool serves honest work (not timed: a run
    that never ends is pytest-timeout's to catch)."""
    result = run_tests(attack.code, list(attack.checks), timeout=attack.timeout, pool=pool_of_two)

    assert result.fraction == attack.expected, result.failures
    assert result.graded_in_child == 0
    assert result.isolation == "strict"
    assert leftover_processes(pool_of_two) == []
    assert processes_matching(CASE_MARKER, wait=0.2) == []
    assert run_tests(HONEST_ADD, [*ADD_FAST, ADD_LOOP], pool=pool_of_two).fraction == 1.0


ADD_ONE = ["assert add(2, 3) == 5"]


def honest_run_passes(pool: SandboxPool) -> RunResult:
    result = run_tests(HONEST, CHECK, timeout=1.0, pool=pool)
    assert (result.fraction, result.timed_out) == (1.0, False), result
    return result


def honest_plain_passes(pool: SandboxPool) -> RunResult:
    """The honest control after an attack: exactly 1.0, no timeout, and no worker found stuck or
    unhealthy on the way (support.hangs.worker_waits: the pool's only waits between runs)."""
    with worker_waits() as waits:
        result = run_tests(HONEST, CHECK, timeout=1.0, pool=pool)
    assert (result.fraction, result.timed_out) == (1.0, False), result
    assert waits == [], waits
    return result


def run_on(pool: SandboxPool, code: str, checks: list, timeout: float = 1.0,
          **kwargs: object) -> RunResult:
    """One run on ``pool`` (pytest-timeout is the hang guard: no run here is timed)."""
    return run_tests(code, checks, timeout=timeout, pool=pool, **kwargs)  # type: ignore[arg-type]


# f right, g wrong: honest work on these two checks scores exactly 0.5
HALF = ["assert f() == 1", "assert g() == 2"]


HALF_CODE = "def f():\n    return 1\ndef g():\n    return 3\n"


# Candidate-side: the run's nonce (a local of run_job, below the candidate's frames) and the
# exact end the worker waits for on G's pipe, found by walking the candidate's frames.
FIND_THE_END = """
import os, sys, threading, time
def _find(pick):
    frame = sys._getframe()
    while frame is not None:
        for scope in (frame.f_locals, frame.f_globals):
            try:
                found = pick(scope)
            except Exception:
                found = None
            if found is not None:
                return found
        frame = frame.f_back
NONCE = _find(lambda s: s["job"]["nonce"])
_wire, _schema = sys.modules["_wire"], sys.modules["_schema"]
END = _wire.encode_frame(NONCE, {_schema.TYPE: _schema.DONE}) + b"+finished\\n"
"""

# FIND_THE_END, the worker module's globals (those of become_candidate), and forged frames bound
# to the nonce.
FORGERY = FIND_THE_END + """
W = _find(lambda s: s if "become_candidate" in s else None)
assert END == W["ended"](NONCE)
def forged_call(index, value, j=0):
    return _wire.encode_frame(NONCE, {_schema.TYPE: _schema.CALL, _schema.INDEX: index,
                                      _schema.CALL_INDEX: j,
                                      _schema.VALUE: _wire.encode_value(value)})
SAVED = os.dup(3)  # the result pipe, still open once G has closed fd 3
def after_finished(action):
    # runs action() as soon as G has closed fd 3 (after FINISHED, while it lingers)
    def watch():
        while True:
            try:
                os.fstat(3)
            except OSError:
                break
            time.sleep(0.0005)
        action()
    threading.Thread(target=watch, daemon=True).start()
"""


# What G does after its last bytes, rebound by the candidate: the worker globals LINGER and
# _sleep (bound at import, but module globals of the candidate's own process), os._exit (read
# from the os module when G exits), and a stdout whose flush never returns (G flushes it before
# FINISHED). Each also makes G's last write a newline after the marker (harmless between frames,
# but the pipe no longer ends with the exact end, so the worker waits for G) and burns CPU in a
# thread.
KEEP_G_ALIVE = {
    "linger_forever": "W['LINGER'] = 1e6\n",
    "sleep_forever": "W['_sleep'] = lambda seconds: time.sleep(1e6)\n",
    "exit_disabled": "os._exit = lambda code: time.sleep(1e6)\n",
    "flush_never_returns": (
        "class Stuck:\n"
        "    def write(self, text):\n        return len(text)\n"
        "    def flush(self):\n        time.sleep(1e6)\n"
        "sys.stdout = Stuck()\n"),
}


LOOP = "for x in (1, 2):\n    assert {name}(x) == x"  # a check only the judge process grades


def judged(name: str) -> str:
    return LOOP.format(name=name)


def honest_controls_pass(pool: SandboxPool) -> None:
    """The honest controls after an attack: a plain, a judged and a stdio run, each exactly 1.0,
    none a timeout, and no worker found stuck or unhealthy on the way (support.hangs.worker_waits:
    the pool's only waits between runs)."""
    with worker_waits() as waits:
        for code, checks in ((HONEST, CHECK), ("def f(x):\n    return x\n", [judged("f")]),
                             (STDIO_HONEST["plain"], [STDIO_3])):
            result = run_tests(code, checks, timeout=1.0, pool=pool)
            assert (result.fraction, result.timed_out) == (1.0, False), (code, result.failures)
    assert waits == [], waits


# FIND_THE_END, and G's frames bound to it. Also found from a stdio program's process and from a
# finalizer (their frames sit above _run_stdio and run_job too).
FORGED_ENDS = FIND_THE_END + """
WARM_END = _wire.encode_frame("0" * 32, {_schema.TYPE: _schema.DONE}) + b"+finished\\n"
"""


# become_candidate's end uses values held in its locals; the candidate rebinds those locals
# through its frame (PyFrame_LocalsToFast: ctypes is preloaded) and makes G's last write a
# newline after the marker, so the pipe never ends with the exact end; a thread burns CPU.
REBIND_LOCALS = FORGED_ENDS + """
import ctypes
frame = sys._getframe()
while frame.f_code.co_name != "become_candidate":
    frame = frame.f_back
held = frame.f_locals  # one snapshot: each read of f_locals refreshes it from the frame
held.update(CHANGES)
held["finished"] = b"+finished\\n\\n"
ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))
del frame
def burn():
    while True:
        pass
threading.Thread(target=burn, daemon=True).start()
def f():
    return 1
def g():
    return 3
"""


LOCALS = {"linger_forever": "{'wait': 1e6}",
          "exit_sleeps": "{'leave': lambda code: time.sleep(1e6)}",
          "close_sleeps": "{'close': lambda fd: time.sleep(1e6)}"}


STDIO_3 = StdioCase(stdin="3\n", expected_stdout="9")


STDIO_HONEST = {
    "plain": "n = int(input())\nprint(n * n)\n",
    "own_buffered_file_on_fd_1": "n = int(input())\nout = open(1, 'w', closefd=False)\n"
                                 "out.write(str(n * n))\n",
    "non_daemon_thread_prints_after_main": "import threading, time\nn = int(input())\n"
                                           "def p():\n    time.sleep(0.05)\n    print(n * n)\n"
                                           "threading.Thread(target=p).start()\n",
    "thread_with_a_big_stack_for_recursion": "import sys, threading\n"
                                             "sys.setrecursionlimit(1 << 25)\n"
                                             "threading.stack_size(1 << 26)\n"
                                             "def d(k):\n    return 0 if k == 0 else 1 + d(k - 1)\n"
                                             "def main():\n    n = int(input())\n"
                                             "    print(n * n + d(20000) - 20000)\n"
                                             "threading.Thread(target=main).start()\n",
    "gc_collect_replaced_by_a_hang": "import gc, time\ngc.collect = lambda *a: time.sleep(1e6)\n"
                                     "print(int(input()) ** 2)\n",
    "finalizer_prints_its_own_line": "class P:\n    def __del__(self):\n"
                                     "        print('', end='')\n"
                                     "p = P()\nprint(int(input()) ** 2)\n",
}


# Each prints the right answer, then keeps its process from ending at _end_program.
STDIO_NEVER_ENDS = {
    "non_daemon_thread_sleeps_forever": "import threading, time\n"
                                        "threading.Thread(target=time.sleep, args=(1e6,)).start()\n",
    "non_daemon_thread_spins_forever": "import threading\ndef spin():\n    while True:\n"
                                       "        pass\nthreading.Thread(target=spin).start()\n",
    # (finalizers keep what they need in their defaults, as finalizers run at exit should)
    "finalizer_sleeps_forever": "import time\nclass Stuck:\n    def __del__(self, time=time):\n"
                                "        time.sleep(1e6)\nstuck = Stuck()\n",
    "finalizer_spins_forever": "class Stuck:\n    def __del__(self):\n        while True:\n"
                               "            pass\nstuck = [Stuck()]\nstuck.append(stuck)\n",
    "threading_module_replaced": "import sys, time\nclass T:\n    @staticmethod\n"
                                 "    def _shutdown():\n        time.sleep(1e6)\n"
                                 "sys.modules['threading'] = T\n",
    "finalizer_forks_a_child_holding_stdout": "import os, time\nclass Fork:\n"
                                              "    def __del__(self, os=os, time=time):\n"
                                              "        if os.fork() == 0:\n"
                                              "            time.sleep(1e6)\n"
                                              "keep = Fork()\n",
}


# Text a candidate controls in the judge's verdict frames (an exception's message, a value's
# repr) shaped like every end it knows: its own run's, the warm-up's (nonce "0" * 32), a bare
# marker. The judge's real end needs its own nonce, which no candidate sees, and raw bytes such
# as the done frame's msgpack body can only reach a verdict frame as quoted UTF-8 text.
JUDGE_TEXT = FORGED_ENDS + """
TEXT = (END + WARM_END + b"+finished\\n").decode("latin-1")
def f(x):
    os.write(3, END)  # G's pipe now ends with its exact end: G counts as done from here on
    raise ValueError(TEXT)
def g(x):
    return TEXT
def ok(x):
    return x
def hang(x):
    while True:
        time.sleep(0.01)
"""


G_EXITS_MID_JUDGING = FORGED_ENDS + """
def ok(x):
    return x
def g(x):
    os.write(3, END)  # G's exact end, then G is gone: the "exited" half of the end rule
    os._exit(0)
"""


# Candidate-side at the rlimits level: every other child of the zygote (the judge, the runs the
# worker keeps prepared) is a sibling of G in the same pid namespace, and can be signalled.
SIBLINGS = """
import signal
def siblings():
    me, parent, found = os.getpid(), os.getppid(), []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    data = handle.read()
                fields = data[data.rindex(b")") + 2:].split()
                if int(fields[1]) == parent and fields[0] != b"Z":
                    found.append(int(name))
            except (OSError, ValueError):
                pass
    return found
"""


STDIO_4 = StdioCase(stdin="4\n", expected_stdout="16")


STDIO_FINALIZER_FORGES = FORGED_ENDS + """
n = int(input())
print(n * n)
class Forge:
    def __del__(self, n=n, os=os, time=time, frame=_wire.encode_frame, nonce=NONCE, end=END,
                s=_schema):
        if n == 3:  # the first case: a frame for the second (index 1) saying "9", then G's end
            os.write(3, frame(nonce, {s.TYPE: s.STDIO, s.INDEX: 1, s.OUT: "9\\n"}) + end)
            time.sleep(0.5)
forge = Forge()
"""


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


PROBE = ("import os\n"
         "def f():\n"
         "    return (os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0),\n"
         "            len(os.sched_getaffinity(0)))\n")


def fallback(size: int = 1) -> SandboxPool:
    return SandboxPool(size=size, isolation="rlimits", allow_root_fallback=True)


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


# The attack class files (tests/attacks/), one per attack class.
ATTACK_CLASS_FILES = ("test_hermetic_runs", "test_run_limits", "test_judge_isolation",
                      "test_judge_values", "test_equality", "test_pool_poisoning",
                      "test_fallback_and_redaction", "test_candidate_text")


def every_judge_attack() -> list[Case]:
    """The judge attack cases (``JUDGE_ATTACKS``) of every class file, for a test that reads the
    failures of cases filed under several classes (importable where tests/attacks is on the path,
    as under pytest)."""
    import importlib

    return [case for name in ATTACK_CLASS_FILES
            for case in getattr(importlib.import_module(name), "JUDGE_ATTACKS", ())]
