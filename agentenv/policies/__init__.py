"""Policies: observation dict in, raw text out. The environment never changes when they do.

- :class:`Policy` / :class:`AsyncPolicy`: the protocols; :func:`acall_policy` calls any policy
  from async code.
- :func:`mock_policy`: the walk-through's mock (solves ``add`` only).
- :class:`ScriptedPolicy`: replays each task's buggy attempts, then the reference (offline
  revision); :class:`ReferencePolicy`: the reference solution; :class:`ReaderPolicy`: revises
  by reading the feedback (repairs likelier the more failures it shows), so prompt-template
  experiments show an effect offline.
- :class:`OpenAIPolicy` and :func:`openai_policy`: any OpenAI-compatible chat server.
- :func:`make_policy`: build one by name (what the CLI uses).
"""

from __future__ import annotations

from agentenv.policies.base import (
    AsyncPolicy,
    Observation,
    Policy,
    acall_policy,
    policy_model,
    policy_name,
)
from agentenv.policies.mock import mock_policy
from agentenv.policies.openai_chat import (
    DEFAULT_SYSTEM_PROMPT,
    OpenAIPolicy,
    build_messages,
    openai_policy,
)
from agentenv.policies.reader import ReaderPolicy
from agentenv.policies.registry import POLICY_NAMES, make_policy
from agentenv.policies.scripted import (
    ReferencePolicy,
    ScriptedPolicy,
    fence,
    scripted_answer,
    turn_of,
)

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "POLICY_NAMES",
    "AsyncPolicy",
    "Observation",
    "OpenAIPolicy",
    "Policy",
    "ReaderPolicy",
    "ReferencePolicy",
    "ScriptedPolicy",
    "acall_policy",
    "build_messages",
    "fence",
    "make_policy",
    "mock_policy",
    "openai_policy",
    "policy_model",
    "policy_name",
    "scripted_answer",
    "turn_of",
]
