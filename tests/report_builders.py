"""Small synthetic runs for the report tests: episodes built turn by turn, written as run dirs.

Token accounting of every built turn: the policy writes 10 tokens, a multi-turn env answers
with 20 tokens of feedback, and the first prompt is 50 tokens; ``cumulative_tokens`` counts the
conversation so far, so a call's prompt is ``cumulative - action - observation``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from agentenv.records import Trajectory, TurnRecord, code_hash

PROMPT_TOKENS = 50
ACTION_TOKENS = 10
FEEDBACK_TOKENS = 20

# (outcome, reward) per turn; rewards are fractions of 4 checks.
Step = tuple[str, float]


def turn(number: int, outcome: str, reward: float, *, previous: float = 0.0,
         cumulative: int = 0, observation: int = 0, visible: tuple[int, int] | None = None,
         usage: dict[str, int] | None = None) -> TurnRecord:
    code = f"def f():\n    return {number}  # {outcome}"
    return TurnRecord(
        turn=number, response_text=f"```python\n{code}\n```", code=code, code_hash=code_hash(code),
        outcome=outcome, passed=round(reward * 4), total=4, fraction=reward, reward=reward,  # type: ignore[arg-type]
        delta=reward - previous, action_tokens=ACTION_TOKENS, observation_tokens=observation,
        cumulative_tokens=cumulative, usage=usage,
        visible_passed=None if visible is None else visible[0],
        visible_total=None if visible is None else visible[1],
    )


def multi_turn(task: str, steps: Sequence[Step], *, sample: int = 0, max_turns: int = 3,
               difficulty: str | None = None, template: str = "feedback@aaaa",
               policy: str = "scripted") -> Trajectory:
    turns, previous, cumulative = [], 0.0, PROMPT_TOKENS
    for number, (outcome, reward) in enumerate(steps, start=1):
        cumulative += ACTION_TOKENS + FEEDBACK_TOKENS
        turns.append(turn(number, outcome, reward, previous=previous, cumulative=cumulative,
                          observation=FEEDBACK_TOKENS))
        previous = reward
    solved = steps[-1][0] == "pass"
    return Trajectory(task_name=task, seed=sample, max_turns=max_turns, turns=turns,
                      stop_reason="solved" if solved else "max_turns", difficulty=difficulty,
                      mode="multi_turn", episode_id=f"{task}-{sample}", sample=sample,
                      policy=policy, model=None,
                      template_ids={"system": "system@1111", "feedback": template})


def single_step(task: str, passed_hidden: bool, visible: tuple[int, int] | None = None, *,
                sample: int = 0, difficulty: str | None = None) -> Trajectory:
    outcome, reward = ("pass", 1.0) if passed_hidden else ("wrong_answer", 0.5)
    record = turn(1, outcome, reward, cumulative=PROMPT_TOKENS + ACTION_TOKENS, visible=visible)
    return Trajectory(task_name=task, seed=sample, max_turns=1, turns=[record],
                      stop_reason="single_step", difficulty=difficulty, mode="single_step",
                      episode_id=f"{task}-{sample}", sample=sample, policy="scripted",
                      template_ids={"system": "system@1111", "task": "task@2222"})


def write_run(directory: Path, trajectories: Sequence[Trajectory],
              summary: dict[str, Any] | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "trajectories.jsonl").open("w", encoding="utf-8") as handle:
        for trajectory in trajectories:
            handle.write(json.dumps(trajectory.to_dict()) + "\n")
    (directory / "summary.json").write_text(json.dumps(summary or {"episodes": len(trajectories)}))
    return directory


def multi_turn_run() -> list[Trajectory]:
    """Three tasks, two samples each, max_turns 3 (the numbers the tests expect are derived
    in test_report_metrics.py)."""
    return [
        multi_turn("add", [("pass", 1.0)], sample=0, difficulty="easy"),
        multi_turn("add", [("wrong_answer", 0.5), ("pass", 1.0)], sample=1, difficulty="easy"),
        multi_turn("sort", [("syntax_error", 0.0), ("wrong_answer", 0.5), ("wrong_answer", 0.5)],
                   sample=0, difficulty="easy"),
        multi_turn("sort", [("wrong_answer", 0.25), ("runtime_error", 0.0), ("pass", 1.0)],
                   sample=1, difficulty="easy"),
        multi_turn("parse", [("runtime_error", 0.0), ("runtime_error", 0.0), ("wrong_answer", 0.25)],
                   sample=0, difficulty="hard"),
        multi_turn("parse", [("timeout", 0.0), ("pass", 1.0)], sample=1, difficulty="hard"),
    ]


def single_step_run() -> list[Trajectory]:
    """The same three tasks, four samples each: (visible checks passed?, hidden passed?)."""
    plan: dict[str, list[tuple[tuple[int, int] | None, bool]]] = {
        "add": [((1, 2), False), ((2, 2), True), ((2, 2), False), ((0, 2), True)],
        "sort": [((3, 3), False), ((3, 3), True), ((1, 3), False), ((2, 3), False)],
        "parse": [(None, False), (None, False), (None, True), (None, False)],
    }
    difficulty = {"add": "easy", "sort": "easy", "parse": "hard"}
    return [single_step(task, hidden, visible, sample=i, difficulty=difficulty[task])
            for task, samples in plan.items() for i, (visible, hidden) in enumerate(samples)]


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.raw = False  # inside <style> or <script>

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.raw = tag in ("style", "script")

    def handle_endtag(self, tag: str) -> None:
        self.raw = False

    def handle_data(self, data: str) -> None:
        if not self.raw:
            self.parts.append(data)


def shown_text(page: str) -> str:
    """The text of an HTML page as a reader sees it: tags dropped, character references decoded
    (attribute values and the page's style and script are left out)."""
    parser = _Text()
    parser.feed(page)
    parser.close()
    return "".join(parser.parts)
