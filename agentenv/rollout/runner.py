"""The concurrent rollout runner: many episodes, ``samples`` per task, written as they finish.

``run_rollouts`` (and its async twin ``arun_rollouts``) plans the episodes (see
:mod:`agentenv.rollout.plan`), skips those already in ``out_dir/trajectories.jsonl``, runs the
rest and writes each one the moment it ends, then writes ``summary.json``. Two resources are
bounded separately: at most ``concurrency`` policy calls are in flight (an asyncio semaphore),
while sandbox runs go through the sandbox's own worker pool, sized to the cores; a few more
episodes than ``concurrency`` are kept open so that the two overlap.

The run is put together from the package's parts: planning and the resume identity
(:mod:`~agentenv.rollout.plan`), the run directory (:mod:`~agentenv.rollout.store`), executing
(:mod:`~agentenv.rollout.execute`: the scheduler and the episode worker every backend shares),
the backend ``config.backend`` names (found in the registry of
:mod:`~agentenv.rollout.backends`: ``local`` runs episodes on this event loop, ``ray`` in Ray
actors) and the summary (:mod:`~agentenv.rollout.summary`). Only the backend differs, so
both give the same records.

Errors: a model call the server rejected ends its episode with the turns graded so far (see
:mod:`agentenv.rollout.episode`), which is written like any other. A transient model-call
failure (``PolicyCallError``) or a sandbox fault (``SandboxError``) fails that one episode: it
is reported in ``RolloutResult.errors`` and in the summary, and retried on resume.
``ServerUnavailable`` (the policy's circuit breaker opened: its server stopped answering)
stops the run: no new episode starts, episodes in flight get ``STOP_GRACE_SECONDS`` to finish
(their model calls fail at once while the breaker is open; those being graded finish their
grading), the rest are cancelled and left to the resume, and ``RolloutResult.stopped`` says
why. Any other exception (a misconfigured policy, a bug) stops the run by propagating.

Whichever way an episode stops after a graded turn (a failure above, the stop, a
cancellation, Ctrl-C), its graded turns are written as a *partial* record
(:mod:`agentenv.rollout.partial`: ``stop_reason`` ``"server_unavailable"`` or
``"interrupted"``), and the resume continues it from its last graded turn instead of redoing
it. Partial records are in ``RolloutResult.partial`` and the summary's ``partial`` list, never
in its metrics; ``summary["run"]`` counts them (``partial``, ``partial_turns``) and the
episodes a resume continued (``continued``). An episode stopped before its first graded turn
is simply redone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentenv.errors import ConfigError
from agentenv.log import get_logger
from agentenv.policies.base import PolicyLike, policy_model, policy_name
from agentenv.records import Trajectory
from agentenv.rollout.backends import Backend, LocalBackend, make_backend
from agentenv.rollout.execute import (
    EnvFactory,
    EnvPool,
    EpisodeError,
    policy_threads,
    run_spec,
    schedule,
)
from agentenv.rollout.plan import (
    EpisodeSpec,
    RolloutConfig,
    config_record,
    make_env,
    plan_episodes,
    run_identity,
)
from agentenv.rollout.store import RunStore, latest_records
from agentenv.rollout.summary import Summary, partial_row, run_record, summarize
from agentenv.tasks.schema import Task

# EnvFactory, EnvPool, LocalBackend, policy_threads and run_spec live in execute/backends; they
# are re-exported here for code written against the runner.
__all__ = ["Backend", "EnvFactory", "EnvPool", "EpisodeError", "LocalBackend", "RolloutResult",
           "arun_rollouts", "policy_threads", "run_rollouts", "run_spec"]

log = get_logger(__name__)

ProgressFn = Callable[[Trajectory, int, int], None]
ResumeFn = Callable[[Sequence[Trajectory], Sequence[Trajectory]], None]


@dataclass
class RolloutResult:
    """What a run produced: every finished trajectory (resumed ones included, in plan order),
    the summary, the episodes that failed, how many were skipped as already done, where it is,
    and why the run stopped early (``stopped``; None when every planned episode was tried)."""

    trajectories: list[Trajectory]
    summary: Summary
    errors: list[EpisodeError] = field(default_factory=list)
    skipped: int = 0
    out_dir: Path | None = None
    seconds: float = 0.0
    stopped: str | None = None
    partial: list[Trajectory] = field(default_factory=list)  # stopped after a graded turn, to be continued
    continued: int = 0  # episodes this run continued from a partial record


def _resume(store: RunStore | None, config: RolloutConfig, tasks: Sequence[Task], policy: PolicyLike,
            specs: Sequence[EpisodeSpec]) -> dict[str, Trajectory]:
    """The planned episodes ``store`` holds already, finished or partial (none without a store)."""
    if store is None:
        return {}
    wanted = {s.episode_id for s in specs}
    record = config_record(config, tasks, policy_name(policy), policy_model(policy))
    return {str(t.episode_id): t for t in latest_records(store.open(record, run_identity(config, tasks)))
            if t.episode_id in wanted}


async def arun_rollouts(tasks: Sequence[Task], policy: PolicyLike, config: RolloutConfig | None = None,
                        out_dir: str | Path | None = None, *, on_episode: ProgressFn | None = None,
                        on_start: Callable[[int, int], None] | None = None,
                        on_resume: ResumeFn | None = None,
                        backend: Backend | None = None, env_factory: EnvFactory = make_env
                        ) -> RolloutResult:
    """Run every planned episode not already in ``out_dir``; write and summarise them.

    ``on_resume(finished, partial)`` is called first with the planned episodes ``out_dir``
    already holds (finished ones, and partial ones this run continues; both in plan order),
    ``on_start(total, already_done)`` once the plan is known, and
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
    store = RunStore(out_dir) if out_dir is not None else None
    stored = _resume(store, config, tasks, policy, specs)
    finished = {i: t for i, t in stored.items() if not t.partial}
    partial = {i: t for i, t in stored.items() if t.partial}
    skipped = len(finished)
    if on_resume is not None:
        on_resume([finished[s.episode_id] for s in specs if s.episode_id in finished],
                  [partial[s.episode_id] for s in specs if s.episode_id in partial])
    # An episode left partial by an earlier run goes on from its last graded turn.
    todo = [dataclasses.replace(s, resume=partial[s.episode_id].to_dict()) if s.episode_id in partial else s
            for s in specs if s.episode_id not in finished]
    if on_start is not None:
        on_start(len(specs), skipped)
    log.info("rollout_start", episodes=len(specs), resumed=skipped, continued=len(partial),
             backend=config.backend, concurrency=config.concurrency)

    own_backend = backend is None
    if backend is None:
        backend = make_backend(tasks, policy, config, env_factory)
    n_done = skipped

    def written(trajectory: Trajectory) -> None:
        nonlocal n_done
        if store is not None:
            store.append(trajectory)
        n_done += 1
        if on_episode is not None:
            on_episode(trajectory, n_done, len(specs))

    def kept(trajectory: Trajectory) -> None:  # a partial episode: written, not counted as done
        if store is not None:
            store.append(trajectory)

    started = time.perf_counter()
    try:
        done = await schedule(todo, backend, config.concurrency, on_finished=written, on_partial=kept)
    finally:
        if own_backend:
            await backend.aclose()
        if store is not None:
            store.close()
    seconds = time.perf_counter() - started
    finished.update(done.finished)
    for episode_id in done.finished:
        partial.pop(episode_id, None)
    partial.update(done.partial)  # a partial episode not tried again this run stays as it was

    ordered = [finished[s.episode_id] for s in specs if s.episode_id in finished]
    left = [partial[s.episode_id] for s in specs if s.episode_id in partial]
    summary = summarize(ordered)
    summary["run"] = run_record(config, policy=policy_name(policy), model=policy_model(policy),
                                planned=len(specs), resumed=skipped, ran=len(finished) - skipped,
                                failed=len(done.errors), seconds=seconds, stopped=done.stopped)
    continued = sum(1 for s in todo if s.resume is not None)
    summary["run"]["continued"] = continued
    summary["run"]["partial"] = len(left)
    summary["run"]["partial_turns"] = sum(len(t.turns) for t in left)
    summary["partial"] = [partial_row(t) for t in left]
    summary["errors"] = [e.to_dict() for e in done.errors]
    if store is not None:
        store.sort_episodes({s.episode_id: i for i, s in enumerate(specs)})
        store.write_summary(summary)
    log.info("rollout_done", episodes=len(ordered), failed=len(done.errors), partial=len(left),
             seconds=round(seconds, 3))
    return RolloutResult(trajectories=ordered, summary=summary, errors=done.errors, skipped=skipped,
                         out_dir=store.dir if store is not None else None, seconds=seconds,
                         stopped=done.stopped, partial=left, continued=continued)


def run_rollouts(tasks: Sequence[Task], policy: PolicyLike, config: RolloutConfig | None = None,
                 out_dir: str | Path | None = None, *, on_episode: ProgressFn | None = None,
                 on_start: Callable[[int, int], None] | None = None,
                 on_resume: ResumeFn | None = None, env_factory: EnvFactory = make_env) -> RolloutResult:
    """Blocking twin of :func:`arun_rollouts` (runs its own event loop)."""

    results: list[RolloutResult] = []

    async def main() -> None:
        try:
            results.append(await arun_rollouts(tasks, policy, config, out_dir, on_episode=on_episode,
                                               on_start=on_start, on_resume=on_resume,
                                               env_factory=env_factory))
        finally:
            aclose = getattr(policy, "aclose", None)
            if aclose is not None:  # the policy's HTTP client for this loop dies with the loop
                await aclose()

    # The result is handed over outside the task: asyncio.run's SIGINT bookkeeping formats the
    # finished task's repr, result included, and with thousands of trajectories that takes ms.
    asyncio.run(main())
    return results[0]
