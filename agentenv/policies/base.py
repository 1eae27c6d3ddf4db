"""The policy contract: an observation dict in, the policy's raw text out.

A :class:`Policy` is any callable ``obs -> str``: a plain function such as ``mock_policy`` or an
object with ``__call__``. An :class:`AsyncPolicy` also has ``async acall(obs) -> str``, so
rollouts can keep many model calls in flight on one event loop. A policy may return an
:class:`agentenv.records.Completion` (a ``str`` that carries the server's usage numbers and
finish reason); environments copy those into the turn record.

Optional attributes the runner reads: ``name`` (recorded as ``trajectory.policy``), ``model``
(recorded as ``trajectory.model``) and ``blocking`` (``False`` for cheap policies that may run
on the event loop itself; anything else synchronous is called in a worker thread).
:func:`acall_policy` is how async code calls any of them.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Mapping
from concurrent.futures import Executor
from typing import Any, Protocol, runtime_checkable

__all__ = ["AsyncPolicy", "Observation", "Policy", "acall_policy", "policy_model", "policy_name"]

Observation = Mapping[str, Any]


@runtime_checkable
class Policy(Protocol):
    """Anything that maps an observation to raw text (which may hold a fenced code block)."""

    def __call__(self, obs: Observation) -> str: ...


@runtime_checkable
class AsyncPolicy(Protocol):
    """A policy with an async twin, for concurrent rollouts."""

    def __call__(self, obs: Observation) -> str: ...

    async def acall(self, obs: Observation) -> str: ...


def _is_coroutine_callable(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


async def acall_policy(policy: Any, obs: Observation, executor: Executor | None = None) -> str:
    """Call any policy from async code without blocking the event loop.

    Order of preference: ``policy.acall``; an ``async def`` policy; a policy marked
    ``blocking = False`` called inline; otherwise the sync call in a worker thread of
    ``executor`` (the loop's default executor when None).
    """
    acall = getattr(policy, "acall", None)
    if acall is not None:
        return await acall(obs)
    if _is_coroutine_callable(policy):
        return await policy(obs)
    if getattr(policy, "blocking", True) is False:
        return policy(obs)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor, functools.partial(policy, obs))


def policy_name(policy: Any) -> str:
    """The name recorded for a policy: its ``name`` attribute, else its function or class name."""
    name = getattr(policy, "name", None)
    if isinstance(name, str) and name:
        return name
    if inspect.isfunction(policy) or inspect.ismethod(policy):
        return str(policy.__name__)
    return type(policy).__name__


def policy_model(policy: Any) -> str | None:
    """The model a policy calls, when it has one (``model`` attribute)."""
    model = getattr(policy, "model", None)
    return model if isinstance(model, str) else None
