"""Grading policy without processes: check decomposition, comparison, the wire format, judging."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from strategies import plain_values

from agentenv.grading import judge, normalise_stdout, plan_checks, strict_equal
from agentenv.sandbox._wire import (
    MAX_DEPTH,
    NotPlainData,
    decode_value,
    decode_value_pure,
    encode_frame,
    encode_value,
    parse_frames,
)
from agentenv.tasks.schema import StdioCase

NONCE = "n" * 32


def frames(*messages: dict) -> list[dict]:
    """Frames exactly as the parent would parse them from the channel."""
    data = b"".join(encode_frame(NONCE, m) for m in messages)
    return parse_frames(data, NONCE)


# ------------------------------------------------------------------ decomposition

def test_a_plain_assert_is_split_into_the_call_the_child_evaluates() -> None:
    """`assert add(2, 3) == 5` sends only `add(2, 3)` to the child and keeps 5 on the trusted side."""
    plan = plan_checks(["assert add(2, 3) == 'EXPECTED-SECRET'"])
    (check,) = plan.checks
    assert check.mode == "trusted"
    assert check.calls == ("add(2, 3)",)
    assert "EXPECTED-SECRET" not in json.dumps(plan.job_items())
    assert plan.graded_in_judge == 0 and not plan.needs_judge


def test_method_calls_on_candidate_results_are_operations_on_the_value() -> None:
    """Only the call into the candidate is shipped; what the check does to its result (method
    calls, attributes, subscripts) is an operation the trusted side applies once it crossed
    (the child applies it only to an object that cannot cross). A method of an object the
    check constructs (``Solution().solve(x)``) is shipped with its construction: its value is
    the method's."""
    plan = plan_checks(["assert Solution().solve([1, 2]) == 3",
                        "assert (abs(f(1.5) - 0.5) < 1e-6) & (g(2)[0] == 'x')",
                        "assert name(1).strip().startswith('a')"])
    assert plan.checks[0].calls == ("Solution().solve([1, 2])",)
    assert plan.checks[0].then == ((),)
    assert plan.checks[1].calls == ("f(1.5)", "g(2)")
    assert plan.checks[1].then == ((), ("_agentenv_recv[0]",))
    assert plan.checks[2].calls == ("name(1)",)
    assert plan.checks[2].then == (("_agentenv_recv.strip()", "_agentenv_recv.startswith('a')"),)


@pytest.mark.parametrize("check", [
    "for i in range(3):\n    assert f(i) == i",
    "x = f(1)\nassert x == 1",
    "assert all(f(i) == i for i in range(3))",
    "assert f == g",
    "assert (y := f(1)) == 1",
    "assert f(lambda: 1) == 1",
    "f(1)",
    "def broken(:",
])
def test_checks_the_trusted_side_cannot_decompose_go_to_the_judge_never_to_the_child(check: str) -> None:
    """Loops, several statements, comprehensions, bare names and non-asserts are graded by the
    judge process: the candidate's job does not even contain them."""
    plan = plan_checks(["assert g(2) == 2", check])
    assert plan.checks[1].mode == "judge"
    assert plan.graded_in_judge == 1 and plan.needs_judge
    assert plan.judge_items() == [{"i": 1, "src": check}]
    assert [item["i"] for item in plan.job_items()] == [0]
    assert check not in json.dumps(plan.job_items())


def test_an_assert_that_calls_a_setup_helper_goes_to_the_judge() -> None:
    """`poly(xs, find_zero(xs))` would run the task's `poly` after the candidate patched builtins,
    so it is not shipped to the child; nor is a check that reads setup data (`root`): the
    setup's data lives in the judge, which passes the candidate a copy as the argument."""
    setup = "import math\ndef poly(xs, x):\n    return sum(c * math.pow(x, i) for i, c in enumerate(xs))\nroot = 1\n"
    plan = plan_checks(["assert abs(poly([1, 2], find_zero([1, 2]))) < 1e-4",
                        "assert decode(encode('abc')) == 'abc'",
                        "assert is_balanced(root) == True"],
                       setup_code=setup + "def encode(s):\n    return s\n")
    assert [c.mode for c in plan.checks] == ["judge", "judge", "judge"]
    assert plan_checks(["assert abs(poly([1, 2], find_zero([1, 2]))) < 1e-4"]).checks[0].mode == "trusted"


def test_an_assert_that_never_calls_the_candidate_asks_the_child_for_builtin_names() -> None:
    """MBPP 126 defines its own `sum`; a check with no other call means the candidate's `sum`."""
    (check,) = plan_checks(["assert sum(10, 15) == 6"]).checks
    assert check.mode == "trusted"
    assert check.calls == ("sum(10, 15)",)


