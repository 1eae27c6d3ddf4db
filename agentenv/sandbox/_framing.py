"""Length-prefixed framing: one implementation for every byte stream between sandbox processes.

A frame is a 4-byte big-endian length and that many bytes. It carries:

- the trusted parent's messages to a worker (:mod:`agentenv.sandbox._pool` ->
  :mod:`_worker`): a JSON header frame, then one JSON payload frame per job (the candidate's,
  and the judge process's when there is one), handed on to the child as they are;
- a worker's **replies** to the parent (:func:`write_reply` / :func:`read_reply`): one frame
  holding a small msgpack map, whose :data:`BLOBS` key names the raw byte strings that follow,
  one frame each (a run's result channel, stdout, stderr, the judge's result channel). Big
  results cross as they are: no base64, no JSON escaping;
- the channel between a judge process and the candidate process (:mod:`_rpc`): one small
  msgpack map per frame.

The other stream of the sandbox, the result channel a candidate or judge process writes, is
framed differently, by nonce-prefixed lines (:func:`_wire.encode_frame`): the candidate shares
that pipe, so a frame there must be recognisable among whatever else the candidate writes.

Standard library only and self-contained: inside the sandbox this module is loaded by path
(``python -I -S``), beside the worker and the runner; the trusted side imports it as
``agentenv.sandbox._framing``. Message bodies are packed and unpacked by the caller
(:func:`_wire.pack_message` / :func:`_wire.unpack_message`, or JSON), passed in as functions,
so this module imports nothing of its own package.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# The builtins this module's functions use: a copy taken when it is imported, before any
# candidate code runs in this process. A function binds its builtins from here when it is
# defined, so a candidate that patches ``builtins.len``, ``type`` or ``isinstance`` changes
# nothing this module does (the candidate's own namespace keeps the real ``builtins``).
globals()["__builtins__"] = dict(vars(__import__("builtins")))

__all__ = [
    "BLOBS",
    "HEADER",
    "FrameTooLarge",
    "frame",
    "read_exact",
    "read_frame",
    "read_reply",
    "reply_bodies",
    "write_all",
    "write_frames",
    "write_reply",
]

HEADER = struct.Struct(">I")
BLOBS = "blobs"  # a reply's header key: the names of the raw frames that follow, in order
_CHUNK = 1 << 20  # bytes asked of one read
_COALESCE = 1 << 16  # frames smaller than this together go out in one write

# Bound at import, before any candidate code runs in a process that loaded this module (the
# candidate's process serves the judge over _rpc): patching ``os`` later changes nothing here.
_os_read = os.read
_os_write = os.write

ReadExact = Callable[[int, int], "bytes | None"]


class FrameTooLarge(ValueError):
    """A frame declared more bytes than the reader accepts."""


def frame(body: bytes) -> bytes:
    """``body`` with its length prefix."""
    return HEADER.pack(len(body)) + body


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write all of ``data`` to ``fd`` (a pipe or socket takes it in pieces); OSError as raised."""
    view = memoryview(data)
    while view:
        view = view[_os_write(fd, view):]


def write_frames(fd: int, bodies: Iterable[bytes]) -> None:
    """Write each body as one frame. Small frames go out together in one write; a big body is
    written as it is, never copied into a bigger buffer."""
    pending: list[bytes] = []
    for body in bodies:
        pending.append(HEADER.pack(len(body)))
        if len(body) >= _COALESCE:
            write_all(fd, b"".join(pending))
            write_all(fd, body)
            pending = []
        else:
            pending.append(body)
    if pending:
        write_all(fd, b"".join(pending))


def read_exact(fd: int, n: int) -> bytes | None:
    """Exactly ``n`` bytes from ``fd``; None when the stream ends first (OSError as raised)."""
    parts: list[bytes] = []
    got = 0
    while got < n:
        try:
            chunk = _os_read(fd, min(n - got, _CHUNK))
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_frame(fd: int, limit: int | None = None, read: ReadExact = read_exact) -> bytes | None:
    """One frame's body from ``fd``; None when the stream ends first.

    ``limit`` bounds the declared length (:class:`FrameTooLarge` beyond it); ``read`` is how
    bytes are read (:func:`read_exact`, or a caller's version that waits with a deadline).
    """
    header = read(fd, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    if limit is not None and size > limit:
        raise FrameTooLarge(f"a message of {size} bytes is over the {limit}-byte limit")
    return read(fd, size)


def reply_bodies(header: Mapping[str, Any], blobs: Mapping[str, bytes],
                 pack: Callable[[dict[str, Any]], bytes]) -> list[bytes]:
    """The frames of one reply: ``header`` packed, naming ``blobs``, then each blob raw."""
    return [pack({**header, BLOBS: list(blobs)}), *blobs.values()]


def write_reply(fd: int, header: Mapping[str, Any], blobs: Mapping[str, bytes],
                pack: Callable[[dict[str, Any]], bytes]) -> None:
    """Write one reply: a packed header, then the raw frames it names (see the docstring)."""
    write_frames(fd, reply_bodies(header, blobs, pack))


def read_reply(fd: int, unpack: Callable[[bytes], dict[str, Any]],
               read: ReadExact = read_exact) -> dict[str, Any] | None:
    """One reply as a dict: the header's items, and each named blob as ``bytes`` under its name.

    None when the stream ends first; ValueError when the header is malformed (``unpack``'s
    own, or names that are not a list of strings).
    """
    body = read_frame(fd, None, read)
    if body is None:
        return None
    message = unpack(body)
    names = message.pop(BLOBS, [])
    if type(names) is not list or not all(type(name) is str for name in names):
        raise ValueError("a reply's blob names are not a list of strings")
    for name in names:
        blob = read_frame(fd, None, read)
        if blob is None:
            return None
        message[name] = blob
    return message
