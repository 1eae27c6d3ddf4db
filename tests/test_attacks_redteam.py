"""Red-team attacks on sandbox v3 (issue 9), new classes not covered by the other attack suites.

Each attack is a candidate that does not solve its task (or solves part of it) and tries to
collect more than the honest fraction anyway, or to stall, crash or poison what comes after it:
exceptions that the check's own iteration machinery swallows, builtins the candidate redefines
in checks that call nothing else, floods of frames, pipes closed under the worker, stray
answers on the judge channel, answers that keep the judge busy, candidate and task text the
trusted side must carry, a tmpfs mounted from a nested user namespace past the disk cap, and
(the other way round) honest duplicates the trusted side took for hash collisions. Each must score exactly
what honest work earns, within its timeout plus a margin, leave no process behind, and leave
the pool serving honest work. Strict isolation, as CI runs (AGENTENV_REQUIRE_STRICT=1).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from support.attacks import FIND_SOCKETS, Case, make_case, strict_pool

from agentenv.grading import run_tests
from agentenv.sandbox import SandboxPool
from agentenv.sandbox.testing import leftover_processes, processes_matching

MARKER = f"agentenv-redteam-{os.getpid()}-{int(time.time())}"
HONEST = "def add(a, b):\n    return a + b\n"
ADD_FAST = ("assert add(2, 3) == 5", "assert add(-1, 1) == 0")
ADD_LOOP = "for a in (1, 2, 99):\n    assert add(a, 1) == a + 1"

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

def case(name: str, code: str, checks: tuple[str, ...], **kwargs: object) -> Case:
    return make_case(MARKER, name, code, checks, **kwargs)


ATTACKS = [
    # --- exceptions the check's own machinery swallows ---------------------------------------
    case("stop_iteration_ends_map_zip_and_filter_checks_quietly",
         "def add(a, b):\n    raise StopIteration\n", MAP_CHECKS),
    case("stop_iteration_subclass_raised_through_map", r"""
class Done(StopIteration):
    pass
def add(a, b):
    raise Done('finished early')
""", MAP_CHECKS),
    # --- builtins redefined next to the builtin the task is about ----------------------------
    case("define_all_and_max_next_to_the_builtin_the_task_is_about",
         "def sum(a, b):\n    return 0\ndef all(xs):\n    return True\n"
         "def max(*xs):\n    return 6\n", SUM_CHECKS),
    case("patch_builtins_all_and_max_at_import",
         "import builtins\nbuiltins.all = lambda xs: True\nbuiltins.max = lambda *xs: 6\n"
         "def sum(a, b):\n    return 0\n", SUM_CHECKS),
    case("define_only_all_and_max_leave_sum_the_builtin",
         "def all(xs):\n    return True\ndef max(*xs):\n    return 6\n", SUM_CHECKS),
    # --- the worker's pipes and the judge channel --------------------------------------------
    case("flood_of_tiny_frames_up_to_the_result_cap", r"""
