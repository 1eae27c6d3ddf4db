"""Rollouts: one episode, the concurrent runner, its JSONL output, resume, seeds and summary."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentenv import CodingEnv, MultiTurnCodingEnv
from agentenv.errors import (
    ConfigError,
    EnvStateError,
    PolicyCallError,
    PolicyError,
    ServerUnavailable,
)
from agentenv.policies import ScriptedPolicy
from agentenv.records import Trajectory, TurnRecord
from agentenv.rollout import (
    RolloutConfig,
    arun_episode,
    arun_rollouts,
    episode_seed,
    plan_episodes,
    read_trajectories,
    run_episode,
    run_rollouts,
    summarize,
)
from agentenv.tasks.builtin import builtin_tasks

TASKS = builtin_tasks()[:4]
REQUIRED_FIELDS = {"episode_id", "task_name", "sample", "seed", "policy", "model", "turns",
                   "stop_reason", "final_reward", "template_ids"}


class CountingPolicy(ScriptedPolicy):
    """The scripted policy, counting its calls (to see what a resumed run re-does)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls = 0

    def __call__(self, obs: Any) -> str:
        self.calls += 1
        return super().__call__(obs)


def comparable(trajectory: Trajectory) -> dict[str, Any]:
    """A trajectory's record without wall-clock timings (which differ run to run)."""
    data = trajectory.to_dict()
    for turn in data["turns"]:
        turn.pop("exec_seconds")
    return data


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- one episode ---------------------------------------------------------------------------------

def test_run_episode_on_coding_env_returns_a_one_turn_trajectory_labelled_with_the_policy() -> None:
    """A single-step episode gives one TurnRecord, stop_reason single_step, and the policy's name."""
    trajectory = run_episode(CodingEnv(tasks=TASKS), ScriptedPolicy(TASKS), task_index=0,
                             episode_id="add#0", sample=0)
    assert len(trajectory.turns) == 1 and trajectory.stop_reason == "single_step"
    assert trajectory.policy == "scripted" and trajectory.episode_id == "add#0"


def test_run_episode_on_multiturn_env_plays_until_done() -> None:
    """On MultiTurnCodingEnv the loop runs until solved or out of turns."""
    env = MultiTurnCodingEnv(tasks=TASKS, max_turns=3, seed=0)
    trajectory = run_episode(env, ScriptedPolicy(TASKS), task_index=0)
    assert trajectory.stop_reason in ("solved", "max_turns")
    assert trajectory.turns[-1].turn == len(trajectory.turns) <= 3


def test_the_returned_trajectory_is_not_changed_by_the_next_reset() -> None:
    """run_episode hands back a copy: resetting the env afterwards leaves it intact."""
    env = MultiTurnCodingEnv(tasks=TASKS, max_turns=2, seed=0)
    first = run_episode(env, ScriptedPolicy(TASKS), task_index=0)
    snapshot = first.to_dict()
    run_episode(env, ScriptedPolicy(TASKS), task_index=1)
    assert first.to_dict() == snapshot


def test_async_and_sync_episodes_record_the_same_thing() -> None:
    """arun_episode (astep, awaited policy) and run_episode agree on every recorded field."""
    sync = run_episode(MultiTurnCodingEnv(tasks=TASKS, max_turns=3, seed=1), ScriptedPolicy(TASKS),
                       task_index=1)
    asynchronous = asyncio.run(arun_episode(MultiTurnCodingEnv(tasks=TASKS, max_turns=3, seed=1),
                                            ScriptedPolicy(TASKS), task_index=1))
    assert comparable(sync) == comparable(asynchronous)


def test_an_env_without_a_trajectory_is_refused_with_a_clear_message() -> None:
    """Envs that keep no env.trajectory cannot be rolled out; the error says what is needed."""

    class Bare:
        def reset(self, task_index: int | None = None) -> dict[str, Any]:
            return {}

        def step(self, action: str) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
            return {}, 0.0, True, {}

    with pytest.raises(ConfigError, match=r"env\.trajectory"):
        run_episode(Bare(), lambda obs: "", task_index=0)


def test_an_env_that_never_ends_is_stopped_at_max_steps() -> None:
    """A runaway env raises EnvStateError after max_steps instead of looping forever."""

    class Endless:
        trajectory = None

        def reset(self, task_index: int | None = None) -> dict[str, Any]:
            return {}

        def step(self, action: str) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
            return {}, 0.0, False, {}

    with pytest.raises(EnvStateError, match="within 5 steps"):
        run_episode(Endless(), lambda obs: "", max_steps=5)


