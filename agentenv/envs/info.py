"""The ``info`` dict every environment step returns, as a typed record (:class:`StepInfo`).

It is a ``TypedDict``: at run time a plain ``dict`` (users index it, copy it, serialise it as
before), to a type checker a record with these keys. Under ``feedback_from="visible"`` no value
in it depends on a hidden check (the policy's view, ``view="visible"``), and the two keys that
would (``delta``, ``exec_seconds``) are left out.
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = ["StepInfo"]


class _StepInfoBase(TypedDict):
    task_name: str
    turn: int
    view: str  # what the numbers below were computed from: "hidden" checks or the "visible" run
    passed: int
    total: int
    fraction: float
    timed_out: bool
    outcome: str
    visible_passed: int | None
    visible_total: int | None
    failures: list[dict[str, Any]]
    feedback_trimmed: bool
    reply_cut: bool
    action_tokens: int
    observation_tokens: int
    tokens_used: int
    tokens_left: int | None
    isolation: str
    terminated: bool
    truncated: bool
    stop_reason: str | None
    infra_error: str | None  # the sandbox could not grade this step (an infrastructure fault)


class StepInfo(_StepInfoBase, total=False):
    """What one step reports besides the observation, the reward and ``done``."""

    delta: float  # the hidden fraction's change since the last turn (feedback_from="all" only)
    exec_seconds: float  # the hidden run's time in the sandbox (feedback_from="all" only)
