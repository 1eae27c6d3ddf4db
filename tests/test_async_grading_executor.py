"""Async grading runs on agentenv's own bounded threads: a batch of looping completions never
occupies the event loop's default executor, which the trainer's other ``to_thread`` calls use."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from agentenv.grading import arun_tests
from agentenv.integrations.trl import acode_reward

CHECKS = ["assert add(2, 3) == 5"]
RIGHT = "def add(a, b):\n    return a + b\n"


class _Recording(ThreadPoolExecutor):
    """A default executor that counts what is submitted to it."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.submitted = 0

    def submit(self, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return super().submit(*args, **kwargs)


def _on_loop(coro_fn: Any) -> tuple[Any, int]:
    async def main() -> tuple[Any, int]:
        recording = _Recording()
        asyncio.get_running_loop().set_default_executor(recording)
        out = await coro_fn()
        return out, recording.submitted

    return asyncio.run(main())


def test_arun_tests_leaves_the_default_executor_alone() -> None:
    result, submitted = _on_loop(lambda: arun_tests(RIGHT, CHECKS, timeout=5))
    assert result.all_passed
    assert submitted == 0


def test_acode_reward_leaves_the_default_executor_alone() -> None:
    columns = {"checks": [json.dumps(CHECKS)] * 2, "entry_point": ["add"] * 2}
    completions = [RIGHT, "def add(a, b):\n    return a - b\n"]
    rewards, submitted = _on_loop(lambda: acode_reward(completions=completions, **columns))
    assert rewards == [1.0, 0.0]
    assert submitted == 0

