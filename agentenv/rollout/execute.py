"""Executing planned episodes, shared by every backend: the environment pool, one episode in a
pooled environment, the worker that holds a policy's slots and threads, and the scheduler that
feeds a backend the episodes still to run and stops the run when the policy's server is gone.

The local backend runs an :class:`EpisodeExecutor` on the driver's event loop; the Ray backend
runs one inside each actor. Nothing here knows which backend it serves.

Errors: a transient model-call failure (``PolicyCallError``) or a sandbox fault
(``SandboxError``) fails that one episode (``EPISODE_ERRORS``: reported, retried on resume).
``ServerUnavailable`` stops the run: no new episode starts, episodes in flight get
``STOP_GRACE_SECONDS`` to finish, the rest are cancelled and left to the resume. Any other
exception propagates. Whichever of these stops an episode after a graded turn (a cancellation
too), the turns it graded are not lost: :func:`run_spec` raises ``EpisodeInterrupted`` with the
episode's partial record, the scheduler hands it to ``on_partial`` (the runner writes it), and
a resumed run continues the episode from there (:mod:`agentenv.rollout.partial`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentenv.errors import (
    EpisodeInterrupted,
    PolicyCallError,
    SandboxError,
    ServerUnavailable,
    SnapshotMismatch,
)
from agentenv.log import get_logger
from agentenv.policies.base import PolicyLike, blocks
from agentenv.records import Trajectory
from agentenv.rollout.contract import Env
from agentenv.rollout.episode import arun_episode
from agentenv.rollout.partial import partial_record, resume_snapshot
from agentenv.rollout.plan import EpisodeSpec, RolloutConfig, make_env
from agentenv.tasks.schema import Task

__all__ = ["EPISODE_ERRORS", "STOP_GRACE_SECONDS", "EnvFactory", "EnvPool", "EpisodeError",
           "EpisodeExecutor", "Schedule", "older_objects_frozen", "policy_threads", "run_spec",
           "schedule"]

log = get_logger(__name__)

# Episode failures that are the infrastructure's, not the run's: record, go on, retry on resume.
EPISODE_ERRORS: tuple[type[BaseException], ...] = (PolicyCallError, SandboxError)

# After the run is stopped, episodes in flight get this long to finish (those being graded are
# then written); the rest are cancelled and left to the resume.
STOP_GRACE_SECONDS = 10.0

# (config, tasks, episode seed) -> a fresh environment; make_env unless you bring your own
# (a custom reward_fn, grader or env class). For the Ray backend it must be picklable.
EnvFactory = Callable[[RolloutConfig, Sequence[Task], int], Env]


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
        self._free: list[Env] = []
        self.built = 0

    def acquire(self, seed: int) -> Env:
        if self._free:
            return self._free.pop()
        self.built += 1
        return self.env_factory(self.config, self.tasks, seed)

    def release(self, env: Env) -> None:
        self._free.append(env)


async def run_spec(spec: EpisodeSpec, policy: PolicyLike, pool: EnvPool,
                   policy_slots: asyncio.Semaphore | None,
                   policy_executor: Executor | None = None) -> Trajectory:
    """Run one planned episode in a pooled environment, reset with the episode's seed, or
    continued from its partial record (``spec.resume``).

    Stopped by the infrastructure after a graded turn (the model server, the sandbox, a
    cancellation), it raises ``EpisodeInterrupted`` carrying the partial record, the original
    exception as its ``cause``.
    """
    env = pool.acquire(spec.seed)
    snapshot = resume_snapshot(Trajectory.from_dict(spec.resume)) if spec.resume is not None else None

    async def play(snapshot: Any) -> Trajectory:
        return await arun_episode(env, policy, task_index=spec.task_index, episode_id=spec.episode_id,
                                  sample=spec.sample, seed=spec.seed, policy_slots=policy_slots,
                                  policy_executor=policy_executor, snapshot=snapshot)

    try:
        try:
            trajectory = await play(snapshot)
        except SnapshotMismatch as exc:  # raised by the restore, before any step
            if snapshot is None:
                raise
            log.warning("partial_episode_redone", episode_id=spec.episode_id, reason=str(exc))
            trajectory = await play(None)
    except BaseException as exc:
        partial = partial_record(env, policy, spec.episode_id, spec.sample, exc)
        if partial is None:
            raise
        raise EpisodeInterrupted(_labelled(partial, spec, pool), exc) from exc
    pool.release(env)
    return _labelled(trajectory, spec, pool)


def _labelled(trajectory: Trajectory, spec: EpisodeSpec, pool: EnvPool) -> Trajectory:
    trajectory.seed = spec.seed
    if trajectory.model is None and pool.config.model is not None:
        trajectory.model = pool.config.model
    return trajectory


def policy_threads(policy: PolicyLike, concurrency: int) -> ThreadPoolExecutor | None:
    """Threads for a blocking (sync) policy, one per allowed call; None for async/inline ones.

    The loop's default executor has only a handful of threads, which would silently cap a
    blocking policy's concurrency far below the one asked for.
    """
    if not blocks(policy):
        return None
    return ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="agentenv-policy")


class EpisodeExecutor:
    """Runs planned episodes on the current event loop with at most ``slots`` policy calls in
    flight: the environments, the policy's threads (when it blocks) and the slots semaphore."""

    def __init__(self, tasks: Sequence[Task], policy: PolicyLike, config: RolloutConfig, slots: int,
                 env_factory: EnvFactory = make_env) -> None:
        self.policy = policy
        self.envs = EnvPool(tasks, config, env_factory)
        self.n_slots = slots
        self._threads = policy_threads(policy, slots)
        self._slots: asyncio.Semaphore | None = None

    async def run(self, spec: EpisodeSpec) -> Trajectory:
        if self._slots is None:  # made on first use, inside the running loop
            self._slots = asyncio.Semaphore(self.n_slots)
        return await run_spec(spec, self.policy, self.envs, self._slots, self._threads)

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)


