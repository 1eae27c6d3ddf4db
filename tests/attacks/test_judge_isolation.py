"""A judge where no candidate code ran: no verdict is decided, and no expected value is held, in a
process the candidate controls. Forged frames, forged ends, stolen nonces, patched builtins,
modules or helpers, scans of memory, stacks, files and descriptors, and early exits all earn
exactly what honest work earns; the honest controls beside them score exactly their fraction."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.attacks import (
    ADD_CHECKS,
    ADD_FAST,
    ADD_LOOP,
    ADD_MULTI,
    CALLBACK_CHECKS,
    CHECK,
    FIND_SOCKETS,
    FORGED_ENDS,
    FORGERY,
    G_EXITS_MID_JUDGING,
    HALF,
    HALF_CODE,
    HONEST_ADD,
    JUDGE_MARKER,
    JUDGE_TEXT,
    PROBE,
    SECRET_CHECKS,
    SIBLINGS,
    STDIO_3,
    STDIO_4,
    STDIO_FINALIZER_FORGES,
    STDIO_HONEST,
    TOKENS,
    Attack,
    Case,
    attack,
    attack_scores_only_honest_work_and_leaves_nothing_behind,
    check_attack_scores_only_honest_work_and_leaves_nothing_behind,
    check_case,
    fallback,
    honest_controls_pass,
    honest_cpu_passes,
    honest_plain_passes,
    honest_run_passes,
    judge_attack_scores_only_honest_work_and_leaves_nothing_behind,
    judge_case,
    judged,
    run_on,
)
from support.hangs import HONEST, honest_passes

from agentenv.grading import RunResult, plan_checks, run_tests
from agentenv.sandbox import Limits, SandboxPool
from agentenv.sandbox.testing import leftover_processes
from agentenv.tasks import Task, load_tasks
from agentenv.tasks.schema import StdioCase

SEARCH_AND_RETURN = """
def secret(i):
    found = FOUND()
    return found[i] if i < len(found) else None
"""


ATTACKS = [
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
]


CONTROLS = [
    Attack("control_correct_solution", "def add(a, b):\n    return a + b\n", expected=1.0),
    Attack("control_half_correct_solution",
           "def add(a, b):\n    return a + b if a < 5 else a - b\n", expected=0.5),
    Attack("control_correct_secret_lookup", "def secret(i):\n    return " + repr(TOKENS) + "[i]\n",
           checks=tuple(SECRET_CHECKS), expected=1.0),
]


@pytest.mark.parametrize("case", ATTACKS + CONTROLS, ids=lambda a: a.name)
def test_attack_scores_only_honest_work_and_leaves_nothing_behind(
        case: Attack, pool_with_secret: SandboxPool, listener: tuple[int, list[bytes]]) -> None:
    """Each attack scores its honest fraction and leaves nothing behind (see the helper)."""
    attack_scores_only_honest_work_and_leaves_nothing_behind(case, pool_with_secret, listener)


def test_forged_reports_reach_no_check_not_even_loops_and_multi_statement_ones(pool_with_secret: SandboxPool) -> None:
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
    result = run_tests(forger, checks, pool=pool_with_secret)
    assert result.graded_in_child == 0
    assert result.passed_indices == ()


@pytest.mark.parametrize("name", ["gc_scan_for_test_strings", "memory_scan_for_test_strings",
                                  "stack_walk_reads_expected_values"])
def test_these_scans_are_real_they_win_wherever_the_expected_values_sit_in_the_candidates_process(
        name: str, pool_with_secret: SandboxPool) -> None:
    """With the tokens placed in the candidate's own process (here by its own code), the scan
    finds them and scores: what stops it above is that the grader never puts them there. Setup
    data is no longer one way in: the setup's data runs in the judge only, so the same tokens
    assigned by ``setup_code`` are out of the scan's reach."""
    case = next(a for a in ATTACKS if a.name == name)
    planted = run_tests(f"{case.code}\n_PLANTED = {TOKENS!r}\n", list(case.checks),
                        timeout=case.timeout, pool=pool_with_secret)
    assert planted.passed > 0
    assert run_tests(case.code, list(case.checks), timeout=case.timeout, pool=pool_with_secret).passed == 0
    in_setup = run_tests(case.code, list(case.checks), timeout=case.timeout, pool=pool_with_secret,
                         setup_code=f"_PLANTED = {TOKENS!r}\n")
    assert in_setup.passed == 0, in_setup.passed_indices


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


JUDGED_PAIR = ["for _ in range(1):\n    assert g() == 1", "for _ in range(1):\n    assert f() == 1"]


def test_a_judge_frame_ending_in_the_finished_marker_does_not_cut_the_judges_verdicts(
        pool: SandboxPool) -> None:
    """The candidate's process writes FINISHED first and makes the judge's first verdict frame
    end with it too (its exception message): the judge's later verdicts still count (exactly
    one of two checks passes), and the next run on the worker is unaffected."""
    result = run_tests(FINISHED_IN_A_VERDICT, JUDGED_PAIR, pool=pool)
    assert (result.fraction, result.timed_out) == (0.5, False), result.failures
    assert [f.index for f in result.failures] == [0]
    honest_cpu_passes(pool)
    assert leftover_processes(pool) == []


JUDGE_TOKENS = [f"tok-{hashlib.sha256(f'{JUDGE_MARKER}{i}'.encode()).hexdigest()[:16]}" for i in range(3)]


DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")


# Expected values only the judge sees: loop and multi-statement checks over the secret tokens...
SECRET_LOOP = tuple(f"for _ in range(2):\n    assert secret({i}) == {tok!r}"
                    for i, tok in enumerate(JUDGE_TOKENS))


# ...and the same questions asked as decomposable asserts, whose values the parent judges.
SECRET_FAST = tuple(f"assert secret({i}) == {tok!r}" for i, tok in enumerate(JUDGE_TOKENS))


POLY_SETUP = ("import math\n\ndef poly(xs, x):\n"
              "    return sum([coeff * math.pow(x, i) for i, coeff in enumerate(xs)])\n")


POLY_CHECKS = (
    "def _check():\n    import copy, math, random\n    rng = random.Random(42)\n"
    "    for _ in range(20):\n"
    "        coeffs = [rng.randint(1, 10) * rng.choice([-1, 1]) for _ in range(2 * rng.randint(1, 3))]\n"
    "        solution = find_zero(copy.deepcopy(coeffs))\n"
    "        assert math.fabs(poly(coeffs, solution)) < 1e-4\n_check()\n",
    "assert abs(poly([1, 2], find_zero([1, 2]))) < 1e-4",
)


FIND_ZERO = """
def find_zero(xs):
    begin, end = -1.0, 1.0
    while poly(xs, begin) * poly(xs, end) > 0:
        begin *= 2.0
        end *= 2.0
    while end - begin > 1e-10:
        center = (begin + end) / 2.0
        if poly(xs, center) * poly(xs, begin) > 0:
            begin = center
        else:
            end = center
    return begin
"""


SORT_SETUP = "def reference(xs):\n    return sorted(xs)\n"