import os, sys
wire = next(m for m in list(sys.modules.values()) if hasattr(m, 'encode_frame'))
def add(a, b):
    frame = wire.encode_frame('0' * 32, {'t': 'x'})
    try:
        os.write(3, frame * (64 * 1024 * 1024 // len(frame)))
    except OSError:
        pass
    return None
""", (*ADD_FAST, ADD_LOOP), timeout=3.0),
    case("close_every_pipe_then_keep_running", r"""
import os, time
def add(a, b):
    for fd in range(0, 256):
        try:
            os.close(fd)
        except OSError:
            pass
    time.sleep(30)
""", (*ADD_FAST, ADD_LOOP)),
    case("stray_answers_queued_on_the_judge_channel_at_import", FIND_SOCKETS + r"""
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
    case("unsolicited_callbacks_and_copy_backs_on_the_judge_channel", FIND_SOCKETS + r"""
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
    case("sigstop_itself_and_a_stopped_child_holding_the_pipes", r"""
import os, signal, time
def add(a, b):
    if os.fork() == 0:
        os.kill(os.getpid(), signal.SIGSTOP)
        time.sleep(60)
        os._exit(0)
    os.kill(os.getpid(), signal.SIGSTOP)
    return None
""", (*ADD_FAST, ADD_LOOP)),
    # --- candidate text the trusted side must carry without error ----------------------------
    case("lone_surrogates_and_nul_in_exception_messages_and_output", r"""
import sys
def add(a, b):
    sys.stdout.write('\udcff\x00' * 1000)
    sys.stderr.write('\ud800' * 1000)
    raise ValueError('\udcff\x00\ud800' * 200)
""", (*ADD_FAST, ADD_LOOP)),
    # --- answers that are plain data but cost the judge --------------------------------------
    case("sixteen_megabyte_answer_to_every_loop_iteration", r"""
def add(a, b):
    return list(range(2_000_000))
""", ("for a in range(10_000):\n    r = add(a, 1)\nassert r == 10_000",), timeout=2.0),
    case("answers_that_make_the_checks_own_sort_slow", r"""
def add(a, b):
    return [str(i) for i in range(1_500_000, 0, -1)]
""", ("for a in range(1000):\n    r = add(a, 1)\n    s = sorted(r) if isinstance(r, list) else [r]\n"
      "assert s == [1000]",), timeout=2.0),
]

CONTROLS = [
    case("control_honest_add_through_map_zip_filter", HONEST, MAP_CHECKS, expected=1.0),
    case("control_honest_add_in_the_costly_loops", HONEST,
         ("for a in range(10_000):\n    r = add(a, 1)\nassert r == 10_000",
          "for a in range(1000):\n    r = add(a, 1)\n    s = sorted(r) if isinstance(r, list) else [r]\n"
          "assert s == [1000]"), expected=1.0, timeout=5.0),
    case("control_the_task_about_sum_checked_by_itself",
         "def sum(a, b):\n    return a * b\n",
         ("assert sum(2, 3) == 6", "for a, b in ((2, 3), (4, 5)):\n    assert sum(a, b) == a * b"),
         expected=1.0),
    case("control_candidate_errors_still_reach_the_check",
         "def f(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x\n",
         ("try:\n    f(-1)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError('no error')",),
         expected=1.0),
]


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    made = strict_pool(2, "the red-team attacks")
    yield made
    made.close()


def test_attack_names_are_distinct() -> None:
    names = [c.name for c in ATTACKS + CONTROLS]
    assert len(set(names)) == len(names)


# Attacks that still win, with what wins and why (each an xfail that must keep failing).
OPEN_HOLES: dict[str, str] = {
}


def _params() -> list[object]:
    return [pytest.param(c, id=c.name, marks=[pytest.mark.xfail(strict=True, reason=OPEN_HOLES[c.name])]
                         if c.name in OPEN_HOLES else []) for c in ATTACKS + CONTROLS]


@pytest.mark.parametrize("attack", _params())
def test_redteam_attack_scores_only_honest_work_and_leaves_nothing_behind(
        attack: Case, pool: SandboxPool) -> None:
    """Score == honest fraction, nothing left, the pool serves honest work (not timed: a run
    that never ends is pytest-timeout's to catch)."""
    result = run_tests(attack.code, list(attack.checks), timeout=attack.timeout, pool=pool)

    assert result.fraction == attack.expected, result.failures
    assert result.graded_in_child == 0
    assert result.isolation == "strict"
    assert leftover_processes(pool) == []
    assert processes_matching(MARKER, wait=0.2) == []
    assert run_tests(HONEST, [*ADD_FAST, ADD_LOOP], pool=pool).fraction == 1.0


def test_a_candidates_stop_iteration_fails_the_check_and_says_so(pool: SandboxPool) -> None:
    """It reaches the check as an error naming the call, not as the end of the check's loop."""
    result = run_tests("def add(a, b):\n    raise StopIteration('early')\n", list(MAP_CHECKS),
                       pool=pool)
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


def test_stdio_frames_a_program_forges_for_other_cases_only_cost_it_those_cases(pool: SandboxPool) -> None:
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
    result = run_tests(forge, cases, timeout=2.0, pool=pool)
    assert result.passed == 0  # its own frames (echoing stdin) came first and are wrong
    assert leftover_processes(pool) == []
    assert run_tests("print(int(input()) * 2)\n", cases, pool=pool).fraction == 1.0


def test_hostile_task_text_is_a_failed_check_never_an_exception(pool: SandboxPool) -> None:
    """Checks with NUL bytes, lone surrogates, or nesting past the parser fail with a message."""
    checks = ["assert add(1, 1) == 2\x00", "x = '\ud800'\nassert add(1, 1) != x",
              "assert add(1, 1) == " + "(" * 5000 + "2" + ")" * 5000,
              "assert add(1, 1) == 2 or " + "1 + " * 20000 + "1"]
    result = run_tests(HONEST, checks, pool=pool)
    assert result.passed == 0 and len(result.failures) == len(checks)
    assert all(f.message for f in result.failures)
    assert run_tests(HONEST, [*ADD_FAST, ADD_LOOP], pool=pool).fraction == 1.0


def test_duplicates_are_not_hash_collisions_but_chosen_collisions_still_are(pool: SandboxPool) -> None:
    """An honest list with repeats, turned into a set by the check, passes; distinct ints chosen
    to share one hash are still refused by the trusted side's budget."""
    honest = "def f():\n    return [1] * 100 + [2] * 100 + ['a'] * 50\n"
    checks = ["assert set(f()) == {1, 2, 'a'}", "assert len(set(f())) == 3",
              "assert dict.fromkeys(f()) == {1: None, 2: None, 'a': None}"]
    assert run_tests(honest, checks, pool=pool).fraction == 1.0
    colliding = "def f():\n    return [k * (2 ** 61 - 1) for k in range(1, 3000)]\n"
    result = run_tests(colliding, ["assert len(set(f())) == 1"], pool=pool)
    assert result.passed == 0 and "collide" in result.failures[0].message


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


def test_a_nested_user_namespace_cannot_mount_a_tmpfs_past_the_disk_cap(pool: SandboxPool) -> None:
    """With capabilities regained in a user namespace of its own, a run could mount a fresh
    tmpfs that Limits.disk does not cap (only a memory cgroup, where there is one, would stop
    it): runs may not create user namespaces at all."""
    from agentenv.sandbox import Limits

    result = run_tests(NESTED_TMPFS, ["assert probe() == 0"], timeout=5.0, pool=pool,
                       limits=Limits(disk=64 * 1024**2))
    assert result.fraction == 1.0, result.failures
    assert leftover_processes(pool) == []
    assert run_tests(HONEST, [*ADD_FAST, ADD_LOOP], pool=pool).fraction == 1.0
