"""Helpers for your tests (and agentenv's own tests and benchmarks); not part of the library.

The library never imports this package: ``import agentenv`` leaves it (and aiohttp's server)
unloaded, so importing it is a choice a test makes.

- :class:`ChatServer`: an OpenAI-compatible chat-completions server on 127.0.0.1 (aiohttp)
  with fixed latency, scripted replies or errors (or a scripted stand-in model), streaming,
  and a record of every request. ``python -m agentenv.testing --port 8000`` runs one in the
  foreground.
"""

from __future__ import annotations

from agentenv.testing.chat_server import (
    KNOWN_FIELDS,
    ChatReply,
    ChatServer,
    RecordedRequest,
    Responder,
    ScriptedModel,
    count_tokens,
)

__all__ = ["KNOWN_FIELDS", "ChatReply", "ChatServer", "RecordedRequest", "Responder", "ScriptedModel", "count_tokens"]