# -- planning --------------------------------------------------------------------------------------

def test_episode_plan_has_samples_per_task_with_stable_ids_and_seeds() -> None:
    """plan_episodes gives samples x tasks episodes; ids and seeds do not depend on task order."""
    plan = plan_episodes(TASKS, samples=3, seed=7)
    assert len(plan) == 12 and len({s.episode_id for s in plan}) == 12
    reversed_plan = {s.episode_id: s.seed for s in plan_episodes(TASKS[::-1], samples=3, seed=7)}
    assert all(reversed_plan[s.episode_id] == s.seed for s in plan)
    assert plan_episodes(TASKS, 3, 8)[0].seed != plan[0].seed
    assert episode_seed(7, TASKS[0].name, 0) == plan[0].seed


def test_duplicate_task_names_are_refused() -> None:
    """Two tasks with one name would share episode ids; the plan refuses them."""
    with pytest.raises(ConfigError, match="unique"):
        plan_episodes([TASKS[0], TASKS[0]], samples=1, seed=0)


def test_bad_config_values_are_configuration_errors() -> None:
    """Zero samples, an unknown mode or backend are rejected with the allowed values."""
    with pytest.raises(ConfigError, match="samples"):
        RolloutConfig(samples=0)
    with pytest.raises(ConfigError, match="single_step"):
        RolloutConfig(mode="bandit")
    with pytest.raises(ConfigError, match="ray"):
        RolloutConfig(backend="slurm")


# -- the runner ------------------------------------------------------------------------------------

def test_a_run_writes_one_line_per_episode_with_the_required_fields(tmp_path: Path) -> None:
    """trajectories.jsonl holds every episode with ids, seeds, policy, turns and template ids."""
    config = RolloutConfig(max_turns=3, samples=2, seed=3)
    result = run_rollouts(TASKS, ScriptedPolicy(TASKS), config, tmp_path)
    records = lines(tmp_path / "trajectories.jsonl")
    assert len(records) == 8 == len(result.trajectories)
    assert all(set(r) >= REQUIRED_FIELDS for r in records)
    assert {(r["task_name"], r["sample"]) for r in records} == {(t.name, s) for t in TASKS for s in (0, 1)}
    assert all(r["policy"] == "scripted" and r["template_ids"] for r in records)
    assert all(r["seed"] == episode_seed(3, r["task_name"], r["sample"]) for r in records)
    assert json.loads((tmp_path / "config.json").read_text())["samples"] == 2


def test_the_summary_has_pass_at_1_solve_rate_reward_turns_tokens_and_difficulty_rows(tmp_path: Path) -> None:
    """summary.json carries the headline numbers and one row per difficulty."""
    run_rollouts(TASKS, ScriptedPolicy(TASKS, sample=False), RolloutConfig(max_turns=3), tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    for key in ("pass@1", "solve_rate", "mean_reward", "mean_turns", "tokens", "per_difficulty"):
        assert key in summary
    # Unsampled, the scripted policy's first attempts are buggy and its references correct: it revises.
    assert summary["pass@1"] == 0.0 and summary["solve_rate"] == 1.0
    assert summary["tokens"]["total"] > 0
    assert {r["difficulty"] for r in summary["per_difficulty"]} == {t.difficulty for t in TASKS}
    assert summary["run"]["ran"] == 4 and summary["errors"] == []


def test_single_step_mode_runs_coding_env_episodes(tmp_path: Path) -> None:
    """mode single_step gives one-turn episodes recorded as single_step."""
    result = run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(mode="single_step", samples=2),
                          tmp_path)
    assert all(t.mode == "single_step" and len(t.turns) == 1 for t in result.trajectories)
    assert result.summary["mean_turns"] == 1.0


def test_scripted_samples_differ_across_episode_seeds_and_repeat_for_the_same_seed(tmp_path: Path) -> None:
    """Each episode has its own seed, so resampling a task offline gives different answers;
    the same run seed gives the same answers again."""
    config = RolloutConfig(mode="single_step", samples=8, seed=3)
    first = run_rollouts(TASKS, ScriptedPolicy(TASKS), config, tmp_path / "a").trajectories
    again = run_rollouts(TASKS, ScriptedPolicy(TASKS), config, tmp_path / "b").trajectories
    assert [t.turns[0].code_hash for t in first] == [t.turns[0].code_hash for t in again]
    for task in TASKS:
        hashes = {t.turns[0].code_hash for t in first if t.task_name == task.name}
        assert len(hashes) > 1, task.name
    assert 0 < sum(t.turns[0].outcome == "pass" for t in first) < len(first)


