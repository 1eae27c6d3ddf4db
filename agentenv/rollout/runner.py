"""The concurrent rollout runner: many episodes, ``samples`` per task, written as they finish.

``run_rollouts`` (and its async twin ``arun_rollouts``) plans the episodes (see
:mod:`agentenv.rollout.plan`), skips those already in ``out_dir/trajectories.jsonl``, runs the
rest and writes each one the moment it ends, then writes ``summary.json``. Two resources are
bounded separately: at most ``concurrency`` policy calls are in flight (an asyncio semaphore),
while sandbox runs go through the sandbox's own worker pool, sized to the cores; a few more
episodes than ``concurrency`` are kept open so that the two overlap.

The work itself is done by a *backend* with one method, ``async run(spec) -> Trajectory``:
:class:`LocalBackend` runs episodes on this event loop, and the Ray backend
(:mod:`agentenv.rollout.ray_backend`) runs them in Ray actors. Everything else (planning,
resuming, writing, summarising) is shared, so both give the same records.

Errors: a model call the server rejected ends its episode with the turns graded so far (see
:mod:`agentenv.rollout.episode`), which is written like any other. A transient model-call
failure (``PolicyCallError``) or a sandbox fault (``SandboxError``) fails that one episode: it
is reported in ``RolloutResult.errors`` and in the summary, not written, and so retried on
resume. ``ServerUnavailable`` (the policy's circuit breaker opened: its server stopped
answering) stops the run: no new episode starts, episodes in flight get
``STOP_GRACE_SECONDS`` to finish (their model calls fail at once while the breaker is open;
those being graded finish and are written), the rest are cancelled and left to the resume,
and ``RolloutResult.stopped`` says why. Any other
exception (a misconfigured policy, a bug) stops the run by propagating.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agentenv.errors import ConfigError, PolicyCallError, SandboxError, ServerUnavailable
from agentenv.log import get_logger
from agentenv.policies.base import policy_model, policy_name
from agentenv.records import Trajectory
from agentenv.rollout.episode import arun_episode
from agentenv.rollout.plan import EpisodeSpec, RolloutConfig, make_env, plan_episodes, task_set_hash
from agentenv.rollout.store import RunStore
from agentenv.rollout.summary import summarize
from agentenv.tasks.schema import Task

__all__ = ["Backend", "EnvFactory", "EnvPool", "EpisodeError", "LocalBackend", "RolloutResult", "arun_rollouts",
           "policy_threads", "run_rollouts", "run_spec"]

log = get_logger(__name__)

# Episode failures that are the infrastructure's, not the run's: record, go on, retry on resume.
EPISODE_ERRORS: tuple[type[BaseException], ...] = (PolicyCallError, SandboxError)

ProgressFn = Callable[[Trajectory, int, int], None]
# (config, tasks, episode seed) -> a fresh environment; make_env unless you bring your own
# (a custom reward_fn, grader or env class). For the Ray backend it must be picklable.
EnvFactory = Callable[[RolloutConfig, Sequence[Task], int], Any]


@dataclass(frozen=True)
class EpisodeError:
    """An episode that could not be completed, and why."""

    episode_id: str
    task_name: str
    sample: int
    error: str

    def to_dict(self) -> dict[str, Any]:
        return {"episode_id": self.episode_id, "task_name": self.task_name, "sample": self.sample,
                "error": self.error}


@dataclass
class RolloutResult:
    """What a run produced: every finished trajectory (resumed ones included, in plan order),
    the summary, the episodes that failed, how many were skipped as already done, where it is,
    and why the run stopped early (``stopped``; None when every planned episode was tried)."""

    trajectories: list[Trajectory]
    summary: dict[str, Any]
    errors: list[EpisodeError] = field(default_factory=list)
    skipped: int = 0
    out_dir: Path | None = None
    seconds: float = 0.0
    stopped: str | None = None


# After the run is stopped, episodes in flight get this long to finish (those being graded are
# then written); the rest are cancelled and left to the resume.
STOP_GRACE_SECONDS = 10.0


class Backend(Protocol):
    """Runs one planned episode somewhere and returns its trajectory."""

    async def run(self, spec: EpisodeSpec) -> Trajectory: ...

    async def aclose(self) -> None: ...


class EnvPool:
    """Environments reused across episodes: one per episode in flight, built on demand.

    Building an environment (templates, tokenizer) costs far more than resetting one, and at
    high concurrency that cost would sit on the event loop between model calls. An env goes
    back to the pool only after a clean episode; one that raised mid-episode is dropped.
    """

    def __init__(self, tasks: Sequence[Task], config: RolloutConfig, env_factory: EnvFactory = make_env) -> None:
        self.tasks = list(tasks)
        self.config = config
        self.env_factory = env_factory
        self._free: list[Any] = []
        self.built = 0

    def acquire(self, seed: int) -> Any:
        if self._free:
            return self._free.pop()
        self.built += 1
        return self.env_factory(self.config, self.tasks, seed)

    def release(self, env: Any) -> None:
        self._free.append(env)


async def run_spec(spec: EpisodeSpec, policy: Any, pool: EnvPool, policy_slots: asyncio.Semaphore | None,
                   policy_executor: Executor | None = None) -> Trajectory:
    """Run one planned episode in a pooled environment, reset with the episode's seed."""
    env = pool.acquire(spec.seed)
    trajectory = await arun_episode(env, policy, task_index=spec.task_index, episode_id=spec.episode_id,
                                    sample=spec.sample, seed=spec.seed, policy_slots=policy_slots,
                                    policy_executor=policy_executor)
    pool.release(env)
    trajectory.seed = spec.seed
    if trajectory.model is None and pool.config.model is not None:
        trajectory.model = pool.config.model
    return trajectory


