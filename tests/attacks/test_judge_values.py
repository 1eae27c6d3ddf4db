"""A judge that survives any value: whatever a candidate returns, raises or floods (huge, deep,
hostile or forged values, exceptions whose messages misbehave, frames at any size) is a failed
check with a message, within budget, never an exception or a stall of the trusted side."""

from __future__ import annotations

import pytest
from support.attacks import (
    ADD_FAST,
    ADD_LOOP,
    ADD_MULTI,
    CALLBACK_CHECKS,
    FIND_SOCKETS,
    HONEST_ADD,
    Attack,
    Case,
    attack,
    attack_scores_only_honest_work_and_leaves_nothing_behind,
    check_attack_scores_only_honest_work_and_leaves_nothing_behind,
    check_case,
    every_judge_attack,
    judge_attack_scores_only_honest_work_and_leaves_nothing_behind,
    judge_case,
)

from agentenv.grading import run_tests
from agentenv.sandbox import SandboxPool

ATTACKS = [
    attack("output_flood", """
import os, sys
def add(a, b):
    chunk = 'flood' * 200000
    for _ in range(100):
        sys.stdout.write(chunk); sys.stderr.write(chunk)
    os.write(1, b'x' * 10 ** 7)
    return a - b
"""),
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
    attack("reduce_runs_code_in_whoever_unpickles", """
import os
class Payload:
    def __reduce__(self):
        return (os.system, ('touch /tmp/MARKER-reduce',))
def add(a, b):
    return Payload()
"""),
]


@pytest.mark.parametrize("case", ATTACKS, ids=lambda a: a.name)
def test_attack_scores_only_honest_work_and_leaves_nothing_behind(
        case: Attack, pool_with_secret: SandboxPool, listener: tuple[int, list[bytes]]) -> None:
    """Each attack scores its honest fraction and leaves nothing behind (see the helper)."""
    attack_scores_only_honest_work_and_leaves_nothing_behind(case, pool_with_secret, listener)


