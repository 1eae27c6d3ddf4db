"""Episode records: outcome classification, turn records and JSON round-trips."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agentenv.grading.result import Failure, RunResult
from agentenv.records import Completion, Trajectory, TurnRecord, classify_outcome

CODE = "def f():\n    return 1\n"


def res(passed: int, total: int, kinds: list[str], timed_out: bool = False) -> RunResult:
    failures = tuple(Failure(passed + i, f"c{passed + i}", k, "m") for i, k in enumerate(kinds))  # type: ignore[arg-type]
    return RunResult.from_counts(passed, total, timed_out=timed_out, failures=failures)


def test_outcomes_are_classified_most_severe_first() -> None:
    """no_code, syntax_error, timeout, runtime_error, wrong_answer and pass each have their case."""
    assert classify_outcome("", res(0, 2, ["no_result", "no_result"])) == "no_code"
    assert classify_outcome(CODE, res(0, 2, ["syntax", "syntax"])) == "syntax_error"
    assert classify_outcome(CODE, res(0, 2, ["timeout", "timeout"], timed_out=True)) == "timeout"
    assert classify_outcome(CODE, res(0, 2, ["exception", "exception"])) == "runtime_error"
    assert classify_outcome(CODE, res(1, 2, ["assertion"])) == "wrong_answer"
    assert classify_outcome(CODE, res(0, 2, ["assertion", "exception"])) == "wrong_answer"
    assert classify_outcome(CODE, res(2, 2, [])) == "pass"


def test_turn_record_tracks_deltas_and_newly_passed_checks() -> None:
    """delta is reward minus the previous turn's; newly_* compare passed check indices."""
    first = TurnRecord.from_result(turn=1, response_text="a", code=CODE,
                                   result=res(1, 3, ["assertion", "assertion"]), reward=1 / 3)
    assert first.delta == 1 / 3 and first.newly_passed == (0,) and first.newly_failed == ()
    second_result = RunResult.from_counts(2, 3, timed_out=False, failures=(
        Failure(0, "c0", "assertion", "m"),))
    second = TurnRecord.from_result(turn=2, response_text="b", code=CODE, result=second_result,
                                    reward=2 / 3, previous=first)
    assert second.newly_passed == (1, 2) and second.newly_failed == (0,)
    assert abs(second.delta - 1 / 3) < 1e-12


def test_completion_is_a_string_that_carries_usage() -> None:
    """Completion behaves as str and keeps usage and finish_reason."""
    c = Completion("hello", usage={"prompt_tokens": 3, "completion_tokens": 1}, finish_reason="stop")
    assert c == "hello" and isinstance(c, str)
    assert c.usage == {"prompt_tokens": 3, "completion_tokens": 1} and c.finish_reason == "stop"


turns = st.builds(
    lambda t, p, total, reward, kinds: TurnRecord.from_result(
        turn=t, response_text="```python\nx\n```", code=CODE,
        result=res(p, total, kinds[: total - p] + ["assertion"] * max(0, total - p - len(kinds))),
        reward=reward, usage={"prompt_tokens": 5, "completion_tokens": 2}, finish_reason="stop"),
    st.integers(1, 10), st.integers(0, 3), st.integers(3, 6), st.floats(0, 1),
    st.lists(st.sampled_from(["assertion", "exception", "timeout", "syntax", "no_result"]), max_size=6),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(turns, max_size=4), st.sampled_from([None, "solved", "max_turns", "token_budget"]),
       st.none() | st.integers(0, 10_000))
def test_trajectory_round_trips_through_json(records: list[TurnRecord], stop: str | None,
                                             seed: int | None) -> None:
    """to_dict -> JSON -> from_dict gives back an equal trajectory."""
    traj = Trajectory(task_name="t", seed=seed, max_turns=4, token_budget=100, turns=records,
                      stop_reason=stop, template_ids={"system": "system.j2@abc"}, episode_id="e1")
    again = Trajectory.from_dict(json.loads(json.dumps(traj.to_dict())))
    assert again == traj
    assert again.to_dict() == traj.to_dict()