SORT_CHECKS = ("assert my_sort([3, 1, 2]) == reference([3, 1, 2])",
               "for xs in ([2, 1], [5, 4, 3]):\n    assert my_sort(xs) == reference(xs)")


TREE_SETUP = "root = Node(1)\nroot.left = Node(2)\nroot.left.left = Node(3)\nroot.right = Node(4)\n"


TREE_CHECKS = ("for node, height in ((root, 3), (root.left, 2), (root.right, 1)):\n"
               "    assert max_height(node) == height",)


JUDGE_ATTACKS = [
    # --- forging verdicts -------------------------------------------------------------------
    judge_case("forge_verdict_frames_with_every_nonce_found_on_every_fd", r"""
import gc, os, re, sys
HEX = re.compile(r'[0-9a-f]{32}')
wire = next(m for m in list(sys.modules.values()) if hasattr(m, 'encode_frame'))
def nonces():
    found = {'0' * 32}
    for obj in gc.get_objects():
        try:
            values = obj.values() if isinstance(obj, dict) else [obj]
            found.update(v for v in values if isinstance(v, str) and HEX.fullmatch(v))
        except Exception:
            pass
    return found
def forge():
    for nonce in nonces():
        for i in range(8):
            for m in ({'t': 'check', 'i': i, 'ok': True}, {'t': 'stmt', 'i': i, 'ok': True},
                      {'t': 'setup', 'ok': True}, {'t': 'call', 'i': i, 'j': 0, 'v': b'\xc3'}):
                line = wire.encode_frame(nonce, m)  # the runner's own frame encoder
                for fd in range(0, 64):
                    try:
                        os.write(fd, line)
                    except OSError:
                        pass
                for path in targets:  # every other process's descriptors, the judge's included
                    try:
                        with open(path, 'wb', 0) as handle:
                            handle.write(line)
                    except OSError:
                        pass
targets = [f'/proc/{pid}/fd/{fd}' for pid in os.listdir('/proc') if pid.isdigit()
           and int(pid) != os.getpid() for fd in range(0, 8)]
forge()
def secret(i):
    forge()
    return None
""", SECRET_LOOP + SECRET_FAST, timeout=2.0),
    judge_case("fake_answers_written_on_the_judge_channel", FIND_SOCKETS + r"""
import struct, sys
wire = next(m for m in list(sys.modules.values()) if hasattr(m, 'pack_message'))
def frame(m):
    body = wire.pack_message(m)  # well-formed messages of the channel's own format
    return struct.pack('>I', len(body)) + body
def secret(i):
    for fd in sockets():
        for m in ({'r': ['v', wire.encode_value('tok-guess')]}, {'r': ['v', wire.encode_value(True)]},
                  {'t': 'check', 'i': i, 'ok': True}):
            try:
                os.write(fd, frame(m))
            except OSError:
                pass
    return 'tok-guess'
""", SECRET_LOOP),
    judge_case("stack_walk_rewrites_the_candidate_side_server", r"""
import sys
def secret(i):
    frame = sys._getframe()
    while frame is not None:
        server = frame.f_locals.get('self')
        if server is not None and hasattr(server, 'handles'):
            type(server).result = lambda self, value: ['v', b'\xc3']   # msgpack True
        chan = frame.f_locals.get('chan')
        if chan is not None and hasattr(chan, 'send'):
            chan.send({'t': 'check', 'i': i, 'ok': True})
        frame = frame.f_back
    return True
""", SECRET_LOOP),
    judge_case("patch_the_runner_and_wire_modules_in_the_candidates_process", r"""
import sys
for module in list(sys.modules.values()):
    for name in ('_encode_value', 'encode_value'):
        if hasattr(module, name):
            setattr(module, name, lambda value: b'\xc3')   # every value "True"
def secret(i):
    return object()
""", SECRET_LOOP),
    judge_case("read_proc_of_every_process_for_the_judges_secrets", r"""
import os, re
def secret(i):
    found = []
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        for name in ('cmdline', 'environ', 'mem', 'maps', 'fd/3', 'fd/4', 'fd/5'):
            try:
                with open(f'/proc/{pid}/{name}', 'rb') as handle:
                    found += re.findall(rb'tok-[0-9a-f]{16}', handle.read(1 << 20))
            except (OSError, ValueError):
                pass
    return found[i].decode() if i < len(found) else None
""", SECRET_LOOP),
    # --- patching what helper code uses ---------------------------------------------------------
    judge_case("patch_math_and_sum_before_the_setup_helper_poly_runs", r"""
import builtins, math
math.pow = lambda x, i: 0.0
builtins.sum = lambda xs, start=0: 0.0
def find_zero(xs):
    return 12345.0
def probe():
    return poly([1, 2], 5.0)   # the helper as the candidate's own process now computes it
""", (*POLY_CHECKS, "assert probe() == 0.0"), expected=1 / 3, setup=POLY_SETUP),
    judge_case("patch_builtin_sorted_under_a_reference_helper", r"""
import builtins
builtins.sorted = lambda xs, **kwargs: ['forged']
def my_sort(xs):
    return ['forged']
def probe():
    return reference([3, 1, 2])
""", (*SORT_CHECKS, "assert probe() == ['forged']"), expected=1 / 3, setup=SORT_SETUP),
    judge_case("candidate_globals_shadow_the_builtins_a_loop_check_uses", r"""
def sorted(xs, **kwargs):
    return 'same'
def len(xs):
    return 0
def my_sort(xs):
    return 'same'
""", ("for xs in ([3, 1], [2, 2, 1]):\n    assert my_sort(xs) == sorted(xs)",
      "ys = my_sort([1])\nassert len(ys) == 1 and ys == [1]")),
    judge_case("candidate_global_shadows_a_stdlib_module_a_loop_check_uses", r"""
class _FakeMath:
    @staticmethod
    def isclose(*args, **kwargs):
        return True
math = _FakeMath()
def half(x):
    return 0.0
""", ("for x in (1.0, 3.0):\n    assert math.isclose(half(x), x / 2)",)),
    # --- reading expected values, answering trusted checks by lookup ------------------------
    judge_case("gc_scan_for_loop_expectations_then_answer_trusted_checks_by_lookup", r"""
import gc, re
def secret(i):
    found = []
    for obj in gc.get_objects():
        try:
            found += re.findall(r'tok-[0-9a-f]{16}', repr(obj)[:100000])
        except Exception:
            pass
    found = sorted(set(found))
    return found[i] if i < len(found) else None
""", SECRET_LOOP + SECRET_FAST),
    judge_case("memory_scan_for_loop_expectations_then_answer_trusted_checks_by_lookup", r"""
import ctypes, re
def secret(i):
    found = []
    with open('/proc/self/maps') as maps:
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split('-'))
            if 'r' not in line.split()[1] or hi - lo > 64 << 20 or '[v' in line:
                continue
            try:  # /proc/self/mem is root's in a non-dumpable process: read the pages directly
                found += re.findall(rb'tok-[0-9a-f]{16}', ctypes.string_at(lo, hi - lo))
            except (OSError, ValueError, OverflowError):
                pass
    found = sorted({x.decode() for x in found})
    return found[i] if i < len(found) else None
""", SECRET_LOOP + SECRET_FAST, timeout=2.0),
    judge_case("stack_and_job_walk_for_other_checks", r"""
import gc, sys
def secret(i):
    texts = []
    for obj in gc.get_objects():
        if isinstance(obj, dict) and ('items' in obj or 'checks' in obj or 'src' in obj):
            texts.append(repr(obj))
    frame = sys._getframe()
    while frame is not None:
        texts += [repr(v)[:10000] for v in list(frame.f_locals.values())]
        frame = frame.f_back
    import re
    found = sorted(set(re.findall(r'tok-[0-9a-f]{16}', ' '.join(texts))))
    return found[i] if i < len(found) else None
""", SECRET_LOOP + SECRET_FAST),
    judge_case("fork_a_child_that_keeps_the_judge_channel_open", r"""
import os, sys
def add(a, b):
    if a == 99:
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', 'MARKER'])
        os._exit(0)
    return a + b
""", (*ADD_FAST, ADD_LOOP), expected=2 / 3),
    # --- side effects the check watches ------------------------------------------------------
    judge_case("mutate_an_argument_behind_the_checks_back", r"""
def median(xs):
    xs.sort()
    return xs[len(xs) // 2]
""", ("assert median([3, 1, 2]) == 2",
      "nums = [3, 1, 2]\nmedian(nums)\nassert nums == [3, 1, 2], 'median() must not modify its argument'"),
         expected=1 / 2),
]


