"""Fidelity: every honest program in tests/fidelity/corpus gets plain Python's verdict, check by check.

Plain Python's verdicts are computed here, in a fresh interpreter per program, never stored. The
honest checks agentenv still fails are recorded in tests/fidelity/known_disagreements.txt: each
style's disagreements must be exactly its recorded ones (a fix removes its line; a new failure
is a regression), and agentenv may never pass a check that plain Python fails.
"""

from __future__ import annotations

import pytest
from fidelity.harness import (
    Program,
    disagreement_keys,
    grade_all,
    known_disagreements,
    load_corpus,
    machine_dependent,
    plain_verdicts,
    styles,
)

STYLES = styles()


def test_the_corpus_holds_hundreds_of_checks_in_many_styles() -> None:
    programs = load_corpus()
    assert len(STYLES) >= 15
    assert len(programs) >= 150
    assert sum(len(p.checks) for p in programs) >= 700


def test_the_record_names_only_checks_of_the_corpus() -> None:
    checks = {f"{p.ident} {i}" for p in load_corpus() for i in range(len(p.checks))}
    assert known_disagreements() <= checks, sorted(known_disagreements() - checks)


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
    known = {k for k in known_disagreements() if k.startswith(f"{style}/")}
    false_passes = [f"{o.program.ident} check {i}: {o.program.checks[i][:120]!r}"
                    for o in outcomes for i in o.disagreements if not o.plain[i]]
    assert not false_passes, "agentenv passes checks plain Python fails:\n" + "\n".join(false_passes)
    found = {k for o in outcomes for k in disagreement_keys(o)}
    new = [
        f"{o.program.ident} check {i}: {o.program.checks[i][:120]!r} "
        + "; ".join(m for m in o.messages if m.startswith(f"check {i}:"))[:300]
        for o in outcomes for i in o.disagreements if f"{o.program.ident} {i}" not in known
    ]
    print(f"[fidelity] {style}: {total - len(found)}/{total} agreed")
    assert not new, f"{style}: honest checks failed that the record does not list:\n" + "\n".join(new)
    fixed = sorted(known - found - machine_dependent())
    assert not fixed, f"{style}: now agrees with Python; remove from known_disagreements.txt: {fixed}"


@pytest.mark.parametrize("style", ["classes", "protocols", "higher_order", "dataclasses"])
def test_a_task_that_says_what_it_asks_for_keeps_plain_pythons_verdicts(style: str) -> None:
    """Graded as a task whose reference is the program itself (``run_tests(defines=...)``: a
    check's other names, a method or operator of a class not asked for, get no check data),
    the styles that use the candidate's own classes most disagree exactly where the plain run
    does (``benchmarks/fidelity.py --defines`` grades every style so)."""
    outcomes = grade_all(load_corpus([style]), defines=True)
    known = {k for k in known_disagreements() if k.startswith(f"{style}/")}
    found = {k for o in outcomes for k in disagreement_keys(o)}
    assert found <= known, sorted(found - known)
    assert not [i for o in outcomes for i in o.disagreements if not o.plain[i]]