def test_rerunning_into_the_same_directory_skips_finished_episodes(tmp_path: Path) -> None:
    """A second run with the same --out calls the policy for nothing; more samples run only the new ones."""
    run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(samples=1), tmp_path)
    again = CountingPolicy(TASKS)
    result = run_rollouts(TASKS, again, RolloutConfig(samples=1), tmp_path)
    assert again.calls == 0 and result.skipped == 4 and len(result.trajectories) == 4
    more = run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(samples=2), tmp_path)
    assert more.skipped == 4 and more.summary["run"]["ran"] == 4
    assert len(lines(tmp_path / "trajectories.jsonl")) == 8


def test_resume_drops_a_torn_last_line_and_redoes_only_the_missing_episodes(tmp_path: Path) -> None:
    """After a crash mid-write, the half line is dropped and only unfinished episodes run again."""
    run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(), tmp_path)
    path = tmp_path / "trajectories.jsonl"
    kept = path.read_text().splitlines()
    path.write_text("\n".join(kept[:2]) + "\n" + kept[2][: len(kept[2]) // 2])
    policy = CountingPolicy(TASKS)
    result = run_rollouts(TASKS, policy, RolloutConfig(), tmp_path)
    assert result.skipped == 2 and len(result.trajectories) == 4
    assert len(lines(path)) == 4  # every line parses again
    assert policy.calls > 0


def test_resuming_with_other_settings_is_refused(tmp_path: Path) -> None:
    """A run directory cannot be continued with another max_turns (its episodes would differ)."""
    run_rollouts(TASKS[:1], ScriptedPolicy(TASKS), RolloutConfig(max_turns=3), tmp_path)
    with pytest.raises(ConfigError, match="max_turns"):
        run_rollouts(TASKS[:1], ScriptedPolicy(TASKS), RolloutConfig(max_turns=2), tmp_path)


def test_a_corrupt_line_in_the_middle_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    """Only a torn last line is forgiven; garbage elsewhere names trajectories.jsonl:line."""
    run_rollouts(TASKS[:2], ScriptedPolicy(TASKS), RolloutConfig(), tmp_path)
    path = tmp_path / "trajectories.jsonl"
    good = path.read_text().splitlines()
    path.write_text("not json\n" + "\n".join(good) + "\n")
    with pytest.raises(ConfigError, match=r"trajectories\.jsonl:1"):
        read_trajectories(tmp_path)


def test_results_do_not_depend_on_concurrency(tmp_path: Path) -> None:
    """Concurrency 1 and 8 give identical records for a deterministic policy."""
    one = run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(samples=2, concurrency=1))
    many = run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(samples=2, concurrency=8))
    assert [comparable(t) for t in one.trajectories] == [comparable(t) for t in many.trajectories]
    assert one.out_dir is None and not list(tmp_path.iterdir())  # no out_dir: nothing written


def test_policy_calls_in_flight_never_exceed_the_concurrency_limit() -> None:
    """An async policy that sleeps sees at most `concurrency` calls at once, and that many are used."""

    class Slow(ScriptedPolicy):
        def __init__(self) -> None:
            super().__init__(TASKS)
            self.in_flight = self.peak = 0

        async def acall(self, obs: Any) -> str:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            await asyncio.sleep(0.02)
            self.in_flight -= 1
            return self(obs)

    policy = Slow()
    run_rollouts(TASKS, policy, RolloutConfig(samples=3, concurrency=3, mode="single_step"))
    assert policy.peak == 3


def test_a_blocking_sync_policy_gets_as_many_threads_as_the_concurrency() -> None:
    """A plain sync policy that blocks still has `concurrency` calls at once (not a small default pool)."""
    import threading

    together = threading.Barrier(16, timeout=20)  # breaks unless 16 calls are in flight at once
    scripted = ScriptedPolicy(TASKS)

    def blocking(obs: Any) -> str:
        together.wait()
        return scripted(obs)

    result = run_rollouts(TASKS, blocking, RolloutConfig(samples=4, concurrency=16, mode="single_step"))
    assert len(result.trajectories) == 16 and not together.broken


