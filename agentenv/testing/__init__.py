"""Test helpers for agentenv users and for agentenv's own tests and benchmarks.

- :class:`ChatServer`: an OpenAI-compatible chat-completions server on 127.0.0.1 with fixed
  latency, scripted replies (or a scripted stand-in model) and a record of every request.
  ``python -m agentenv.testing --port 8000`` runs one in the foreground.
"""

from __future__ import annotations

from agentenv.testing.chat_server import (
    ChatReply,
    ChatServer,
    RecordedRequest,
    Responder,
    ScriptedModel,
    count_tokens,
)

__all__ = ["ChatReply", "ChatServer", "RecordedRequest", "Responder", "ScriptedModel", "count_tokens"]
