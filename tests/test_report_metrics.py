"""One run's metrics on a synthetic multi-turn run whose every number is derived by hand.

The run (report_builders.multi_turn_run), max_turns 3, rewards in quarters:

    add   (easy) s0: pass                         -> solved turn 1
                 s1: wrong .5, pass               -> solved turn 2
    sort  (easy) s0: syntax 0, wrong .5, wrong .5 -> unsolved
                 s1: wrong .25, runtime 0, pass   -> solved turn 3
    parse (hard) s0: runtime 0, runtime 0, wrong .25 -> unsolved
                 s1: timeout 0, pass              -> solved turn 2

Tokens per episode of T turns: generated 10T; prompts 50 + 30(t-1) per call, so processed
60T + 15T(T-1) (60, 150, 270 for T = 1, 2, 3).
"""

from __future__ import annotations

import pytest
from report_builders import multi_turn, multi_turn_run, single_step, single_step_run, turn

from agentenv.records import OUTCOMES, Trajectory, TurnRecord
from agentenv.report import episode_cost, run_metrics

approx = pytest.approx


def test_overall_metrics_match_the_hand_computed_values() -> None:
    """pass@1, solve@3, repair rate, reward, turns and tokens, averaged over tasks."""
    overall = run_metrics(multi_turn_run())["overall"]
    assert overall["tasks"] == 3 and overall["episodes"] == 6
    assert overall["pass@1"] == approx(1 / 6)              # (0.5 + 0 + 0) / 3
    assert overall["solve_rate"] == approx(2 / 3)          # (1 + 0.5 + 0.5) / 3
    assert (overall["repaired"], overall["failed_first"]) == (3, 5)
    assert overall["repair_rate"] == approx(0.6)
    assert overall["mean_reward"] == approx((1.0 + 0.75 + 0.625) / 3)
    assert overall["mean_first_reward"] == approx((0.75 + 0.125 + 0.0) / 3)
    assert overall["mean_turns"] == approx((1.5 + 3 + 2.5) / 3)
    assert overall["cumulative_solve_rate"] == approx([1 / 6, 0.5, 2 / 3])
    assert overall["tokens"]["generated"] == approx((15 + 30 + 25) / 3)
    assert overall["tokens"]["processed"] == approx((105 + 270 + 210) / 3)
    assert overall["tokens"]["conversation"] == approx((95 + 140 + 125) / 3)


def test_task_rows_hold_each_tasks_own_numbers() -> None:
    """Per-task rows: add is always solved, sort and parse half the time."""
    rows = run_metrics(multi_turn_run())["by_task"]
    assert list(rows) == ["add", "parse", "sort"]  # name order, whatever the file order
    add, sort, parse = rows["add"], rows["sort"], rows["parse"]
    assert (add["pass@1"], add["solve_rate"], add["repair_rate"], add["mean_reward"]) == (0.5, 1.0, 1.0, 1.0)
    assert add["cumulative_solve_rate"] == [0.5, 1.0, 1.0]
    assert (sort["pass@1"], sort["solve_rate"], sort["repair_rate"], sort["mean_reward"]) == (0.0, 0.5, 0.5, 0.75)
    assert sort["cumulative_solve_rate"] == [0.0, 0.0, 0.5]
    assert parse["cumulative_solve_rate"] == [0.0, 0.5, 0.5]
    assert parse["mean_reward"] == 0.625 and parse["difficulty"] == "hard"
    assert (add["tokens"]["generated"], add["tokens"]["processed"]) == (15.0, 105.0)


def test_difficulty_rows_average_their_tasks_and_pool_repairs() -> None:
    """easy = add + sort, hard = parse."""
    levels = run_metrics(multi_turn_run())["by_difficulty"]
    assert list(levels) == ["easy", "hard"]
    easy = levels["easy"]
    assert (easy["tasks"], easy["episodes"]) == (2, 4)
    assert easy["pass@1"] == 0.25 and easy["solve_rate"] == 0.75
    assert easy["repair_rate"] == approx(2 / 3)            # 1 of 1 (add) + 1 of 2 (sort)
    assert easy["mean_reward"] == 0.875
    assert levels["hard"]["solve_rate"] == 0.5


def test_reward_distribution_counts_final_and_first_rewards_in_bins_centred_on_tenths() -> None:
    """Final rewards 1,1,.5,1,.25,1 and first rewards 1,.5,0,.25,0,0 land in the bins centred
    on 0.0, 0.1, ..., 1.0 (a tie such as 0.25 goes up)."""
    dist = run_metrics(multi_turn_run())["reward_distribution"]
    assert dist["bin_edges"] == approx([(i - 0.5) / 10 for i in range(12)])
    assert dist["final_counts"] == [0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4]
    assert dist["first_turn_counts"] == [3, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1]
    assert dist["final"]["mean"] == approx(4.75 / 6)
    assert dist["final"]["median"] == 1.0 and dist["final"]["min"] == 0.25
    assert dist["first_turn"]["median"] == approx(0.125)


def test_a_reward_of_0_9_and_a_full_pass_never_share_a_bin() -> None:
    """0.9 (nine of ten checks) is counted apart from 1.0, despite 0.9 / 0.1 = 8.999..."""
    episodes = [multi_turn(f"t{i}", [("wrong_answer", 0.9)]) for i in range(3)]
    episodes.append(multi_turn("t3", [("pass", 1.0)]))
    counts = run_metrics(episodes)["reward_distribution"]["final_counts"]
    assert counts[9] == 3 and counts[10] == 1


