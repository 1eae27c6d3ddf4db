"""Hypothesis strategies shared by the test suite.

Sandbox and grading strategies:

- :func:`plain_values`: values that may cross the sandbox boundary (None, bool, int, float,
  str, bytes and list / tuple / dict / set / frozenset of those);
- :func:`candidate_programs`: small Python programs defining ``add(a, b)`` whose module level
  and body mix loops, sleeps, exceptions, exits, recursion and prints;
- :func:`arbitrary_code`: any text at all, as a policy might emit it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["arbitrary_code", "candidate_programs", "plain_values"]

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.binary(max_size=20),
)
_hashables = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
              st.text(max_size=10), st.binary(max_size=10)),
    lambda inner: st.one_of(st.tuples(inner, inner), st.frozensets(inner, max_size=3)),
    max_leaves=6,
)


def plain_values() -> st.SearchStrategy[Any]:
    """Plain data of every kind the wire format carries, nested a few levels."""
    return st.recursive(
        _scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.lists(inner, max_size=4).map(tuple),
            st.dictionaries(_hashables, inner, max_size=4),
            st.sets(_hashables, max_size=4),
            st.frozensets(_hashables, max_size=4),
        ),
        max_leaves=12,
    )


# Statements for add's body; each is one line at function indentation.
_BODY = [
    "return a + b",
    "return a - b",
    "return None",
    "raise ValueError('boom')",
    "raise SystemExit(0)",
    "raise KeyboardInterrupt",
    "sys.exit(0)",
    "os._exit(0)",
    "os._exit(7)",
    "while True: pass",
    "time.sleep(0.05)",
    "for _ in range(10 ** 4): pass",
    "return add(a, b)",
    "print('out' * 50)",
    "sys.stderr.write('err' * 50)",
    "1 / 0",
    "return [a, b]",
    "return str(a + b)",
    "return float(a + b)",
]

# Statements at module level, run when the candidate is loaded.
_MODULE = [
    "",
    "print('loading')",
    "time.sleep(0.02)",
    "x = [i * i for i in range(1000)]",
    "raise RuntimeError('at import')",
    "sys.exit(0)",
    "import this",
    "def helper(n):\n    return helper(n + 1)\nhelper(0)",
]


@st.composite
def candidate_programs(draw: st.DrawFn) -> str:
    """A program defining ``add(a, b)`` built from pathological and honest pieces."""
    module = draw(st.sampled_from(_MODULE))
    body = draw(st.lists(st.sampled_from(_BODY), min_size=1, max_size=3))
    lines = ["import os, sys, time", module, "def add(a, b):"]
    lines += ["    " + stmt for stmt in body]
    return "\n".join(lines) + "\n"


def arbitrary_code() -> st.SearchStrategy[str]:
    """Any text, biased towards things that look a little like Python."""
    pythonish = st.lists(
        st.sampled_from(["def", "add", "(", ")", ":", "return", "a", "+", "b", "\n", "    ",
                         "while", "True", "pass", "import", "os", "'", '"', "#", "\\", "\0"]),
        max_size=30,
    ).map("".join)
    return st.one_of(st.text(max_size=200), pythonish)