def test_a_failed_model_call_fails_one_episode_and_is_retried_on_resume(tmp_path: Path) -> None:
    """A transient PolicyCallError marks that episode failed (not written); the others finish;
    a rerun redoes it."""
    victim = TASKS[1].name

    class Flaky(ScriptedPolicy):
        def __call__(self, obs: Any) -> str:
            if obs["task_name"] == victim:
                raise PolicyCallError("the server kept answering 503", status=503, transient=True)
            return super().__call__(obs)

    result = run_rollouts(TASKS, Flaky(TASKS), RolloutConfig(), tmp_path)
    assert [e.task_name for e in result.errors] == [victim]
    assert result.summary["run"]["failed"] == 1 and "503" in result.summary["errors"][0]["error"]
    assert victim not in {r["task_name"] for r in lines(tmp_path / "trajectories.jsonl")}
    retry = CountingPolicy(TASKS)
    again = run_rollouts(TASKS, retry, RolloutConfig(), tmp_path)
    assert again.errors == [] and again.skipped == 3 and len(again.trajectories) == 4


def test_a_rejected_call_mid_episode_keeps_the_graded_turns_and_is_not_retried(tmp_path: Path) -> None:
    """A non-transient PolicyCallError on turn 2 ends that episode with turn 1 kept and
    stop_reason context_length; it is written, so a resume does not ask again."""
    victim = TASKS[0].name

    class TooLong(ScriptedPolicy):
        def __call__(self, obs: Any) -> str:
            if obs["task_name"] == victim and obs["turn"] == 2:
                raise PolicyCallError("maximum context length exceeded", status=400, context_length=True)
            return super().__call__(obs)

    result = run_rollouts(TASKS, TooLong(TASKS), RolloutConfig(max_turns=3), tmp_path)
    assert result.errors == []
    cut = next(t for t in result.trajectories if t.task_name == victim)
    assert cut.stop_reason == "context_length" and len(cut.turns) == 1 and cut.truncated
    assert "maximum context length" in cut.metadata["policy_error"]
    assert result.summary["stop_reasons"]["context_length"] == 1
    again = run_rollouts(TASKS, CountingPolicy(TASKS), RolloutConfig(max_turns=3), tmp_path)
    assert again.skipped == len(TASKS) and again.trajectories[0].stop_reason == "context_length"


def test_an_unavailable_server_stops_the_run_and_a_resume_completes_it(tmp_path: Path) -> None:
    """ServerUnavailable stops the run: what finished is written, `stopped` says why, and the
    rerun does only the rest."""
    calls = {"n": 0}

    class Dying(ScriptedPolicy):
        def __call__(self, obs: Any) -> str:
            calls["n"] += 1
            if calls["n"] > 2:
                raise ServerUnavailable("the server at http://x stopped answering: 8 consecutive failures")
            return super().__call__(obs)

    config = RolloutConfig(mode="single_step", concurrency=1)
    result = run_rollouts(TASKS, Dying(TASKS), config, tmp_path)
    assert result.stopped is not None and "stopped answering" in result.stopped
    assert len(result.trajectories) == 2 and result.summary["run"]["stopped"] == result.stopped
    assert len(lines(tmp_path / "trajectories.jsonl")) == 2
    again = run_rollouts(TASKS, CountingPolicy(TASKS), config, tmp_path)
    assert again.stopped is None and again.skipped == 2 and len(again.trajectories) == len(TASKS)


def test_a_misconfigured_policy_stops_the_run() -> None:
    """A PolicyError that is not about one call (e.g. an unknown task) aborts instead of failing quietly."""
    with pytest.raises(PolicyError):
        run_rollouts(TASKS, ScriptedPolicy(TASKS[:1]), RolloutConfig())


def test_an_empty_task_set_is_a_configuration_error() -> None:
    """Running zero tasks is refused with a hint about the filters."""
    with pytest.raises(ConfigError, match="empty"):
        asyncio.run(arun_rollouts([], ScriptedPolicy(TASKS)))


def test_progress_callbacks_see_every_episode() -> None:
    """on_start gets the plan size; on_episode is called once per finished episode, counting up."""
    seen: list[int] = []
    starts: list[tuple[int, int]] = []
    run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(mode="single_step"),
                 on_episode=lambda t, n, total: seen.append(n), on_start=lambda a, b: starts.append((a, b)))
    assert starts == [(4, 0)] and sorted(seen) == [1, 2, 3, 4]


