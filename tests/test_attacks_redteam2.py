"""Red-team attacks on three sandbox changes: bytecode bound into the sandbox, scheduler weights
relative to the oldest run in flight, and the 1.5x wall-clock backstop.

Bytecode: a candidate cannot write, replace, remount or shadow the ``.pyc`` a later worker
imports, the boot string resolves the sandbox modules only from their own directory, the private
bytecode directory is writable by its owner alone, bytecode under a path the sandbox uid cannot
reach is staged by the root launcher like any other bind, and bytecode removed from the host or
made stale by an edit after it was first compiled is compiled again rather than bound (a gone
bind stopped every later worker). Backstop: honest solutions that block (sleeps, tmpfs I/O,
threads, child processes) keep the verdicts they earn alone beside 16 loops. Scheduler: idle runs
submitted after an honest one do not move its weight; an honest sample released with a batch of
loops, or already running when a burst arrives, keeps its verdict (the backstop does not count
time spent waiting for a core); the weights an idle run older than a burst gives are a strict
xfail (latency, no longer verdicts). Strict isolation, as CI runs (AGENTENV_REQUIRE_STRICT=1).
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.attacks import strict_pool
from test_load_independence import LOOP, honest

from agentenv.grading import RunResult, run_tests
from agentenv.sandbox import SandboxPool, _isolation

HONEST = "def add(a, b):\n    return a + b\n"
ADD = ["assert add(2, 3) == 5"]
INSIDE_CACHE = f"{_isolation.INSIDE_DIR}/__pycache__"


def _bound_bytecode() -> dict[str, str]:
    """Where each bound .pyc is inside the sandbox -> its sha256 on the host."""
    out = {}
    for name, pyc in _isolation.compiled_sandbox_files().items():
        inside = importlib.util.cache_from_source(f"{_isolation.INSIDE_DIR}/{name}")
        out[inside] = hashlib.sha256(Path(pyc).read_bytes()).hexdigest()
    return out


# --- 1. bytecode bound into the sandbox ---------------------------------------------------------

TAMPER = r'''
import os, marshal
CACHE = "INSIDE_CACHE"
def add(a, b):
    done = []
    def attempt(what, fn):
        try:
            fn()
            done.append(what)
        except OSError:
            pass
    evil = b"\x00" * 16 + marshal.dumps(compile("import os; os._exit(3)", "x", "exec"))
    for name in os.listdir(CACHE):
        path = f"{CACHE}/{name}"
        attempt(f"write {name}", lambda: open(path, "r+b").write(evil))
        attempt(f"truncate {name}", lambda: os.truncate(path, 0))
        attempt(f"unlink {name}", lambda: os.unlink(path))
        attempt(f"rename {name}", lambda: os.rename(path, path + ".x"))
        attempt(f"chmod {name}", lambda: os.chmod(path, 0o666))
        attempt(f"utime {name}", lambda: os.utime(path, (0, 0)))
    attempt("create in cache", lambda: open(f"{CACHE}/_wire.cpython-311.opt-1.pyc", "wb"))
    attempt("mkdir in cache", lambda: os.mkdir(f"{CACHE}/sub"))
    attempt("create beside", lambda: open("/opt/agentenv/_extra.py", "w"))
    attempt("rmdir cache", lambda: os.rmdir(CACHE))
    # A nested user and mount namespace, then the bind made writable (the inode is the host's).
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    def remount():
        if libc.unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS
            raise OSError(ctypes.get_errno(), "unshare")
        for target in (CACHE, "/opt/agentenv"):
            for flags in (4096 | 32, 4096 | 32 | 16384):  # MS_BIND|MS_REMOUNT (|MS_REC)
                if libc.mount(None, target.encode(), None, flags, None) == 0:
                    open(f"{CACHE}/{os.listdir(CACHE)[0]}", "r+b").write(evil)
                    return
        raise OSError(1, "remount refused")
    attempt("remount writable", remount)
    # Sandbox module names planted in every place this process can write (cwd, /tmp, /dev/shm).
    for where in {os.getcwd(), "/tmp", "/dev/shm"}:
        for mod in ("_worker", "_kernel", "_seccomp", "_namespaces", "_candidate", "_zygote",
                    "_strays", "_monitor", "_wire", "_runner", "_schema", "_framing", "_judge",
                    "_rpc", "_cleanup"):
            try:
                with open(f"{where}/{mod}.py", "w") as handle:
                    handle.write("import os\nos._exit(3)\n")
                os.makedirs(f"{where}/__pycache__", exist_ok=True)
                with open(f"{where}/__pycache__/{mod}.{__import__('sys').implementation.cache_tag}.pyc", "wb") as handle:
                    handle.write(evil)
            except OSError:
                pass
    if done:
        raise AssertionError(done)
    return a + b
'''.replace("INSIDE_CACHE", INSIDE_CACHE)


def test_a_candidate_cannot_write_replace_or_shadow_the_bytecode_a_later_worker_imports() -> None:
    before = _bound_bytecode()
    with strict_pool(1, "the bytecode tampering attack") as pool:
        tampered = run_tests(TAMPER, ADD, pool=pool)
        assert tampered.fraction == 1.0, tampered.failures  # every attempt refused
        again = run_tests(HONEST, ADD, pool=pool)  # the same worker forks the next run
        assert again.fraction == 1.0, again.failures
    assert _bound_bytecode() == before  # nothing changed on the host
    with strict_pool(1, "the bytecode tampering attack") as pool:  # a later worker start
        later = run_tests(HONEST, ADD, pool=pool)
        assert later.fraction == 1.0, later.failures


def test_the_boot_string_imports_the_sandbox_modules_only_from_their_own_directory(
        tmp_path: Path) -> None:
    """Planted copies in the working directory, on PYTHONPATH or named like stdlib modules never
    shadow ``_worker`` or its siblings: ``-I`` keeps the cwd and PYTHON* off sys.path, and no
    stdlib or builtin module bears a sandbox file's name."""
    names = [name[:-3] for name in _isolation.SANDBOX_FILES]
    python = _isolation.python_executable()
    probe = subprocess.run(
        [python, "-I", "-S", "-B", "-c",
         "import importlib.util, sys; print(sorted(n for n in sys.argv[1:] "
         "if n in sys.builtin_module_names or importlib.util.find_spec(n) is not None))",
         *names], capture_output=True, text=True, timeout=60, check=True)
    assert probe.stdout.strip() == "[]"
    real, planted = tmp_path / "real", tmp_path / "planted"
    real.mkdir()
    planted.mkdir()
    report = "import sys, _wire; print(__file__, _wire.__file__)\ndef main(argv): pass\n"
    (real / "_worker.py").write_text(report)
    (real / "_wire.py").write_text("")
    for mod in names:
        (planted / f"{mod}.py").write_text("import os\nos._exit(3)\n")
    env = {**os.environ, "PYTHONPATH": str(planted), "PYTHONSTARTUP": str(planted / "_rpc.py")}
    done = subprocess.run(_isolation.worker_argv(python, str(real), "{}"), cwd=planted, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(real / "_worker.py"), str(real / "_wire.py")]


