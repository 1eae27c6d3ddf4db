"""Hermetic runs: nothing a run writes, plants, mounts or leaves running is seen by a later run or
by a run beside it; the runner's files, the system paths and the sandbox's own bytecode are
read-only to candidates, and no run reaches the network or the host's files."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.attacks import (
    ADD,
    ADD_CHECKS,
    ADD_FAST,
    ADD_LOOP,
    ADD_ONE,
    DISK_HOARD,
    HERMETIC_MARKER,
    HONEST_ADD,
    HONEST_IMPORTS,
    IPC_KEY,
    LIBC,
    PLANT_EVERYWHERE,
    PLANT_IPC,
    Attack,
    assert_honest_scores,
    attack,
    attack_scores_only_honest_work_and_leaves_nothing_behind,
    counted,
    fill,
    honest_plain_passes,
    needs_memory_cgroup,
    probe,
    run_on,
    run_sampled,
    strict_pool,
)

from agentenv.grading import RunResult, run_tests
from agentenv.sandbox import Limits, SandboxPool, _isolation
from agentenv.sandbox.testing import leftover_processes

ATTACKS = [
    attack("setsid_double_fork_daemon", """
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', 'MARKER'])
    os._exit(0)
def add(a, b): return a - b
"""),
    # --- escaping the sandbox ----------------------------------------------------------------
    attack("network_connect", """
import socket
def add(a, b):
    for host, port in (('127.0.0.1', PORT), ('localhost', PORT), ('8.8.8.8', 53)):
        try:
            socket.create_connection((host, port), timeout=0.3).sendall(b'MARKER')
            return a + b
        except OSError:
            pass
    return None
""", needs=("port",)),
    attack("write_outside_the_work_dir", """
import os
TARGETS = ['/tmp/MARKER', os.path.expanduser('~/MARKER'), 'REPO/MARKER', '/usr/MARKER',
           '/opt/agentenv/_runner.py', '/opt/agentenv/MARKER', '../MARKER', '/MARKER']
def add(a, b):
    wrote = 0
    for path in TARGETS:
        try:
            with open(path, 'w') as f:
                f.write('pwned')
            wrote += 1
        except OSError:
            pass
    return -wrote
""", needs=("repo",)),
]


@pytest.mark.parametrize("case", ATTACKS, ids=lambda a: a.name)
def test_attack_scores_only_honest_work_and_leaves_nothing_behind(
        case: Attack, pool_with_secret: SandboxPool, listener: tuple[int, list[bytes]]) -> None:
    """Each attack scores its honest fraction and leaves nothing behind (see the helper)."""
    attack_scores_only_honest_work_and_leaves_nothing_behind(case, pool_with_secret, listener)


def test_an_attack_cannot_touch_a_sibling_run_in_flight(pool_with_secret: SandboxPool) -> None:
    """While one run kills everything it can see, a concurrent honest run still scores 1.0."""
    honest = "import time\ndef add(a, b):\n    time.sleep(0.4)\n    return a + b\n"
    hostile = ("import os, signal, time\n"
               "def add(a, b):\n"
               "    end = time.monotonic() + 0.6\n"
               "    while time.monotonic() < end:\n"
               "        for pid in [-1, 0] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
               "            try: os.kill(pid, signal.SIGKILL)\n"
               "            except OSError: pass\n"
               "    return a - b\n")
    results: dict[str, RunResult] = {}

    def run(label: str, code: str) -> None:
        results[label] = run_tests(code, ADD_CHECKS[:1], timeout=3.0, pool=pool_with_secret)

    threads = [threading.Thread(target=run, args=("honest", honest)),
               threading.Thread(target=run, args=("hostile", hostile))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results["honest"].fraction == 1.0
    assert results["hostile"].fraction == 0.0
    assert leftover_processes(pool_with_secret) == []


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
    plant = PLANT_IPC.replace("MARKER", HERMETIC_MARKER[-20:]).replace("KEY", str(IPC_KEY))
    made = ast.literal_eval(probe(pool, plant))
    print(f"[ipc] the planting run made: {made}")
    assert {"sysv-shm", "sysv-msg", "sysv-sem", "posix-shm"} <= set(made), made  # they were real
    assert probe(pool, FIND_IPC.replace("MARKER", HERMETIC_MARKER[-20:]).replace("KEY", str(IPC_KEY))) == "[]"
    assert leftover_processes(pool) == []
    assert_honest_scores(pool)


def test_a_planted_spy_cannot_read_a_later_runs_inputs(pool: SandboxPool) -> None:
    """Run 1 leaves a daemon and planted files meant to copy whatever later runs write; run 2 is
    honest and writes its input to its work dir; run 3 looks everywhere for run 2's input."""
    secret = f"input-{HERMETIC_MARKER}"
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
              "import time\ntime.sleep(0.2)\n" + HONEST_ADD)
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