JUDGE_CONTROLS = [
    judge_case("control_setup_helper_poly_and_a_loop", FIND_ZERO, POLY_CHECKS, expected=1.0,
         setup=POLY_SETUP),
    judge_case("control_reference_helper_sort", "def my_sort(xs):\n    return sorted(xs)\n", SORT_CHECKS,
         expected=1.0, setup=SORT_SETUP),
    judge_case("control_half_correct_on_loops", "def add(a, b):\n    return a + b if a < 50 else 0\n",
         (*ADD_FAST, ADD_LOOP, ADD_MULTI), expected=1 / 2),
    judge_case("control_secret_lookup_everywhere", f"def secret(i):\n    return {JUDGE_TOKENS!r}[i]\n",
         SECRET_LOOP + SECRET_FAST, expected=1.0),
    judge_case("control_callbacks", "def apply(fn, x):\n    return fn(x)\n", CALLBACK_CHECKS[:1],
         expected=1.0),
    judge_case("control_objects_and_methods_in_a_loop",
         "class Counter:\n    def __init__(self):\n        self.value = 0\n"
         "    def inc(self, by=1):\n        self.value += by\n        return self.value\n",
         ("c = Counter()\nfor i in range(3):\n    assert c.inc() == i + 1\nassert c.value == 3",
          "c = Counter()\nc.value = 10\nassert c.inc(by=5) == 15"), expected=1.0),
    judge_case("control_setup_builds_objects_from_the_candidates_class",
         "class Node:\n    def __init__(self, v):\n        self.v, self.left, self.right = v, None, None\n"
         "def max_height(node):\n    if node is None:\n        return 0\n"
         "    return 1 + max(max_height(node.left), max_height(node.right))\n",
         TREE_CHECKS, expected=1.0, setup=TREE_SETUP),
    judge_case("control_a_builtin_name_the_task_is_about",
         "def sum(a, b):\n    return a * b\n",
         ("for a, b in ((2, 3), (4, 5)):\n    assert sum(a, b) == a * b",), expected=1.0),
    judge_case("control_candidate_constants_and_expected_exceptions",
         "LIMIT = 10\ndef f(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x\n",
         ("y = f(LIMIT)\nassert y == LIMIT == 10",
          "try:\n    f(-1)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError('no error')"),
         expected=1.0),
    judge_case("control_median_leaves_its_argument_alone",
         "def median(xs):\n    return sorted(xs)[len(xs) // 2]\n",
         ("assert median([3, 1, 2]) == 2",
          "nums = [3, 1, 2]\nmedian(nums)\nassert nums == [3, 1, 2]"), expected=1.0),
]


@pytest.mark.parametrize("attack", JUDGE_ATTACKS + JUDGE_CONTROLS, ids=lambda a: a.name)
def test_judge_attack_scores_only_honest_work_and_leaves_nothing_behind(
        attack: Case, pool_of_two: SandboxPool) -> None:
    """Each judged attack scores its honest fraction and leaves nothing behind (see the helper)."""
    judge_attack_scores_only_honest_work_and_leaves_nothing_behind(attack, pool_of_two)


def test_scanners_used_above_do_find_expected_values_planted_in_the_candidates_process(
        pool_of_two: SandboxPool) -> None:
    """The same scans score once the tokens sit in the candidate's process (here: its own code
    holds them): the judge attacks above fail because the judge never puts them there. Nor does
    the setup any longer: its data runs in the judge only, and the scans find nothing."""
    for name in ("gc_scan_for_loop_expectations_then_answer_trusted_checks_by_lookup",
                 "memory_scan_for_loop_expectations_then_answer_trusted_checks_by_lookup"):
        c = next(a for a in JUDGE_ATTACKS if a.name == name)
        in_order = [f"assert secret({i}) == {tok!r}" for i, tok in enumerate(sorted(JUDGE_TOKENS))]
        planted = run_tests(f"{c.code}\n_PLANTED = {JUDGE_TOKENS!r}\n", in_order, timeout=c.timeout,
                            pool=pool_of_two)
        assert planted.passed == len(JUDGE_TOKENS), (name, planted.failures)
        in_setup = run_tests(c.code, in_order, timeout=c.timeout, pool=pool_of_two,
                             setup_code=f"_PLANTED = {JUDGE_TOKENS!r}\n")
        assert in_setup.passed == 0, (name, in_setup.passed_indices)


def test_the_judges_job_never_reaches_the_candidates_process(pool_of_two: SandboxPool) -> None:
    """The candidate's job holds the decomposed calls only: no loop check, expected value or
    judge nonce; the judge's job goes to the judge process alone."""
    plan = plan_checks([*SECRET_FAST, *SECRET_LOOP])
    text = repr(plan.job_items())
    assert not any(tok in text for tok in JUDGE_TOKENS)
    assert [item["i"] for item in plan.job_items()] == [0, 1, 2]
    assert [item["i"] for item in plan.judge_items()] == [3, 4, 5]


def _datasets() -> dict[str, list]:
    return {
        "humaneval": load_tasks("humaneval"),
        "builtin": load_tasks("builtin"),
        "mbpp": load_tasks("mbpp", path=os.path.join(DATA_DIR, "mbpp_sample.jsonl")),
        "livecodebench": load_tasks("livecodebench", path=os.path.join(DATA_DIR, "livecodebench_sample.jsonl")),
        "apps": load_tasks("apps", path=os.path.join(DATA_DIR, "apps_sample.jsonl")),
    }


