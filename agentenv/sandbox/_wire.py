"""The wire format between the sandboxed child and the trusted parent: frames and plain values.

This module is imported on both sides of the boundary. Inside the sandbox it is loaded by path
(``python -I -S``, no site-packages), so it uses the standard library only and no
package-relative imports.

**Frames.** The child writes one frame per line on its result channel (a pipe of its own, never
stdout): ``<nonce> <json>\\n``. The parent ignores every line that does not start with the run's
nonce and stops reading at the first malformed one.

**Values.** A value crosses the boundary only as *plain data*: ``None``, ``bool``, ``int``,
``float``, ``str``, ``bytes`` and ``list`` / ``tuple`` / ``dict`` / ``set`` / ``frozenset`` of
those, with exact types (subclasses are refused). They are encoded as tagged JSON arrays::

    None -> ["n"]          True/False -> ["T"] / ["F"]     int -> ["i", "<hex>"]
    float -> ["f", "<float.hex()>"]  str -> ["s", "..."]   bytes -> ["b", "<hex>"]
    list/tuple/set/frozenset -> ["l"|"t"|"S"|"F", [items]]  dict -> ["d", [[k, v], ...]]

so the parent rebuilds them with ``json.loads`` plus a walk that only constructs builtin
containers: nothing is executed, nothing is looked up by name, nothing is unpickled.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "MAX_ITEMS",
    "NotPlainData",
    "decode_value",
    "encode_frame",
    "encode_value",
    "parse_frames",
]

MAX_DEPTH = 64  # nesting depth of containers
MAX_ITEMS = 1_000_000  # total number of scalars and containers in one value

_dumps = json.JSONEncoder(ensure_ascii=True, check_circular=False, allow_nan=False,
                          separators=(",", ":")).encode
_loads = json.loads


class NotPlainData(Exception):
    """A value is not plain data (its exact type is not one the boundary accepts)."""


def _type_label(value: Any) -> str:
    try:
        return str(type.__dict__["__qualname__"].__get__(type(value)))
    except Exception:  # pragma: no cover - a class whose name cannot be read
        return "object"


def encode_value(value: Any) -> list[Any]:
    """Encode plain data as a tagged JSON structure; raise NotPlainData for anything else.

    Types are checked with ``type(x) is T`` so that no subclass (and no user ``__eq__``,
    ``__iter__`` or ``__reduce__``) is ever invoked: iteration over exact builtin containers runs
    no user code.
    """
    budget = [MAX_ITEMS]

    def enc(v: Any, depth: int) -> list[Any]:
        budget[0] -= 1
        if budget[0] < 0:
            raise NotPlainData(f"value has more than {MAX_ITEMS} parts")
        if depth > MAX_DEPTH:
            raise NotPlainData(f"value is nested deeper than {MAX_DEPTH} levels")
        t = type(v)
        if v is None:
            return ["n"]
        if v is True:
            return ["T"]
        if v is False:
            return ["F"]
        if t is int:
            return ["i", int.__format__(v, "x")]
        if t is float:
            return ["f", float.hex(v)]
        if t is str:
            return ["s", v]
        if t is bytes:
            return ["b", bytes.hex(v)]
        if t is list:
            return ["l", [enc(x, depth + 1) for x in list.copy(v)]]
        if t is tuple:
            return ["t", [enc(x, depth + 1) for x in v]]
        if t is set:
            return ["S", [enc(x, depth + 1) for x in set.copy(v)]]
        if t is frozenset:
            return ["F", [enc(x, depth + 1) for x in v]]
        if t is dict:
            return ["d", [[enc(k, depth + 1), enc(x, depth + 1)] for k, x in dict.items(v)]]
        raise NotPlainData(_type_label(v))

    return enc(value, 0)


def decode_value(data: Any) -> Any:
    """Rebuild a value from :func:`encode_value`'s structure; raise ValueError when malformed.

    Hashability is checked where a set member or dict key is rebuilt, so a malformed (forged)
    structure cannot smuggle an unhashable key in; nothing but builtin constructors runs.
    """
    def dec(d: Any, depth: int) -> Any:
        if depth > MAX_DEPTH + 1 or type(d) is not list or not d or type(d[0]) is not str:
            raise ValueError("malformed value")
        tag = d[0]
        if len(d) == 1:
            if tag == "n":
                return None
            if tag == "T":
                return True
            if tag == "F":
                return False
            raise ValueError(f"unknown value tag {tag!r}")
        if len(d) != 2:
            raise ValueError("malformed value")
        body = d[1]
        if tag in ("i", "f", "s", "b") and type(body) is not str:
            raise ValueError("malformed scalar")
        if tag == "i":
            return int(body, 16)
        if tag == "f":
            return float.fromhex(body)
        if tag == "s":
            return body
        if tag == "b":
            return bytes.fromhex(body)
        if type(body) is not list:
            raise ValueError("malformed container")
        if tag == "l":
            return [dec(x, depth + 1) for x in body]
        if tag == "t":
            return tuple(dec(x, depth + 1) for x in body)
        if tag in ("S", "F"):
            items = [dec(x, depth + 1) for x in body]
            try:
                return set(items) if tag == "S" else frozenset(items)
            except TypeError:
                raise ValueError("unhashable set member") from None
        if tag == "d":
            out: dict[Any, Any] = {}
            for pair in body:
                if type(pair) is not list or len(pair) != 2:
                    raise ValueError("malformed dict item")
                try:
                    out[dec(pair[0], depth + 1)] = dec(pair[1], depth + 1)
                except TypeError:
                    raise ValueError("unhashable dict key") from None
            return out
        raise ValueError(f"unknown value tag {tag!r}")

    return dec(data, 0)


def encode_frame(nonce: str, message: dict[str, Any]) -> bytes:
    """One line of the result channel: the run's nonce, a space, compact JSON, a newline."""
    return (nonce + " " + _dumps(message) + "\n").encode("ascii")


def parse_frames(data: bytes, nonce: str) -> list[dict[str, Any]]:
    """Decode the frames of one run from the raw bytes of its result channel.

    Lines without the nonce are ignored; a line with the nonce but a body that is not a JSON
    object ends the parse (everything after it is distrusted). A trailing partial line (the
    child was killed mid-write) is dropped.
    """
    prefix = (nonce + " ").encode("ascii")
    frames: list[dict[str, Any]] = []
    lines = data.split(b"\n")
    for line in lines[:-1]:  # the last piece has no newline: incomplete or empty
        if not line.startswith(prefix):
            continue
        try:
            message = _loads(line[len(prefix):].decode("ascii"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            break
        if type(message) is not dict:
            break
        frames.append(message)
    return frames
