"""Partial episodes: what is kept of an episode the infrastructure stopped, and how it goes on.

An episode of a rollout run can stop before its end for reasons that are not its own: the model
server stops answering (a transient ``PolicyCallError`` after its retries, or
``ServerUnavailable`` once the circuit breaker opens), the sandbox faults (``SandboxError``), or
the run is cancelled (Ctrl-C, or the stop grace running out). The turns it has graded cost
sandbox work and model tokens, so they are kept: :func:`partial_record` turns the episode in
flight into a *partial* :class:`~agentenv.records.Trajectory`, with

- the turns graded so far, exactly as the env recorded them;
- ``stop_reason`` ``"server_unavailable"`` (the model server) or ``"interrupted"`` (a sandbox
  fault, a cancelled run): ``trajectory.partial`` is true, ``done``, ``terminated`` and
  ``truncated`` are false;
- ``metadata["partial"]``: the error, and what the env needs to continue the episode (the
  conversation between turns: its messages, token counts and turn; the last feedback; the env
  settings it must be continued under).

The runner writes it to ``trajectories.jsonl`` like any episode and counts it in no metric (the
summary lists it under ``partial``). A resumed run hands it back (``EpisodeSpec.resume``) and
:func:`resume_snapshot` rebuilds the :class:`~agentenv.envs.multiturn.EpisodeSnapshot` the env
restores: the episode goes on from its last graded turn, with the turn indices, the token
budget and the history sent to the policy as they would have been, had it never stopped. The
finished record supersedes the partial one (``RunStore.sort_episodes`` keeps one line per
episode) and says where it was continued: ``metadata["resumed_after_turns"]``.

Nothing is kept of an episode without a graded turn (it is redone from its start, as before), so
single-step episodes never leave partial records; nor of an env that takes no snapshots. A
partial record whose snapshot no longer fits the env (other templates or tokenizer:
``SnapshotMismatch``) is redone from the start too, with a warning.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping

from agentenv.choices import StopReason
from agentenv.envs.multiturn import EpisodeSnapshot
from agentenv.errors import ConfigError, EnvStateError, PolicyCallError, SandboxError
from agentenv.policies.base import PolicyLike
from agentenv.records import Trajectory
from agentenv.rollout.contract import Env, ResumableEnv
from agentenv.rollout.episode import episode_record

__all__ = ["PARTIAL_KEY", "RESUMED_KEY", "partial_record", "partial_stop_reason", "resume_snapshot"]

PARTIAL_KEY = "partial"  # metadata of a partial record: the error and the state to continue from
RESUMED_KEY = "resumed_after_turns"  # metadata of a continued episode: the graded turns it had each time


def partial_stop_reason(exc: BaseException) -> str | None:
    """The stop reason of an episode ``exc`` stopped before its end, or None when ``exc`` is
    not the infrastructure's (a bug, a bad option: the run fails as it always did)."""
    if isinstance(exc, PolicyCallError):
        # A rejected request (not transient) ends the episode in arun_episode and never gets here.
        return StopReason.SERVER_UNAVAILABLE.value if exc.transient else None
    if isinstance(exc, (SandboxError, asyncio.CancelledError)):
        return StopReason.INTERRUPTED.value
    return None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.CancelledError):
        return "the run was cancelled (interrupted, or stopped while this episode was in flight)"
    return f"{type(exc).__name__}: {exc}"


def partial_record(env: Env, policy: PolicyLike, episode_id: str | None, sample: int,
                   exc: BaseException) -> Trajectory | None:
    """The partial record of the episode ``env`` is in, stopped by ``exc``; None when there is
    nothing to keep (no graded turn, an error that is not the infrastructure's, or an env that
    cannot be snapshotted between turns)."""
    stop_reason = partial_stop_reason(exc)
    if stop_reason is None or not isinstance(env, ResumableEnv):
        return None
    trajectory = env.trajectory
    if not isinstance(trajectory, Trajectory) or not trajectory.turns or trajectory.stop_reason is not None:
        return None
    try:
        state: EpisodeSnapshot = env.snapshot()
    except EnvStateError:  # not between turns (a grading that raised leaves it there, else not)
        return None
    kept = {"error": _describe(exc), "conversation": dict(state.conversation), "feedback": state.feedback,
            "settings": dict(state.settings)}
    return episode_record(env, policy, episode_id, sample, stop_reason=stop_reason,
                          metadata={PARTIAL_KEY: kept})


def resume_snapshot(partial: Trajectory) -> EpisodeSnapshot:
    """The snapshot that continues ``partial`` (a record made by :func:`partial_record`) from
    its last graded turn; its trajectory is the partial one, running again, noting the turn it
    was continued after in ``metadata["resumed_after_turns"]``."""
    kept = partial.metadata.get(PARTIAL_KEY)
    if not partial.partial or not isinstance(kept, Mapping) or "conversation" not in kept:
        raise ConfigError(f"episode {partial.episode_id!r} is not a partial record with a state to "
                          "continue from; remove its line from trajectories.jsonl to redo it")
    metadata = {k: v for k, v in partial.metadata.items() if k != PARTIAL_KEY}
    metadata[RESUMED_KEY] = [*metadata.get(RESUMED_KEY, ()), len(partial.turns)]
    running = dataclasses.replace(partial, stop_reason=None, metadata=metadata)
    return EpisodeSnapshot(task_name=partial.task_name, conversation=dict(kept["conversation"]),
                           trajectory=running.to_dict(), feedback=str(kept["feedback"]),
                           settings=dict(kept["settings"]))