def test_no_dataset_we_load_has_a_check_graded_in_the_candidates_process(pool_of_two: SandboxPool) -> None:
    """Every check of every loader is decomposed, stdio, or judged by the judge process; the
    references of the tasks that need the judge score 1.0 and their stubs 0."""
    for name, tasks in _datasets().items():
        for task in tasks:
            plan = plan_checks(task.checks, setup_code=task.setup_code)
            assert {c.mode for c in plan.checks} <= {"trusted", "stdio", "judge"}, (name, task.name)
            if not plan.needs_judge or not task.reference_solution:
                continue
            result = run_tests(task.reference_solution, task.checks, 5.0,
                               setup_code=task.setup_code, pool=pool_of_two)
            assert result.fraction == 1.0 and result.graded_in_child == 0, (task.name, result.failures)
            stub = run_tests(task.prompt + "    pass\n", task.checks, 5.0,
                             setup_code=task.setup_code, pool=pool_of_two)
            assert stub.passed == 0, task.name


def test_the_judge_alone_grades_humaneval_s_original_tests(pool_of_two: SandboxPool) -> None:
    """With split_checks=False each task is its whole check(candidate) program, graded by the
    judge process with the candidate behind proxies: 164/164 canonical solutions, 0 stubs."""
    tasks = load_tasks("humaneval", split_checks=False)
    assert all(plan_checks(t.checks, setup_code=t.setup_code).needs_judge for t in tasks)

    def score(code_of: Callable[[Task], str]) -> list[RunResult]:
        with ThreadPoolExecutor(max_workers=2) as executor:
            return list(executor.map(lambda t: run_tests(code_of(t), t.checks, 5.0,
                                                         setup_code=t.setup_code, pool=pool_of_two), tasks))

    canonical = score(lambda t: t.reference_solution or "")
    assert [t.name for t, r in zip(tasks, canonical, strict=True) if not r.all_passed] == []
    stubs = score(lambda t: t.prompt + "    pass\n")
    assert sum(r.passed for r in stubs) == 0


def test_the_judge_honours_the_tasks_float_tolerance_like_the_fast_path(pool_of_two: SandboxPool) -> None:
    """0.1 + 0.2 matches 0.3 in a loop check only within an explicit tolerance, as it does in a
    decomposed assert; != is the negation; a candidate object is never 'close' to the check's
    data: it earns what a stub returning None earns (unequal to everything)."""
    code = "def f(k):\n    return [0.1 * k + 0.2 * k] * 2\n"
    checks = ["for k in (1, 2):\n    assert f(k) == [0.3 * k, 0.3 * k]",
              "assert f(1)[0] == 0.3", "x = f(1)\nassert x != [0.3, 0.3]"]
    strict = run_tests(code, checks, pool=pool_of_two)
    assert strict.passed_indices == (2,)
    tolerant = run_tests(code, checks, float_tolerance=1e-9, pool=pool_of_two)
    assert tolerant.passed_indices == (0, 1)
    impostor = "class X:\n    def __eq__(self, o): return True\ndef f(k):\n    return X()\n"
    stub = "def f(k):\n    return None\n"
    assert (run_tests(impostor, checks, float_tolerance=1e-9, pool=pool_of_two).passed_indices
            == run_tests(stub, checks, float_tolerance=1e-9, pool=pool_of_two).passed_indices == (2,))


class _Names:
    """A stand-in for the judge's channel: records which names were looked up."""

    def __init__(self, defined: set[str], defines: frozenset[str] | None = None) -> None:
        self.defined = defined
        self.defines = defines  # what the task asks the candidate to define (None: not said)
        self.asked: list[str] = []

    def lookup(self, name: str) -> tuple[bool, object]:
        self.asked.append(name)
        return (True, f"<candidate {name}>") if name in self.defined else (False, None)


def test_the_judge_binds_only_names_nobody_else_owns_to_the_candidate() -> None:
    """Builtins, standard-library modules and setup names are the judge's own; only the other
    free names are asked of the candidate; names the check binds are never asked."""
    import math

    from agentenv.sandbox import _judge

    check = ("def _check():\n    import random\n    xs = sorted([random.random(), 2])\n"
             "    assert math.isclose(f(xs), helper(xs)) and len(xs) == 2\n_check()\n")
    names = _Names({"f", "math", "sorted", "len"})
    ns = _judge._Namespace(names)  # type: ignore[arg-type]
    ns["helper"] = "setup's helper"
    added = _judge._bind(_judge._free_globals(check), ns, names, check=True)  # type: ignore[arg-type]
    assert names.asked == [] and added == []  # the candidate's names are read when used
    assert ns["math"] is math and ns["helper"] == "setup's helper" and "sorted" not in ns
    assert ns["sorted"] is sorted and ns["len"] is len and names.asked == []
    assert ns["f"] == "<candidate f>" and ns["f"] == "<candidate f>"
    assert names.asked == ["f", "f"]  # data is read afresh at every use (COUNTER after bump())
    with pytest.raises(KeyError):
        ns["g"]
    asked = _Names({"f", "helper2"}, defines=frozenset({"f"}))
    limited = _judge._Namespace(asked)  # type: ignore[arg-type]
    assert limited["f"] == "<candidate f>"
    with pytest.raises(KeyError):  # the candidate defines it, but the task does not ask for it
        limited["helper2"]
    assert asked.asked == ["f"]


def test_builtins_are_the_candidates_only_in_a_check_that_uses_nothing_else() -> None:
    """MBPP's task about its own `sum`: a check whose free names are all builtins and that
    calls one of them asks the candidate for it; with two called (the task's and `len`) none
    is asked (a candidate's `len` must not decide); setup code never asks."""
    from agentenv.sandbox import _judge

    def bind(source: str, ns: dict, names: _Names, check: bool) -> list[str]:
        return _judge._bind(_judge._free_globals(source), ns, names, check=check)  # type: ignore[arg-type]

    names = _Names({"sum"})
    ns: dict = {}
    assert bind("for a in (1, 2):\n    assert sum(a, a) == a * 2\n", ns, names, True) == ["sum"]
    assert names.asked == ["sum"] and ns["sum"] == "<candidate sum>"
    both = _Names({"sum", "len"})
    assert bind("for a in (1, 2):\n    assert sum(a, a) == len([a])\n", {}, both, True) == []
    assert both.asked == []
    setup = _Names({"sum"})
    assert bind("def helper(xs):\n    return sum(xs)\n", {}, setup, False) == []
    assert setup.asked == []


def test_hostile_task_data_is_contained_in_the_judge_process_too(pool_of_two: SandboxPool) -> None:
    """The judge runs task code under the same limits and deadline as the candidate: a check
    that hogs memory fails, one that never ends times out, and the next run is unaffected."""
    code = "def add(a, b):\n    return a + b\n"
    hog = "x = add(1, 1)\nblob = bytearray(8 * 2 ** 30)\nassert x == 2"
    spin = "x = add(1, 1)\nwhile True:\n    pass"
    result = run_tests(code, [*ADD_FAST, hog, spin], timeout=1.0, pool=pool_of_two)
    assert result.timed_out is True  # the spinning check was ended by the run's time limit
    assert result.passed_indices == (0, 1)
    assert [f.kind for f in result.failures] == ["exception", "timeout"]
    assert "MemoryError" in result.failures[0].message
    assert leftover_processes(pool_of_two) == []
    assert run_tests(code, [*ADD_FAST, ADD_LOOP], pool=pool_of_two).fraction == 1.0


