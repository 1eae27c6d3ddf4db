"""Rollouts: run episodes of any agentenv environment with any policy, one or thousands.

- :func:`run_episode` / :func:`arun_episode`: one episode, returning its Trajectory.
- :func:`run_rollouts` / :func:`arun_rollouts`: many episodes (``samples`` per task, seeded),
  concurrent, written to ``trajectories.jsonl`` as they finish, resumable (an episode stopped
  midway goes on from its last graded turn), summarised in
  ``summary.json``; ``backend="ray"`` runs them on a Ray cluster.
- :func:`run_repair_trees` / :func:`arun_repair_trees`: N first programs per task and M repairs
  from each failing one, the shared first turn generated once (snapshot and restore);
- :func:`run_curriculum` / :func:`arun_curriculum`: rounds of rollouts whose tasks a
  :class:`PassRateCurriculum` draws by running pass rate, keeping only the groups whose rewards
  differ (DAPO's dynamic sampling; :func:`split_groups`);
- :class:`RolloutConfig`, :func:`plan_episodes`: what a run is; :func:`read_trajectories`,
  :func:`summarize`: reading a run back; :func:`register_backend`: a backend of your own.

Modules, top to bottom: ``runner`` and ``tree`` (whole runs) use ``backends`` (the registry;
``local`` there, ``ray`` in ``ray_backend``), which use ``execute`` (the scheduler and the
episode worker every backend shares), which uses ``partial`` (an episode stopped midway: its
partial record, and the snapshot that continues it) and ``episode`` (one episode); beside them,
``plan`` (what a run is), ``store`` (its directory) and ``summary`` (its numbers). ``contract``
is the environment every one of them drives, as typed protocols (``Env``, ``AsyncEnv`` ...).
"""

from __future__ import annotations

# ray_backend is imported for its registration (it imports Ray itself only when it is used).
from agentenv.rollout import ray_backend as _ray_backend  # noqa: F401
from agentenv.rollout.backends import Backend, LocalBackend, backend_names, register_backend
from agentenv.rollout.curriculum import (
    CurriculumResult,
    PassRateCurriculum,
    PassRateWindow,
    arun_curriculum,
    informative,
    run_curriculum,
    split_groups,
)
from agentenv.rollout.episode import arun_episode, run_episode
from agentenv.rollout.execute import EnvFactory, EnvPool, EpisodeError
from agentenv.rollout.plan import EpisodeSpec, RolloutConfig, episode_seed, make_env, plan_episodes
from agentenv.rollout.runner import RolloutResult, arun_rollouts, run_rollouts
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
    "Backend",
    "CurriculumResult",
    "EnvFactory",
    "EnvPool",
    "EpisodeError",
    "EpisodeSpec",
    "LocalBackend",
    "PassRateCurriculum",
    "PassRateWindow",
    "RolloutConfig",
    "RolloutResult",
    "RunStore",
    "arun_curriculum",
    "arun_episode",
    "arun_repair_trees",
    "arun_rollouts",
    "backend_names",
    "episode_seed",
    "informative",
    "make_env",
    "plan_episodes",
    "read_trajectories",
    "register_backend",
    "run_curriculum",
    "run_episode",
    "run_repair_trees",
    "run_rollouts",
    "split_groups",
    "summarize",
    "summarize_group",
]
