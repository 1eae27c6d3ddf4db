"""How a program's standard output is compared with a stdio case's expected output.

Each :class:`~agentenv.tasks.schema.StdioCase` names its rule (``compare``, a
:class:`~agentenv.choices.StdoutRule`); loaders set the rule of the benchmark a task comes from,
read from that benchmark's own grader, without the graders' known flaws (the README lists what
each grader does and what we do instead). Every rule refuses what it cannot read as equal, and
its message names the rule and the first line or token that differs.

- ``tokens`` (agentenv's own, the default): line endings unified, trailing spaces and trailing
  empty lines dropped; then line by line (the same number of lines), token by token (split on
  whitespace): equal tokens pass, and two decimal numbers pass when equal as numbers (``3.0``
  and ``3``) or, unless both are integers, within the task's ``float_tolerance`` (absolute or
  relative). Every rule compares two integers exactly.
- ``livecodebench`` (``lcb_runner/evaluation/testing_util.py``, ``grade_stdio``): the output
  stripped, split at ``\\n``, each line stripped; the same number of lines; a line passes when
  equal as text, or when all its tokens and all the expected line's tokens read as ``Decimal``
  and are equal (``3.0`` and ``3``; ``YES 3.0`` against ``YES 3`` does not pass). With a
  ``float_tolerance`` (LiveCodeBench's stdin tasks have none), numbers may differ within it.
- ``apps`` (hendrycks/apps ``eval/testing_util.py``, also TACO's): empty lines dropped, lines
  stripped, in order; each line token by token, integers exactly, other numbers within
  ``numpy.allclose``'s tolerance (``|a - b| <= 1e-8 + 1e-5 * |b|``) or the task's
  ``float_tolerance``. APPS's flaws are not copied: its ``allclose`` also takes 1000001 for
  1000000, and its last fallbacks compare lines as a set of token sets, numbers rounded to 3
  decimals.
- ``code_contests`` (google-deepmind/code_contests ``execution/tester_sandboxer.cc``,
  ``OutputsMatch``): the whole output as whitespace-separated tokens, line breaks included,
  compared case-insensitively; integers exactly (not as doubles), other numbers within 1e-5
  absolute (or the task's ``float_tolerance``).

:func:`compare_stdout` returns ``None`` when the output passes, else why not.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

from agentenv.choices import StdoutRule, parse

__all__ = ["compare_stdout", "normalise_stdout"]

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")
_MAX_SHOWN = 60
_ALLCLOSE = (Decimal("1e-8"), Decimal("1e-5"))  # numpy.allclose's atol, rtol: APPS's float rule
_CODE_CONTESTS_PRECISION = Decimal("1e-5")  # kDoublePrecision of OutputsMatch (strictly less)
_CC_SPACE = re.compile(r"[ \n\t\r\v]+")  # absl::ByAnyChar(" \n\t\r\v")

_HOW = {
    StdoutRule.TOKENS: "agentenv's rule: line by line, tokens as text or as equal numbers",
    StdoutRule.LIVECODEBENCH: ("LiveCodeBench's rule: stripped lines equal as text, or all their "
                               "tokens equal as Decimal"),
    StdoutRule.APPS: "APPS's rule: non-empty lines in order, tokens as text or numbers within allclose",
    StdoutRule.CODE_CONTESTS: ("CodeContests' rule: whitespace-separated tokens of the whole output, "
                               "case-insensitive, numbers within 1e-5"),
}


def normalise_stdout(text: str) -> str:
    """Output as a judge compares it: line endings unified, trailing spaces and final newlines gone."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).rstrip("\n")


def _number(token: str) -> Decimal | None:
    if len(token) > 4000 or not _NUMBER.fullmatch(token):
        return None
    try:
        return Decimal(token)
    except (InvalidOperation, ValueError):
        return None