JUDGE_ATTACKS = [
    judge_case("os_exit_inside_a_proxy_call", r"""
import os
def add(a, b):
    if a == 99:
        os._exit(0)
    return a + b
""", (*ADD_FAST, ADD_LOOP, ADD_MULTI), expected=2 / 4),
    judge_case("segfault_inside_a_proxy_call", r"""
import ctypes
def add(a, b):
    if a == 99:
        ctypes.string_at(0)
    return a + b
""", (*ADD_FAST, ADD_LOOP, ADD_MULTI), expected=2 / 4),
    judge_case("sys_exit_inside_a_proxy_call", r"""
import sys
def add(a, b):
    if a == 99:
        sys.exit(0)
    return a + b
""", (*ADD_FAST, ADD_LOOP, ADD_MULTI), expected=2 / 4),
    judge_case("close_the_judge_channel_inside_a_proxy_call", FIND_SOCKETS + r"""
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
    judge_case("deep_and_huge_values_to_the_judge", r"""
def add(a, b):
    if a < 50:
        deep = []
        for _ in range(500):
            deep = [deep]
        return deep
    return 1 << (4 * 10 ** 6)
""", (ADD_LOOP, ADD_MULTI), timeout=2.0),
    judge_case("hostile_exceptions_raised_to_the_judge", r"""
class Nasty(Exception):
    def __str__(self):
        raise Nasty()
def add(a, b):
    if a > 50:
        raise ValueError('x' * (4 << 20))
    raise Nasty()
""", (ADD_LOOP, ADD_MULTI)),
    judge_case("oversized_frame_header_on_the_judge_channel", FIND_SOCKETS + r"""
def add(a, b):
    for fd in sockets():
        try:
            os.write(fd, b'\xff\xff\xff\xff' + b'x' * 4096)
        except OSError:
            pass
    return a + b
""", (ADD_LOOP, ADD_MULTI)),
    # --- callbacks -------------------------------------------------------------------------
    judge_case("callbacks_that_recurse_forever", r"""
def apply(fn, x):
    return fn(x)
""", CALLBACK_CHECKS, expected=1 / 2),
    judge_case("non_plain_data_handed_to_a_callback", r"""
class Always:
    def __eq__(self, other): return True
def apply(fn, x):
    return fn(Always())
""", CALLBACK_CHECKS[:1]),
]


@pytest.mark.parametrize("attack", JUDGE_ATTACKS, ids=lambda a: a.name)
def test_judge_attack_scores_only_honest_work_and_leaves_nothing_behind(
        attack: Case, pool_of_two: SandboxPool) -> None:
    """Each judged attack scores its honest fraction and leaves nothing behind (see the helper)."""
    judge_attack_scores_only_honest_work_and_leaves_nothing_behind(attack, pool_of_two)


def test_failures_inside_proxy_calls_say_what_happened(pool_of_two: SandboxPool) -> None:
    """A hang is a timeout, a death is no_result naming the call, a raise names the exception,
    an impostor value names its type, and a runaway callback names the nesting limit."""
    by_name = {c.name: c for c in every_judge_attack()}

    def failures(name: str) -> list[tuple[str, str]]:
        c = by_name[name]
        result = run_tests(c.code, list(c.checks), timeout=c.timeout, setup_code=c.setup, pool=pool_of_two)
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


CHECK_ATTACKS = [
    # --- the worker's pipes and the judge channel --------------------------------------------
    check_case("flood_of_tiny_frames_up_to_the_result_cap", r"""
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
    # --- answers that are plain data but cost the judge --------------------------------------
    check_case("sixteen_megabyte_answer_to_every_loop_iteration", r"""
def add(a, b):
    return list(range(2_000_000))
""", ("for a in range(10_000):\n    r = add(a, 1)\nassert r == 10_000",), timeout=2.0),
    check_case("answers_that_make_the_checks_own_sort_slow", r"""
def add(a, b):
    return [str(i) for i in range(1_500_000, 0, -1)]
""", ("for a in range(1000):\n    r = add(a, 1)\n    s = sorted(r) if isinstance(r, list) else [r]\n"
      "assert s == [1000]",), timeout=2.0),
]


@pytest.mark.parametrize("attack", CHECK_ATTACKS, ids=lambda a: a.name)
def test_check_attack_scores_only_honest_work_and_leaves_nothing_behind(
        attack: Case, pool_of_two: SandboxPool) -> None:
    """Each attack scores its honest fraction and leaves nothing behind (see the helper)."""
    check_attack_scores_only_honest_work_and_leaves_nothing_behind(attack, pool_of_two)


def test_hostile_task_text_is_a_failed_check_never_an_exception(pool_of_two: SandboxPool) -> None:
    """Checks with NUL bytes, lone surrogates, or nesting past the parser fail with a message."""
    checks = ["assert add(1, 1) == 2\x00", "x = '\ud800'\nassert add(1, 1) != x",
              "assert add(1, 1) == " + "(" * 5000 + "2" + ")" * 5000,
              "assert add(1, 1) == 2 or " + "1 + " * 20000 + "1"]
    result = run_tests(HONEST_ADD, checks, pool=pool_of_two)
    assert result.passed == 0 and len(result.failures) == len(checks)
    assert all(f.message for f in result.failures)
    assert run_tests(HONEST_ADD, [*ADD_FAST, ADD_LOOP], pool=pool_of_two).fraction == 1.0


def test_duplicates_are_not_hash_collisions_but_chosen_collisions_still_are(pool_of_two: SandboxPool) -> None:
    """An honest list with repeats, turned into a set by the check, passes; distinct ints chosen
    to share one hash are still refused by the trusted side's budget."""
    honest = "def f():\n    return [1] * 100 + [2] * 100 + ['a'] * 50\n"
    checks = ["assert set(f()) == {1, 2, 'a'}", "assert len(set(f())) == 3",
              "assert dict.fromkeys(f()) == {1: None, 2: None, 'a': None}"]
    assert run_tests(honest, checks, pool=pool_of_two).fraction == 1.0
    colliding = "def f():\n    return [k * (2 ** 61 - 1) for k in range(1, 3000)]\n"
    result = run_tests(colliding, ["assert len(set(f())) == 1"], pool=pool_of_two)
    assert result.passed == 0 and "collide" in result.failures[0].message


ENDS_LIKE_THE_MARKER = """
import time
def f():
    return "+finished"
def g():
    time.sleep(0.3)
    return 2
"""


def test_an_honest_value_whose_frame_ends_like_the_finished_marker_keeps_its_later_checks(
        pool: SandboxPool) -> None:
    """A frame on the result channel is ``<nonce> <len>\\n<msgpack>\\n``, so a call that
    returns the string ``"+finished"`` writes a frame whose last bytes are exactly FINISHED.
    When the worker's read ends there (here: the next check sleeps first), the monitor must
    not take it for the run's end and kill G before the later checks run (an honest solution
    passing both checks would score 0.5, check 1 ``no_result``): the run ends early only on
    ``ENDED``, the job's done frame followed by the marker, followed across reads, so both
    checks pass."""
    checks = ["assert f() == '+finished'", "assert g() == 2"]
    result = run_tests(ENDS_LIKE_THE_MARKER, checks, timeout=2.0, pool=pool)
    assert (result.fraction, result.timed_out) == (1.0, False), result.failures


# Values whose raw bytes on the wire end like a done frame's body and the marker: a mixed list of small ints spelling it, a typed int array (16 or more ints
# travel as raw machine words), plain bytes.
ENDS_LIKE_A_DONE_FRAME = {
    "mixed_list": '[10, {"t": "done"}, 10, 43, 102, 105, 110, 105, 115, 104, 101, 100]',
    "int_array": "[0] * 16 + [-1585378816, 1868866676, 722101614, 1768843622, 1684367475]",
    "bytes": "b'payload\\n\\x81\\xa1t\\xa4done\\n+finished'",
}


@pytest.mark.parametrize("value", sorted(ENDS_LIKE_A_DONE_FRAME))
def test_an_honest_value_whose_frame_ends_like_a_done_frame_keeps_its_later_checks(
        pool: SandboxPool, value: str) -> None:
    """A call whose value's raw bytes end like the done frame's body and the marker does not
    cut the run before the next check (0.5, ``no_result``): the end a worker waits for includes
    the done frame's header line with the run's 128-bit nonce, so both checks pass."""
    code = f"import time\ndef f():\n    return {ENDS_LIKE_A_DONE_FRAME[value]}\n" \
           "def g():\n    time.sleep(0.3)\n    return 2\n"
    result = run_tests(code, ["assert f() == f()", "assert g() == 2"], timeout=2.0, pool=pool)
    assert (result.fraction, result.timed_out) == (1.0, False), (value, result.failures)
