"""Rollouts: run episodes of any agentenv environment with any policy, one or thousands.

- :func:`run_episode` / :func:`arun_episode`: one episode, returning its Trajectory.
- :func:`run_rollouts` / :func:`arun_rollouts`: many episodes (``samples`` per task, seeded),
  concurrent, written to ``trajectories.jsonl`` as they finish, resumable, summarised in
  ``summary.json``; ``backend="ray"`` runs them on a Ray cluster.
- :func:`run_repair_trees` / :func:`arun_repair_trees`: N first programs per task and M repairs
  from each failing one, the shared first turn generated once (snapshot and restore);
- :class:`RolloutConfig`, :func:`plan_episodes`: what a run is; :func:`read_trajectories`,
  :func:`summarize`: reading a run back.
"""

from __future__ import annotations

from agentenv.rollout.episode import arun_episode, run_episode
from agentenv.rollout.plan import EpisodeSpec, RolloutConfig, episode_seed, make_env, plan_episodes
from agentenv.rollout.runner import (
    EnvFactory,
    EnvPool,
    EpisodeError,
    LocalBackend,
    RolloutResult,
    arun_rollouts,
    run_rollouts,
)
from agentenv.rollout.store import (
    CONFIG_FILE,
    SUMMARY_FILE,
    TRAJECTORIES_FILE,
    RunStore,
    read_trajectories,
)
from agentenv.rollout.summary import summarize, summarize_group
from agentenv.rollout.tree import arun_repair_trees, run_repair_trees

__all__ = [
    "CONFIG_FILE",
    "SUMMARY_FILE",
    "TRAJECTORIES_FILE",
    "EnvFactory",
    "EnvPool",
    "EpisodeError",
    "EpisodeSpec",
    "LocalBackend",
    "RolloutConfig",
    "RolloutResult",
    "RunStore",
    "arun_episode",
    "arun_repair_trees",
    "arun_rollouts",
    "episode_seed",
    "make_env",
    "plan_episodes",
    "read_trajectories",
    "run_episode",
    "run_repair_trees",
    "run_rollouts",
    "summarize",
    "summarize_group",
]