def test_on_resume_gets_the_episodes_the_run_directory_already_holds(tmp_path: Path) -> None:
    """on_resume(finished, partial) is the runner's own resume: nothing on a fresh directory, and
    on a second run with more samples the first run's episodes, in plan order, before on_start."""
    calls: list[tuple[str, list[str], int]] = []

    def run(samples: int) -> Any:
        return run_rollouts(TASKS, ScriptedPolicy(TASKS), RolloutConfig(mode="single_step", samples=samples),
                            tmp_path, on_start=lambda total, done: calls.append(("start", [], done)),
                            on_resume=lambda done, partial: calls.append(
                                ("resume", [str(t.episode_id) for t in done], len(partial))))

    first = run(1)
    assert calls == [("resume", [], 0), ("start", [], 0)]
    calls.clear()
    run(2)
    assert calls == [("resume", [str(t.episode_id) for t in first.trajectories], 0), ("start", [], len(TASKS))]


# -- the summary -----------------------------------------------------------------------------------

def turn(t: int, reward: float, tokens: int = 10) -> TurnRecord:
    return TurnRecord(turn=t, response_text="", code="x", code_hash="h",
                      outcome="pass" if reward == 1.0 else "wrong_answer", passed=int(reward * 4),
                      total=4, fraction=reward, reward=reward, delta=0.0, action_tokens=tokens,
                      cumulative_tokens=tokens * t, usage={"prompt_tokens": 5, "completion_tokens": 2})


def episode(rewards: list[float], difficulty: str = "easy", name: str = "t") -> Trajectory:
    return Trajectory(task_name=name, max_turns=3, difficulty=difficulty,
                      turns=[turn(i + 1, r) for i, r in enumerate(rewards)],
                      stop_reason="solved" if rewards[-1] == 1.0 else "max_turns")


def test_summary_numbers_match_a_hand_count() -> None:
    """pass@1, solve rate, repair rate, reward, turns, tokens and by-turn rates on known episodes."""
    episodes = [episode([1.0]), episode([0.5, 1.0]), episode([0.0, 0.25, 0.5], "hard", "u"),
                episode([0.0, 0.0, 1.0], "hard", "u")]
    s = summarize(episodes)
    assert s["pass@1"] == 0.25 and s["solve_rate"] == 0.75
    assert s["repair_rate"] == pytest.approx(2 / 3)
    assert s["mean_reward"] == pytest.approx((1.0 + 1.0 + 0.5 + 1.0) / 4)
    assert s["mean_turns"] == 2.25
    assert s["solve_rate_by_turn"] == [0.25, 0.5, 0.75]
    assert s["tokens"]["prompt_tokens"] == 5 * 9 and s["tokens"]["completion_tokens"] == 2 * 9
    assert [r["difficulty"] for r in s["per_difficulty"]] == ["easy", "hard"]
    assert s["per_difficulty"][1]["solve_rate"] == 0.5 and s["tasks"] == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=1, max_size=3), min_size=1,
                max_size=12))
def test_summary_rates_are_ordered_and_bounded(reward_lists: list[list[float]]) -> None:
    """0 <= pass@1 <= solve rate <= 1, and the by-turn solve rate rises to the solve rate."""
    episodes = []
    for rewards in reward_lists:
        cut = rewards.index(1.0) + 1 if 1.0 in rewards else len(rewards)  # episodes end when solved
        episodes.append(episode(rewards[:cut]))
    s = summarize(episodes)
    assert 0.0 <= s["pass@1"] <= s["solve_rate"] <= 1.0
    by_turn = s["solve_rate_by_turn"]
    assert all(a <= b for a, b in itertools.pairwise(by_turn))
    assert by_turn[-1] == pytest.approx(s["solve_rate"])
    assert 0.0 <= s["mean_reward"] <= 1.0


def test_a_run_freezes_older_objects_only_while_it_runs_and_leaves_a_callers_freeze_alone() -> None:
    """During a run the objects made before it are frozen; afterwards the GC is as it was."""
    import gc

    seen: list[int] = []
    policy = ScriptedPolicy(TASKS)
    config = RolloutConfig(max_turns=1, samples=1)
    assert gc.get_freeze_count() == 0
    run_rollouts(TASKS, policy, config, on_episode=lambda *_: seen.append(gc.get_freeze_count()))
    assert seen and all(n > 0 for n in seen)
    assert gc.get_freeze_count() == 0
    gc.freeze()  # a caller's own freeze is kept, not undone by the run
    try:
        before = gc.get_freeze_count()
        run_rollouts(TASKS, policy, config)
        # Not unfrozen (that empties the frozen set); a few frozen objects may die meanwhile.
        assert gc.get_freeze_count() > before // 2
    finally:
        gc.unfreeze()
