"""The channel between a judge process and the candidate process it questions.

Imported on both sides of that channel, inside the sandbox (loaded by path, standard library
only). The judge ``J`` (:mod:`_judge`) runs a task's check program; every name the candidate
defines is a proxy there, and each use of a proxy becomes one request to the candidate process
``G`` (:func:`_runner.serve_judge`), which answers with plain data. The channel is one
``AF_UNIX`` stream socket pair, created by the worker and handed to the two processes only;
it carries small msgpack maps (:func:`_wire.pack_message`), one per length-prefixed frame
(:mod:`_framing`), values inside them as :func:`_wire.encode_value`'s bytes:

- ``J -> G`` requests: ``{"op": "name", "n": name}`` (look a global up; the run's first one
  also carries ``"cpu"``, the CPU ``J`` has pinned itself to, where ``G`` then serves from),
  ``{"op": "call", "f": REF, "a": [ARG...], "k": [[name, ARG]...]}``, ``{"op": "get", "f":
  REF, "n": attr}``, ``{"op": "set", "f": REF, "n": attr, "v": ARG}``, ``{"op": "del", "f":
  REF, "n": attr}``, ``{"op": "do", "w": operation, "a": [ARG...]}`` (a protocol operation of
  Python's data model: ``eq``, ``len``, ``iter``, ``add``, ``iadd``, ``enter``...),
  ``{"op": "take", "f": REF, "n": count}`` (up to ``count`` items of an iterator; the reply
  says ``"end": true`` when it is exhausted), ``{"op": "type", "f": REF}`` (a class's
  description, to build its mirror: see :mod:`_judge`) and ``{"op": "base", "f": REF}`` (the
  object's value as its builtin base class holds it, or ``["n"]``);
- ``G -> J`` replies: ``{"r": RESULT, "m": [[position, VALUE]...]}`` (``m``: arguments the call
  mutated, copied back) or ``{"x": exception type name, "msg": text, "e": [id, class id],
  "args": VALUE, "cause": another such reply}``; ``RESULT`` may also be ``["b", text]``: plain
  data over one of the wire's budgets;
- ``G -> J`` callback requests, sent while ``G`` is answering: ``{"op": "cb", "c": id, "a":
  [VALUE...], "k": [[name, VALUE]...]}``, answered by ``J`` with a reply as above.

``{"op": "defines", "n": [name...]}`` asks which names are the candidate's globals (and whether
its code reads each), ``{"op": "setname"|"delname", "n": name, "v": ARG}`` binds or deletes one
(a handle only: see :class:`_judge._Namespace`). Any message may carry ``"sync": [[id, ARG or
RESULT]...]`` (new content of a check's object the candidate keeps a copy of ``id``; see
:mod:`_judge`) and ``"unsync": [id...]``; replies and callbacks may carry ``"o"``/``"e"`` (what
the candidate printed to stdout/stderr meanwhile), a call's reply ``"kept": [[path, id]...]``
(arguments it kept copies of) and a result ``["r", path]`` (the argument at ``path`` itself),
a ``take`` reply ``"rv"`` (the generator's return value).
``REF`` is ``["n", name]`` (a global of the candidate's namespace), ``["h", id]`` (an object
``G`` returned earlier and keeps: one id per object for the run) or ``["a", id, name]`` (that
object's method ``name``); ``ARG`` is ``["v", VALUE]``, ``["h", id]``, ``["c", id]`` (a callable
of the judge's, called back through ``cb``), ``["bt", name]`` (a builtin class), ``["sl"|"rg",
[ARG, ARG, ARG]]`` (a slice or range) or a builtin container of ARGs (``["l"|"t"|"s"|"fs",
[ARG...]]``, ``["d", [[ARG, ARG]...]]``); ``RESULT`` is ``["v", VALUE]``, ``["h", id, class id,
type name, "c" for a class or "o"]``, ``["a", id, name, class id]`` (a method of a held object,
not kept) or a builtin container of RESULTs, tagged as ARGs are; ``VALUE`` is
:func:`_wire.encode_value`'s plain-data encoding. The channel
never carries a verdict: those go from ``J`` to the worker on ``J``'s own result pipe.
"""

from __future__ import annotations

import os
import sys
from typing import Any

# The builtins this module's functions use: a copy taken when it is imported, before any
# candidate code runs in this process. A function binds its builtins from here when it is
# defined, so a candidate that patches ``builtins.len``, ``type`` or ``isinstance`` changes
# nothing this module does (the candidate's own namespace keeps the real ``builtins``).
globals()["__builtins__"] = dict(vars(__import__("builtins")))

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)

import _framing  # noqa: E402  (loaded by path inside the sandbox)
import _wire  # noqa: E402

__all__ = ["MAX_FRAME", "ChannelClosed", "ProtocolError", "recv", "send"]

MAX_FRAME = 16 * 1024 * 1024  # bytes of one message; more is a protocol error
MAX_ENTRIES = 4096  # items of any list or map in a message (values travel as bytes)

_pack = _wire.pack_message
_unpack = _wire.unpack_message
_frame = _framing.frame
_write_all = _framing.write_all
_read_frame = _framing.read_frame
_FrameTooLarge = _framing.FrameTooLarge


class ChannelClosed(Exception):
    """The other side closed the channel (or died)."""


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message."""


def send(fd: int, message: dict[str, Any]) -> None:
    """Write one message; raise ChannelClosed when the other side is gone."""
    try:
        body = _pack(message)
    except _wire.NotPlainData as exc:
        raise ProtocolError(f"a message that cannot be sent ({exc})") from None
    if len(body) > MAX_FRAME:
        raise ProtocolError(f"a message of {len(body)} bytes is over the {MAX_FRAME}-byte limit")
    try:
        _write_all(fd, _frame(body))
    except OSError:
        raise ChannelClosed("the other side closed the channel") from None


def recv(fd: int) -> dict[str, Any]:
    """Read one message: a map of at most MAX_FRAME bytes, else ProtocolError."""
    try:
        body = _read_frame(fd, MAX_FRAME)
    except _FrameTooLarge as exc:
        raise ProtocolError(str(exc)) from None
    except OSError:
        body = None
    if body is None:
        raise ChannelClosed("the other side closed the channel")
    try:
        return _unpack(body, MAX_ENTRIES)
    except (ValueError, RecursionError, MemoryError):
        raise ProtocolError("a message is not a well-formed map") from None
