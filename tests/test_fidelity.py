"""Fidelity: every honest program in tests/fidelity/corpus gets plain Python's verdict, check by check.

Plain Python's verdicts are computed here, in a fresh interpreter per program, never stored.
"""

from __future__ import annotations

import pytest
from fidelity.harness import Program, grade_all, load_corpus, plain_verdicts, styles

STYLES = styles()


def test_the_corpus_holds_hundreds_of_checks_in_many_styles() -> None:
    programs = load_corpus()
    assert len(STYLES) >= 15
    assert len(programs) >= 150
    assert sum(len(p.checks) for p in programs) >= 700


def test_plain_python_side_tells_passing_from_failing_checks() -> None:
    """The reference side is not a constant: it fails what Python fails and passes what it passes."""
    program = Program(style="self", name="probe", code="def f(x):\n    return x + 1\n",
                      checks=("assert f(1) == 2", "assert f(1) == 3", "f(None)", "while True: pass"),
                      timeout=0.5)
    assert plain_verdicts(program) == (True, False, False, False)


def test_plain_python_runs_the_solution_as_main_with_setup_after_the_code() -> None:
    program = Program(style="self", name="order", prelude="from math import *\n",
                      code="from dataclasses import dataclass\n@dataclass\nclass N:\n    nxt: 'N | None' = None\n",
                      setup_code="ROOT = N(N())\n",
                      checks=("assert ROOT.nxt.nxt is None", "assert __name__ == '__main__'", "assert sqrt(4) == 2"))
    assert plain_verdicts(program) == (True, True, True)


@pytest.mark.parametrize("style", STYLES)
def test_agentenv_agrees_with_plain_python_on_every_check(style: str) -> None:
    programs = load_corpus([style])
    if not any(p.available() for p in programs):
        pytest.skip(f"no program of style {style!r} can run here (missing modules)")
    outcomes = grade_all(programs)
    total = sum(len(o.plain) for o in outcomes)
    wrong = [
        f"{o.program.ident} check {i}: python {'passes' if o.plain[i] else 'fails'}, "
        f"agentenv {'passes' if o.agentenv[i] else 'fails'}: {o.program.checks[i][:120]!r} "
        + "; ".join(m for m in o.messages if m.startswith(f"check {i}:"))[:300]
        for o in outcomes for i in o.disagreements
    ]
    assert not wrong, f"{style}: {total - len(wrong)}/{total} agreed\n" + "\n".join(wrong)