# Checks that reach the candidate through iteration machinery that ends quietly on StopIteration.
MAP_CHECKS = (
    "assert all(map(lambda a: add(a, 1) == a + 1, (1, 2, 99)))",
    "for a, got in zip((1, 2), map(add, (1, 2), (1, 1))):\n    assert got == a + 1",
    "assert list(filter(lambda a: add(a, 1) != a + 1, (1, 2))) == []",
)


# A task about a builtin name (MBPP 126's own ``sum``) whose checks also call other builtins.
SUM_CHECKS = (
    "assert all([sum(2, 3) == 6, sum(4, 5) == 20])",
    "assert all([sum(a, b) == a * b for a, b in ((2, 3), (4, 5))])",
    "assert max(sum(2, 3), 0) == 6",
)


CHECK_ATTACKS = [
    # --- exceptions the check's own machinery swallows ---------------------------------------
    check_case("stop_iteration_ends_map_zip_and_filter_checks_quietly",
         "def add(a, b):\n    raise StopIteration\n", MAP_CHECKS),
    check_case("stop_iteration_subclass_raised_through_map", r"""
class Done(StopIteration):
    pass
def add(a, b):
    raise Done('finished early')
""", MAP_CHECKS),
    # --- builtins redefined next to the builtin the task is about ----------------------------
    check_case("define_all_and_max_next_to_the_builtin_the_task_is_about",
         "def sum(a, b):\n    return 0\ndef all(xs):\n    return True\n"
         "def max(*xs):\n    return 6\n", SUM_CHECKS),
    check_case("patch_builtins_all_and_max_at_import",
         "import builtins\nbuiltins.all = lambda xs: True\nbuiltins.max = lambda *xs: 6\n"
         "def sum(a, b):\n    return 0\n", SUM_CHECKS),
    check_case("define_only_all_and_max_leave_sum_the_builtin",
         "def all(xs):\n    return True\ndef max(*xs):\n    return 6\n", SUM_CHECKS),
    check_case("stray_answers_queued_on_the_judge_channel_at_import", FIND_SOCKETS + r"""
import sys
rpc = next(m for m in list(sys.modules.values()) if hasattr(m, 'MAX_FRAME') and hasattr(m, 'send'))
wire = next(m for m in list(sys.modules.values()) if hasattr(m, 'encode_value'))
for fd in sockets():
    for v in (2, 3, 100):
        try:
            rpc.send(fd, {'r': ['v', wire.encode_value(v)]})
        except Exception:
            pass
def add(a, b):
    return None
""", (ADD_LOOP,)),
    check_case("unsolicited_callbacks_and_copy_backs_on_the_judge_channel", FIND_SOCKETS + r"""
import sys
rpc = next(m for m in list(sys.modules.values()) if hasattr(m, 'MAX_FRAME') and hasattr(m, 'send'))
wire = next(m for m in list(sys.modules.values()) if hasattr(m, 'encode_value'))
def add(a, b):
    for fd in sockets():
        for c in range(0, 4):
            try:
                rpc.send(fd, {'op': 'cb', 'c': c, 'a': [], 'k': []})
            except Exception:
                pass
    return None
""", (ADD_LOOP, "xs = [1]\nadd(xs, 1)\nassert xs == [2]")),
]


CHECK_CONTROLS = [
    check_case("control_honest_add_through_map_zip_filter", HONEST_ADD, MAP_CHECKS, expected=1.0),
    check_case("control_honest_add_in_the_costly_loops", HONEST_ADD,
         ("for a in range(10_000):\n    r = add(a, 1)\nassert r == 10_000",
          "for a in range(1000):\n    r = add(a, 1)\n    s = sorted(r) if isinstance(r, list) else [r]\n"
          "assert s == [1000]"), expected=1.0, timeout=5.0),
    check_case("control_the_task_about_sum_checked_by_itself",
         "def sum(a, b):\n    return a * b\n",
         ("assert sum(2, 3) == 6", "for a, b in ((2, 3), (4, 5)):\n    assert sum(a, b) == a * b"),
         expected=1.0),
    check_case("control_candidate_errors_still_reach_the_check",
         "def f(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x\n",
         ("try:\n    f(-1)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError('no error')",),
         expected=1.0),
]


@pytest.mark.parametrize("attack", CHECK_ATTACKS + CHECK_CONTROLS, ids=lambda a: a.name)
def test_check_attack_scores_only_honest_work_and_leaves_nothing_behind(
        attack: Case, pool_of_two: SandboxPool) -> None:
    """Each attack scores its honest fraction and leaves nothing behind (see the helper)."""
    check_attack_scores_only_honest_work_and_leaves_nothing_behind(attack, pool_of_two)


def test_a_candidates_stop_iteration_fails_the_check_and_says_so(pool_of_two: SandboxPool) -> None:
    """It reaches the check as an error naming the call, not as the end of the check's loop."""
    result = run_tests("def add(a, b):\n    raise StopIteration('early')\n", list(MAP_CHECKS),
                       pool=pool_of_two)
    assert result.passed == 0
    assert [f.kind for f in result.failures] == ["exception"] * 3
    assert "add(1, 1) raised StopIteration: early" in result.failures[0].message


def test_only_a_check_calling_one_builtin_name_asks_the_candidate_for_it() -> None:
    """MBPP 126's `assert sum(10, 15) == 6` ships `sum`; with a second builtin called beside
    it nothing is shipped, so a candidate's `all` or `max` never reaches the verdict."""
    from agentenv.grading import plan_checks

    (alone,) = plan_checks(["assert sum(10, 15) == 6"]).checks
    assert alone.mode == "trusted" and alone.calls == ("sum(10, 15)",)
    for text in (SUM_CHECKS[0], SUM_CHECKS[2]):
        (mixed,) = plan_checks([text]).checks
        assert mixed.mode == "trusted" and mixed.calls == ()


def test_stdio_frames_a_program_forges_for_other_cases_only_cost_it_those_cases(pool_of_two: SandboxPool) -> None:
    """A program may write frames on the result channel it inherits: for another case it can
    only claim an output it never computed (the expected one never leaves the parent)."""
    from agentenv.tasks.schema import StdioCase

    forge = (
        "import gc, os, sys\n"
        "wire = next(m for m in list(sys.modules.values()) if hasattr(m, 'encode_frame'))\n"
        "job = next(o for o in gc.get_objects() if isinstance(o, dict) and 'nonce' in o and 'items' in o)\n"
        "for item in job['items']:\n"
        "    os.write(3, wire.encode_frame(job['nonce'], {'t': 'stdio', 'i': item['i'], 'out': item['stdin']}))\n"
        "print(int(input()) * 2)\n")
    cases = [StdioCase("2\n", "4\n"), StdioCase("5\n", "10\n")]
    result = run_tests(forge, cases, timeout=2.0, pool=pool_of_two)
    assert result.passed == 0  # its own frames (echoing stdin) came first and are wrong
    assert leftover_processes(pool_of_two) == []
    assert run_tests("print(int(input()) * 2)\n", cases, pool=pool_of_two).fraction == 1.0


