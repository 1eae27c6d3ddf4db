"""The Ray backend: the same planned episodes, run by Ray actors on a laptop or a cluster.

``RayBackend`` starts (or joins, with ``address``) a Ray cluster and creates a set of async
actors, one per CPU by default (each reserves one CPU, so Ray's scheduler spreads them over
the nodes). Each actor holds the task set and the policy, builds the environment for every
episode it is handed, and runs its own sandbox pool in its own process; several episodes run
concurrently inside an actor on asyncio, so the policy-call limit is shared out between
actors (each runs an :class:`~agentenv.rollout.execute.EpisodeExecutor`, as the local backend
does). The driver keeps the plan, the resume logic and the JSONL writer (see
:mod:`agentenv.rollout.runner`): an actor returns the finished trajectory as a plain dict, or
the partial record of an episode the infrastructure stopped, with the error that stopped it.
Because episodes are seeded from their ids, a deterministic policy gives the same records here
as on the local backend. Needs the ``ray`` extra (imported when a RayBackend is built); registered as ``"ray"``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from agentenv import settings
from agentenv.choices import Backend
from agentenv.errors import EpisodeInterrupted, MissingDependency
from agentenv.log import get_logger
from agentenv.policies.base import PolicyLike
from agentenv.records import Trajectory
from agentenv.rollout.backends import register_backend
from agentenv.rollout.execute import EnvFactory, EpisodeExecutor
from agentenv.rollout.plan import EpisodeSpec, RolloutConfig, make_env
from agentenv.tasks.schema import Task

__all__ = ["EpisodeActor", "RayBackend"]

log = get_logger(__name__)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise MissingDependency.for_extra("ray", "ray", "the Ray backend (--backend ray)") from None
    return ray


class EpisodeActor:
    """Runs episodes in a Ray worker process (wrapped with ``ray.remote`` by RayBackend)."""

    def __init__(self, tasks: Sequence[Task], policy: PolicyLike, config: RolloutConfig, slots: int,
                 env_factory: EnvFactory = make_env) -> None:
        self.policy = policy
        self._executor = EpisodeExecutor(tasks, policy, config, slots, env_factory)
        self.envs = self._executor.envs
        self.n_slots = slots

    async def run(self, spec: dict[str, Any]) -> dict[str, Any]:
        try:
            trajectory = await self._executor.run(EpisodeSpec.from_dict(spec))
        except EpisodeInterrupted as exc:  # the partial record comes back as data, with its cause
            return {"interrupted": exc.partial.to_dict(), "cause": exc.cause}  # type: ignore[attr-defined]
        return trajectory.to_dict()

    def ping(self) -> bool:
        return True


class RayBackend:
    """Runs planned episodes in Ray actors; ``await run(spec)`` returns the trajectory.

    ``address`` (default ``config.address``, else ``RAY_ADDRESS``) joins an existing cluster
    ("auto" or "ray://host:10001"); without one, a Ray instance already initialised in this
    process is used, else a local one is started (and shut down again by :meth:`aclose`).
    ``num_actors`` defaults to the cluster's CPU count.
    """

    def __init__(self, tasks: Sequence[Task], policy: PolicyLike, config: RolloutConfig, *,
                 address: str | None = None, num_actors: int | None = None,
                 env_factory: EnvFactory = make_env) -> None:
        ray = _import_ray()
        self._ray = ray
        self._started_ray = False
        if not ray.is_initialized():
            # Without an address (ours or RAY_ADDRESS): a fresh local instance ("local"), never
            # the latest cluster some other process started, which a bare ray.init() would join.
            where = address or config.address or settings.ray_address() or "local"
            ray.init(address=where, ignore_reinit_error=True,
                     log_to_driver=False, include_dashboard=False)
            self._started_ray = True
        cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
        n = max(1, num_actors or cpus)
        slots = max(1, math.ceil(config.concurrency / n))
        actor_cls = ray.remote(num_cpus=1)(EpisodeActor)
        tasks_ref = ray.put(list(tasks))
        self.actors = [
            actor_cls.options(max_concurrency=slots + 4).remote(tasks_ref, policy, config, slots, env_factory)
            for _ in range(n)
        ]
        self._load = [0] * n
        log.info("ray_backend", actors=n, slots_per_actor=slots, cluster_cpus=cpus)

    async def run(self, spec: EpisodeSpec) -> Trajectory:
        i = min(range(len(self.actors)), key=self._load.__getitem__)  # least busy actor
        self._load[i] += 1
        try:
            data = await self.actors[i].run.remote(spec.to_dict())
        except self._ray.exceptions.RayTaskError as exc:
            # Re-raise the episode's own exception (PolicyCallError, SandboxError, ...) here.
            cause = exc.as_instanceof_cause()
            raise cause from None
        finally:
            self._load[i] -= 1
        if "interrupted" in data:
            raise EpisodeInterrupted(Trajectory.from_dict(data["interrupted"]), data["cause"])
        return Trajectory.from_dict(data)

    async def aclose(self) -> None:
        for actor in self.actors:
            self._ray.kill(actor)
        self.actors = []
        if self._started_ray:
            self._ray.shutdown()


def _make(tasks: Sequence[Task], policy: PolicyLike, config: RolloutConfig,
          env_factory: EnvFactory) -> RayBackend:
    return RayBackend(tasks, policy, config, env_factory=env_factory)


register_backend(Backend.RAY.value, _make)