class _Runs(Protocol):
    async def run(self, spec: EpisodeSpec) -> Trajectory: ...


@dataclass
class Schedule:
    """What :func:`schedule` did: the episodes it finished (by id), those it left partial (by
    id: stopped after a graded turn, to be continued), those that failed, and the reason the
    run was stopped early (None when every episode was tried)."""

    finished: dict[str, Trajectory] = field(default_factory=dict)
    errors: list[EpisodeError] = field(default_factory=list)
    stopped: str | None = None
    partial: dict[str, Trajectory] = field(default_factory=dict)


@contextlib.contextmanager
def older_objects_frozen() -> Iterator[None]:
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


async def schedule(todo: Sequence[EpisodeSpec], backend: _Runs, concurrency: int, *,
                   on_finished: Callable[[Trajectory], None] | None = None,
                   on_partial: Callable[[Trajectory], None] | None = None) -> Schedule:
    """Run ``todo`` through ``backend``, ``on_finished(trajectory)`` after each success and
    ``on_partial(trajectory)`` for each episode stopped after a graded turn (also while the
    run is being cancelled: keep it quick and synchronous).

    A few more episodes than ``concurrency`` are kept open, so that sandbox runs (bounded by
    the sandbox's own pool, sized to the cores) overlap the policy calls.
    """
    result = Schedule()
    stopped: list[str] = []
    stop = asyncio.Event()
    queue: asyncio.Queue[EpisodeSpec] = asyncio.Queue()
    for spec in todo:
        queue.put_nowait(spec)

    async def worker() -> None:
        while not stopped:
            try:
                spec = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            error: BaseException
            try:
                trajectory = await backend.run(spec)
            except EpisodeInterrupted as exc:
                partial: Trajectory = exc.partial  # type: ignore[assignment]
                result.partial[spec.episode_id] = partial
                log.warning("episode_partial", episode_id=spec.episode_id, turns=len(partial.turns),
                            stop_reason=partial.stop_reason)
                if on_partial is not None:
                    on_partial(partial)
                error = exc.cause
            except EPISODE_ERRORS as exc:  # ServerUnavailable among them
                error = exc
            else:
                result.finished[spec.episode_id] = trajectory
                if on_finished is not None:
                    on_finished(trajectory)
                continue
            if isinstance(error, ServerUnavailable):
                if not stopped:
                    log.warning("run_stopped", episode_id=spec.episode_id, error=str(error))
                    stop.set()
                stopped.append(str(error))
                return
            if not isinstance(error, EPISODE_ERRORS):
                raise error  # a cancellation goes on as one
            result.errors.append(EpisodeError(spec.episode_id, spec.task_name, spec.sample,
                                              f"{type(error).__name__}: {error}"))
            log.warning("episode_failed", episode_id=spec.episode_id, error=str(error))

    n_workers = min(len(todo), concurrency + _sandbox_workers())
    workers: list[asyncio.Future[None]] = []
    try:
        with older_objects_frozen():
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
    result.stopped = stopped[0] if stopped else None
    return result


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
        # Cancelled from outside (Ctrl-C): the workers' CancelledError lands in ``everything``
        # once they are cancelled; retrieve it then, or the loop prints it as a traceback.
        everything.add_done_callback(_retrieve)


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


async def _cancel(workers: Sequence[asyncio.Future[None]]) -> None:
    for w in workers:
        w.cancel()
    await asyncio.gather(*workers, return_exceptions=True)