def test_builtins_stay_trusted_when_the_check_calls_the_candidate() -> None:
    """`abs` in `abs(f(x) - 0.5) < eps` runs on the trusted side, so a candidate `abs` cannot help."""
    (check,) = plan_checks(["assert abs(f(3.5) - 0.5) < 1e-6"]).checks
    assert check.calls == ("f(3.5)",)


def test_stdio_cases_never_send_the_expected_output() -> None:
    """The child gets the stdin of a stdio case, never its expected stdout."""
    plan = plan_checks([StdioCase("1 2\n", "SECRET-OUT\n")])
    assert plan.checks[0].mode == "stdio"
    assert "SECRET-OUT" not in json.dumps(plan.job_items())


def test_planning_rejects_something_that_is_not_a_check() -> None:
    """A check must be a str or a StdioCase."""
    with pytest.raises(TypeError, match="check 0"):
        plan_checks([42])  # type: ignore[list-item]


# ------------------------------------------------------------------ strict comparison

@pytest.mark.parametrize(("actual", "expected", "equal"), [
    (1, 1, True),
    (1, 1.0, False),
    (True, 1, False),
    (0, False, False),
    ("a", "a", True),
    (b"a", "a", False),
    ([1, 2], [1, 2], True),
    ((1, 2), [1, 2], False),
    ([1, [2, 3]], [1, [2, 3.0]], False),
    ({1: "a"}, {1.0: "a"}, False),
    ({1: "a"}, {1: "a"}, True),
    ({1, 2}, {1, 2}, True),
    ({1, 2}, {1.0, 2}, False),
    ({1}, frozenset({1}), False),
    (float("nan"), float("nan"), True),
    (0.1 + 0.2, 0.3, False),
    (None, None, True),
    (None, 0, False),
])
def test_strict_equality_demands_the_same_exact_types_all_the_way_down(actual, expected, equal) -> None:
    """Same exact type, element-wise containers; 1 is not 1.0 and True is not 1."""
    assert strict_equal(actual, expected) is equal


def test_float_tolerance_applies_only_when_given() -> None:
    """Floats match within the task's tolerance, inside containers too."""
    assert not strict_equal([0.1 + 0.2], [0.3])
    assert strict_equal([0.1 + 0.2], [0.3], tolerance=1e-9)
    assert not strict_equal(1.0, 1.1, tolerance=1e-3)


