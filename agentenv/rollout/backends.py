"""Where a run's episodes execute: the :class:`Backend` contract, the registry of backends by
name, and the local backend.

A backend has one job, ``await run(spec) -> Trajectory`` (and ``aclose()`` when the run ends);
the runner finds it by ``config.backend`` through :func:`make_backend`, never by importing it.
The local backend registers itself here; the Ray backend in :mod:`agentenv.rollout.ray_backend`
(imported by the package, so both are always registered). Your own: ``register_backend(name,
factory)`` with ``factory(tasks, policy, config, env_factory) -> Backend``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from agentenv.choices import Backend as BackendName
from agentenv.errors import ConfigError
from agentenv.policies.base import PolicyLike
from agentenv.records import Trajectory
from agentenv.rollout.execute import EnvFactory, EpisodeExecutor
from agentenv.rollout.plan import EpisodeSpec, RolloutConfig, make_env
from agentenv.tasks.schema import Task

__all__ = ["Backend", "BackendFactory", "LocalBackend", "backend_names", "make_backend",
           "register_backend"]


class Backend(Protocol):
    """Runs one planned episode somewhere and returns its trajectory."""

    async def run(self, spec: EpisodeSpec) -> Trajectory: ...

    async def aclose(self) -> None: ...


BackendFactory = Callable[[Sequence[Task], PolicyLike, RolloutConfig, EnvFactory], Backend]

_REGISTRY: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> None:
    """Make ``factory`` the backend called ``name`` (replacing any earlier one)."""
    _REGISTRY[str(name)] = factory


def backend_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def make_backend(tasks: Sequence[Task], policy: PolicyLike, config: RolloutConfig,
                 env_factory: EnvFactory = make_env) -> Backend:
    """The backend ``config.backend`` names, built for this run."""
    factory = _REGISTRY.get(str(config.backend))
    if factory is None:
        raise ConfigError(f"no backend {config.backend!r} is registered; use one of "
                          f"{', '.join(_REGISTRY)}")
    return factory(tasks, policy, config, env_factory)


class LocalBackend:
    """Episodes on this event loop; policy calls bounded by ``concurrency``."""

    def __init__(self, tasks: Sequence[Task], policy: PolicyLike, config: RolloutConfig,
                 env_factory: EnvFactory = make_env) -> None:
        self.policy = policy
        self.config = config
        self._executor = EpisodeExecutor(tasks, policy, config, config.concurrency, env_factory)
        self.envs = self._executor.envs

    async def run(self, spec: EpisodeSpec) -> Trajectory:
        return await self._executor.run(spec)

    async def aclose(self) -> None:
        self._executor.close()


register_backend(BackendName.LOCAL.value, LocalBackend)
