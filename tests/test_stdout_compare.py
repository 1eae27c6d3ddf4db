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
    assert compare_stdout(str(3 ** 900 + 1) + ".0\n", huge + "\n", 1e-6) is None  # relatively close
    assert compare_stdout(str(3 ** 900 + 1) + "\n", huge + "\n", 1e-6) is not None  # integers: exactly
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


# Each benchmark's own rule, read from its grader (the README cites the files): what the grader
# accepts and refuses for honest output, and, for the graders' lenient fallbacks, what we refuse.
RULE_ACCEPTED = [
    ("livecodebench", "3.0\n", "3\n"),                   # a line of Decimal tokens
    ("livecodebench", "  1   2 \n", "1 2\n"),            # stripped lines, numbers
    ("livecodebench", "\n\nYES\n\n", "YES"),              # the whole output is stripped
    ("livecodebench", "1_000\n", "1000\n"),               # Decimal reads it so
    ("apps", "0.3333333333\n", "0.333333\n"),            # numpy.allclose: rtol 1e-5
    ("apps", "1\n\n2\n", "1\n2\n"),                       # empty lines dropped
    ("apps", "YES 3.0\n", "YES 3\n"),
    ("apps", "1000000.5\n", "1000000\n"),              # a float within allclose of an integer
    ("code_contests", "yes\n", "YES\n"),                   # case-insensitive
    ("code_contests", "1 2\n", "1\n2\n"),                  # line breaks are whitespace
    ("code_contests", "0.1000001\n", "0.1\n"),            # within 1e-5 absolute
    ("tokens", "YES 3.0\n", "YES 3\n"),
]
RULE_REFUSED = [
    ("livecodebench", "YES 3.0\n", "YES 3\n", "not all numbers"),  # a line with a word: text
    ("livecodebench", "a  b\n", "a b\n", "compared as text"),
    ("livecodebench", "1\n\n2\n", "1\n2\n", "lines"),
    ("livecodebench", "0.3333333\n", "0.333333\n", "token 1"),     # no tolerance
    ("livecodebench", "NaN\n", "nan\n", "token 1"),                # both Decimal NaN: never equal
    ("apps", "2\n1\n", "1\n2\n", "line 1"),            # APPS's set fallback would accept: not copied
    ("apps", "1 2 2\n", "2 1\n", "token 1"),          # token sets: not copied
    ("apps", "0.333\n", "0.333333\n", "token 1"),     # rounding to 3 decimals: not copied
    ("apps", "yes\n", "YES\n", "token 1"),
    ("apps", "1000001\n", "1000000\n", "token 1"),  # numpy.allclose would accept: integers exactly
    ("code_contests", "9007199254740993\n", "9007199254740992\n", "token 1"),  # no doubles for integers
    ("code_contests", "0.10001\n", "0.1\n", "token 1"),
    ("code_contests", "1 2\n", "2 1\n", "token 1"),
    ("code_contests", "1\n", "1 1\n", "tokens"),
]


@pytest.mark.parametrize(("rule", "out", "expected"), RULE_ACCEPTED)
def test_each_benchmarks_rule_accepts_what_its_grader_accepts(rule: str, out: str, expected: str) -> None:
    assert compare_stdout(out, expected, rule=rule) is None


@pytest.mark.parametrize(("rule", "out", "expected", "where"), RULE_REFUSED)
def test_each_benchmarks_rule_refuses_naming_the_rule_and_the_first_difference(
        rule: str, out: str, expected: str, where: str) -> None:
    why = compare_stdout(out, expected, rule=rule)
    assert why is not None and where in why
    name = {"livecodebench": "LiveCodeBench's rule", "apps": "APPS's rule",
            "code_contests": "CodeContests' rule"}[rule]
    assert name in why


def test_a_refusal_shows_the_differing_tokens() -> None:
    why = compare_stdout("1 2 3\n4 5 7\n", "1 2 3\n4 5 6\n", rule="apps")
    assert why is not None and "line 2, token 3: expected '6', got '7'" in why


def test_an_unknown_rule_is_refused_at_load() -> None:
    from agentenv.errors import ConfigError

    with pytest.raises(ConfigError):
        StdioCase("", "", compare="sets")


@pytest.mark.parametrize("rule", ["tokens", "livecodebench", "apps", "code_contests"])
def test_run_tests_honours_each_cases_rule(rule: str) -> None:
    code = "print('yes'); print(0.1000001)"
    result = run_tests(code, [StdioCase("", "YES\n0.1\n", rule)], timeout=5)
    assert result.passed == (1 if rule == "code_contests" else 0)
    if rule != "code_contests":
        assert "token 1: expected 'YES', got 'yes'" in result.failures[0].message


def test_a_cases_rule_survives_its_dict_form() -> None:
    from agentenv.tasks.schema import check_from_dict, check_to_dict

    case = StdioCase("1\n", "1\n", "apps")
    assert check_from_dict(check_to_dict(case)) == case
    assert "compare" not in check_to_dict(StdioCase("1\n", "1\n"))


def test_a_line_count_refusal_still_names_the_first_difference() -> None:
    why = compare_stdout("1\n5\n3\n", "1\n2\n", rule="livecodebench")
    assert why is not None and "expected 2 lines of output, got 3" in why
    assert "line 2, token 1: expected '2', got '5'" in why


@pytest.mark.parametrize("rule", ["tokens", "livecodebench", "apps", "code_contests"])
def test_a_float_tolerance_never_passes_a_wrong_integer(rule: str) -> None:
    assert compare_stdout("10000001\n", "10000000\n", 1e-6, rule=rule) is not None
    assert compare_stdout("2.0000001\n", "2\n", 1e-6, rule=rule) is None


def test_a_cases_rule_survives_a_trainer_record() -> None:
    import json

    from agentenv.tasks.schema import check_to_dict, decode_checks

    cases = [StdioCase("1\n", "YES\n", "code_contests"), StdioCase("2\n", "3\n")]
    assert decode_checks(json.dumps([check_to_dict(c) for c in cases])) == tuple(cases)


def test_livecodebench_reads_a_long_line_of_numbers_as_numbers() -> None:
    expected = " ".join(str(i) for i in range(300_000)) + "\n"
    got = " ".join(f"{i}.0" for i in range(300_000)) + "\n"  # 2.4 MB on one line
    assert compare_stdout(got, expected, rule="livecodebench") is None