JUDGED_XS = ("for x in (1, 2, 3):\n    assert f(x) == x",)


JUDGED_CODE = """
import os, sys
FORGE
sys.stdout.write("o" * 200_000)
sys.stdout.flush()
def f(x):
    os.write(3, b"+finished\\n") if FORGE_IN_CALL else None
    print("call", x)
    return x if x != WRONG else -1
"""


@pytest.mark.parametrize(("forge", "in_call", "wrong", "expected"), [
    ("", False, 0, 1.0),
    ("os.write(3, b'+finished\\n')", False, 0, 1.0),
    ("", True, 0, 1.0),
    ("os.write(3, b'+finished\\n')", True, 3, 0.0),
])
def test_a_forged_finished_marker_never_ends_a_judged_run_before_its_judge(
        pool: SandboxPool, forge: str, in_call: bool, wrong: int, expected: float) -> None:
    """A check only the judge process can grade (a loop), and a candidate that writes FINISHED
    on fd 3 at load and/or inside every call the judge makes, so G's result pipe ends with the
    marker while the judge still works. The early answer also waits for the judge to exit, so
    the verdict is the judge's, earned work only: 1.0 when every call is right, 0.0 (not a
    forged pass) when the last one is wrong; 200 kB of stdout written at load comes back."""
    code = (JUDGED_CODE.replace("FORGE_IN_CALL", str(in_call)).replace("FORGE", forge)
            .replace("WRONG", str(wrong)))
    result = run_tests(code, JUDGED_XS, timeout=2.0, pool=pool, limits=Limits(max_output=1 << 20))
    assert (result.fraction, result.timed_out) == (expected, False), result.failures
    assert result.stdout.startswith("o" * 200_000), len(result.stdout)
    honest_run_passes(pool)


def test_the_forgery_helper_finds_the_nonce_and_the_exact_end(pool: SandboxPool) -> None:
    """Control for the attacks built on FORGERY: the candidate does find its nonce and builds the very
    bytes ``_candidate.ended`` returns (an assert in the helper), and an honest f still scores 1.0."""
    result = run_on(pool, FORGERY + HONEST, CHECK)
    assert (result.fraction, result.timed_out) == (1.0, False), result.failures


def test_the_exact_end_forged_at_load_only_cuts_the_candidates_own_run(pool: SandboxPool) -> None:
    """The done frame with the run's nonce and FINISHED, written on fd 3 at load, then a pause
    so the worker reads it as the pipe's last bytes: the worker ends the run there and kills G
    before its load frame, so nothing is credited (0.0, not a timeout) and the next honest run
    on the same worker is untouched."""
    workers = pool.worker_pids
    code = FORGERY + "os.write(3, END)\ntime.sleep(0.5)\n" + HALF_CODE
    result = run_on(pool, code, HALF)
    assert result.fraction == 0.0, result.failures
    assert result.timed_out is False
    honest_plain_passes(pool)
    assert pool.worker_pids == workers
    assert leftover_processes(pool) == []


def test_the_exact_end_forged_inside_a_call_cuts_the_later_checks_not_credits_them(
        pool: SandboxPool) -> None:
    """Inside f (before f's own frame), a forged frame giving g's call a wrong value, then the
    exact end: the run ends there. f's check never reported (no_result) and g's is judged on
    the forged value, which is wrong: 0.0. A forged frame is only ever what returning that
    value says (the first frame of a call wins), so forging never beats computing."""
    code = FORGERY + (
        "def f():\n"
        "    os.write(3, forged_call(1, 3) + END)\n"
        "    time.sleep(0.5)\n"
        "    return 1\n"
        "def g():\n    return 2\n")
    result = run_on(pool, code, HALF)
    # f's own frame never came (G was killed in f), g's forged wrong value is judged as such
    assert result.fraction == 0.0, result.failures
    assert {f.index for f in result.failures} == {0, 1}
    honest_plain_passes(pool)


def test_frames_forged_after_the_done_frame_are_never_credited(pool: SandboxPool) -> None:
    """g raises; once G has written its done frame and FINISHED and closed fd 3, a thread
    writes through a saved copy of fd 3 a frame giving g's call the right value, then the exact
    end again (so the pipe's last bytes are a valid end once more). The real frame for g (it
    raised) came first, and the parent keeps the first frame of each call: 0.5, not 1.0."""
    code = FORGERY + (
        "after_finished(lambda: os.write(SAVED, forged_call(1, 2) + END))\n"
        "def f():\n    return 1\n"
        "def g():\n    raise ValueError('no')\n")
    for _ in range(3):
        result = run_on(pool, code, HALF)
        assert result.fraction == 0.5, result.failures
        assert [f.index for f in result.failures] == [1]
        assert result.timed_out is False
    honest_plain_passes(pool)


def test_a_call_that_hangs_stays_unpaid_in_a_judged_run_whatever_g_forges(
        pool: SandboxPool) -> None:
    """A check only the judge process grades, and an f that hangs; a watchdog thread in G
    forges, with G's nonce, frames for the check and the exact end. The verdict is read only
    from J's pipe (J's nonce is not G's) and the early end waits for J to exit, so the check is
    not credited: 0.0, the run stopped by its time limit, not hung."""
    code = FORGERY + (
        "def watchdog():\n"
        "    time.sleep(0.2)\n"
        "    forged = _wire.encode_frame(NONCE, {_schema.TYPE: _schema.CHECK, "
        "_schema.INDEX: 0, _schema.OK: True})\n"
        "    os.write(3, forged + forged_call(0, 1) + END)\n"
        "threading.Thread(target=watchdog, daemon=True).start()\n"
        "def f(x):\n    while True:\n        time.sleep(0.01)\n")
    checks = ["for x in (1, 2):\n    assert f(x) == x"]
    result = run_on(pool, code, checks, timeout=0.5)
    assert (result.fraction, result.timed_out) == (0.0, True), result.failures
    honest_plain_passes(pool)


HONEST_CALLS = {
    "thread_still_sleeping": "import threading, time\n"
                             "threading.Thread(target=time.sleep, args=(30,)).start()\n",
    "thread_still_printing": "import threading\ndef p():\n    while True:\n"
                             "        print('x', end='')\n"
                             "threading.Thread(target=p, daemon=True).start()\n",
    "output_without_newline": "import sys\nsys.stdout.write('partial')\n",
    "stdout_closed": "import sys\nprint('hi')\nsys.stdout.close()\n",
    "stdout_replaced": "import io, sys\nsys.stdout = io.StringIO()\nprint('hi')\n",
    "background_subprocess": "import subprocess, sys\n"
                             "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n",
    "background_fork": "import os, time\nif os.fork() == 0:\n    time.sleep(30)\n    os._exit(0)\n",
}


@pytest.mark.parametrize("name", sorted(HONEST_CALLS))
def test_honest_solutions_with_loose_ends_score_exactly_one(pool: SandboxPool, name: str) -> None:
    """Threads still running at the end, output without a newline, stdout closed or replaced,
    a background child: 1.0 for two checks, no timeout, well within the limit."""
    code = HONEST_CALLS[name] + "def f():\n    return 1\ndef g():\n    return 2\n"
    result = run_on(pool, code, HALF)
    assert (result.fraction, result.timed_out) == (1.0, False), (name, result.failures)
    if name == "output_without_newline":
        assert result.stdout == "partial"