def policy_threads(policy: Any, concurrency: int) -> ThreadPoolExecutor | None:
    """Threads for a blocking (sync) policy, one per allowed call; None for async/inline ones.

    The loop's default executor has only a handful of threads, which would silently cap a
    blocking policy's concurrency far below the one asked for.
    """
    if getattr(policy, "acall", None) is not None or getattr(policy, "blocking", True) is False:
        return None
    if inspect.iscoroutinefunction(policy) or inspect.iscoroutinefunction(type(policy).__call__):
        return None
    return ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="agentenv-policy")


class LocalBackend:
    """Episodes on this event loop; policy calls bounded by ``concurrency``."""

    def __init__(self, tasks: Sequence[Task], policy: Any, config: RolloutConfig,
                 env_factory: EnvFactory = make_env) -> None:
        self.policy = policy
        self.config = config
        self.envs = EnvPool(tasks, config, env_factory)
        self._threads = policy_threads(policy, config.concurrency)
        self._slots: asyncio.Semaphore | None = None

    async def run(self, spec: EpisodeSpec) -> Trajectory:
        if self._slots is None:  # made on first use, inside the running loop
            self._slots = asyncio.Semaphore(self.config.concurrency)
        return await run_spec(spec, self.policy, self.envs, self._slots, self._threads)

    async def aclose(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)


@contextlib.contextmanager
def _older_objects_frozen() -> Iterator[None]:
    """For the duration of a run, keep the cyclic garbage collector off every object that
    existed before it (``gc.freeze``), and put them back afterwards (``gc.unfreeze``).

    Why: a run allocates steadily (observations, records, HTTP buffers), so the collector runs
    on the event loop in the middle of it; a full collection then walks every object in the
    process (the task set, imported libraries, earlier runs' results) and stalls all episodes
    for tens of milliseconds. Frozen, those objects are skipped, and a collection costs only
    what the run itself allocated. Nothing is lost: objects made during the run are collected
    as usual, and garbage among the older ones is collected after the run. Left alone when the
    collector is disabled or something else has frozen objects already (a caller's own
    ``gc.freeze``, or an enclosing run), so the caller's GC set-up is exactly restored.
    """
    if not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _sandbox_workers() -> int:
    return max(1, os.cpu_count() or 1)


