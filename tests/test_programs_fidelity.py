"""Whole programs get the verdict of ``python3`` plus their benchmark's own judge, test by test.

The corpus (tests/fidelity/program_corpus.py) holds honest programs in the styles competitive
programmers and models write (fast-I/O templates, ``input()`` loops, ``print(*xs)``, floats,
deep recursion in a thread, ``exit()`` midway, large outputs, many tests, numpy) and wrong ones
(off by one, wrong precision, extra output, stderr only, a crash after the output, a timeout).
Each is written as an agentenv JSONL task, an APPS row, a LiveCodeBench row and a CodeContests
row, loaded by agentenv's loaders and graded by agentenv, and run by plain ``python3`` with the
benchmark's own comparison (tests/fidelity/program_harness.py). They must agree on every test
except the recorded grader flaws (tests/fidelity/programs_known.txt), which are all on wrong
programs; agentenv never passes a test the judge fails. The fast test grades each program in one
layout (in turn); the slow one grades the whole corpus.
"""

from __future__ import annotations

import pytest
from fidelity.program_corpus import LAYOUTS, Program, fast_programs, heavy_programs, programs
from fidelity.program_harness import (
    Outcome,
    apps_accepts,
    code_contests_accepts,
    disagreement_keys,
    grade_all,
    known_disagreements,
    livecodebench_accepts,
    plain_run,
    tokens_accepts,
)


def _check(outcomes: list[Outcome]) -> None:
    known = known_disagreements()
    sizes = {o.program.ident: len(o.plain) for o in outcomes}
    false_passes = [f"{o.program.ident} test {i}" for o in outcomes for i in o.false_passes]
    assert not false_passes, "agentenv passes tests the benchmark's judge fails: " + ", ".join(false_passes)
    dishonest = [o.program.ident for o in outcomes if not o.program.wrong and not all(o.plain)]
    assert not dishonest, f"honest programs the judge fails (the corpus is wrong): {dishonest}"
    found = {k for o in outcomes for k in disagreement_keys(o)}
    expected = {k for k in known if int(k.split(" ")[1]) < sizes.get(k.split(" ")[0], 0)}
    new = sorted(found - expected)
    detail = ["; ".join(o.messages)[:300] for o in outcomes if disagreement_keys(o) & set(new)]
    assert not new, f"disagreements not in programs_known.txt: {new}\n" + "\n".join(detail)
    fixed = sorted(expected - found)
    assert not fixed, f"now agreeing: remove from programs_known.txt: {fixed}"
    by_layout = {layout: [o for o in outcomes if o.program.layout == layout] for layout in LAYOUTS}
    for layout, group in by_layout.items():
        tests = sum(len(o.plain) for o in group)
        agreed = tests - sum(len(o.disagreements) for o in group)
        print(f"[programs] {layout}: {agreed}/{tests} agreed, {len(group)} programs")


def test_the_record_lists_only_wrong_programs_of_the_corpus() -> None:
    corpus = {p.ident: p for p in programs() + heavy_programs()}
    for key in known_disagreements():
        ident, _, index = key.partition(" ")
        assert ident in corpus, key
        assert corpus[ident].wrong, f"{key}: an honest program may not disagree"
        assert int(index) < len(corpus[ident].problem.tests)


def test_the_corpus_covers_every_layout_with_many_styles() -> None:
    corpus = programs()
    assert {p.layout for p in corpus} == set(LAYOUTS)
    honest = {p.name for p in corpus if not p.wrong}
    wrong = {p.name for p in corpus if p.wrong}
    assert len(honest) >= 25 and len(wrong) >= 15
    assert len(corpus) >= 60 * 3
    fast = fast_programs()
    assert {p.layout for p in fast} == set(LAYOUTS)
    assert {p.name for p in fast} == {p.name for p in corpus if not p.requires} | {"hang_on_zero"}


def test_each_reference_comparison_refuses_and_accepts() -> None:
    """The reference side is not a constant: each judge's rule passes and fails what it should."""
    assert livecodebench_accepts("3.0\n", "3") and not livecodebench_accepts("YES 3.0", "YES 3")
    assert apps_accepts("2\n1\n", "1\n2\n")  # APPS's set fallback (a flaw)
    assert not apps_accepts("3\n", "1\n2\n")
    assert code_contests_accepts("yes", "YES") and not code_contests_accepts("1", "2")
    assert code_contests_accepts("9007199254740993", "9007199254740992")  # doubles (a flaw)
    assert tokens_accepts("3.0000001\n", "3", 1e-6) and not tokens_accepts("3.0000001\n", "3", None)
    assert not tokens_accepts("10000001\n", "10000000", 1e-6)


def test_plain_python_tells_a_crash_from_an_exit() -> None:
    assert plain_run("print(1)\nraise ValueError\n", "", 5.0).crashed
    assert not plain_run("import sys\nprint(1)\nsys.exit(3)\n", "", 5.0).crashed
    assert plain_run("while True: pass\n", "", 0.2).timed_out


def test_every_program_gets_its_judges_verdict_in_one_layout_each() -> None:
    _check(grade_all(fast_programs()))


@pytest.mark.slow
@pytest.mark.exhaustive
def test_every_program_gets_its_judges_verdict_in_every_layout() -> None:
    _check(grade_all(programs() + heavy_programs()))


def test_a_program_is_graded_as_the_loaded_task_says() -> None:
    """A probe of the harness itself: a wrong program is refused on the agentenv side too."""
    from fidelity.program_corpus import MEAN
    from fidelity.program_harness import grade, load_layout

    task = load_layout("apps", [MEAN])["mean"]
    outcome = grade(Program("apps", "probe", MEAN, "print(0)\n"), task)
    assert not any(outcome.plain) and not any(outcome.agentenv)
