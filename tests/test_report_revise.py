"""Revise vs resample on synthetic runs whose every number is derived by hand.

Single-step run (report_builders.single_step_run), n = 4 samples, k = 3 (visible pass, hidden pass):

    add:   (F,F) (T,T) (T,F) (F,T)  c=2  pass@1 .5   pass@3 1 - C(2,3)/C(4,3) = 1
                                         1@3 (order-averaged) .5; the first 3 stored pick s1 -> 1
    sort:  (T,F) (T,T) (F,F) (F,F)  c=1  pass@1 .25  pass@3 1 - C(3,3)/C(4,3) = .75
                                         1@3 .5; the first 3 stored pick s0 -> 0
    parse: no visible checks, s2 solved  c=1  pass@3 .75; 1@3 .25; the first 3 stored: s0 -> 0

Multi-turn run (report_builders.multi_turn_run): solve@3 = 1, .5, .5; repairs 3 of 5.
Tokens: a sample costs 60 (50 prompt + 10 generated); an episode of T turns 60T + 15T(T-1).
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from report_builders import multi_turn_run, single_step, single_step_run, write_run

from agentenv.errors import ConfigError
from agentenv.report import format_revise, revise_vs_resample
from agentenv.report.revise import one_at_k, one_at_k_expected

approx = pytest.approx


def test_per_task_numbers_match_the_hand_computed_values() -> None:
    """pass@1, pass@3, 1@3 (order-averaged, and of the first 3 stored), solve@3 and repair rate per task."""
    rows = revise_vs_resample(single_step_run(), multi_turn_run(), n_boot=200)["by_task"]
    add, sort, parse = rows["add"], rows["sort"], rows["parse"]
    assert (add["pass@1"], add["pass@k"], add["1@k_first"]) == (0.5, 1.0, 1.0)
    assert add["1@k"] == approx(0.5)
    assert (sort["pass@1"], sort["pass@k"], sort["1@k_first"]) == (0.25, 0.75, 0.0)
    assert sort["1@k"] == approx(0.5)
    assert (parse["pass@1"], parse["pass@k"], parse["1@k_first"]) == (0.25, 0.75, 0.0)
    assert parse["1@k"] == approx(0.25) and not parse["has_visible"]
    assert (add["solve@k"], sort["solve@k"], parse["solve@k"]) == (1.0, 0.5, 0.5)
    assert (add["pass@1_turn1"], sort["pass@1_turn1"]) == (0.5, 0.0)
    assert (add["repair_rate"], sort["repair_rate"], parse["repair_rate"]) == (1.0, 0.5, 0.5)


def test_overall_numbers_average_tasks_and_pool_repairs() -> None:
    """Overall: means over the three tasks; the repair rate pooled over episodes."""
    result = revise_vs_resample(single_step_run(), multi_turn_run(), n_boot=200)
    overall = result["overall"]
    assert result["k"] == 3
    assert overall["pass@1"] == approx(1 / 3)
    assert overall["pass@1_turn1"] == approx(1 / 6)
    assert overall["solve@k"] == approx(2 / 3)
    assert overall["1@k"] == approx(1.25 / 3)
    assert overall["1@k_first"] == approx(1 / 3)
    assert overall["pass@k"] == approx(2.5 / 3)
    assert overall["repair_rate"] == approx(0.6)
    assert overall["tasks_with_visible"] == 2
    assert any("no visible checks" in w for w in result["warnings"])


def test_tokens_and_calls_per_episode_for_both_strategies() -> None:
    """Revise spends what its turns cost; resample k times one sample's cost."""
    result = revise_vs_resample(single_step_run(), multi_turn_run(), n_boot=200)
    add = result["by_task"]["add"]
    assert add["tokens"]["revise_generated"] == 15.0 and add["tokens"]["revise_processed"] == 105.0
    assert add["tokens"]["sample_processed"] == 60.0
    assert add["tokens"]["resample_processed"] == 180.0
    assert add["tokens"]["resample_generated"] == 30.0
    # Early stopping, averaged over orders: 2 visible passes of 4, min(first pass, 3) is 5/3 calls.
    assert add["calls"] == {"revise": 1.5, "resample": 3, "one_at_k_early_stop": approx(5 / 3)}
    assert add["tokens"]["one_at_k_early_stop_processed"] == approx(100)
    overall = result["overall"]
    assert overall["tokens"]["revise_processed"] == approx(195.0)
    assert overall["tokens"]["revise_generated"] == approx(70 / 3)
    assert overall["calls"]["revise"] == approx(7 / 3)
    assert overall["calls"]["one_at_k_early_stop"] == approx(19 / 9)   # 5/3, 5/3 and 3 calls


