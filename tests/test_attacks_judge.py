"""Attacks on the judge process: no verdict is ever decided where candidate code ran.

Checks the trusted side cannot decompose (loops, several statements, setup helpers) are graded by
a judge process that talks to the candidate's process only through proxies. Each attack below
tries to win such checks anyway: forging verdicts, finding nonces, patching what helper code
uses, reading expected values, answering trusted checks by lookup, hanging or dying inside a
proxy call, returning impostor values, abusing callbacks. Each must score exactly what honest
work earns, within its timeout plus a margin, leave no process behind, and leave the pool
serving; the honest controls score exactly 1.0 or their fraction. Strict isolation, as CI runs.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.attacks import FIND_SOCKETS, Case, make_case, strict_pool

from agentenv.grading import RunResult, plan_checks, run_tests
from agentenv.sandbox import SandboxPool
from agentenv.sandbox.testing import leftover_processes, processes_matching
from agentenv.tasks import Task, load_tasks

MARKER = f"agentenv-judge-attack-{os.getpid()}-{int(time.time())}"
TOKENS = [f"tok-{hashlib.sha256(f'{MARKER}{i}'.encode()).hexdigest()[:16]}" for i in range(3)]
DATA = os.path.join(os.path.dirname(__file__), "data")

ADD_FAST = ("assert add(2, 3) == 5", "assert add(-1, 1) == 0")
ADD_LOOP = "for a in (1, 2, 99):\n    assert add(a, 1) == a + 1"
ADD_MULTI = "x = add(99, 2)\ny = add(x, 1)\nassert y == 102"
# Expected values only the judge sees: loop and multi-statement checks over the secret tokens...
SECRET_LOOP = tuple(f"for _ in range(2):\n    assert secret({i}) == {tok!r}"
                    for i, tok in enumerate(TOKENS))
# ...and the same questions asked as decomposable asserts, whose values the parent judges.
SECRET_FAST = tuple(f"assert secret({i}) == {tok!r}" for i, tok in enumerate(TOKENS))

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
CALLBACK_CHECKS = ("assert apply(lambda v: v * 2, 3) == 6",
                   "def again(x):\n    return apply(again, x)\nassert apply(again, 1) == 1")
TREE_SETUP = "root = Node(1)\nroot.left = Node(2)\nroot.left.left = Node(3)\nroot.right = Node(4)\n"
TREE_CHECKS = ("for node, height in ((root, 3), (root.left, 2), (root.right, 1)):\n"
               "    assert max_height(node) == height",)

def case(name: str, code: str, checks: tuple[str, ...], **kwargs: object) -> Case:
    return make_case(MARKER, name, code, checks, **kwargs)


ATTACKS = [
    # --- forging verdicts -------------------------------------------------------------------
    case("forge_verdict_frames_with_every_nonce_found_on_every_fd", r"""
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
    case("fake_answers_written_on_the_judge_channel", FIND_SOCKETS + r"""
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
    case("stack_walk_rewrites_the_candidate_side_server", r"""
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
    case("patch_the_runner_and_wire_modules_in_the_candidates_process", r"""
import sys
for module in list(sys.modules.values()):
    for name in ('_encode_value', 'encode_value'):
        if hasattr(module, name):
            setattr(module, name, lambda value: b'\xc3')   # every value "True"
def secret(i):
    return object()
""", SECRET_LOOP),
    case("read_proc_of_every_process_for_the_judges_secrets", r"""
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
    case("patch_math_and_sum_before_the_setup_helper_poly_runs", r"""
import builtins, math
math.pow = lambda x, i: 0.0
builtins.sum = lambda xs, start=0: 0.0
def find_zero(xs):
    return 12345.0
def probe():
    return poly([1, 2], 5.0)   # the helper as the candidate's own process now computes it
""", (*POLY_CHECKS, "assert probe() == 0.0"), expected=1 / 3, setup=POLY_SETUP),
    case("patch_builtin_sorted_under_a_reference_helper", r"""
import builtins
builtins.sorted = lambda xs, **kwargs: ['forged']
def my_sort(xs):
    return ['forged']
def probe():
    return reference([3, 1, 2])
""", (*SORT_CHECKS, "assert probe() == ['forged']"), expected=1 / 3, setup=SORT_SETUP),
    case("candidate_globals_shadow_the_builtins_a_loop_check_uses", r"""
def sorted(xs, **kwargs):
    return 'same'
def len(xs):
    return 0
def my_sort(xs):
    return 'same'
""", ("for xs in ([3, 1], [2, 2, 1]):\n    assert my_sort(xs) == sorted(xs)",
      "ys = my_sort([1])\nassert len(ys) == 1 and ys == [1]")),
    case("candidate_global_shadows_a_stdlib_module_a_loop_check_uses", r"""
class _FakeMath:
    @staticmethod
    def isclose(*args, **kwargs):
        return True
math = _FakeMath()
def half(x):
    return 0.0
""", ("for x in (1.0, 3.0):\n    assert math.isclose(half(x), x / 2)",)),
    # --- reading expected values, answering trusted checks by lookup ------------------------
    case("gc_scan_for_loop_expectations_then_answer_trusted_checks_by_lookup", r"""
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
    case("memory_scan_for_loop_expectations_then_answer_trusted_checks_by_lookup", r"""
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
    case("stack_and_job_walk_for_other_checks", r"""
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
    # --- hanging or dying inside a proxy call (the two decomposable checks still count) ----------
    case("busy_loop_inside_a_proxy_call", r"""
def add(a, b):
    while a == 99:
        pass
    return a + b
""", (*ADD_FAST, ADD_LOOP), expected=2 / 3),
    case("sleep_with_signals_ignored_inside_a_proxy_call", r"""
import signal, time
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM):
    signal.signal(sig, signal.SIG_IGN)
def add(a, b):
    if a == 99:
        time.sleep(1000)
    return a + b
""", (*ADD_FAST, ADD_LOOP), expected=2 / 3),
    case("os_exit_inside_a_proxy_call", r"""
import os
def add(a, b):
    if a == 99:
        os._exit(0)
    return a + b
""", (*ADD_FAST, ADD_LOOP, ADD_MULTI), expected=2 / 4),
    case("segfault_inside_a_proxy_call", r"""
import ctypes
def add(a, b):
    if a == 99:
        ctypes.string_at(0)
    return a + b
""", (*ADD_FAST, ADD_LOOP, ADD_MULTI), expected=2 / 4),
    case("sys_exit_inside_a_proxy_call", r"""
import sys
def add(a, b):
    if a == 99:
        sys.exit(0)
    return a + b
""", (*ADD_FAST, ADD_LOOP, ADD_MULTI), expected=2 / 4),
    case("close_the_judge_channel_inside_a_proxy_call", FIND_SOCKETS + r"""
import socket
def add(a, b):
    if a == 99:
        for fd in sockets():
            try:
                socket.socket(fileno=fd).shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    return a + b
""", (*ADD_FAST, ADD_LOOP, ADD_MULTI), expected=2 / 4),
    case("fork_a_child_that_keeps_the_judge_channel_open", r"""
import os, sys
def add(a, b):
    if a == 99:
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', 'MARKER'])
        os._exit(0)
    return a + b
""", (*ADD_FAST, ADD_LOOP), expected=2 / 3),
    # --- answers that are not plain data ---------------------------------------------------
    case("always_equal_object_to_the_judge", r"""
class AlwaysEqual:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __bool__(self): return True
    __hash__ = object.__hash__
def add(a, b):
    return AlwaysEqual()
""", (ADD_LOOP, ADD_MULTI)),
    case("int_subclass_liar_to_the_judge", r"""
class Liar(int):
    def __eq__(self, other): return True
    __hash__ = int.__hash__
def add(a, b):
    return Liar(a + b + 1)
""", (ADD_LOOP, ADD_MULTI)),
    case("class_spoofing_object_to_the_judge", r"""
class Spoof:
    @property
    def __class__(self): return int
    def __eq__(self, other): return True
def add(a, b):
    return Spoof()
""", (ADD_LOOP, ADD_MULTI)),
    case("deep_and_huge_values_to_the_judge", r"""
def add(a, b):
    if a < 50:
        deep = []
        for _ in range(500):
            deep = [deep]
        return deep
    return 1 << (4 * 10 ** 6)
""", (ADD_LOOP, ADD_MULTI), timeout=2.0),
    case("hostile_exceptions_raised_to_the_judge", r"""
class Nasty(Exception):
    def __str__(self):
        raise Nasty()
def add(a, b):
    if a > 50:
        raise ValueError('x' * (4 << 20))
    raise Nasty()
""", (ADD_LOOP, ADD_MULTI)),
    case("oversized_frame_header_on_the_judge_channel", FIND_SOCKETS + r"""
def add(a, b):
    for fd in sockets():
        try:
            os.write(fd, b'\xff\xff\xff\xff' + b'x' * 4096)
        except OSError:
            pass
    return a + b
""", (ADD_LOOP, ADD_MULTI)),
    # --- callbacks -------------------------------------------------------------------------
    case("callbacks_that_recurse_forever", r"""
def apply(fn, x):
    return fn(x)
""", CALLBACK_CHECKS, expected=1 / 2),
    case("candidate_calls_a_callback_forever", r"""
def apply(fn, x):
    while True:
        fn(x)
""", CALLBACK_CHECKS[:1]),
    case("non_plain_data_handed_to_a_callback", r"""
class Always:
    def __eq__(self, other): return True
def apply(fn, x):
    return fn(Always())
""", CALLBACK_CHECKS[:1]),
    # --- side effects the check watches ------------------------------------------------------
    case("mutate_an_argument_behind_the_checks_back", r"""
def median(xs):
    xs.sort()
    return xs[len(xs) // 2]
""", ("assert median([3, 1, 2]) == 2",
      "nums = [3, 1, 2]\nmedian(nums)\nassert nums == [3, 1, 2], 'median() must not modify its argument'"),
         expected=1 / 2),
    case("kill_everything_visible_from_inside_a_proxy_call", r"""
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

CONTROLS = [
    case("control_setup_helper_poly_and_a_loop", FIND_ZERO, POLY_CHECKS, expected=1.0,
         setup=POLY_SETUP),
    case("control_reference_helper_sort", "def my_sort(xs):\n    return sorted(xs)\n", SORT_CHECKS,
         expected=1.0, setup=SORT_SETUP),
    case("control_half_correct_on_loops", "def add(a, b):\n    return a + b if a < 50 else 0\n",
         (*ADD_FAST, ADD_LOOP, ADD_MULTI), expected=1 / 2),
    case("control_secret_lookup_everywhere", f"def secret(i):\n    return {TOKENS!r}[i]\n",
         SECRET_LOOP + SECRET_FAST, expected=1.0),
    case("control_callbacks", "def apply(fn, x):\n    return fn(x)\n", CALLBACK_CHECKS[:1],
         expected=1.0),
    case("control_objects_and_methods_in_a_loop",
         "class Counter:\n    def __init__(self):\n        self.value = 0\n"
         "    def inc(self, by=1):\n        self.value += by\n        return self.value\n",
         ("c = Counter()\nfor i in range(3):\n    assert c.inc() == i + 1\nassert c.value == 3",
          "c = Counter()\nc.value = 10\nassert c.inc(by=5) == 15"), expected=1.0),
    case("control_setup_builds_objects_from_the_candidates_class",
         "class Node:\n    def __init__(self, v):\n        self.v, self.left, self.right = v, None, None\n"
         "def max_height(node):\n    if node is None:\n        return 0\n"
         "    return 1 + max(max_height(node.left), max_height(node.right))\n",
         TREE_CHECKS, expected=1.0, setup=TREE_SETUP),
    case("control_a_builtin_name_the_task_is_about",
         "def sum(a, b):\n    return a * b\n",
         ("for a, b in ((2, 3), (4, 5)):\n    assert sum(a, b) == a * b",), expected=1.0),
    case("control_candidate_constants_and_expected_exceptions",
         "LIMIT = 10\ndef f(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x\n",
         ("y = f(LIMIT)\nassert y == LIMIT == 10",
          "try:\n    f(-1)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError('no error')"),
         expected=1.0),
    case("control_median_leaves_its_argument_alone",
         "def median(xs):\n    return sorted(xs)[len(xs) // 2]\n",
         ("assert median([3, 1, 2]) == 2",
          "nums = [3, 1, 2]\nmedian(nums)\nassert nums == [3, 1, 2]"), expected=1.0),
]


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    made = strict_pool(2, "the judge attacks")
    yield made
    made.close()


def test_the_suite_names_at_least_25_distinct_judge_attacks() -> None:
    """Every class the judge defends against has attacks; names are unique."""
    names = [c.name for c in ATTACKS + CONTROLS]
    assert len(ATTACKS) >= 25 and len(set(names)) == len(names)


@pytest.mark.parametrize("attack", ATTACKS + CONTROLS, ids=lambda c: c.name)
def test_judge_attack_scores_only_honest_work_and_leaves_nothing_behind(
        attack: Case, pool: SandboxPool) -> None:
    """Score == honest fraction, graded_in_child == 0, nothing left, pool fine (not timed: a
    run that never ends is pytest-timeout's to catch)."""
    plan = plan_checks(attack.checks, setup_code=attack.setup)
    assert plan.needs_judge  # every case has checks only the judge process can grade
    result = run_tests(attack.code, list(attack.checks), timeout=attack.timeout,
                       setup_code=attack.setup, pool=pool)

    assert result.fraction == attack.expected, result.failures
    assert result.passed == round(attack.expected * len(attack.checks))
    assert result.graded_in_child == 0
    assert result.isolation == "strict"
    assert all(len(f.message) <= 520 for f in result.failures)
    assert leftover_processes(pool) == []
    assert processes_matching(MARKER, wait=0.2) == []
    assert run_tests("def add(a, b):\n    return a + b\n", [*ADD_FAST, ADD_LOOP],
                     pool=pool).fraction == 1.0


def test_failures_inside_proxy_calls_say_what_happened(pool: SandboxPool) -> None:
    """A hang is a timeout, a death is no_result naming the call, a raise names the exception,
    an impostor value names its type, and a runaway callback names the nesting limit."""
    by_name = {c.name: c for c in ATTACKS}

    def failures(name: str) -> list[tuple[str, str]]:
        c = by_name[name]
        result = run_tests(c.code, list(c.checks), timeout=c.timeout, setup_code=c.setup, pool=pool)
        return [(f.kind, f.message) for f in result.failures]

    assert failures("busy_loop_inside_a_proxy_call") == [
        ("timeout", "the time limit was reached before this check finished")]
    died = failures("os_exit_inside_a_proxy_call")
    assert died[0] == ("no_result", "the candidate's process ended during add(99, 1)")
    assert died[1][0] == "no_result"
    raised = failures("sys_exit_inside_a_proxy_call")
    assert raised[0] == ("exception", "add(99, 1) raised SystemExit: 0")
    assert failures("always_equal_object_to_the_judge")[0] == (
        "assertion", "add(1, 1) returned <the candidate's AlwaysEqual>")
    (runaway,) = failures("callbacks_that_recurse_forever")
    assert runaway[0] == "exception" and "nested deeper than 32 levels" in runaway[1]
    mutated = failures("mutate_an_argument_behind_the_checks_back")
    assert mutated == [("assertion", "median() must not modify its argument")]


def test_scanners_used_above_do_find_expected_values_planted_in_the_candidates_process(
        pool: SandboxPool) -> None:
    """The same scans score once the tokens sit in the candidate's process (here: its own code
    holds them): the judge attacks above fail because the judge never puts them there. Nor does
    the setup any longer: its data runs in the judge only, and the scans find nothing."""
    for name in ("gc_scan_for_loop_expectations_then_answer_trusted_checks_by_lookup",
                 "memory_scan_for_loop_expectations_then_answer_trusted_checks_by_lookup"):
        c = next(a for a in ATTACKS if a.name == name)
        in_order = [f"assert secret({i}) == {tok!r}" for i, tok in enumerate(sorted(TOKENS))]
        planted = run_tests(f"{c.code}\n_PLANTED = {TOKENS!r}\n", in_order, timeout=c.timeout,
                            pool=pool)
        assert planted.passed == len(TOKENS), (name, planted.failures)
        in_setup = run_tests(c.code, in_order, timeout=c.timeout, pool=pool,
                             setup_code=f"_PLANTED = {TOKENS!r}\n")
        assert in_setup.passed == 0, (name, in_setup.passed_indices)


def test_the_judges_job_never_reaches_the_candidates_process(pool: SandboxPool) -> None:
    """The candidate's job holds the decomposed calls only: no loop check, expected value or
    judge nonce; the judge's job goes to the judge process alone."""
    plan = plan_checks([*SECRET_FAST, *SECRET_LOOP])
    text = repr(plan.job_items())
    assert not any(tok in text for tok in TOKENS)
    assert [item["i"] for item in plan.job_items()] == [0, 1, 2]
    assert [item["i"] for item in plan.judge_items()] == [3, 4, 5]


def _datasets() -> dict[str, list]:
    return {
        "humaneval": load_tasks("humaneval"),
        "builtin": load_tasks("builtin"),
        "mbpp": load_tasks("mbpp", path=os.path.join(DATA, "mbpp_sample.jsonl")),
        "livecodebench": load_tasks("livecodebench", path=os.path.join(DATA, "livecodebench_sample.jsonl")),
        "apps": load_tasks("apps", path=os.path.join(DATA, "apps_sample.jsonl")),
    }


def test_no_dataset_we_load_has_a_check_graded_in_the_candidates_process(pool: SandboxPool) -> None:
    """Every check of every loader is decomposed, stdio, or judged by the judge process; the
    references of the tasks that need the judge score 1.0 and their stubs 0."""
    for name, tasks in _datasets().items():
        for task in tasks:
            plan = plan_checks(task.checks, setup_code=task.setup_code)
            assert {c.mode for c in plan.checks} <= {"trusted", "stdio", "judge"}, (name, task.name)
            if not plan.needs_judge or not task.reference_solution:
                continue
            result = run_tests(task.reference_solution, task.checks, 5.0,
                               setup_code=task.setup_code, pool=pool)
            assert result.fraction == 1.0 and result.graded_in_child == 0, (task.name, result.failures)
            stub = run_tests(task.prompt + "    pass\n", task.checks, 5.0,
                             setup_code=task.setup_code, pool=pool)
            assert stub.passed == 0, task.name


def test_the_judge_alone_grades_humaneval_s_original_tests(pool: SandboxPool) -> None:
    """With split_checks=False each task is its whole check(candidate) program, graded by the
    judge process with the candidate behind proxies: 164/164 canonical solutions, 0 stubs."""
    tasks = load_tasks("humaneval", split_checks=False)
    assert all(plan_checks(t.checks, setup_code=t.setup_code).needs_judge for t in tasks)

    def score(code_of: Callable[[Task], str]) -> list[RunResult]:
        with ThreadPoolExecutor(max_workers=2) as executor:
            return list(executor.map(lambda t: run_tests(code_of(t), t.checks, 5.0,
                                                         setup_code=t.setup_code, pool=pool), tasks))

    canonical = score(lambda t: t.reference_solution or "")
    assert [t.name for t, r in zip(tasks, canonical, strict=True) if not r.all_passed] == []
    stubs = score(lambda t: t.prompt + "    pass\n")
    assert sum(r.passed for r in stubs) == 0


def test_the_judge_honours_the_tasks_float_tolerance_like_the_fast_path(pool: SandboxPool) -> None:
    """0.1 + 0.2 matches 0.3 in a loop check only within an explicit tolerance, as it does in a
    decomposed assert; != is the negation; a candidate object is never 'close' to the check's
    data: it earns what a stub returning None earns (unequal to everything)."""
    code = "def f(k):\n    return [0.1 * k + 0.2 * k] * 2\n"
    checks = ["for k in (1, 2):\n    assert f(k) == [0.3 * k, 0.3 * k]",
              "assert f(1)[0] == 0.3", "x = f(1)\nassert x != [0.3, 0.3]"]
    strict = run_tests(code, checks, pool=pool)
    assert strict.passed_indices == (2,)
    tolerant = run_tests(code, checks, float_tolerance=1e-9, pool=pool)
    assert tolerant.passed_indices == (0, 1)
    impostor = "class X:\n    def __eq__(self, o): return True\ndef f(k):\n    return X()\n"
    stub = "def f(k):\n    return None\n"
    assert (run_tests(impostor, checks, float_tolerance=1e-9, pool=pool).passed_indices
            == run_tests(stub, checks, float_tolerance=1e-9, pool=pool).passed_indices == (2,))


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


def test_hostile_task_data_is_contained_in_the_judge_process_too(pool: SandboxPool) -> None:
    """The judge runs task code under the same limits and deadline as the candidate: a check
    that hogs memory fails, one that never ends times out, and the next run is unaffected."""
    code = "def add(a, b):\n    return a + b\n"
    hog = "x = add(1, 1)\nblob = bytearray(8 * 2 ** 30)\nassert x == 2"
    spin = "x = add(1, 1)\nwhile True:\n    pass"
    result = run_tests(code, [*ADD_FAST, hog, spin], timeout=1.0, pool=pool)
    assert result.timed_out is True  # the spinning check was ended by the run's time limit
    assert result.passed_indices == (0, 1)
    assert [f.kind for f in result.failures] == ["exception", "timeout"]
    assert "MemoryError" in result.failures[0].message
    assert leftover_processes(pool) == []
    assert run_tests(code, [*ADD_FAST, ADD_LOOP], pool=pool).fraction == 1.0
