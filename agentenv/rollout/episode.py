"""One episode: drive any agentenv environment with any policy and return its Trajectory.

``run_episode`` and ``arun_episode`` are the sync and async twins of the same loop::

    obs = env.reset(task_index=i)
    while not done:
        obs, reward, done, info = env.step(policy(obs))

They work with both environment kinds (``CodingEnv``, ``MultiTurnCodingEnv``), and any other,
through the contract of :mod:`agentenv.rollout.contract`: ``reset``/``step`` (``astep`` when
present) and ``env.trajectory``. The async
twin awaits the policy through :func:`agentenv.policies.acall_policy` (optionally under a
semaphore that bounds concurrent model calls) and the sandbox through ``env.astep``, whose
work runs in the sandbox's bounded worker pool.

A model call the server rejected for good (a ``PolicyCallError`` that is not ``transient``,
such as a context-length error) ends the episode there: the turns already graded are kept and
``stop_reason`` is ``"context_length"`` or ``"policy_error"`` (the message is in
``metadata["policy_error"]``), since asking again would fail again. Transient failures
(the server down, timeouts, 5xx) propagate; the rollout runner then keeps the episode's graded
turns as a partial record (:mod:`agentenv.rollout.partial`), and ``snapshot=`` (the
:class:`~agentenv.envs.multiturn.EpisodeSnapshot` of that record) continues the episode from
its last graded turn instead of resetting: the same loop, started from ``env.restore``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Mapping
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

from agentenv.choices import StopReason
from agentenv.errors import ConfigError, EnvStateError, PolicyCallError, SandboxError
from agentenv.policies.base import Policy, PolicyLike, acall_policy, policy_model, policy_name
from agentenv.records import Trajectory
from agentenv.rollout.contract import AsyncEnv, Env, ResumableEnv, TurnLimited, reset_takes_seed

if TYPE_CHECKING:  # for annotations only: the envs are the caller's
    from agentenv.envs.multiturn import EpisodeSnapshot

__all__ = ["arun_episode", "episode_record", "run_episode"]

_DEFAULT_STEP_LIMIT = 10_000


def _step_limit(env: Env, max_steps: int | None) -> int:
    if max_steps is not None:
        if max_steps < 1:
            raise ConfigError(f"max_steps must be >= 1, got {max_steps}")
        return max_steps
    if isinstance(env, TurnLimited) and isinstance(env.max_turns, int) and env.max_turns >= 1:
        return env.max_turns
    return _DEFAULT_STEP_LIMIT


def episode_record(env: Env, policy: PolicyLike, episode_id: str | None, sample: int, *,
                   stop_reason: str | None = None, metadata: Mapping[str, Any] | None = None) -> Trajectory:
    """A copy of ``env.trajectory`` labelled with the episode and the policy (a later
    ``env.reset()`` cannot touch it; TurnRecords are frozen); ``stop_reason`` and ``metadata``,
    when given, override the env's stop reason and add to its metadata."""
    trajectory = env.trajectory if isinstance(env, Env) else None
    if not isinstance(trajectory, Trajectory):
        raise ConfigError(f"{type(env).__name__} keeps no env.trajectory; run_episode needs an "
                          "agentenv environment such as CodingEnv or MultiTurnCodingEnv")
    return dataclasses.replace(
        trajectory, turns=list(trajectory.turns), template_ids=dict(trajectory.template_ids),
        metadata={**trajectory.metadata, **(metadata or {})}, episode_id=episode_id, sample=sample,
        stop_reason=StopReason(stop_reason) if stop_reason is not None else trajectory.stop_reason,
        policy=policy_name(policy), model=policy_model(policy),
    )


def _finish(env: Env, policy: PolicyLike, episode_id: str | None, sample: int,
            error: PolicyCallError | None = None) -> Trajectory:
    if error is None:
        return episode_record(env, policy, episode_id, sample)
    # the episode ends here, with the turns graded so far
    return episode_record(env, policy, episode_id, sample, stop_reason=error.stop_reason,
                          metadata={"policy_error": str(error)})