def _within(a: Decimal, b: Decimal, tolerance: float | None) -> bool:
    """``a`` within ``tolerance`` of ``b``, absolute or relative. In Decimal, not float: an
    expected number past float's range would be inf, and every finite answer would then be
    "within" a relative tolerance of it."""
    if tolerance is None:
        return False
    try:
        difference, allowed = abs(a - b), Decimal(repr(float(tolerance)))
        return difference <= allowed or difference <= allowed * abs(b)
    except ArithmeticError:  # exponents past Decimal's own range: not equal
        return False


def _close(got: str, want: str, a: Decimal, b: Decimal, tolerance: float | None) -> bool:
    """A float tolerance holds for floats: two integers (``1000001`` for ``1000000``) never
    pass by being relatively close."""
    if _INTEGER.fullmatch(got) and _INTEGER.fullmatch(want):
        return False
    return _within(a, b, tolerance)


def _tokens_equal(got: str, want: str, tolerance: float | None) -> bool:
    if got == want:
        return True
    a, b = _number(got), _number(want)
    if a is None or b is None:
        return False
    return a == b or _close(got, want, a, b, tolerance)


def _apps_tokens_equal(got: str, want: str, tolerance: float | None) -> bool:
    if got == want:
        return True
    a, b = _number(got), _number(want)
    if a is None or b is None:
        return False
    if a == b or _close(got, want, a, b, tolerance):
        return True
    if _INTEGER.fullmatch(got) and _INTEGER.fullmatch(want):
        return False  # integers exactly: numpy.allclose would take 1000001 for 1000000
    atol, rtol = _ALLCLOSE
    try:
        return abs(a - b) <= atol + rtol * abs(b)
    except ArithmeticError:
        return False


def _cc_tokens_equal(got: str, want: str, tolerance: float | None) -> bool:
    if got == want:
        return True
    a, b = _number(got), _number(want)
    if a is None or b is None:
        return False
    if _INTEGER.fullmatch(got) and _INTEGER.fullmatch(want):
        return a == b  # integers exactly: the tester's doubles would take 2**53 + 1 for 2**53
    if a == b or _within(a, b, tolerance):
        return True
    try:
        return abs(a - b) < _CODE_CONTESTS_PRECISION
    except ArithmeticError:
        return False


def _show(token: str) -> str:
    return repr(token if len(token) <= _MAX_SHOWN else token[:_MAX_SHOWN] + "…")


def _first_token_difference(got: list[str], want: list[str],
                            equal: Callable[[str, str, float | None], bool],
                            tolerance: float | None) -> str | None:
    for position, (g, w) in enumerate(zip(got, want, strict=False), start=1):
        if not equal(g, w, tolerance):
            return f"token {position}: expected {_show(w)}, got {_show(g)}"
    if len(got) != len(want):
        return f"expected {len(want)} tokens, got {len(got)}"
    return None


def _by_lines(got_lines: list[str], want_lines: list[str],
              equal: Callable[[str, str, float | None], bool], tolerance: float | None,
              how: str) -> str | None:
    for number, (got, want) in enumerate(zip(got_lines, want_lines, strict=False), start=1):
        why = _first_token_difference(got.split(), want.split(), equal, tolerance)
        if why is not None:
            return f"line {number}, {why} ({how})"
    if len(got_lines) != len(want_lines):
        return f"expected {len(want_lines)} lines of output, got {len(got_lines)} ({how})"
    return None


def _tokens_rule(out: str, expected: str, tolerance: float | None) -> str | None:
    got_text, want_text = normalise_stdout(out), normalise_stdout(expected)
    if got_text == want_text:
        return None
    how = _HOW[StdoutRule.TOKENS] + (", within float_tolerance" if tolerance is not None else "")
    return _by_lines(got_text.split("\n"), want_text.split("\n"), _tokens_equal, tolerance, how)


