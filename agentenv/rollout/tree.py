"""Repair trees: N initial programs per task, M repairs from each failing state, no re-generation.

As in Olausson et al., "Is Self-Repair a Silver Bullet?": each task gets ``initial`` first
attempts (roots, each with its own seed); a root that fails is snapshotted once
(:meth:`MultiTurnCodingEnv.snapshot`) and restored ``repairs`` times, each branch with its own
seed, so the shared prefix (the prompt, the first program and its grading) is generated and
graded once per root, not once per branch. Each branch then runs as an ordinary episode to its
end (``max_turns=2``: exactly one repair).

What it writes, into the same run directory layout as :func:`agentenv.rollout.run_rollouts`:
a solved root as one trajectory (``task#r<i>``), and a failed root as ``repairs`` trajectories
(``task#r<i>.<j>``) that share its first turn. Each carries ``metadata["tree"]``: ``root``,
``branch`` (None for a solved root) and ``shared_turns``. ``summary.json``'s numbers count each
root once (its branches share its weight, see :mod:`agentenv.rollout.summary`), so ``pass@1``
is the first programs' pass rate; it adds ``tree``: the shape, the policy calls made, the calls
the shared prefixes saved, and ``tree_solve_rate``: the fraction of roots solved by their first
program or by any of their ``repairs`` branches (the tree's pass rate). Re-running into the same
directory resumes tree by tree.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenv.choices import Mode
from agentenv.errors import ConfigError, EnvStateError
from agentenv.log import get_logger
from agentenv.policies.base import PolicyLike, acall_policy, policy_model, policy_name
from agentenv.records import Trajectory
from agentenv.rollout.contract import BranchingEnv, Env
from agentenv.rollout.plan import RolloutConfig, episode_seed, make_env, run_identity, task_set_hash
from agentenv.rollout.runner import EnvFactory, RolloutResult
from agentenv.rollout.store import RunStore
from agentenv.rollout.summary import summarize
from agentenv.tasks.schema import Task

__all__ = ["arun_repair_trees", "run_repair_trees"]

log = get_logger(__name__)


def _label(trajectory: Trajectory, policy: PolicyLike, episode_id: str, root: int, branch: int | None,
           shared: int) -> Trajectory:
    return dataclasses.replace(
        trajectory, turns=list(trajectory.turns), template_ids=dict(trajectory.template_ids),
        metadata={**trajectory.metadata, "tree": {"root": root, "branch": branch, "shared_turns": shared}},
        episode_id=episode_id, sample=root, policy=policy_name(policy), model=policy_model(policy),
    )


def _branching(env: Env) -> BranchingEnv:
    if not isinstance(env, BranchingEnv):
        raise ConfigError(f"{type(env).__name__} cannot be branched: a repair tree needs an env with "
                          "astep, max_turns, snapshot and restore (MultiTurnCodingEnv)")
    return env


def _record(env: Env) -> Trajectory:
    if env.trajectory is None:
        raise EnvStateError(f"{type(env).__name__} has no trajectory after its episode")
    return env.trajectory


async def _step(env: BranchingEnv, policy: PolicyLike, obs: Any, slots: asyncio.Semaphore) -> tuple[Any, bool]:
    async with slots:
        action = await acall_policy(policy, obs)
    obs, _reward, done, _info = await env.astep(action)
    return obs, done


async def _play_to_end(env: BranchingEnv, policy: PolicyLike, obs: Any, slots: asyncio.Semaphore) -> int:
    """Step a restored branch until its episode ends; the policy calls it took."""
    calls, done = 0, False
    while not done:
        if calls > env.max_turns:
            raise EnvStateError(f"{type(env).__name__} did not end its episode within max_turns")
        obs, done = await _step(env, policy, obs, slots)
        calls += 1
    return calls


async def arun_repair_trees(tasks: Sequence[Task], policy: PolicyLike, config: RolloutConfig | None = None,
                            out_dir: str | Path | None = None, *, initial: int = 5, repairs: int = 1,
                            env_factory: EnvFactory = make_env) -> RolloutResult:
    """Build a repair tree per task (see the module docstring) and write its trajectories."""
    config = config or RolloutConfig(max_turns=2)
    tasks = list(tasks)
    if not tasks:
        raise ConfigError("the task set is empty; check --tasks and its filters")
    if config.mode != Mode.MULTI_TURN or config.max_turns < 2:
        raise ConfigError("a repair tree needs multi-turn episodes with max_turns >= 2 "
                          "(drop --single-step; --max-turns 2 gives one repair per branch)")
    for name, value in (("initial", initial), ("repairs", repairs)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
    store = RunStore(out_dir) if out_dir is not None else None
    identity = {**run_identity(config, tasks), "tree": [initial, repairs]}
    done_ids: dict[str, Trajectory] = {}
    if store is not None:
        record = {**config.to_dict(), "policy_name": policy_name(policy), "n_tasks": len(tasks),
                  "task_set_hash": task_set_hash(tasks), "tree": {"initial": initial, "repairs": repairs}}
        done_ids = {str(t.episode_id): t for t in store.open(record, identity)}
    slots = asyncio.Semaphore(config.concurrency)
    results: dict[tuple[int, int], list[Trajectory]] = {}
    counts = {"calls": 0, "saved": 0, "resumed_roots": 0}

    async def tree_root(task_index: int, root: int) -> None:
        name = tasks[task_index].name
        root_id = f"{name}#r{root}"
        previous = [done_ids[i] for i in [root_id, *(f"{root_id}.{j}" for j in range(repairs))] if i in done_ids]
        if previous and (previous[0].episode_id == root_id or len(previous) == repairs):
            results[(task_index, root)] = previous
            counts["resumed_roots"] += 1
            return
        seed = episode_seed(config.seed, name, root)
        env = _branching(env_factory(config, tasks, seed))
        obs = env.reset(task_index=task_index, seed=seed)
        obs, done = await _step(env, policy, obs, slots)  # the root's first program
        counts["calls"] += 1
        if done:
            out = [_label(_record(env), policy, root_id, root, None, 0)]
        else:
            snapshot = env.snapshot()
            out = []
            for branch in range(repairs):
                branch_env = _branching(env_factory(config, tasks, seed))
                branch_obs = branch_env.restore(snapshot, seed=episode_seed(config.seed, root_id, branch))
                calls = await _play_to_end(branch_env, policy, branch_obs, slots)
                counts["calls"] += calls  # (not `+= await`: that reads the count before awaiting)
                out.append(_label(_record(branch_env), policy, f"{root_id}.{branch}", root, branch, 1))
            counts["saved"] += repairs - 1  # the first turn was generated and graded once, not M times
        if store is not None:
            for trajectory in out:
                if trajectory.episode_id not in done_ids:  # a half-written tree is redone, not doubled
                    store.append(trajectory)
        results[(task_index, root)] = out

    started = time.perf_counter()
    try:
        await asyncio.gather(*(tree_root(i, r) for i in range(len(tasks)) for r in range(initial)))
    finally:
        if store is not None:
            store.close()
    seconds = time.perf_counter() - started
    ordered = [t for key in sorted(results) for t in results[key]]
    summary = summarize(ordered)
    summary["run"] = {"policy": policy_name(policy), "model": policy_model(policy) or config.model,
                      "tasks": config.tasks, "mode": "repair_tree", "max_turns": config.max_turns,
                      "seed": config.seed, "seconds": round(seconds, 3)}
    solved_trees = sum(1 for v in results.values() if any(t.solved_turn is not None for t in v))
    summary["tree"] = {"initial": initial, "repairs": repairs, "roots": len(results),
                       "failed_roots": sum(1 for v in results.values() if v and v[0].metadata["tree"]["branch"] is not None),
                       "tree_solve_rate": solved_trees / len(results) if results else None,
                       "policy_calls": counts["calls"], "calls_saved_by_sharing": counts["saved"],
                       "resumed_roots": counts["resumed_roots"]}
    summary["errors"] = []
    if store is not None:
        store.write_summary(summary)
    log.info("repair_trees_done", trajectories=len(ordered), calls=counts["calls"], seconds=round(seconds, 3))
    return RolloutResult(trajectories=ordered, summary=summary, errors=[], skipped=counts["resumed_roots"],
                         out_dir=store.dir if store is not None else None, seconds=seconds)


def run_repair_trees(tasks: Sequence[Task], policy: PolicyLike, config: RolloutConfig | None = None,
                     out_dir: str | Path | None = None, *, initial: int = 5, repairs: int = 1,
                     env_factory: EnvFactory = make_env) -> RolloutResult:
    """Blocking twin of :func:`arun_repair_trees`."""
    return asyncio.run(arun_repair_trees(tasks, policy, config, out_dir, initial=initial,
                                         repairs=repairs, env_factory=env_factory))

