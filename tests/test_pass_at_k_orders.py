"""1@k is averaged over sample orders, as pass@k is: the revise-vs-resample table, its budget
curve and the early-stopping cost do not depend on which samples happen to be stored first
(1@1 is pass@1, never above it); and `report` with two multi-turn runs labels its resample arm
as first turns, not as a single-step run."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from report_builders import multi_turn, multi_turn_run, single_step, write_run

from agentenv.cli import main
from agentenv.report import format_revise, revise_vs_resample
from agentenv.report.revise import _pick

approx = pytest.approx


def samples_of(plan: list[tuple[bool, bool]]) -> list:
    """Single-step samples of task 'add': (visible checks pass, hidden checks pass) each."""
    return [single_step("add", hidden, (2, 2) if visible else (1, 2), sample=i)
            for i, (visible, hidden) in enumerate(plan)]


def episodes(k: int) -> list:
    return [multi_turn("add", [("pass", 1.0)], sample=0, max_turns=k)]


def test_one_at_one_is_pass_at_one_whatever_sample_is_stored_first() -> None:
    """The issue's case: the first stored sample passes (visible and hidden), the other three
    fail; read from the first stored samples 1@1 was 1.0, above the oracle pass@1 of 0.25."""
    plan = [(True, True), (False, False), (False, False), (False, False)]
    result = revise_vs_resample(samples_of(plan), episodes(2), k=2, n_boot=50)
    row = result["by_task"]["add"]
    assert row["pass@1"] == 0.25 and row["1@k_first"] == 1.0  # what the stored order alone says
    assert result["budget"][0]["1@j"] == approx(row["pass@1"])  # 1@1 = pass@1
    assert row["1@k"] <= row["pass@k"]
    # 1@2: the one visible pass is among the first 2 with probability 1/2, else a failing pick.
    assert row["1@k"] == approx(0.5)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=5), st.data())
def test_every_1_at_k_number_is_the_mean_over_every_ordering(
        plan: list[tuple[bool, bool]], data: st.DataObject) -> None:
    """Headline 1@k, the 1@j curve and the early-stopping calls and tokens equal their average
    over every permutation of the stored samples (enumerated), and are the same for any order."""
    k = data.draw(st.integers(1, len(plan)))
    samples = samples_of(plan)
    result = revise_vs_resample(samples, episodes(k), k=k, n_boot=20)
    row = result["by_task"]["add"]
    orders = [list(order) for order in itertools.permutations(samples)]

    def literal(order: list, j: int) -> float:
        return float(order[_pick(order, j)].solved_turn is not None)

    def calls(order: list) -> int:
        pick = _pick(order, k)
        return pick + 1 if order[pick].turns[0].visible_passed == 2 else k

    assert row["1@k"] == approx(sum(literal(o, k) for o in orders) / len(orders))
    assert [p["1@j"] for p in result["budget"]] == approx(
        [sum(literal(o, j) for o in orders) / len(orders) for j in range(1, k + 1)])
    mean_calls = sum(calls(o) for o in orders) / len(orders)
    assert row["calls"]["one_at_k_early_stop"] == approx(mean_calls)
    assert row["tokens"]["one_at_k_early_stop_processed"] == approx(60 * mean_calls)  # 60 per sample
    assert row["1@k"] <= row["pass@k"] + 1e-12
    shuffled = revise_vs_resample(data.draw(st.permutations(samples)), episodes(k), k=k, n_boot=20)
    assert shuffled["by_task"]["add"]["1@k"] == approx(row["1@k"])


def test_report_of_two_multi_turn_runs_does_not_call_either_single_step(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The first run's first turns are the resample arm: the table, the page and the notes
    say so, and no label calls that run single-step."""
    first = write_run(tmp_path / "first", multi_turn_run())
    second = write_run(tmp_path / "second", multi_turn_run())
    code = main(["report", str(first), str(second), "--k", "2", "-q"])
    out, _err = capsys.readouterr()
    assert code == 0
    assert f"resample first turns of multi-turn {first}" in out
    assert "single-step" not in out
    page = (second / "revise_vs_resample" / "revise_vs_resample.html").read_text()
    assert "Resample arm: first turns of multi-turn" in page and "single-step" not in page.lower()


def test_a_single_step_resample_arm_is_still_called_single_step(tmp_path: Path) -> None:
    single = [single_step("add", i == 0, (2, 2), sample=i) for i in range(3)]
    text = format_revise(revise_vs_resample(single, episodes(3), n_boot=20))
    assert "resample single-step" in text and "3 single-step samples" in text
