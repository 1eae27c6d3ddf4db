"""The statistics the reports rest on: the unbiased pass@k estimator and bootstrap intervals.

Pure Python (``math``, ``random``) so that the numbers do not depend on whether numpy is
installed, and a seed gives the same interval everywhere. Bootstrap intervals are percentile
intervals; quantiles interpolate linearly between order statistics (numpy's default).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentenv.errors import ConfigError

__all__ = [
    "Interval",
    "bootstrap_difference",
    "mean",
    "mean_halfwidth",
    "paired_bootstrap",
    "pass_at_k",
    "quantile",
]


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean, or None for no values."""
    return math.fsum(values) / len(values) if values else None


def mean_halfwidth(values: Sequence[float], confidence: float = 0.95) -> float | None:
    """Half-width of the normal-approximation interval of the mean: ``z * s / sqrt(n)``.

    ``s`` is the sample standard deviation and ``z`` the normal quantile (1.96 at 95%); None
    for fewer than two values. The run table's quick ``±``; bootstraps are for comparisons.
    """
    if len(values) < 2:
        return None
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence!r}")
    centre = math.fsum(values) / len(values)
    variance = math.fsum((v - centre) ** 2 for v in values) / (len(values) - 1)
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    return z * math.sqrt(variance / len(values))


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of already sorted values, interpolating linearly."""
    if not sorted_values:
        raise ConfigError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ConfigError(f"quantile must be in [0, 1], got {q!r}")
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    weight = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * weight


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k from ``n`` samples of which ``c`` are correct.

    ``1 - C(n-c, k) / C(n, k)``: the chance that ``k`` samples drawn without replacement from
    the ``n`` include a correct one (Chen et al., 2021). Needs ``1 <= k <= n``.
    """
    if not 0 <= c <= n:
        raise ConfigError(f"pass@k needs 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ConfigError(f"pass@{k} needs at least k={k} samples per task, got n={n}; "
                          f"re-run with --samples {k} or more")
    # Integer binomials are exact; int / int rounds once, to the nearest float.
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass(frozen=True)
class Interval:
    """A point estimate with a bootstrap confidence interval ``[low, high]``."""

    estimate: float
    low: float
    high: float
    confidence: float
    n: int
    n_boot: int

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0.0 or self.high < 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high,
                "confidence": self.confidence, "n": self.n, "n_boot": self.n_boot,
                "excludes_zero": self.excludes_zero}


def _check(n_boot: int, confidence: float) -> None:
    if n_boot < 1:
        raise ConfigError(f"n_boot must be at least 1, got {n_boot!r}")
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence!r}")


def _interval(estimate: float, replicates: list[float], confidence: float, n: int) -> Interval:
    replicates.sort()
    tail = (1.0 - confidence) / 2.0
    return Interval(estimate=estimate, low=quantile(replicates, tail),
                    high=quantile(replicates, 1.0 - tail), confidence=confidence, n=n,
                    n_boot=len(replicates))


def paired_bootstrap(differences: Sequence[float], *, n_boot: int = 10_000, seed: int | str = 0,
                     confidence: float = 0.95) -> Interval:
    """Mean of paired differences with a percentile bootstrap interval.

    The pairs (one difference per task) are resampled with replacement, so whatever the two
    conditions share through a task is held fixed.
    """
    _check(n_boot, confidence)
    values = [float(d) for d in differences]
    if not values:
        raise ConfigError("a paired bootstrap needs at least one pair")
    n = len(values)
    rng = random.Random(seed)
    replicates = [math.fsum(rng.choices(values, k=n)) / n for _ in range(n_boot)]
    return _interval(math.fsum(values) / n, replicates, confidence, n)


def bootstrap_difference(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], *,
                         n_boot: int = 1_000, seed: int | str = 0,
                         confidence: float = 0.95) -> list[Interval]:
    """Differences of means ``mean(b) - mean(a)`` for several metrics of two unpaired samples.

    ``a`` and ``b`` hold one row per observation and one column per metric; each bootstrap
    replicate resamples the rows of ``a`` and of ``b`` independently and once for all metrics.
    Returns one interval per metric column.
    """
    _check(n_boot, confidence)
    if not a or not b:
        raise ConfigError("a bootstrap difference needs observations on both sides")
    width = len(a[0])
    if any(len(row) != width for row in (*a, *b)):
        raise ConfigError("every observation must carry the same metrics")
    rng = random.Random(seed)
    columns_a = [[float(row[j]) for row in a] for j in range(width)]
    columns_b = [[float(row[j]) for row in b] for j in range(width)]
    estimate = [math.fsum(cb) / len(b) - math.fsum(ca) / len(a)
                for ca, cb in zip(columns_a, columns_b, strict=True)]
    rows_a, rows_b = range(len(a)), range(len(b))
    replicates: list[list[float]] = [[] for _ in range(width)]
    for _ in range(n_boot):
        pick_a = rng.choices(rows_a, k=len(a))
        pick_b = rng.choices(rows_b, k=len(b))
        for j in range(width):
            mean_a = math.fsum(map(columns_a[j].__getitem__, pick_a)) / len(a)
            mean_b = math.fsum(map(columns_b[j].__getitem__, pick_b)) / len(b)
            replicates[j].append(mean_b - mean_a)
    n = min(len(a), len(b))
    return [_interval(estimate[j], replicates[j], confidence, n) for j in range(width)]
