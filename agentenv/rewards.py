"""Reward functions: what a sandbox result is worth, in [0, 1].

A reward function is any callable ``(result: RunResult, code: str) -> float``. Provided:

- ``dense_reward``: the walk-through's reward — format gate (no code -> 0.0), then the
  fraction of checks passed. It says "you are getting warmer".
- ``sparse_reward``: 1.0 only when every check passes, else 0.0.
- ``format_gate(fn)``: wraps any reward so empty code earns 0.0 whatever ``fn`` says.
- ``outcome_reward(levels)``: a fixed reward per outcome (no_code, syntax_error, ... pass).
- ``combine({fn: weight, ...})``: a weighted mean of several rewards (a rubric).

Plug your own into ``CodingEnv(reward_fn=...)`` / ``MultiTurnCodingEnv(reward_fn=...)``; every
value is checked to be finite and is clipped into [0, 1] by :func:`checked_reward`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Protocol

from agentenv.errors import ConfigError
from agentenv.grading.result import RunResult
from agentenv.records import OUTCOMES, classify_outcome

__all__ = [
    "REWARDS",
    "RewardFn",
    "checked_reward",
    "combine",
    "dense_reward",
    "format_gate",
    "get_reward",
    "outcome_reward",
    "sparse_reward",
]


class RewardFn(Protocol):
    """Maps one sandbox result and the code that produced it to a reward."""

    def __call__(self, result: RunResult, code: str) -> float: ...


def dense_reward(result: RunResult, code: str) -> float:
    """Format gate, then (checks passed) / (checks total)."""
    if not code.strip():  # format gate: no code at all -> 0, no partial credit
        return 0.0
    return result.fraction


def sparse_reward(result: RunResult, code: str) -> float:
    """1.0 only when every check passes."""
    if not code.strip():
        return 0.0
    return 1.0 if result.all_passed else 0.0


def format_gate(fn: RewardFn) -> RewardFn:
    """Wrap ``fn`` so that a submission with no code earns 0.0."""

    def gated(result: RunResult, code: str) -> float:
        return 0.0 if not code.strip() else fn(result, code)

    gated.__name__ = f"format_gate({getattr(fn, '__name__', 'reward')})"
    return gated


def outcome_reward(levels: Mapping[str, float]) -> RewardFn:
    """A reward per outcome of :func:`agentenv.records.classify_outcome` (missing outcomes -> 0)."""
    unknown = set(levels) - set(OUTCOMES)
    if unknown:
        raise ConfigError(f"unknown outcome(s) {sorted(unknown)}; outcomes are {', '.join(OUTCOMES)}")
    table = dict(levels)

    def by_outcome(result: RunResult, code: str) -> float:
        return table.get(classify_outcome(code, result), 0.0)

    by_outcome.__name__ = "outcome_reward"
    return by_outcome


def combine(weights: Mapping[Callable[[RunResult, str], float], float]) -> RewardFn:
    """Weighted mean of several reward functions (weights must be >= 0 and not all zero)."""
    if not weights or any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
        raise ConfigError("combine() needs at least one reward with a positive weight and no negative weights")
    total = sum(weights.values())
    items = list(weights.items())

    def combined(result: RunResult, code: str) -> float:
        return sum(w * fn(result, code) for fn, w in items) / total

    combined.__name__ = "combine"
    return combined


def checked_reward(fn: Callable[[RunResult, str], float], result: RunResult, code: str) -> float:
    """Call a reward function and make sure its value is a finite float in [0, 1]."""
    value = fn(result, code)
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"reward function {getattr(fn, '__name__', fn)!r} returned {value!r}; it must return a number"
        ) from None
    if not math.isfinite(value):
        raise ConfigError(f"reward function {getattr(fn, '__name__', fn)!r} returned {value}; "
                          "rewards must be finite")
    return min(1.0, max(0.0, value))


REWARDS: dict[str, RewardFn] = {"dense": dense_reward, "sparse": sparse_reward}


def get_reward(name_or_fn: str | RewardFn) -> RewardFn:
    """Resolve a reward by name ("dense", "sparse") or pass a callable through."""
    if callable(name_or_fn):
        return name_or_fn
    try:
        return REWARDS[name_or_fn]
    except KeyError:
        raise ConfigError(f"unknown reward {name_or_fn!r}; use one of {', '.join(REWARDS)} "
                          "or pass a function (result, code) -> float") from None
