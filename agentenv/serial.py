"""How agentenv's records become JSON and come back: one library, msgspec, for every dataclass.

:func:`to_data` turns a record (a dataclass, with the dataclasses, tuples and enums inside it)
into plain JSON-shaped data; :func:`from_data` builds the record back from such data, typed and
checked against the dataclass's annotations (fields missing from older files take their
defaults; keys the class does not have are ignored); :func:`encode` and :func:`decode` do the
same to and from one line of JSON, without a ``dict`` in between where no field is derived.

Why msgspec: it reads and writes standard-library dataclasses as they are (no base class, no
schema to keep beside them), checks types on the way in, and is the fastest of the libraries
weighed on a 10,000-episode ``trajectories.jsonl`` (``benchmarks/records_io.py``: reading about
4x and writing about 3x the hand-written ``to_dict``/``from_dict`` with ``json``; cattrs was
about as slow as those, pydantic v2 in between).
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from agentenv.untrusted import json_line

__all__ = ["decode", "encode", "from_data", "to_data"]

T = TypeVar("T")

_ENCODER = msgspec.json.Encoder()
_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}


def to_data(record: Any) -> Any:
    """``record`` as plain data: dicts, lists, strings, numbers, booleans and None."""
    return msgspec.to_builtins(record)


def from_data(data: Any, kind: type[T]) -> T:
    """A ``kind`` built from plain data; a ``ValueError`` naming the field when it does not fit."""
    return msgspec.convert(data, kind, strict=False)


def encode(record: Any) -> bytes:
    """``record`` (or plain data) as one line of UTF-8 JSON, newline not included. A string that
    UTF-8 cannot hold (a lone surrogate, as candidate text may have) is written escaped."""
    try:
        return _ENCODER.encode(record)
    except UnicodeEncodeError:
        return json_line(to_data(record)).encode("utf-8")


def decode(line: bytes | str, kind: type[T]) -> T:
    """A ``kind`` read from one line of JSON (see :func:`from_data`)."""
    decoder = _DECODERS.get(kind)
    if decoder is None:
        decoder = _DECODERS[kind] = msgspec.json.Decoder(kind, strict=False)
    try:
        value: T = decoder.decode(line)
        return value
    except msgspec.DecodeError:
        # msgspec refuses an escaped lone surrogate (what encode writes for candidate text
        # UTF-8 cannot hold); Python's json reads it back as it was.
        import json

        try:
            data = json.loads(line)
        except ValueError:
            raise msgspec.DecodeError("not a JSON line") from None
        built: T = from_data(data, kind)
        return built
