"""The stdout comparison: what it accepts and refuses, and that a whole run honours it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentenv.grading import compare_stdout, run_tests
from agentenv.tasks.schema import StdioCase

ACCEPTED = [
    ("3\n", "3"),                      # trailing newline
    ("1 2  \n3\r\n", "1 2\n3\n"),      # trailing spaces, CRLF
    ("3.0\n", "3\n"),                  # equal as numbers (LiveCodeBench compares tokens as Decimal)
    ("1e3\n", "1000\n"),
    ("-0.50 2\n", "-0.5 2.000\n"),
    ("1  2\n", "1 2\n"),               # spacing between tokens
    ("YES\n\n\n", "YES"),              # trailing empty lines
]
REFUSED = [
    ("3\n", "4\n"),
    ("3.0000001\n", "3\n"),            # no tolerance given: numbers must be equal
    ("yes\n", "YES\n"),                # no case folding
    ("1 2\n", "1\n2\n"),               # lines matter
    ("2\n1\n", "1\n2\n"),              # order matters (no comparison as a set)
    ("1 2 3\n", "1 2\n"),              # extra token
    ("\n1\n", "1\n"),                  # a leading empty line is a line
    ("nan\n", "nan1\n"),
    ("0x10\n", "16\n"),                # only decimal numbers compare as numbers
    ("inf\n", "1e999\n"),
]


@pytest.mark.parametrize(("out", "expected"), ACCEPTED)
def test_accepted(out: str, expected: str) -> None:
    assert compare_stdout(out, expected) is None


@pytest.mark.parametrize(("out", "expected"), REFUSED)
def test_refused_with_the_first_difference_named(out: str, expected: str) -> None:
    why = compare_stdout(out, expected)
    assert why is not None and ("line" in why or "lines" in why)


def test_float_tolerance_is_absolute_or_relative() -> None:
    assert compare_stdout("3.1415926536\n", "3.14159265358979\n", 1e-6) is None
    assert compare_stdout("3.1416\n", "3.14159265358979\n", 1e-6) is not None
    assert compare_stdout("1000000.5\n", "1000000.0\n", 1e-6) is None  # relative
    assert compare_stdout("abc\n", "abd\n", 1.0) is not None


def test_a_tolerance_never_accepts_any_number_for_one_past_floats_range() -> None:
    huge = str(3 ** 900)  # 430 digits: inf as a float
    assert compare_stdout("1\n", huge + "\n", 1e-6) is not None
    assert compare_stdout(huge + "\n", huge + "\n", 1e-6) is None
    assert compare_stdout(str(3 ** 900 + 1) + "\n", huge + "\n", 1e-6) is None  # relatively close
    assert compare_stdout("1e999999999\n", "1e-999999999\n", 1e-6) is not None  # no exception


@given(st.lists(st.integers(), max_size=20), st.integers(min_value=0, max_value=2))
def test_integers_printed_any_way_equal_only_themselves(xs: list[int], style: int) -> None:
    sep = (" ", "\n", "  ")[style]
    printed = sep.join(map(str, xs)) + "\n"
    assert compare_stdout(printed, sep.join(map(str, xs))) is None
    if xs:
        changed = [*xs[:-1], xs[-1] + 1]
        assert compare_stdout(printed, sep.join(map(str, changed))) is not None


def test_a_run_honours_the_tasks_float_tolerance_on_stdout() -> None:
    code = "import math\nr = float(input())\nprint(math.pi * r * r)\n"
    case = StdioCase("1\n", "3.1415926536\n")
    assert run_tests(code, [case], 5).passed == 0
    assert run_tests(code, [case], 5, float_tolerance=1e-6).passed == 1
    wrong = run_tests("print(3.15)\n", [case], 5, float_tolerance=1e-6)
    assert wrong.passed == 0 and "token 1" in wrong.failures[0].message