def _config_record(config: RolloutConfig, tasks: Sequence[Task], policy: Any) -> dict[str, Any]:
    return {**config.to_dict(), "policy_name": policy_name(policy),
            "policy_model": policy_model(policy) or config.model, "n_tasks": len(tasks),
            "task_set_hash": task_set_hash(tasks)}


def _identity(config: RolloutConfig, tasks: Sequence[Task]) -> dict[str, Any]:
    return {**config.identity(), "task_set_hash": task_set_hash(tasks)}


async def arun_rollouts(tasks: Sequence[Task], policy: Any, config: RolloutConfig | None = None,
                        out_dir: str | Path | None = None, *, on_episode: ProgressFn | None = None,
                        on_start: Callable[[int, int], None] | None = None,
                        backend: Backend | None = None, env_factory: EnvFactory = make_env
                        ) -> RolloutResult:
    """Run every planned episode not already in ``out_dir``; write and summarise them.

    ``on_start(total, already_done)`` is called once the plan is known, and
    ``on_episode(trajectory, n_finished, total)`` after each episode is written (both on the
    event loop: keep them quick). Without ``out_dir`` nothing is written and nothing resumed.
    ``env_factory(config, tasks, seed)`` builds each episode's environment (default
    :func:`~agentenv.rollout.plan.make_env`); ``backend`` replaces the local/Ray backend altogether.
    """
    config = config or RolloutConfig()
    tasks = list(tasks)
    if not tasks:
        raise ConfigError("the task set is empty; check --tasks and its filters")
    specs = plan_episodes(tasks, config.samples, config.seed)
    wanted = {s.episode_id for s in specs}
    store = RunStore(out_dir) if out_dir is not None else None
    finished: dict[str, Trajectory] = {}
    if store is not None:
        for t in store.open(_config_record(config, tasks, policy), _identity(config, tasks)):
            if t.episode_id in wanted:
                finished[str(t.episode_id)] = t
    skipped = len(finished)
    todo = [s for s in specs if s.episode_id not in finished]
    if on_start is not None:
        on_start(len(specs), skipped)
    log.info("rollout_start", episodes=len(specs), resumed=skipped, backend=config.backend,
             concurrency=config.concurrency)

    own_backend = backend is None
    if backend is None:
        if config.backend == "ray":
            from agentenv.rollout.ray_backend import RayBackend

            backend = RayBackend(tasks, policy, config, env_factory=env_factory)
        else:
            backend = LocalBackend(tasks, policy, config, env_factory)

    errors: list[EpisodeError] = []
    stopped: list[str] = []
    stop = asyncio.Event()
    queue: asyncio.Queue[EpisodeSpec] = asyncio.Queue()
    for spec in todo:
        queue.put_nowait(spec)
    n_done = skipped
    started = time.perf_counter()

    async def worker() -> None:
        nonlocal n_done
        assert backend is not None
        while not stopped:
            try:
                spec = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            try:
                trajectory = await backend.run(spec)
            except ServerUnavailable as exc:
                if not stopped:
                    log.warning("run_stopped", episode_id=spec.episode_id, error=str(exc))
                    stop.set()
                stopped.append(str(exc))
                return
            except EPISODE_ERRORS as exc:
                errors.append(EpisodeError(spec.episode_id, spec.task_name, spec.sample,
                                           f"{type(exc).__name__}: {exc}"))
                log.warning("episode_failed", episode_id=spec.episode_id, error=str(exc))
                continue
            finished[spec.episode_id] = trajectory
            if store is not None:
                store.append(trajectory)
            n_done += 1
            if on_episode is not None:
                on_episode(trajectory, n_done, len(specs))

    # Keep a few more episodes open than policy slots, so sandbox runs overlap model calls.
    n_workers = min(len(todo), config.concurrency + _sandbox_workers())
    workers: list[asyncio.Future[None]] = []
    try:
        with _older_objects_frozen():
            for _ in range(n_workers):
                workers.append(asyncio.ensure_future(worker()))
                # One loop turn per new worker: its request leaves as soon as its connection is
                # up, instead of every worker's setup running before the first byte is sent.
                await asyncio.sleep(0)
            if workers:
                await _until_done_or_stopped(workers, stop)
    except BaseException:
        await _cancel(workers)
        raise
    finally:
        if own_backend:
            await backend.aclose()
        if store is not None:
            store.close()
    seconds = time.perf_counter() - started

    ordered = [finished[s.episode_id] for s in specs if s.episode_id in finished]
    summary = summarize(ordered)
    summary["run"] = {
        "policy": policy_name(policy), "model": policy_model(policy) or config.model,
        "tasks": config.tasks, "mode": config.mode, "max_turns": config.max_turns,
        "samples": config.samples, "seed": config.seed, "backend": config.backend,
        "concurrency": config.concurrency, "planned": len(specs), "resumed": skipped,
        "ran": len(finished) - skipped, "failed": len(errors), "seconds": round(seconds, 3),
        "episodes_per_second": round((len(finished) - skipped) / seconds, 3) if seconds > 0 else None,
        "stopped": stopped[0] if stopped else None,
    }
    summary["errors"] = [e.to_dict() for e in errors]
    if store is not None:
        store.sort_episodes({s.episode_id: i for i, s in enumerate(specs)})
        store.write_summary(summary)
    log.info("rollout_done", episodes=len(ordered), failed=len(errors), seconds=round(seconds, 3))
    return RolloutResult(trajectories=ordered, summary=summary, errors=errors, skipped=skipped,
                         out_dir=store.dir if store is not None else None, seconds=seconds,
                         stopped=stopped[0] if stopped else None)