def _decimals(line: str) -> list[Decimal] | None:
    """Every token of ``line`` as ``Decimal`` (as LiveCodeBench's grader reads it), else None.
    A token over 4,000 characters is not read as a number (its conversion costs quadratic time):
    such a token passes only as equal text."""
    tokens = line.split()
    if any(len(token) > 4000 for token in tokens):
        return None
    try:
        return [Decimal(token) for token in tokens]
    except (InvalidOperation, ValueError):
        return None


def _decimal_lines_equal(got_line: str, want_line: str, got: list[Decimal], want: list[Decimal],
                         tolerance: float | None) -> bool:
    if len(got) != len(want):
        return False
    for g, w, a, b in zip(got_line.split(), want_line.split(), got, want, strict=True):
        try:
            if not (a == b or (a.is_finite() and b.is_finite() and _close(g, w, a, b, tolerance))):
                return False
        except ArithmeticError:  # a signalling NaN: not equal
            return False
    return True


def _livecodebench_rule(out: str, expected: str, tolerance: float | None) -> str | None:
    got_lines = [line.strip() for line in out.strip().split("\n")]
    want_lines = [line.strip() for line in expected.strip().split("\n")]
    how = _HOW[StdoutRule.LIVECODEBENCH]
    if len(got_lines) != len(want_lines):
        first = _by_lines(got_lines, want_lines, _tokens_equal, tolerance, how)
        where = first.split(" (", 1)[0] if first and first.startswith("line") else ""
        return (f"expected {len(want_lines)} lines of output, got {len(got_lines)}"
                + (f"; first difference at {where}" if where else "") + f" ({how})")
    for number, (got, want) in enumerate(zip(got_lines, want_lines, strict=True), start=1):
        if got == want:
            continue
        got_numbers, want_numbers = _decimals(got), _decimals(want)
        if got_numbers is not None and want_numbers is not None:
            if _decimal_lines_equal(got, want, got_numbers, want_numbers, tolerance):
                continue
            why = _first_token_difference(got.split(), want.split(), _tokens_equal, tolerance)
        else:
            why = _first_token_difference(got.split(), want.split(), lambda g, w, t: g == w, None)
            side = "expected line" if want_numbers is None else "output line"
            why = f"{why or 'the spacing differs'}; the {side} is not all numbers, so it is compared as text"
        return f"line {number}, {why or 'the spacing differs'} ({how})"
    return None


def _apps_rule(out: str, expected: str, tolerance: float | None) -> str | None:
    if normalise_stdout(out) == normalise_stdout(expected):
        return None
    got_lines = [line.strip() for line in normalise_stdout(out).split("\n") if line.strip()]
    want_lines = [line.strip() for line in normalise_stdout(expected).split("\n") if line.strip()]
    return _by_lines(got_lines, want_lines, _apps_tokens_equal, tolerance, _HOW[StdoutRule.APPS])


def _code_contests_rule(out: str, expected: str, tolerance: float | None) -> str | None:
    got = [t.lower() for t in _CC_SPACE.split(out) if t]
    want = [t.lower() for t in _CC_SPACE.split(expected) if t]
    if got == want:
        return None
    why = _first_token_difference(got, want, _cc_tokens_equal, tolerance)
    return None if why is None else f"{why} ({_HOW[StdoutRule.CODE_CONTESTS]})"


_RULES: dict[StdoutRule, Callable[[str, str, float | None], str | None]] = {
    StdoutRule.TOKENS: _tokens_rule,
    StdoutRule.LIVECODEBENCH: _livecodebench_rule,
    StdoutRule.APPS: _apps_rule,
    StdoutRule.CODE_CONTESTS: _code_contests_rule,
}


def compare_stdout(out: str, expected: str, tolerance: float | None = None,
                   rule: str = StdoutRule.TOKENS) -> str | None:
    """``None`` when ``out`` passes as ``expected`` under ``rule``, else why not (first difference)."""
    return _RULES[parse(StdoutRule, rule, "rule")](out, expected, tolerance)