NESTED_TMPFS = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def probe():
    uid, gid = os.getuid(), os.getgid()
    libc.prctl(4, 1, 0, 0, 0)  # dumpable again, so the nested id maps can be written
    if libc.unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS
        return 0
    for name, text in (('setgroups', 'deny'), ('uid_map', f'{uid} {uid} 1'),
                       ('gid_map', f'{gid} {gid} 1')):
        with open(f'/proc/self/{name}', 'w') as handle:
            handle.write(text)
    os.mkdir('/tmp/nested')
    if libc.mount(b'none', b'/tmp/nested', b'tmpfs', 0, None) != 0:
        return 0
    written = 0
    try:
        for k in range(40):
            with open(f'/tmp/nested/f{k}', 'wb') as handle:
                for _ in range(16):
                    handle.write(b'x' * (1 << 20))
                    written += 1
    except OSError:
        pass
    return written
"""


def test_a_nested_user_namespace_cannot_mount_a_tmpfs_past_the_disk_cap(pool_of_two: SandboxPool) -> None:
    """With capabilities regained in a user namespace of its own, a run could mount a fresh
    tmpfs that Limits.disk does not cap (only a memory cgroup, where there is one, would stop
    it): runs may not create user namespaces at all."""
    from agentenv.sandbox import Limits

    result = run_tests(NESTED_TMPFS, ["assert probe() == 0"], timeout=5.0, pool=pool_of_two,
                       limits=Limits(disk=64 * 1024**2))
    assert result.fraction == 1.0, result.failures
    assert leftover_processes(pool_of_two) == []
    assert run_tests(HONEST_ADD, [*ADD_FAST, ADD_LOOP], pool=pool_of_two).fraction == 1.0


INSIDE_CACHE = f"{_isolation.INSIDE_DIR}/__pycache__"


def _bound_bytecode() -> dict[str, str]:
    """Where each bound .pyc is inside the sandbox -> its sha256 on the host."""
    out = {}
    for name, pyc in _isolation.compiled_sandbox_files().items():
        inside = importlib.util.cache_from_source(f"{_isolation.INSIDE_DIR}/{name}")
        out[inside] = hashlib.sha256(Path(pyc).read_bytes()).hexdigest()
    return out


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
        tampered = run_tests(TAMPER, ADD_ONE, pool=pool)
        assert tampered.fraction == 1.0, tampered.failures  # every attempt refused
        again = run_tests(HONEST_ADD, ADD_ONE, pool=pool)  # the same worker forks the next run
        assert again.fraction == 1.0, again.failures
    assert _bound_bytecode() == before  # nothing changed on the host
    with strict_pool(1, "the bytecode tampering attack") as pool:  # a later worker start
        later = run_tests(HONEST_ADD, ADD_ONE, pool=pool)
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


# Candidate-side: every socket it holds (and any fd of any process it can see) gets a forged
# job head and a hostile job. At the strict level a run holds no job socket once its job is read
# (the prepared runs' are in the worker, in no namespace a run can see); only a judged run holds
# a socket, the channel to its own judge.
WRITE_EVERY_SOCKET = """
import json, os, stat, struct
HOSTILE = json.dumps({"nonce": "0" * 32, "code": "def f():\\n    return 0\\n", "items": [],
                      "setup": "", "limits": {}, "env": {}, "workdir": "/"}).encode()
MESSAGE = struct.pack(">cQ", b"-", len(HOSTILE)) + HOSTILE
seen = []
paths = [f"/proc/self/fd/{n}" for n in os.listdir("/proc/self/fd")]
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            paths += [f"/proc/{pid}/fd/{n}" for n in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            pass
for path in paths:
    try:
        if not stat.S_ISSOCK(os.stat(path).st_mode):
            continue
        seen.append(path)
        fd = int(path.rsplit("/", 1)[1]) if path.startswith("/proc/self") else None
        if fd is not None:
            os.write(fd, MESSAGE)
    except OSError:
        pass
print("sockets:", seen)
def f(x=1):
    return x
"""


@pytest.mark.parametrize("judged", [False, True])
def test_a_candidate_cannot_write_a_job_to_any_prepared_run(pool: SandboxPool, judged: bool) -> None:
    """A forged head and job written to every socket the candidate can find: a plain run has
    none; a judged run has its own judge channel only (so at most it spoils its own run). The
    next honest run, taken from the runs prepared meanwhile, scores exactly 1.0."""
    checks = ["for x in (1, 2):\n    assert f(x) == x"] if judged else ["assert f() == 1"]
    result = run_on(pool, WRITE_EVERY_SOCKET, checks)
    assert result.fraction <= 1.0
    if not judged:
        assert "sockets: []" in result.stdout, result.stdout
    for _ in range(3):
        honest_plain_passes(pool)