async def _until_done_or_stopped(workers: Sequence[asyncio.Future[None]], stop: asyncio.Event) -> None:
    """Wait for every worker; once ``stop`` is set, for at most STOP_GRACE_SECONDS more, then
    cancel those still busy. A worker's exception propagates."""
    everything: asyncio.Future[Any] = asyncio.gather(*workers)
    stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({everything, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not everything.done():
            await asyncio.wait({everything}, timeout=STOP_GRACE_SECONDS)
        if not everything.done():
            await _cancel(workers)
            await asyncio.wait({everything})
            everything.exception()  # a cancelled worker's CancelledError: retrieved, not raised
            return
        everything.result()
    finally:
        stopping.cancel()


async def _cancel(workers: Sequence[asyncio.Future[None]]) -> None:
    for w in workers:
        w.cancel()
    await asyncio.gather(*workers, return_exceptions=True)


def run_rollouts(tasks: Sequence[Task], policy: Any, config: RolloutConfig | None = None,
                 out_dir: str | Path | None = None, *, on_episode: ProgressFn | None = None,
                 on_start: Callable[[int, int], None] | None = None,
                 env_factory: EnvFactory = make_env) -> RolloutResult:
    """Blocking twin of :func:`arun_rollouts` (runs its own event loop)."""

    results: list[RolloutResult] = []

    async def main() -> None:
        try:
            results.append(await arun_rollouts(tasks, policy, config, out_dir, on_episode=on_episode,
                                               on_start=on_start, env_factory=env_factory))
        finally:
            aclose = getattr(policy, "aclose", None)
            if aclose is not None:  # the policy's HTTP client for this loop dies with the loop
                await aclose()

    # The result is handed over outside the task: asyncio.run's SIGINT bookkeeping formats the
    # finished task's repr, result included, and with thousands of trajectories that takes ms.
    asyncio.run(main())
    return results[0]