def test_the_private_bytecode_directory_is_writable_by_its_owner_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With bytecode writing off the .pyc go to a private directory: the caller's, 0755, files
    0644, nothing else in it; other users (the sandbox uid among them) can read, not write."""
    copy = tmp_path / "sandbox"
    copy.mkdir()
    for name in _isolation.SANDBOX_FILES:
        shutil.copy(_isolation.SANDBOX_DIR / name, copy / name)
    monkeypatch.setattr(_isolation, "SANDBOX_DIR", copy)
    monkeypatch.setattr(_isolation, "_pycs", None)
    monkeypatch.setattr(_isolation, "_pyc_dir", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    registered: list[tuple[object, ...]] = []
    monkeypatch.setattr(_isolation.atexit, "register", lambda *a: registered.append(a))
    pycs = _isolation.compiled_sandbox_files()
    assert sorted(pycs) == sorted(_isolation.SANDBOX_FILES)
    assert not (copy / "__pycache__").exists()  # bytecode writing is off: the package untouched
    private = {os.path.dirname(p) for p in pycs.values()}
    assert len(private) == 1
    directory = private.pop()
    try:
        info = os.stat(directory)
        assert (info.st_uid, info.st_mode & 0o7777) == (os.geteuid(), 0o755)
        assert sorted(os.listdir(directory)) == sorted(os.path.basename(p) for p in pycs.values())
        for pyc in pycs.values():
            info = os.stat(pyc)
            assert (info.st_uid, info.st_mode & 0o7777) == (os.geteuid(), 0o644)
            assert _isolation.reachable_by(pyc, _isolation.SANDBOX_UID, _isolation.SANDBOX_UID)
        assert [a[0] for a in registered] == [shutil.rmtree]  # removed at exit
    finally:
        shutil.rmtree(directory, ignore_errors=True)


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
        result = run_tests(HONEST, ADD, pool=pool)
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


# --- 2. scheduler weights relative to the oldest run in flight ----------------------------------

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


# --- 3. the 1.5x wall-clock backstop: honest solutions that block --------------------------------

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
