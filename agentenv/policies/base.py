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
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor
from typing import Any, Protocol, runtime_checkable

__all__ = ["AsyncPolicy", "Observation", "Policy", "PolicyLike", "acall_policy", "blocks",
           "policy_model", "policy_name"]

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


# What the runner and the episode loop accept: a sync policy, one with an async twin, or a
# plain ``async def`` (obs -> awaitable text).
PolicyLike = Policy | AsyncPolicy | Callable[[Observation], Awaitable[str]]


def _is_coroutine_callable(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def _has_acall(policy: Any) -> bool:
    return getattr(policy, "acall", None) is not None


def _inline(policy: Any) -> bool:
    return getattr(policy, "blocking", True) is False


def blocks(policy: PolicyLike) -> bool:
    """Whether calling ``policy`` would block the event loop, so it needs a worker thread:
    True unless it has ``acall``, is ``async def`` or is marked ``blocking = False``."""
    return not (_has_acall(policy) or _is_coroutine_callable(policy) or _inline(policy))


async def acall_policy(policy: PolicyLike, obs: Observation, executor: Executor | None = None) -> str:
    """Call any policy from async code without blocking the event loop.

    Order of preference: ``policy.acall``; an ``async def`` policy; a policy marked
    ``blocking = False`` called inline; otherwise the sync call in a worker thread of
    ``executor`` (the loop's default executor when None).
    """
    # The text is returned as it came (a Completion keeps its usage numbers).
    call: Any = policy
    text: str
    if _has_acall(policy):
        text = await call.acall(obs)
    elif _is_coroutine_callable(policy):
        text = await call(obs)
    elif _inline(policy):
        text = call(obs)
    else:
        loop = asyncio.get_running_loop()
        text = await loop.run_in_executor(executor, functools.partial(call, obs))
    return text


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
