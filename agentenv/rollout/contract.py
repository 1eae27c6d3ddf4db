"""The environment contract the rollout runner drives, as typed protocols.

An environment is anything with the shape of ``CodingEnv`` and ``MultiTurnCodingEnv`` (a
structural type: nothing needs to inherit from these):

- :class:`Env`: ``reset(task_index=...) -> obs``, ``step(action) -> (obs, reward, done, info)``
  and ``trajectory`` (the episode's record, None before the first reset). ``reset`` may also
  take ``seed=`` (:func:`reset_takes_seed` says whether it does);
- :class:`AsyncEnv`: an :class:`Env` with ``async astep(action)``, whose grading runs in the
  sandbox's worker pool instead of a thread of the event loop's executor;
- :class:`TurnLimited`: an :class:`Env` that says how many steps an episode takes at most
  (``max_turns``);
- :class:`ResumableEnv`: an :class:`Env` that can be snapshotted between turns and restored
  from a snapshot (``CodingEnv``, ``MultiTurnCodingEnv``): what a partial record and a resumed
  episode need;
- :class:`BranchingEnv`: all of the above with a seeded ``reset``: what a repair tree needs.

The optional parts are asked for with ``isinstance`` (the protocols are runtime-checkable),
and an env that lacks one gets a :class:`~agentenv.errors.ConfigError` that names it.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentenv.records import Trajectory

if TYPE_CHECKING:  # for annotations only
    from agentenv.envs.multiturn import EpisodeSnapshot

__all__ = ["AsyncEnv", "BranchingEnv", "Env", "ResumableEnv", "StepOutcome", "TurnLimited", "reset_takes_seed"]

# (observation, reward, done, info): what ``step`` and ``astep`` return.
StepOutcome = tuple[Any, float, bool, Any]


@runtime_checkable
class Env(Protocol):
    """An environment the runner can drive: reset, step, and the episode's record."""

    @property
    def trajectory(self) -> Trajectory | None: ...

    def reset(self, task_index: int | None = None) -> Any: ...

    def step(self, action: str) -> StepOutcome: ...


@runtime_checkable
class AsyncEnv(Env, Protocol):
    """An environment with an async step."""

    async def astep(self, action: str) -> StepOutcome: ...


@runtime_checkable
class TurnLimited(Env, Protocol):
    """An environment whose episodes take at most ``max_turns`` steps."""

    @property
    def max_turns(self) -> int: ...


@runtime_checkable
class ResumableEnv(Env, Protocol):
    """An environment that can be snapshotted between turns and continued from a snapshot."""

    def snapshot(self) -> EpisodeSnapshot: ...

    def restore(self, snapshot: EpisodeSnapshot, *, seed: int | None = None) -> Any: ...


@runtime_checkable
class BranchingEnv(AsyncEnv, TurnLimited, ResumableEnv, Protocol):
    """An environment a repair tree can branch: async, turn-limited, resumable, seeded."""

    def reset(self, task_index: int | None = None, *, seed: int | None = None) -> Any: ...


_TAKES_SEED: dict[type, bool] = {}


def reset_takes_seed(env: Env) -> bool:
    """Whether ``env.reset`` takes a ``seed=`` keyword (cached per class)."""
    env_type = type(env)
    if env_type not in _TAKES_SEED:
        try:
            _TAKES_SEED[env_type] = "seed" in inspect.signature(env_type.reset).parameters
        except (TypeError, ValueError, AttributeError):
            _TAKES_SEED[env_type] = False
    return _TAKES_SEED[env_type]
