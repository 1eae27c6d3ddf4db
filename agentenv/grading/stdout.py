"""How a program's standard output is compared with a stdio case's expected output.

The rule follows what the benchmarks' own graders accept for honest programs, without their
known flaws. Output and expectation are first normalised (line endings unified, trailing spaces
of each line and trailing empty lines dropped); equal text passes. Otherwise they are compared
line by line (the same number of lines), each line token by token (split on whitespace): equal
tokens pass, and two tokens that are both decimal numbers pass when they are equal as numbers
(``3.0`` and ``3``, ``1e3`` and ``1000``), as LiveCodeBench's grader compares tokens as
``Decimal``, or, when the task gives a ``float_tolerance``, when they are within it (absolute
or relative), as APPS's grader compares floats. Nothing else is accepted: no comparison of lines
as a set, no dropping of lines, no case folding. :func:`compare_stdout` returns ``None`` when the
output passes, else a message naming the first line and token that differ.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

__all__ = ["compare_stdout", "normalise_stdout"]

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_MAX_SHOWN = 60


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


def _tokens_equal(got: str, want: str, tolerance: float | None) -> bool:
    if got == want:
        return True
    a, b = _number(got), _number(want)
    if a is None or b is None:
        return False
    if a == b:
        return True
    if tolerance is None:
        return False
    # In Decimal, not float: an expected number past float's range would be inf, and every
    # finite answer would then be "within" a relative tolerance of it.
    try:
        difference, allowed = abs(a - b), Decimal(repr(float(tolerance)))
        return difference <= allowed or difference <= allowed * abs(b)
    except ArithmeticError:  # exponents past Decimal's own range: not equal
        return False


def _show(token: str) -> str:
    return repr(token if len(token) <= _MAX_SHOWN else token[:_MAX_SHOWN] + "…")


def compare_stdout(out: str, expected: str, tolerance: float | None = None) -> str | None:
    """``None`` when ``out`` passes as ``expected``, else why not (first difference)."""
    got_text, want_text = normalise_stdout(out), normalise_stdout(expected)
    if got_text == want_text:
        return None
    got_lines, want_lines = got_text.split("\n"), want_text.split("\n")
    for number, (got, want) in enumerate(zip(got_lines, want_lines, strict=False), start=1):
        got_tokens, want_tokens = got.split(), want.split()
        for position, (g, w) in enumerate(zip(got_tokens, want_tokens, strict=False), start=1):
            if not _tokens_equal(g, w, tolerance):
                how = "within float_tolerance" if tolerance is not None else "as text or as numbers"
                return (f"line {number}, token {position}: expected {_show(w)}, got {_show(g)} "
                        f"(tokens compared {how})")
        if len(got_tokens) != len(want_tokens):
            return (f"line {number}: expected {len(want_tokens)} tokens, got {len(got_tokens)}: "
                    f"expected {_show(want)}, got {_show(got)}")
    if len(got_lines) != len(want_lines):
        return f"expected {len(want_lines)} lines of output, got {len(got_lines)}"
    return None