def test_budget_curves_give_each_strategy_at_one_two_and_three_calls() -> None:
    """solve@j, 1@j and pass@j for j = 1..3, with calls and tokens spent at each budget."""
    budget = revise_vs_resample(single_step_run(), multi_turn_run(), n_boot=200)["budget"]
    assert [p["calls"] for p in budget] == [1, 2, 3]
    assert [p["revise"] for p in budget] == approx([1 / 6, 0.5, 2 / 3])
    assert [p["1@j"] for p in budget] == approx([1 / 3, 7 / 18, 1.25 / 3])  # 1@1 is pass@1
    assert [p["pass@j"] for p in budget] == approx([1 / 3, 11 / 18, 2.5 / 3])
    assert [p["revise_calls"] for p in budget] == approx([1.0, 5.5 / 3, 7 / 3])
    assert [p["revise_tokens"] for p in budget] == approx([60.0, 135.0, 195.0])
    assert [p["resample_tokens"] for p in budget] == approx([60.0, 120.0, 180.0])


def test_the_paired_interval_on_revise_minus_1_at_k_holds_its_mean() -> None:
    """Per-task differences .5, 0, .25: estimate .25, the interval within [0, .5] around it."""
    result = revise_vs_resample(single_step_run(), multi_turn_run(), n_boot=2000, seed=1)
    diff = result["revise_minus_1@k"]
    assert diff["estimate"] == approx(0.25)
    assert 0.0 <= diff["low"] < 0.25 < diff["high"] <= 0.5
    assert result["revise_minus_pass@k"]["estimate"] == approx(2 / 3 - 2.5 / 3)
    text = format_revise(result)
    assert "revise - 1@3: +0.250" in text and "overall" in text


def test_a_smaller_k_reads_the_multi_turn_run_up_to_turn_k() -> None:
    """k = 2: solve@2 is 1, 0 and .5; pass@2 uses the same samples."""
    result = revise_vs_resample(single_step_run(), multi_turn_run(), k=2, n_boot=100)
    rows = result["by_task"]
    assert [rows[t]["solve@k"] for t in ("add", "sort", "parse")] == [1.0, 0.0, 0.5]
    assert rows["add"]["pass@k"] == approx(5 / 6)
    assert rows["add"]["tokens"]["revise_processed"] == 105.0
    assert rows["sort"]["tokens"]["revise_processed"] == 150.0


def test_inputs_in_the_wrong_order_or_with_too_few_samples_are_refused(tmp_path: Path) -> None:
    """Swapped runs, a k above max_turns and fewer than k samples each say what to do."""
    single, multi = single_step_run(), multi_turn_run()
    with pytest.raises(ConfigError, match="swapped"):
        revise_vs_resample(multi, single)
    with pytest.raises(ConfigError, match="between 1 and"):
        revise_vs_resample(single, multi, k=4)
    few = [t for t in single if t.sample < 2]
    with pytest.raises(ConfigError, match="--samples 3"):
        revise_vs_resample(few, multi)
    with pytest.raises(ConfigError, match="multi-turn"):
        revise_vs_resample(single, single)


def test_run_directories_are_accepted_as_inputs(tmp_path: Path) -> None:
    """Paths to the two run directories work like lists of episodes."""
    s = write_run(tmp_path / "single", single_step_run())
    m = write_run(tmp_path / "multi", multi_turn_run())
    result = revise_vs_resample(s, m, n_boot=100)
    assert result["single_step"]["path"] == str(s)
    assert result["overall"]["solve@k"] == approx(2 / 3)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=6), st.data())
def test_order_averaged_1_at_k_is_the_mean_of_1_at_k_over_every_ordering(
        plan: list[tuple[bool, bool]], data: st.DataObject) -> None:
    """Enumerating every permutation of the samples gives the closed form exactly."""
    k = data.draw(st.integers(1, len(plan)))
    samples = [single_step("t", hidden, (2, 2) if visible else (1, 2), sample=i)
               for i, (visible, hidden) in enumerate(plan)]
    orders = list(itertools.permutations(samples))
    exact = Fraction(sum(one_at_k(list(order), k) for order in orders), len(orders))
    assert one_at_k_expected(samples, k) == approx(float(exact), abs=1e-12)
