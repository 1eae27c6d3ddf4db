"""The report's statistics: the unbiased pass@k estimator and bootstrap intervals."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentenv.errors import ConfigError
from agentenv.report.stats import bootstrap_difference, paired_bootstrap, pass_at_k, quantile


@pytest.mark.parametrize(("n", "c", "k", "expected"), [
    (4, 2, 3, 1.0),            # 1 - C(2,3)/C(4,3) = 1 - 0/4
    (4, 1, 3, 0.75),           # 1 - C(3,3)/C(4,3) = 1 - 1/4
    (4, 2, 2, 5 / 6),          # 1 - C(2,2)/C(4,2) = 1 - 1/6
    (4, 1, 2, 0.5),            # 1 - C(3,2)/C(4,2) = 1 - 3/6
    (10, 3, 1, 0.3),           # pass@1 is c/n
    (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
    (5, 0, 2, 0.0),
    (5, 5, 1, 1.0),
])
def test_pass_at_k_matches_the_closed_form(n: int, c: int, k: int, expected: float) -> None:
    """pass@k = 1 - C(n-c, k)/C(n, k) on hand-computed cases."""
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-15)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n),
                                                       st.integers(1, n))))
def test_pass_at_k_is_the_chance_a_random_k_subset_holds_a_correct_sample(
        case: tuple[int, int, int]) -> None:
    """Enumerating every k-subset of n samples gives the same number as the estimator."""
    n, c, k = case
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    hits = sum(any(samples[i] for i in subset) for subset in subsets)
    assert pass_at_k(n, c, k) == pytest.approx(float(Fraction(hits, len(subsets))), abs=1e-12)


def test_pass_at_k_refuses_fewer_samples_than_k() -> None:
    """k larger than n is undefined; the error says to draw more samples."""
    with pytest.raises(ConfigError, match="--samples 5"):
        pass_at_k(3, 1, 5)
    with pytest.raises(ConfigError, match="0 <= c <= n"):
        pass_at_k(3, 4, 1)


def test_quantile_interpolates_linearly_between_order_statistics() -> None:
    """The median of 1..4 is 2.5; the extremes are the min and max."""
    values = [1.0, 2.0, 3.0, 4.0]
    assert quantile(values, 0.5) == 2.5
    assert quantile(values, 0.0) == 1.0
    assert quantile(values, 1.0) == 4.0
    assert quantile(values, 0.25) == pytest.approx(1.75)


def test_paired_bootstrap_contains_the_true_mean_on_a_clear_case() -> None:
    """200 paired differences drawn around 0.3: the interval holds 0.3 and excludes 0."""
    rng = random.Random(7)
    differences = [0.3 + rng.gauss(0.0, 0.5) for _ in range(200)]
    interval = paired_bootstrap(differences, n_boot=2000, seed=0)
    assert interval.low < 0.3 < interval.high
    assert interval.excludes_zero
    assert interval.low < interval.estimate < interval.high
    assert interval.high - interval.low < 0.3  # about 4 standard errors of 0.5/sqrt(200)


def test_paired_bootstrap_is_reproducible_for_a_seed_and_exact_for_constant_pairs() -> None:
    """The same seed gives the same interval; identical differences give a point interval."""
    values = [0.0, 1.0, 0.5, 0.25, 1.0]
    assert paired_bootstrap(values, n_boot=500, seed=3) == paired_bootstrap(values, n_boot=500, seed=3)
    constant = paired_bootstrap([0.5] * 10, n_boot=100)
    assert (constant.estimate, constant.low, constant.high) == (0.5, 0.5, 0.5)
    assert constant.to_dict()["n"] == 10


def test_paired_bootstrap_refuses_no_pairs_and_bad_settings() -> None:
    """No pairs, n_boot < 1 and a confidence outside (0, 1) are configuration errors."""
    with pytest.raises(ConfigError):
        paired_bootstrap([])
    with pytest.raises(ConfigError):
        paired_bootstrap([1.0], n_boot=0)
    with pytest.raises(ConfigError):
        paired_bootstrap([1.0], confidence=1.0)


def test_bootstrap_difference_resamples_two_samples_jointly_over_metrics() -> None:
    """B - A per metric column; a clear gap gives an interval that holds it and excludes 0."""
    a = [(0.0, 0.2)] * 10 + [(1.0, 0.4)] * 10
    b = [(1.0, 0.9)] * 18 + [(0.0, 0.5)] * 2
    first, second = bootstrap_difference(a, b, n_boot=1000, seed=1)
    assert first.estimate == pytest.approx(0.9 - 0.5)
    assert second.estimate == pytest.approx(0.86 - 0.3)
    assert first.low < 0.4 < first.high and first.excludes_zero
    assert second.low < 0.56 < second.high and second.excludes_zero
