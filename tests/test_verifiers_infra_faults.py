"""verifiers: a reply agentenv's sandbox could not grade is verifiers' own SandboxError (a
RolloutError, recorded on the trace with its rewards unscored), never a reward of 0."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentenv.errors import SandboxError

vf = pytest.importorskip("verifiers.v1")
from agentenv.integrations.verifiers import CodingTask, CodingTasksetConfig  # noqa: E402

RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"


def _lost(*args: Any, **kwargs: Any) -> Any:
    raise SandboxError("the sandbox worker died twice while running this submission")


def test_a_reply_the_sandbox_could_not_grade_is_a_rollout_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from verifiers.v1.errors import RolloutError
    from verifiers.v1.trace import AgentInfo, Trace, TraceTask
    from verifiers.v1.utils.loaders import load_taskset

    from agentenv.grading.scoring import SandboxGrader

    task = next(iter(load_taskset(CodingTasksetConfig(id="agentenv_coding")).include(names=["add"])))
    assert isinstance(task, CodingTask)
    trace = Trace(task=TraceTask(type=type(task).__name__, data=task.data),
                  agent=AgentInfo(config=vf.AgentConfig()), root_reply=RIGHT)
    monkeypatch.setattr(SandboxGrader, "ascore", _lost)
    with pytest.raises(RolloutError, match="could not grade"):
        asyncio.run(task.tests_passed(trace))
