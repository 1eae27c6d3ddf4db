"""A row the sandbox could not grade is an infrastructure fault, not the model's failure:
``code_reward``/``acode_reward`` return ``None`` for it (TRL masks it), log it as
``infra_error``, and the other rows keep their rewards; an error that may be the
completion's doing still scores 0."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import agentenv.grading
import agentenv.grading.run
from agentenv.errors import IsolationUnavailable, SandboxError
from agentenv.integrations.trl import acode_reward, code_reward, to_records
from agentenv.integrations.verl import DATA_SOURCE, compute_score_batch, to_verl_records
from agentenv.tasks.schema import Task

ADD = Task(
    name="add", prompt="Write `add(a, b)` returning the sum.", entry_point="add",
    checks=("assert add(2, 3) == 5", "assert add(-1, 1) == 0"),
)
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
# Same program, other text: a distinct submission, so it runs on its own.
LOST = "```python\ndef add(a, b):\n    return a + b  # lost\n```"
UNREACHABLE = "```python\ndef add(a, b):\n    return a + b  # no bwrap\n```"
BUGGY = "```python\ndef add(a, b):\n    return a + b  # grader bug\n```"


def _columns(n: int, **extra: Any) -> dict[str, Any]:
    row = to_records([ADD])[0]
    return {**{k: [row[k]] * n for k in row if k != "prompt"}, **extra}


@pytest.fixture()
def faulty_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """run_tests as the pool raises when a worker dies twice / bwrap vanishes / a bug hits."""
    real = agentenv.grading.run_tests

    def run_tests(code: str, *args: Any, **kwargs: Any) -> Any:
        if "# lost" in code:
            raise SandboxError("the sandbox worker died twice while running this submission")
        if "# no bwrap" in code:
            raise IsolationUnavailable("bubblewrap (bwrap) is not installed")
        if "# grader bug" in code:
            raise RuntimeError("a judge bug this input triggers")
        return real(code, *args, **kwargs)

    monkeypatch.setattr(agentenv.grading, "run_tests", run_tests)
    monkeypatch.setattr(agentenv.grading.run, "run_tests", run_tests)  # what arun_tests calls


COMPLETIONS = [RIGHT, LOST, UNREACHABLE, BUGGY]
EXPECTED = [1.0, None, None, 0.0]
OUTCOMES = ["pass", "infra_error", "infra_error", "wrong_answer"]


@pytest.mark.usefixtures("faulty_sandbox")
def test_code_reward_returns_none_for_rows_the_sandbox_could_not_grade() -> None:
    logged: dict[str, Any] = {}
    rewards = code_reward(completions=COMPLETIONS,
                          **_columns(4, log_extra=logged.__setitem__))
    assert rewards == EXPECTED
    assert logged["code_reward/outcome"][:3] == OUTCOMES[:3]


@pytest.mark.usefixtures("faulty_sandbox")
def test_acode_reward_returns_none_for_rows_the_sandbox_could_not_grade() -> None:
    logged: dict[str, Any] = {}
    rewards = asyncio.run(acode_reward(completions=COMPLETIONS,
                                       **_columns(4, log_extra=logged.__setitem__)))
    assert rewards == EXPECTED
    assert logged["acode_reward/outcome"][:3] == OUTCOMES[:3]


@pytest.mark.usefixtures("faulty_sandbox")
def test_infra_error_rate_is_logged_as_a_metric() -> None:
    metrics: dict[str, float] = {}
    code_reward(completions=COMPLETIONS, **_columns(4, log_metric=metrics.__setitem__))
    assert metrics["code_reward/infra_error"] == 0.5


@pytest.mark.usefixtures("faulty_sandbox")
def test_verl_scores_an_infra_row_0_and_keeps_the_other_rows() -> None:
    row = to_verl_records([ADD])[0]
    out = compute_score_batch([DATA_SOURCE] * 2, [RIGHT, LOST],
                              [row["reward_model"]["ground_truth"]] * 2, [row["extra_info"]] * 2)
    assert [o["score"] for o in out] == [1.0, 0.0]
