"""Sandbox runs spread over a Ray cluster: a trainer on GPU nodes grades on CPU nodes.

:class:`RayPool` has the interface of :class:`~agentenv.sandbox.SandboxPool` (``run(job,
timeout, limits) -> RawRun``, ``level``, ``close()``), so everything that grades through the
sandbox can use it: pass ``pool=`` to ``run_tests``, or make it the process-wide pool with
:func:`~agentenv.sandbox.set_default_pool`, which ``code_reward``, both environments and the
rollout runner then grade through without any other change.

One actor per alive node (pinned there with node affinity) holds a local ``SandboxPool`` sized
to that node's CPUs; the caller's process keeps planning and judging, so the verdict is decided
where it always was and only the raw run crosses the cluster. Each run goes to the actor with
the fewest runs in flight. A run whose actor or node dies under it is sent to another node (a
sandbox run has no effect but its result, so re-running it cannot duplicate a verdict), and the
actor set is refreshed: actors appear on nodes that joined and are dropped for nodes that left.
Only when no node can take the run does it raise :class:`~agentenv.errors.SandboxError`.
Needs the ``ray`` extra.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from agentenv.choices import IsolationLevel
from agentenv.errors import ConfigError, MissingDependency, SandboxError
from agentenv.log import get_logger
from agentenv.sandbox._jobs import Job
from agentenv.sandbox._limits import Limits
from agentenv.sandbox._pool import RawRun

__all__ = ["NodeSandbox", "RayPool"]

log = get_logger(__name__)

BACKSTOP = 30.0  # seconds past a run's longest wall time before its node is presumed wedged
REFRESH_SECONDS = 5.0  # how often the node list is re-read while runs flow


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise MissingDependency.for_extra("ray", "ray", "grading on a Ray cluster (RayPool)") from None
    return ray


class NodeSandbox:
    """The actor on one node: a local sandbox pool that runs jobs for remote callers."""

    def __init__(self, size: int | None, isolation: str | None) -> None:
        from agentenv.sandbox._pool import SandboxPool

        self.pool = SandboxPool(size=size, isolation=isolation)

    def info(self) -> dict[str, Any]:
        return {"level": self.pool.level, "size": self.pool.size, "pid": os.getpid()}

    def run(self, job: Job, timeout: float, limits: Limits,
            options: dict[str, Any]) -> RawRun:
        return self.pool.run(job, timeout, limits, **options)

    def close(self) -> None:
        self.pool.close()


@dataclass
class _Actor:
    node_id: str
    handle: Any
    slots: int
    level: str
    in_flight: int = 0
    runs: int = 0
    failures: list[str] = field(default_factory=list)


class RayPool:
    """A sandbox pool whose runs execute on the nodes of a Ray cluster (see the module docstring).

    ``address`` joins a running cluster (``"auto"``, ``"ray://..."``); with ``None`` an already
    initialised Ray is used, or a local one is started. ``isolation`` is required of every
    node's pool (``"strict"`` fails on a node without bubblewrap). ``runs_per_node`` bounds the
    runs in flight on a node (default: its CPU count, which is also its local pool's size).
    ``max_attempts`` is how many nodes one run may be tried on before it raises.
    """

    def __init__(self, address: str | None = None, *, isolation: str | None = None,
                 runs_per_node: int | None = None, max_attempts: int = 3,
                 refresh_seconds: float = REFRESH_SECONDS) -> None:
        if runs_per_node is not None and runs_per_node < 1:
            raise ConfigError(f"runs_per_node must be at least 1, got {runs_per_node}")
        if max_attempts < 1:
            raise ConfigError(f"max_attempts must be at least 1, got {max_attempts}")
        self._ray = _import_ray()
        if not self._ray.is_initialized():
            self._ray.init(address=address, include_dashboard=False, log_to_driver=False)
        self.isolation = isolation
        self.runs_per_node = runs_per_node
        self.max_attempts = max_attempts
        self.refresh_seconds = refresh_seconds
        self._actors: dict[str, _Actor] = {}
        self._lock = threading.Condition()
        self._refreshing = threading.Lock()
        self._refreshed_at = 0.0
        self._closed = False
        self._pid = os.getpid()
        self._remote = self._ray.remote(NodeSandbox)
        self.refresh(force=True)
        if not self._actors:
            raise SandboxError("no Ray node could start a sandbox pool; check `ray status`")

    # ----------------------------------------------------------------------- the actor set

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def level(self) -> str:
        """The weakest isolation level among the nodes' pools (``run_tests`` checks it)."""
        with self._lock:
            levels = {a.level for a in self._actors.values()}
        weakest = IsolationLevel.RLIMITS in levels or not levels
        return IsolationLevel.RLIMITS.value if weakest else IsolationLevel.STRICT.value

    @property
    def nodes(self) -> list[str]:
        """The ids of the nodes that currently hold a sandbox actor."""
        with self._lock:
            return sorted(self._actors)

    def stats(self) -> dict[str, int]:
        """Runs completed per node id (for tests and dashboards)."""
        with self._lock:
            return {node: a.runs for node, a in self._actors.items()}

    def refresh(self, *, force: bool = False) -> None:
        """Start actors on nodes that joined, forget those on nodes that left."""
        now = time.monotonic()
        if not force and now - self._refreshed_at < self.refresh_seconds:
            return
        if not self._refreshing.acquire(blocking=force):
            return  # another thread is refreshing
        try:
            self._refreshed_at = time.monotonic()
            alive = {n["NodeID"]: n for n in self._ray.nodes() if n.get("Alive")}
            with self._lock:
                for node_id in [n for n in self._actors if n not in alive]:
                    log.warning("ray_sandbox_node_left", node=node_id)
                    del self._actors[node_id]
                missing = [n for n in alive if n not in self._actors]
            for node_id in missing:
                actor = self._start(node_id, alive[node_id])
                if actor is not None:
                    with self._lock:
                        self._actors[node_id] = actor
                        self._lock.notify_all()
        finally:
            self._refreshing.release()

    def _start(self, node_id: str, node: dict[str, Any]) -> _Actor | None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        cpus = int(node.get("Resources", {}).get("CPU", 1)) or 1
        slots = self.runs_per_node or cpus
        try:
            handle = self._remote.options(
                num_cpus=0, max_concurrency=slots + 2,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote(slots, self.isolation)
            info = self._ray.get(handle.info.remote(), timeout=120)
        except Exception as exc:  # a node that cannot host a pool is skipped, not fatal
            log.warning("ray_sandbox_node_unusable", node=node_id, reason=str(exc)[:300])
            return None
        return _Actor(node_id, handle, slots, str(info["level"]))

    # ----------------------------------------------------------------------- running

    def _pick(self, avoid: set[str], deadline: float) -> _Actor:
        with self._lock:
            while True:
                usable = [a for n, a in self._actors.items() if n not in avoid]
                free = [a for a in usable if a.in_flight < a.slots]
                if free:
                    actor = min(free, key=lambda a: a.in_flight / a.slots)
                    actor.in_flight += 1
                    return actor
                if not usable:
                    raise SandboxError("no Ray node is left to run this submission on "
                                       f"(tried {len(avoid)}); check `ray status`")
                if not self._lock.wait(timeout=max(0.0, deadline - time.monotonic())):
                    raise SandboxError("every Ray sandbox node stayed busy past the deadline")

    def _done(self, actor: _Actor, ok: bool) -> None:
        with self._lock:
            actor.in_flight -= 1
            if ok:
                actor.runs += 1
            self._lock.notify_all()

    def _drop(self, actor: _Actor) -> None:
        with self._lock:
            if self._actors.get(actor.node_id) is actor:
                del self._actors[actor.node_id]
            self._lock.notify_all()

    def run(self, job: dict[str, Any], timeout: float, limits: Limits, **options: Any) -> RawRun:
        """Run one job on some node; move it to another node if its node dies under it.

        ``options`` go to the node's ``SandboxPool.run`` as they are (e.g. a judge job).
        """
        if self._closed:
            raise SandboxError("this RayPool is closed; create a new one")
        ray = self._ray
        lost = (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError,
                ray.exceptions.ObjectLostError, ray.exceptions.NodeDiedError)
        tried: set[str] = set()
        errors: list[str] = []
        for _attempt in range(self.max_attempts):
            self.refresh()
            actor = self._pick(tried, time.monotonic() + timeout + BACKSTOP)
            ref = actor.handle.run.remote(job, timeout, limits, options)
            try:
                raw = ray.get(ref, timeout=limits.wall_cap_seconds(timeout) + BACKSTOP)
            except lost as exc:
                self._done(actor, ok=False)
                tried.add(actor.node_id)
                errors.append(f"{actor.node_id[:8]}: {type(exc).__name__}")
                log.warning("ray_sandbox_run_moved", node=actor.node_id, reason=type(exc).__name__)
                self._drop(actor)
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
                self.refresh(force=True)
                continue
            except ray.exceptions.RayTaskError as exc:
                self._done(actor, ok=False)
                cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else exc
                if isinstance(cause, SandboxError):
                    raise cause from None
                raise SandboxError(f"the sandbox on Ray node {actor.node_id[:8]} failed: "
                                   f"{cause}") from None
            self._done(actor, ok=True)
            if not isinstance(raw, RawRun):
                raise SandboxError(f"a Ray sandbox node answered {type(raw).__name__}, not a run")
            return raw
        raise SandboxError("the submission's Ray node died under it on every attempt "
                           f"({'; '.join(errors)}); this is an infrastructure fault, not a score")

    def close(self) -> None:
        """Stop every node's pool and its actor (idempotent)."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            actors = list(self._actors.values())
            self._actors.clear()
        for actor in actors:
            try:
                self._ray.get(actor.handle.close.remote(), timeout=30)
                self._ray.kill(actor.handle)
            except Exception:  # the node may already be gone
                pass

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
