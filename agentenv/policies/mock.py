"""The walk-through's mock policy: it knows how to solve ``add`` and nothing else.

It exists so the environment's mechanics can be shown without a model: on ``add`` it answers
with a fenced, correct solution; on any other task it answers with a stub that raises, so
every check fails and the episode scores 0.0.
"""

from __future__ import annotations

from agentenv.policies.base import Observation

__all__ = ["mock_policy"]

_ADD_SOLUTION = "```python\ndef add(a, b):\n    return a + b\n```"


def mock_policy(obs: Observation) -> str:
    """The 'policy': observation -> raw text. Solves ``add``; fails every other task."""
    entry_point = str(obs.get("entry_point") or "solution")
    if entry_point == "add":
        return _ADD_SOLUTION
    return (
        "I only know how to add two numbers, so here is a placeholder:\n\n"
        f"```python\ndef {entry_point}(*args, **kwargs):\n"
        "    raise NotImplementedError('mock_policy only solves add')\n```"
    )


# Cheap and deterministic: the rollout runner may call it on the event loop itself.
mock_policy.blocking = False  # type: ignore[attr-defined]
