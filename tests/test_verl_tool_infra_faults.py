"""verl's submit tool: a call the sandbox could not grade is no turn and is flagged in
agent_data.extra_fields (INFRA_KEY), instead of verl's generic tool error after which the
episode is scored as if the model had failed."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from agentenv.errors import SandboxError
from agentenv.tasks.schema import Task

pytest.importorskip("verl")
from agentenv.integrations.verl import INFRA_KEY, RETURN_KEY, to_verl_records
from agentenv.integrations.verl_tool import SubmitTool

ADD = Task(name="add", prompt="Write add.", entry_point="add", checks=("assert add(2, 3) == 5",))
RIGHT = "def add(a, b):\n    return a + b\n"


def _lost(*args: Any, **kwargs: Any) -> Any:
    raise SandboxError("the sandbox worker died twice while running this submission")


def test_a_call_the_sandbox_could_not_grade_is_flagged_and_not_a_turn(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from agentenv.grading.scoring import SandboxGrader

    tool = SubmitTool({"type": "native", "max_turns": 2})
    kwargs = to_verl_records([ADD], multi_turn=True)[0]["extra_info"]["tools_kwargs"]["submit"]
    agent = SimpleNamespace(request_id="r1", extra_fields={})

    async def episode() -> tuple[Any, Any]:
        instance, _ = await tool.create(create_kwargs=kwargs["create_kwargs"])
        with monkeypatch.context() as patch:
            patch.setattr(SandboxGrader, "ascore", _lost)
            lost = await tool.execute(instance, {"code": RIGHT}, agent_data=agent)
        graded = await tool.execute(instance, {"code": RIGHT}, agent_data=agent)
        return lost, graded

    (response, reward, _), (_, graded_reward, _) = asyncio.run(episode())
    assert "not graded" in (response.text or "") and reward == 0.0
    assert agent.extra_fields[INFRA_KEY] is True
    assert graded_reward == 1.0 and agent.extra_fields["agentenv_turns"] == 1
    assert agent.extra_fields[RETURN_KEY] == 1.0
