"""The stand-in server's model can read the feedback: with ``reads_feedback=True`` it answers
as the reader policy does, so a template change has an effect over HTTP too."""

from __future__ import annotations

from agentenv import MultiTurnCodingEnv
from agentenv.policies import ReaderPolicy
from agentenv.tasks.builtin import builtin_tasks
from agentenv.testing.chat_server import ScriptedModel

TASKS = builtin_tasks()


def second_turn_bodies(listing: bool) -> list[dict]:
    """For every task, the request of turn 2 after a wrong first answer, with the environment's
    feedback (failures listed) or a terse one that lists none."""
    bodies = []
    for index, task in enumerate(TASKS):
        env = MultiTurnCodingEnv(tasks=TASKS, max_turns=3, seed=0)
        env.reset(task_index=index)
        obs, _, _, _ = env.step(f"def {task.entry_point}(*args, **kwargs):\n    return None\n")
        messages = [dict(m) for m in obs["messages"]]
        if not listing:
            messages[-1]["content"] = "That was not right. Try again."
        bodies.append({"model": "m", "messages": messages})
    return bodies


def fixed(model: ScriptedModel, bodies: list[dict]) -> int:
    replies = [model(body).content for body in bodies]
    return sum(task.reference_solution.strip() in reply for task, reply in zip(TASKS, replies, strict=True))


def test_the_reading_model_repairs_more_when_the_feedback_lists_failures() -> None:
    model = ScriptedModel(TASKS, reads_feedback=True)
    assert fixed(model, second_turn_bodies(True)) > fixed(model, second_turn_bodies(False)) + 5


def test_it_answers_as_the_reader_policy() -> None:
    model, policy = ScriptedModel(TASKS, reads_feedback=True), ReaderPolicy(TASKS)
    for task, body in list(zip(TASKS, second_turn_bodies(True), strict=True))[:6]:
        obs = {"task_name": task.name, "messages": body["messages"], "seed": None}
        assert model(body).content == policy(obs)


def test_the_default_model_still_ignores_the_feedback() -> None:
    model = ScriptedModel(TASKS)
    shown, terse = second_turn_bodies(True), second_turn_bodies(False)
    assert [model(b).content for b in shown] == [model(b).content for b in terse]