def test_an_honest_judged_solution_with_a_thread_still_running_scores_one(
        pool: SandboxPool) -> None:
    code = ("import threading, time\nthreading.Thread(target=time.sleep, args=(30,)).start()\n"
            "def f(x):\n    return x\n")
    result = run_on(pool, code, ["for x in (1, 2, 3):\n    assert f(x) == x"])
    assert (result.fraction, result.timed_out) == (1.0, False), result.failures


STDIO = StdioCase(stdin="3\n", expected_stdout="9")


HONEST_STDIO = {
    "plain": "n = int(input())\nprint(n * n)\n",
    "without_newline": "import sys\nn = int(input())\nsys.stdout.write(str(n * n))\n",
    "stdout_closed": "import sys\nn = int(input())\nprint(n * n)\nsys.stdout.close()\n",
    "stdout_rewrapped": "import io, os, sys\nn = int(input())\n"
                        "sys.stdout = io.TextIOWrapper(os.fdopen(1, 'wb'))\nprint(n * n)\n",
    "daemon_thread_left": "import threading, time\nn = int(input())\n"
                          "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
                          "print(n * n)\n",
    "sys_exit": "import sys\nn = int(input())\nprint(n * n)\nsys.exit(0)\n",
    "background_child_off_stdout": "import subprocess, sys\nn = int(input())\n"
                                   "subprocess.Popen([sys.executable, '-c', 'import time; "
                                   "time.sleep(30)'], stdout=subprocess.DEVNULL)\nprint(n * n)\n",
}


@pytest.mark.parametrize("name", sorted(HONEST_STDIO))
def test_honest_stdio_programs_score_exactly_one(pool: SandboxPool, name: str) -> None:
    result = run_on(pool, HONEST_STDIO[name], [STDIO, STDIO])
    assert (result.fraction, result.timed_out) == (1.0, False), (name, result.failures)


# A stdio program's process must end as CPython's does, not with os._exit right after flushing
# sys.stdout: CPython first joins non-daemon threads and finalizes (so flushes) other file objects
# on fd 1. Both programs print 9 under `python3`; _runner._end_program does what the interpreter
# does.
PRE_EXISTING_STDIO = {
    "non_daemon_thread_prints_after_main": "import threading, time\nn = int(input())\n"
                                           "def p():\n    time.sleep(0.1)\n    print(n * n)\n"
                                           "threading.Thread(target=p).start()\n",
    "own_buffered_file_on_fd_1": "n = int(input())\nout = open(1, 'w', closefd=False)\n"
                                 "out.write(str(n * n))\n",
}


@pytest.mark.parametrize("name", sorted(PRE_EXISTING_STDIO))
def test_honest_stdio_programs_relying_on_interpreter_exit_score_one(
        pool: SandboxPool, name: str) -> None:
    result = run_on(pool, PRE_EXISTING_STDIO[name], [STDIO])
    assert (result.fraction, result.timed_out) == (1.0, False), (name, result.failures)


def test_text_shaped_like_every_known_end_never_ends_the_judge_early(pool: SandboxPool) -> None:
    """Four judged checks: f raises a message made of the ends the candidate knows (after
    writing its own exact end on G's pipe), g returns it as a value, ok is right, hang never
    returns. The judge's pipe never ends like its end before the judge is done, so the run is
    not cut: ok's check is graded (passes) after the two quoted ends, and hang's is a timeout,
    never credited: exactly 0.25."""
    checks = [judged("f"), judged("g"), judged("ok"), judged("hang")]
    result = run_on(pool, JUDGE_TEXT, checks, timeout=0.5)
    assert result.fraction == 0.25, result.failures
    assert result.passed_indices == (2,)
    assert result.timed_out is True
    honest_controls_pass(pool)


def test_g_that_forges_its_end_and_exits_mid_judging_keeps_only_earlier_verdicts(
        pool: SandboxPool) -> None:
    """ok's check, then g (which writes G's exact end and exits while the judge waits for its
    answer), then ok again: the first verdict stands, the judge reports the other two as
    no_result (the candidate is gone) and the run ends without waiting: exactly 1/3."""
    checks = [judged("ok"), judged("g"), judged("ok")]
    result = run_on(pool, G_EXITS_MID_JUDGING, checks)
    assert result.passed_indices == (0,), result.failures
    assert result.timed_out is False
    assert {f.kind for f in result.failures} == {"no_result"}
    honest_controls_pass(pool)


KILL_THE_JUDGE = FORGED_ENDS + SIBLINGS + """
def ok(x):
    return x
def g(x):
    for pid in siblings():
        try:
            os.kill(pid, signal.SIGNAL)
        except OSError:
            pass
    os.write(3, END)  # G's exact end, the judge stopped or gone: the run may end now
    time.sleep(30)
"""


@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGSTOP"])
def test_rlimits_candidate_that_kills_or_stops_the_judge_gains_nothing(
        fallback_pool: SandboxPool, signal_name: str) -> None:
    """At the rlimits level G can signal its judge (and the prepared runs beside it). Killed
    after its first verdict, with G's exact end written, the run ends at once (the judge has
    exited): the first check stands, the rest are no_result: exactly 1/3. Stopped, the judge
    neither ends nor exits: the run is stopped by its wall limit, still 1/3. The next honest
    runs, on prepared runs the worker had to replace, score exactly 1.0."""
    checks = [judged("ok"), judged("g"), judged("ok")]
    code = KILL_THE_JUDGE.replace("SIGNAL", signal_name)
    result = run_on(fallback_pool, code, checks, timeout=0.5)
    assert result.passed_indices == (0,), result.failures
    assert result.timed_out is (signal_name == "SIGSTOP")
    for _ in range(2):
        honest_controls_pass(fallback_pool)


@pytest.mark.parametrize("name", sorted(STDIO_HONEST))
def test_honest_stdio_programs_score_exactly_one_back_to_back(pool: SandboxPool, name: str) -> None:
    for _ in range(2):
        result = run_on(pool, STDIO_HONEST[name], [STDIO_3, STDIO_4])
        assert (result.fraction, result.timed_out) == (1.0, False), (name, result.failures)


# Both print 9 under python3: _end_program does what the interpreter does at exit, atexit
# handlers included, and the program's end flushes sys.__stdout__ as well.
STDIO_DIVERGENT = {
    # The competitive-programming idiom: buffer all output, write it out at exit.
    "atexit_writes_the_buffered_output": "import atexit, io, sys\nbuf = io.StringIO()\n"
                                         "sys.stdout = buf\n@atexit.register\ndef out():\n"
                                         "    sys.__stdout__.write(buf.getvalue())\n"
                                         "print(int(input()) ** 2)\n",
    # sys.__stdout__ (the original stream on fd 1) is flushed when the interpreter finalizes.
    "unflushed_write_to_sys_dunder_stdout": "import io, sys\nsys.stdout = io.StringIO()\n"
                                            "sys.__stdout__.write(str(int(input()) ** 2))\n",
}