def test_transition_matrix_counts_each_consecutive_pair_of_outcomes() -> None:
    """Eight turn pairs; wrong_answer goes to pass, wrong_answer and runtime_error once each."""
    transitions = run_metrics(multi_turn_run())["transitions"]
    assert transitions["states"] == list(OUTCOMES) and transitions["pairs"] == 8
    counts = {(OUTCOMES[i], OUTCOMES[j]): c for i, row in enumerate(transitions["counts"])
              for j, c in enumerate(row) if c}
    assert counts == {
        ("wrong_answer", "pass"): 1, ("wrong_answer", "wrong_answer"): 1,
        ("wrong_answer", "runtime_error"): 1, ("syntax_error", "wrong_answer"): 1,
        ("runtime_error", "pass"): 1, ("runtime_error", "runtime_error"): 1,
        ("runtime_error", "wrong_answer"): 1, ("timeout", "pass"): 1,
    }
    fractions = dict(zip(OUTCOMES, transitions["row_fractions"], strict=True))
    assert fractions["wrong_answer"] == approx([0, 0, 1 / 3, 0, 1 / 3, 1 / 3])
    assert fractions["pass"] is None and fractions["no_code"] is None


def test_by_turn_series_and_stop_reasons() -> None:
    """Episodes reaching each turn, the mean reward there, and how episodes ended."""
    metrics = run_metrics(multi_turn_run())
    assert metrics["episodes_reaching_turn"] == [6, 5, 3]
    assert metrics["mean_reward_by_turn"] == approx([1.75 / 6, 0.5, 1.75 / 3])
    assert metrics["outcomes_by_turn"][0]["runtime_error"] == 1
    assert metrics["outcomes_by_turn"][2]["pass"] == 1
    assert metrics["stop_reasons"] == {"max_turns": 2, "solved": 4}
    assert metrics["run"]["turns"] == 3 and metrics["run"]["mode"] == "multi_turn"
    assert metrics["run"]["samples_per_task"] == {"min": 2, "max": 2}
    assert metrics["run"]["settings"]["template_ids"] == [{"feedback": "feedback@aaaa",
                                                           "system": "system@1111"}]


def test_a_single_step_run_has_one_turn_no_repairs_and_no_transitions() -> None:
    """Single-step: solve@1 equals pass@1, the repair rate is undefined (no later turn)."""
    metrics = run_metrics(single_step_run())
    overall = metrics["overall"]
    assert overall["pass@1"] == overall["solve_rate"] == approx((0.5 + 0.25 + 0.25) / 3)
    assert overall["repaired"] == 0 and overall["failed_first"] == 0
    assert overall["repair_rate"] is None
    assert metrics["transitions"]["pairs"] == 0
    assert metrics["run"]["turns"] == 1
    assert overall["tokens"]["processed"] == 60.0


def test_unequal_samples_weigh_every_task_the_same() -> None:
    """Task A solved in 1 of 3 episodes, task B in 1 of 1: pass@1 is (1/3 + 1) / 2."""
    episodes = [single_step("a", False, sample=0), single_step("a", False, sample=1),
                single_step("a", True, sample=2), single_step("b", True, sample=0)]
    metrics = run_metrics(episodes)
    assert metrics["overall"]["pass@1"] == approx(2 / 3)
    assert metrics["run"]["samples_per_task"] == {"min": 1, "max": 3}


def test_episode_cost_prefers_the_servers_usage_and_marks_missing_counts_as_none() -> None:
    """Usage numbers win over the env's counts; a run without counts has None, not 0."""
    with_usage = Trajectory(task_name="t", turns=[
        turn(1, "wrong_answer", 0.5, cumulative=80, observation=20,
             usage={"prompt_tokens": 120, "completion_tokens": 7}),
        turn(2, "pass", 1.0, previous=0.5, cumulative=110, observation=20),
    ])
    cost = episode_cost(with_usage)
    assert (cost.calls, cost.generated, cost.prompt) == (2, 7 + 10, 120 + 80)
    assert cost.processed == 217 and cost.conversation == 110
    assert episode_cost(with_usage, upto=1).processed == 127
    bare = Trajectory(task_name="t", turns=[TurnRecord(
        turn=1, response_text="", code="", code_hash="", outcome="pass", passed=1, total=1,
        fraction=1.0, reward=1.0, delta=1.0)])
    assert episode_cost(bare).to_dict() == {"calls": 1, "generated": None, "prompt": None,
                                            "processed": None, "conversation": None}
    assert run_metrics([bare])["overall"]["tokens"]["processed"] is None


def test_difficulty_rows_run_from_easy_to_hard_with_unknown_last() -> None:
    """Usual difficulty labels are ordered by difficulty, not alphabetically."""
    episodes = [single_step(name, True, difficulty=level) for name, level in
                (("a", "hard"), ("b", None), ("c", "medium"), ("d", "easy"), ("e", "Zany"))]
    assert list(run_metrics(episodes)["by_difficulty"]) == ["easy", "medium", "hard", "Zany",
                                                            "unknown"]