def _ends_episode(exc: PolicyCallError) -> bool:
    """A rejected request ends the episode; a transient failure fails it (retried later)."""
    return not exc.transient


def _reset(env: Env, task_index: int | None, seed: int | None, snapshot: EpisodeSnapshot | None = None) -> Any:
    """``env.reset(task_index=...)``, passing ``seed=`` too when given and the env takes it;
    with a ``snapshot``, ``env.restore(snapshot, seed=seed)`` instead (the episode goes on)."""
    if snapshot is not None:
        if not isinstance(env, ResumableEnv):
            raise ConfigError(f"{type(env).__name__} has no restore(); an episode can be continued "
                              "from a snapshot only in an env that takes snapshots (MultiTurnCodingEnv)")
        return env.restore(snapshot, seed=seed)
    if seed is not None and reset_takes_seed(env):
        seeded: Any = env  # its reset takes seed= (checked above), which Env does not promise
        return seeded.reset(task_index=task_index, seed=seed)
    return env.reset(task_index=task_index)


def _did_not_end(env: Env, limit: int) -> EnvStateError:
    return EnvStateError(f"{type(env).__name__} did not end its episode within {limit} steps; "
                         "give the env a max_turns or pass max_steps=... to run_episode")


def _raise_infra_error(info: Any) -> None:
    """A step the env flagged as not graded (``info["infra_error"]``) stops the episode as a
    sandbox fault does: the runner reports it, keeps a partial record, and retries on resume."""
    reason = info.get("infra_error") if isinstance(info, dict) else None
    if reason:
        raise SandboxError(str(reason))


def run_episode(env: Env, policy: Policy, *, task_index: int | None = None, max_steps: int | None = None,
                episode_id: str | None = None, sample: int = 0, seed: int | None = None,
                snapshot: EpisodeSnapshot | None = None) -> Trajectory:
    """Reset ``env`` (on ``tasks[task_index]``, or a seeded random task), then step it with
    ``policy`` until ``done``; return the episode's Trajectory, labelled with the policy.

    ``seed``, when given, goes to ``env.reset(seed=...)`` if the env's reset takes one.
    ``snapshot`` continues that episode (``env.restore``) instead of resetting; the turns it
    holds are kept and the step limit counts the steps still to play.
    """
    limit = _step_limit(env, max_steps)
    obs = _reset(env, task_index, seed, snapshot)
    for _ in range(limit):
        try:
            action = policy(obs)
        except PolicyCallError as exc:
            if not _ends_episode(exc):
                raise
            return _finish(env, policy, episode_id, sample, exc)
        obs, _reward, done, info = env.step(action)
        _raise_infra_error(info)
        if done:
            return _finish(env, policy, episode_id, sample)
    raise _did_not_end(env, limit)


async def arun_episode(env: Env, policy: PolicyLike, *, task_index: int | None = None,
                       max_steps: int | None = None, episode_id: str | None = None, sample: int = 0,
                       seed: int | None = None, policy_slots: asyncio.Semaphore | None = None,
                       policy_executor: Executor | None = None,
                       snapshot: EpisodeSnapshot | None = None) -> Trajectory:
    """Async twin of :func:`run_episode`; ``policy_slots`` bounds concurrent policy calls and
    ``policy_executor`` runs a blocking (sync) policy's calls (default: the loop's executor)."""
    limit = _step_limit(env, max_steps)
    obs = _reset(env, task_index, seed, snapshot)
    asynchronous = env if isinstance(env, AsyncEnv) else None
    for _ in range(limit):
        try:
            async with policy_slots if policy_slots is not None else contextlib.nullcontext():
                action = await acall_policy(policy, obs, policy_executor)
        except PolicyCallError as exc:
            if not _ends_episode(exc):
                raise
            return _finish(env, policy, episode_id, sample, exc)
        if asynchronous is not None:
            obs, _reward, done, info = await asynchronous.astep(action)
        else:
            obs, _reward, done, info = await asyncio.to_thread(env.step, action)
        _raise_infra_error(info)
        if done:
            return _finish(env, policy, episode_id, sample)
    raise _did_not_end(env, limit)