@pytest.mark.parametrize("name", sorted(STDIO_DIVERGENT))
def test_honest_stdio_programs_relying_on_atexit_or_the_original_stdout(
        pool: SandboxPool, name: str) -> None:
    result = run_on(pool, STDIO_DIVERGENT[name], [STDIO_3])
    assert (result.fraction, result.timed_out) == (1.0, False), (name, result.failures)


def test_stdio_finalizer_forging_frames_and_the_end_gains_nothing(pool: SandboxPool) -> None:
    """At the program's end (namespace cleared), a finalizer in the first case's process writes
    on the result pipe a stdio frame for the next case and G's exact end. The run ends there,
    before G has reported the first case (G sends it once the program's process is gone): that
    case is no_result and the forged frame is judged like printed output (wrong: 9 for 4):
    0.0, never more than printing the same would earn."""
    result = run_on(pool, STDIO_FINALIZER_FORGES, [STDIO_3, STDIO_4])
    assert result.fraction == 0.0, result.failures
    assert [f.kind for f in result.failures] == ["no_result", "assertion"]
    assert result.timed_out is False
    honest_controls_pass(pool)


# Candidate-side: every 32-hex-digit string anywhere in G's writable memory (the judge's
# requests it served included), compared by hash with the judge's nonce (the test makes both
# nonces known to itself, and gives the candidate only the hash).
SCAN_FOR_THE_JUDGES_NONCE = """
import ctypes, hashlib, re
def f(x):
    wanted = bytes.fromhex(WANTED)
    pattern = re.compile(rb"[0-9a-f]{32}")
    with open("/proc/self/maps") as handle:  # (G is not dumpable: no /proc/self/mem)
        regions = [line.split() for line in handle]
    for region in regions:
        low, high = (int(v, 16) for v in region[0].split("-"))
        if not region[1].startswith("rw") or high - low > (256 << 20):
            continue
        for found in pattern.findall(ctypes.string_at(low, high - low)):
            if hashlib.sha256(found).digest() == wanted:
                return -1
    return x
"""


def test_the_judges_nonce_is_nowhere_in_the_candidates_memory(
        pool: SandboxPool, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the run's two nonces known to the test, the candidate scans all its writable
    memory (its job, the judge's requests it served, the warm-up's leftovers) for the judge's
    nonce, by hash: never found (the check passes only then), in two runs; the same scan for
    its own nonce finds it (the control: the check fails)."""
    import hashlib
    import itertools
    import secrets

    made = itertools.count()
    nonces: list[str] = []

    def token_hex(nbytes: int | None = None) -> str:
        nonces.append(hashlib.sha256(f"rt7-{next(made)}".encode()).hexdigest()[:32])
        return nonces[-1]

    monkeypatch.setattr(secrets, "token_hex", token_hex)
    for run in range(3):
        # the run's first nonce is G's (the control: the scan finds it), its second the judge's
        own, theirs = (hashlib.sha256(f"rt7-{2 * run + k}".encode()).hexdigest()[:32]
                       for k in (0, 1))
        code = SCAN_FOR_THE_JUDGES_NONCE.replace(
            "WANTED", repr(hashlib.sha256((own if run == 0 else theirs).encode()).hexdigest()))
        result = run_on(pool, code, [judged("f")], timeout=10.0)
        assert nonces[-2:] == [own, theirs]
        expected = 0.0 if run == 0 else 1.0
        assert (result.fraction, result.timed_out) == (expected, False), result.failures


# A task with function checks and a stdio case: G runs the code for the checks (registering
# the handler there), then forks the stdio program, which runs it again as __main__.
ATEXIT_PROGRAM = ("import atexit\natexit.register(print, 'bye')\ndef f():\n    return 1\n"
                  "if __name__ == '__main__':\n    n = int(input())\n    print(n * n)\n")


@pytest.mark.parametrize("isolation", ["strict", "rlimits"])
def test_atexit_handlers_of_the_checks_run_never_reach_the_stdio_program(
        pool: SandboxPool, isolation: str) -> None:
    """The stdio program does not inherit the handlers G registered running the function
    checks, so an honest program that prints at exit prints once and scores 1.0."""
    used = pool if isolation == "strict" else SandboxPool(
        size=1, isolation="rlimits", allow_root_fallback=True)
    try:
        result = run_tests(ATEXIT_PROGRAM, [CHECK[0], StdioCase(stdin="3\n",
                                                                 expected_stdout="9\nbye")],
                           timeout=1.0, pool=used)
        assert (result.fraction, result.timed_out) == (1.0, False), result.failures
    finally:
        if used is not pool:
            used.close()


# Each reports whether the kernel refused it (EPERM, from the sandbox's syscall filter).
REACH_IN = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def refused(ret):
    return ret == -1 and ctypes.get_errno() == 1
def f():
    found = {}
    found["ptrace_traceme"] = refused(libc.ptrace(0, 0, None, None))
    found["ptrace_seize_self_parent"] = refused(libc.ptrace(0x4206, os.getppid(), None, None))
    buf = ctypes.create_string_buffer(8)
    iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)
    found["process_vm_readv"] = refused(libc.process_vm_readv(os.getpid(), iov, 1, iov, 1, 0))
    found["pidfd_getfd"] = refused(libc.syscall(438, 0, 0, 0))
    return found
"""


EVERY_WAY_REFUSED = ("assert f() == {'ptrace_traceme': True, 'ptrace_seize_self_parent': True, "
                     "'process_vm_readv': True, 'pidfd_getfd': True}")


@pytest.mark.parametrize("level", ["strict", "rlimits"])
def test_no_run_can_trace_or_reach_into_another_process(pool: SandboxPool, level: str) -> None:
    """ptrace, process_vm_readv/writev and pidfd_getfd are refused to every run (a traced
    candidate, TRACED_CANDIDATE, would hold the fallback zygote in waitpid: a tracee's zombie is
    its tracer's)."""
    pool = pool if level == "strict" else fallback()
    try:
        result = run_tests(REACH_IN, [EVERY_WAY_REFUSED], timeout=1.0, pool=pool)
        assert (result.fraction, result.timed_out) == (1.0, False), result.failures
    finally:
        if pool is not pool:
            pool.close()


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


JUDGED_TWENTY = ["for _ in range(20):\n    assert f() == 1"]


def test_strict_a_candidate_that_crowds_the_judges_cpu_gains_nothing(pool: SandboxPool) -> None:
    """Contained: G cannot name J (another pid namespace), its spinners die with its namespace,
    and a starved judge only makes the run slower: 0.0, and the next runs are unaffected."""
    attacked = run_tests(STARVE_THE_JUDGE, JUDGED_TWENTY, timeout=1.0, pool=pool)
    assert attacked.fraction == 0.0
    honest_passes(pool)
    probe = run_tests(PROBE, [f"assert f()[2] == {len(os.sched_getaffinity(0))}"], timeout=1.0,
                      pool=pool)
    assert probe.fraction == 1.0, probe.failures  # no pin reaches a later run