def test_subclasses_never_equal_their_base_even_if_they_claim_to() -> None:
    """An int subclass whose __eq__ always answers True is still not an int."""
    class Liar(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    assert not strict_equal(Liar(5), 5)
    assert not strict_equal(5, Liar(5))


# ------------------------------------------------------------------ the wire format

@settings(max_examples=200, deadline=None)
@given(plain_values())
def test_plain_values_round_trip_through_the_wire_exactly(value) -> None:
    """encode -> bytes -> decode (msgpack's C path and the pure-Python one) rebuilds the same value."""
    data = encode_value(value)
    assert type(data) is bytes
    assert strict_equal(decode_value(data), value)
    assert strict_equal(decode_value_pure(data), value)


@pytest.mark.parametrize("value", [
    type("Foo", (), {})(),
    [1, 2, object()],
    {"k": type("Node", (), {})()},
])
def test_objects_are_refused(value) -> None:
    """Custom objects (instances of the candidate's own classes) do not cross as values."""
    with pytest.raises(NotPlainData):
        encode_value(value)


@pytest.mark.parametrize(("value", "expected"), [
    (type("MyInt", (int,), {"__eq__": lambda s, o: True, "__hash__": lambda s: 0})(3), 3),
    (type("MyStr", (str,), {"__eq__": lambda s, o: True, "__hash__": lambda s: 0})("x"), "x"),
    ({"k": type("MyList", (list,), {"__len__": lambda s: 5})()}, {"k": []}),
    (type("MyDict", (dict,), {"keys": lambda s: ["lie"]})(a=1), {"a": 1}),
])
def test_builtin_subclasses_cross_as_exact_base_values(value, expected) -> None:
    """A subclass of a builtin crosses as its base type's true content, rebuilt as the exact
    base type: none of its overrides answers for it on the trusted side."""
    decoded = decode_value(encode_value(value))
    assert decoded == expected
    assert type(decoded) is type(expected)


def test_objects_whose_reduce_runs_code_are_refused_without_calling_it() -> None:
    """__reduce__ (the pickle hook) is never invoked; the type is simply not plain."""
    called = []

    class Evil:
        def __reduce__(self):  # pragma: no cover - must not run
            called.append(True)
            return (print, ("pwned",))

    with pytest.raises(NotPlainData, match="Evil"):
        encode_value([Evil()])
    assert not called


def test_cyclic_and_very_deep_values_are_refused() -> None:
    """A list containing itself or nested past the depth limit is not plain data."""
    loop: list = []
    loop.append(loop)
    with pytest.raises(NotPlainData):
        encode_value(loop)
    deep: list = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(NotPlainData):
        encode_value(deep)


@pytest.mark.parametrize("data", [
    b"", b"\xc1", b"\x92\x01", b"\xd4\x63\x00", b"\xc7\x01\x03\x91",  # empty, reserved, short, bad ext
    b"\x81\x91\x01\xc0",  # a dict keyed by a list
    b"\xc7\x03\x03\x91\x90",  # a set holding a list (unhashable)
    b"\x01\x02",  # trailing bytes
    b"\xd5\x06\x00\x69\x01",  # a typed array whose length is not a whole number of items
    b"\xc7\x04\x0b\x91\x81\x01\x02", b"\xc7\x02\x0b\x91\x80",  # records holding a map
    b"\xc7\x04\x0b\x91\x91\xd4\x05",  # records holding an extension
    b"\xd4\x0b\x01",  # records that are not an array
    [], "cos", {"__reduce__": ["os.system", "true"]},  # not bytes at all
])
def test_malformed_encodings_raise_value_error(data) -> None:
    """Both decoders only build plain values; anything else is a ValueError, never an import or call."""
    with pytest.raises(ValueError):
        decode_value(data)
    with pytest.raises(ValueError):
        decode_value_pure(data)


def test_the_frame_parser_ignores_foreign_lines_and_distrusts_what_follows_garbage() -> None:
    """Lines without the nonce are skipped; a malformed nonce line ends the parse; partial tails drop."""
    good = encode_frame(NONCE, {"t": "load", "ok": True})
    data = (b"PASS everything\n" + good + encode_frame("x" * 32, {"t": "done"})
            + (NONCE + " 3\n\xc1\xc1\xc1\n").encode("latin-1") + encode_frame(NONCE, {"t": "done"}))
    assert parse_frames(data, NONCE) == [{"t": "load", "ok": True}]
    truncated = good + encode_frame(NONCE, {"t": "done"})[:-2]
    assert parse_frames(truncated, NONCE) == [{"t": "load", "ok": True}]


# ------------------------------------------------------------------ judging

def test_values_are_judged_on_the_trusted_side_with_readable_messages() -> None:
    """Right values pass; wrong ones fail as assertions naming the call and what it returned."""
    plan = plan_checks(["assert add(2, 3) == 5", "assert add(1, 1) == 2"])
    result = judge(plan, frames({"t": "load", "ok": True},
                                {"t": "call", "i": 0, "j": 0, "v": encode_value(5)},
                                {"t": "call", "i": 1, "j": 0, "v": encode_value(3)}),
                   timed_out=False, isolation="strict")
    assert (result.passed, result.total, result.passed_indices) == (1, 2, (0,))
    (failure,) = result.failures
    assert (failure.index, failure.kind) == (1, "assertion")
    assert failure.message == "add(1, 1) returned 3"


def test_a_value_that_is_not_plain_data_fails_with_its_type_and_the_expected_one() -> None:
    """The child reports the type it refused; the message reads 'returned a Foo, expected int'."""
    plan = plan_checks(["assert add(2, 3) == 5"])
    result = judge(plan, frames({"t": "load", "ok": True},
                                {"t": "call", "i": 0, "j": 0, "kind": "type", "msg": "Foo"}),
                   timed_out=False, isolation="strict")
    assert result.failures[0].message == "add(2, 3) returned a Foo, expected int"
    assert result.failures[0].kind == "assertion"


def test_missing_reports_become_timeouts_or_no_result_never_passes() -> None:
    """Checks that never reported are 'timeout' after a timeout and 'no_result' otherwise."""
    plan = plan_checks(["assert f(1) == 1", "assert f(2) == 2", "for i in []: pass"])
    reported = frames({"t": "load", "ok": True}, {"t": "call", "i": 0, "j": 0, "v": encode_value(1)})
    timed = judge(plan, reported, timed_out=True, isolation="strict")
    assert timed.passed == 1 and [f.kind for f in timed.failures] == ["timeout", "timeout"]
    died = judge(plan, reported, timed_out=False, isolation="strict", died="killed by SIGSEGV",
                 judge_died="killed by SIGXCPU")
    assert [f.kind for f in died.failures] == ["no_result", "no_result"]
    assert "SIGSEGV" in died.failures[0].message
    assert "judge process" in died.failures[1].message and "SIGXCPU" in died.failures[1].message


def test_a_candidate_that_fails_to_load_fails_every_function_check_with_the_reason() -> None:
    """A syntax error while loading marks every non-stdio check 'syntax' with the compiler's message."""
    plan = plan_checks(["assert f(1) == 1", "for i in []: pass"])
    result = judge(plan, frames({"t": "load", "kind": "syntax", "msg": "solution: SyntaxError: x"}),
                   timed_out=False, isolation="strict")
    assert [f.kind for f in result.failures] == ["syntax", "syntax"]
    assert result.fraction == 0.0


def test_frames_for_unknown_checks_or_with_forged_shapes_are_ignored() -> None:
    """Extra indices, non-int indices and stray kinds do not add passes."""
    plan = plan_checks(["assert f(1) == 1"])
    result = judge(plan, frames({"t": "load", "ok": True},
                                {"t": "stmt", "i": 0, "ok": True},
                                {"t": "check", "i": 0, "ok": True},
                                {"t": "call", "i": 5, "j": 0, "v": encode_value(1)},
                                {"t": "call", "i": "0", "j": 0, "v": encode_value(1)},
                                {"t": "verdict", "passed": 1}),
                   timed_out=False, isolation="strict")
    assert result.passed == 0


def test_verdicts_are_taken_only_from_the_judge_frames_never_from_the_candidates() -> None:
    """A verdict frame on the candidate's channel counts for nothing; the same frame from the
    judge passes the check; a judge verdict never passes a check the parent judges itself."""
    plan = plan_checks(["assert f(7) == 7", "for i in range(2):\n    assert f(i) == i"])
    forged = frames({"t": "load", "ok": True}, {"t": "check", "i": 1, "ok": True},
                    {"t": "stmt", "i": 1, "ok": True})
    assert judge(plan, forged, timed_out=False, isolation="strict").passed == 0
    verdict = frames({"t": "check", "i": 1, "ok": True}, {"t": "check", "i": 0, "ok": True})
    result = judge(plan, frames({"t": "load", "ok": True}), judge_frames=verdict,
                   timed_out=False, isolation="strict")
    assert result.passed_indices == (1,) and result.graded_in_child == 0


def test_a_failed_judge_setup_fails_every_judge_check_with_its_reason() -> None:
    """The judge's setup frame stands for every judge check that has no verdict of its own."""
    plan = plan_checks(["for i in range(2):\n    assert f(i) == i", "x = f(1)\nassert x"])
    result = judge(plan, frames({"t": "load", "ok": True}),
                   judge_frames=frames({"t": "setup", "kind": "exception", "msg": "setup: NameError: q"},
                                       {"t": "check", "i": 1, "ok": True}),
                   timed_out=False, isolation="strict")
    assert result.passed_indices == (1,)
    assert result.failures[0].message == "setup: NameError: q"


def test_stdio_output_is_compared_with_whitespace_normalised() -> None:
    """Trailing spaces per line, CRLF, final newlines and spacing between tokens are ignored;
    an extra token counts, and so does an exception after correct output."""
    plan = plan_checks([StdioCase("", "1 2\n3\n"), StdioCase("", "x"), StdioCase("", "y")])
    result = judge(plan, frames({"t": "stdio", "i": 0, "out": " 1  2   \r\n3\n\n\n"},
                                {"t": "stdio", "i": 1, "out": "x x"},
                                {"t": "stdio", "i": 2, "out": "y", "kind": "exception",
                                 "msg": "ValueError: bad"}),
                   timed_out=False, isolation="strict")
    assert result.passed_indices == (0,)
    assert [f.kind for f in result.failures] == ["assertion", "exception"]


@pytest.mark.parametrize(("raw", "normal"), [
    ("a \nb\t\n\n", "a\nb"),
    ("a\r\nb\r\n", "a\nb"),
    ("  lead", "  lead"),
    ("", ""),
])
def test_normalise_stdout_strips_trailing_whitespace_only(raw: str, normal: str) -> None:
    """Leading spaces matter; trailing spaces and final newlines do not."""
    assert normalise_stdout(raw) == normal


def test_fraction_is_passed_over_total_and_finite() -> None:
    """The judged result obeys RunResult's invariants, including with no frames at all."""
    plan = plan_checks(["assert f() == 1"] * 3)
    result = judge(plan, [], timed_out=False, isolation="rlimits")
    assert result.fraction == 0.0 and math.isfinite(result.fraction)
    assert len(result.failures) == result.total - result.passed
