"""The wire format between the sandboxed child and the trusted parent: frames and plain values.

This module is imported on both sides of the boundary. Inside the sandbox it is loaded by path
(``python -I -S``, no site-packages), so it uses the standard library only and no
package-relative imports. The trusted side decodes with msgpack's C unpacker when it can be
imported, and otherwise with the pure-Python decoder here; both read the same bytes, enforce
the same budgets and build the same values (the tests hold them to it).

**Frames.** The child writes frames on its result channel (a pipe of its own, never stdout)::

    <nonce> <length>\\n<length bytes: a msgpack map>\\n

The parent skips every line that does not start with the run's nonce and stops at the first
frame with the nonce that is malformed (everything after it is distrusted); a truncated
trailing frame (the child was killed mid-write) is dropped.

**Values.** A value crosses the boundary only as *data*, rebuilt on the other side as builtin
and standard-library values (so no user ``__eq__``, ``__hash__``, ``__iter__`` or
``__reduce__`` ever runs there): ``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``
(lone surrogates included), ``bytes``, ``list``, ``tuple``, ``dict``, ``set``, ``frozenset``,
``collections.Counter``, ``OrderedDict``, ``deque``; the standard-library values of
:mod:`_stdvalues` (``Fraction``, ``Decimal``, ``range``, dict views, dates, namedtuples, enum
members, a ``defaultdict`` with a builtin factory...); and:

- **iterators** (generators, ``map``, ``filter``, ``zip``, the itertools types...: exactly
  those types) cross as the items they yield, pulled where they were made until exhausted or
  ``MAX_PULL_BYTES`` of them are encoded, and are replayed on the other side as a generator
  that ends as the original did: exhausted, raising the nearest builtin exception the original
  raised, or, cut short, raising :class:`_stdvalues.Unreadable` (never a list: ``gen() == [1]``
  stays False, as in Python);
- **subclasses of builtins** (``class S(str)``, ``class L(list)``...) cross as an exact copy of
  their base type's content, read with the base type's own methods: the subclass's overrides
  (a lying ``__eq__``, ``__len__``, ``startswith``) neither run nor cross.

Anything else (an instance of the candidate's own class, a function) is not plain data.
:func:`encode_value` turns a value into msgpack bytes (the message's ``v`` field is those
bytes); msgpack's own types carry ``None``/``bool``/64-bit ints/``float``/``str``/``bytes``/
``list``/``dict``, and extension types the rest:

    1 int beyond 64 bits (signed big-endian bytes)   2 tuple   3 set   4 frozenset
    5 complex (two big-endian doubles)               6 typed flat array (below)
    7 Counter   8 OrderedDict   9 defaultdict (old form: no factory)   10 deque (no maxlen)
    (payload: a msgpack map / array)
    11 records: a list whose nested arrays are all tuples, holding only msgpack scalars
       (a list of pairs or rows: one C call rebuilds it, not one call per tuple)
    12 a standard-library value or an iterator: ``[kind, parts]`` (see :mod:`_stdvalues`)

A list or tuple of 16 or more items that are all exact ints fitting 32 or 64 bits, or all
exact floats, goes as one typed array (``array`` module bytes, little-endian): a 100k-int
answer costs one C loop on each side instead of 100k Python steps.

**Budgets** (the trusted side enforces them whatever the bytes say; :class:`ValueBudget`
names the one exceeded). A frame is bounded by the run's result-channel cap
(``Limits.max_result_bytes``). One value, or all the values one check compares (they share a
:class:`DecodeBudget`), holds at most ``MAX_ITEMS`` objects: the members of all containers and
the containers themselves, a set or deque counting for the several small objects its memory
is worth; no array or map may even declare more than what is left, so decoded values cannot
amplify their bytes into unbounded memory. Tagged containers nest at most ``MAX_DEPTH`` levels
(the encoder nests no container deeper; forged plain arrays stop at msgpack's stack, or at the
recursion limit of the pure-Python decoder). No int is wider than ``MAX_INT_BITS``, and no set
or dict has keys chosen to collide in the hash table (building it would be quadratic).

Decoding builds builtin and standard-library values only: nothing is executed, nothing is
looked up by a name the data chooses (kinds come from a fixed table), nothing is unpickled. For the judge: ``encode_value(value) -> bytes`` and
``decode_value(bytes) -> value`` keep their names; the encoded form is now ``bytes`` (it was a
JSON-able list), carried in frames as msgpack binary (``encode_frame``/``parse_frames`` handle
that transparently). A channel that embedded encoded values in JSON messages should frame them
with :func:`pack_message`/:func:`unpack_message` instead (msgpack maps that hold bytes).
"""

from __future__ import annotations

import collections
import struct
import sys
from array import array
from typing import Any

try:  # the trusted side: the package's module
    from . import _stdvalues
except ImportError:  # inside the sandbox, loaded by path beside this file
    import _stdvalues  # type: ignore[no-redef]

# The builtins this module's functions use: a copy taken when it is imported, before any
# candidate code runs in this process. A function binds its builtins from here when it is
# defined, so a candidate that patches ``builtins.len``, ``type`` or ``isinstance`` changes
# nothing this module does (the candidate's own namespace keeps the real ``builtins``).
globals()["__builtins__"] = dict(vars(__import__("builtins")))

__all__ = [
    "MAX_DEPTH",
    "MAX_INT_BITS",
    "MAX_ITEMS",
    "DecodeBudget",
    "NotPlainData",
    "ValueBudget",
    "ValueTooLarge",
    "decode_value",
    "encode_frame",
    "encode_value",
    "is_value",
    "pack_message",
    "parse_frames",
    "unpack_message",
]

MAX_DEPTH = 200  # nesting depth of tagged containers (tuple, set, ...), and of the encoder's walk
MAX_INT_BITS = 1 << 18  # 262,144 bits, about 79,000 decimal digits
MAX_ITEMS = 1 << 22  # 4,194,304 objects in one value (elements and containers, all levels)
TYPED_MIN = 16  # shortest list sent as a typed array (below it the header costs more than it saves)
_COLLIDE_MIN = 64  # sets/dicts at least this big get their key hashes checked

EXT_BIGINT, EXT_TUPLE, EXT_SET, EXT_FROZENSET, EXT_COMPLEX, EXT_ARRAY = 1, 2, 3, 4, 5, 6
EXT_COUNTER, EXT_ORDERED, EXT_DEFAULT, EXT_DEQUE = 7, 8, 9, 10
EXT_RECORDS = 11  # a list whose nested arrays are all tuples (a list of pairs, of rows...)
EXT_STD = 12  # a standard-library value or an iterator: [kind, parts] (see _stdvalues)
MAX_PULL_BYTES = 2 << 20  # an iterator's items pulled, encoded: beyond this it crosses as a prefix

_Counter, _OrderedDict = collections.Counter, collections.OrderedDict
_defaultdict, _deque = collections.defaultdict, collections.deque
_LITTLE = sys.byteorder == "little"
_B1, _B2, _B4 = struct.Struct(">BB"), struct.Struct(">BH"), struct.Struct(">BI")
_I8, _I16, _I32, _I64 = (struct.Struct(f">B{c}") for c in "bhiq")
_U64 = struct.Struct(">BQ")
_F64 = struct.Struct(">Bd")
_DD = struct.Struct(">dd")
_EXT_ITEMS = {EXT_TUPLE: tuple, EXT_SET: set, EXT_FROZENSET: frozenset, EXT_DEQUE: _deque}
_EXT_MAPS = {EXT_COUNTER: _Counter, EXT_ORDERED: _OrderedDict, EXT_DEFAULT: _defaultdict}
_ARRAY_KINDS = {0: list, 1: tuple}
# What rebuilding one tagged container costs, in budget units (~64 bytes, ~0.3 us): each is a
# nested decode call of ~2 us, and a deque is ~760 bytes of malloc'd memory. With these weights
# a value forged from empty tagged containers costs the caller well under a second.
_WEIGHT = {EXT_TUPLE: 8, EXT_SET: 8, EXT_FROZENSET: 8, EXT_DEQUE: 24, EXT_COUNTER: 12,
           EXT_ORDERED: 12, EXT_DEFAULT: 12, EXT_STD: 16}
_TYPECODES = {ord("i"): "i", ord("q"): "q", ord("d"): "d"}


class NotPlainData(Exception):
    """A value is not plain data (its exact type is not one the boundary accepts)."""


class ValueTooLarge(NotPlainData):
    """Plain data, but over one of the wire's budgets (elements, depth, int width)."""


class ValueBudget(ValueError):
    """A value (or frame) exceeds one of the wire's budgets; the message names the limit."""


_stdvalues._BUDGET_ERROR[0] = ValueBudget


def _type_label(value: Any) -> str:
    try:
        return str(type.__dict__["__qualname__"].__get__(type(value)))
    except Exception:  # pragma: no cover - a class whose name cannot be read
        return "object"


# --------------------------------------------------------------------------- encoding (both sides)

def _head(buf: bytearray, n: int, fix: int, fixmax: int, c16: int, c32: int) -> None:
    if n < fixmax:
        buf.append(fix | n)
    elif n < 0x10000:
        buf += _B2.pack(c16, n)
    else:
        buf += _B4.pack(c32, n)


def _ext(buf: bytearray, code: int, payload: Any, n: int | None = None) -> None:
    """An extension: its header, then ``payload`` (any buffer; ``n`` its size in bytes)."""
    n = len(payload) if n is None else n
    if n == 1 or n == 2 or n == 4 or n == 8 or n == 16:
        buf += _B1.pack({1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}[n], code)
    elif n < 0x100:
        buf += bytes((0xC7, n, code))
    elif n < 0x10000:
        buf += _B2.pack(0xC8, n) + bytes((code,))
    else:
        buf += _B4.pack(0xC9, n) + bytes((code,))
    buf += payload


def _pack_int(buf: bytearray, v: int) -> None:
    if 0 <= v < 0x80:
        buf.append(v)
    elif -0x20 <= v < 0:
        buf.append(v & 0xFF)
    elif -0x80000000 <= v < 0x80000000:
        buf += _I32.pack(0xD2, v)
    elif -0x8000000000000000 <= v < 0x8000000000000000:
        buf += _I64.pack(0xD3, v)
    elif 0 <= v < 0x10000000000000000:
        buf += _U64.pack(0xCF, v)
    else:
        bits = int.bit_length(v)
        if bits > MAX_INT_BITS:
            raise ValueTooLarge(f"an int of {bits} bits (MAX_INT_BITS is {MAX_INT_BITS})")
        _ext(buf, EXT_BIGINT, int.to_bytes(v, bits // 8 + 1, "big", signed=True))


def _typed(items: Any, kinds: set[type]) -> array[Any] | None:
    """A flat list/tuple of exact ints or floats as one typed array, else None."""
    if kinds == {int}:
        for code in "iq":
            try:
                data = array(code, items)
            except OverflowError:
                continue
            break
        else:
            return None
    elif kinds == {float}:
        code, data = "d", array("d", items)
    else:
        return None
    if not _LITTLE:  # pragma: no cover - big-endian hosts
        data.byteswap()
    return data


def _pack(buf: bytearray, v: Any, depth: int, budget: list[int]) -> None:
    t = type(v)
    if v is None:
        buf.append(0xC0)
    elif v is True:
        buf.append(0xC3)
    elif v is False:
        buf.append(0xC2)
    elif t is int:
        _pack_int(buf, v)
    elif t is float:
        buf += _F64.pack(0xCB, v)
    elif t is str:
        data = str.encode(v, "utf-8", "surrogatepass")
        n = len(data)
        if n < 32:
            buf.append(0xA0 | n)
        elif n < 0x100:
            buf += _B1.pack(0xD9, n)
        else:
            _head(buf, n, 0, 0, 0xDA, 0xDB)
        buf += data
    elif t is bytes:
        n = len(v)
        if n < 0x100:
            buf += _B1.pack(0xC4, n)
        else:
            _head(buf, n, 0, 0, 0xC5, 0xC6)
        buf += v
    elif t is complex:
        _ext(buf, EXT_COMPLEX, _DD.pack(v.real, v.imag))
    else:
        if depth >= MAX_DEPTH:
            raise ValueTooLarge(f"a value nested deeper than {MAX_DEPTH} levels (MAX_DEPTH)")
        if t is list or t is tuple:
            # No candidate code runs while exact builtin containers are walked, so none can
            # change them under the walk: no copy is needed.
            items = v
            kinds = set(map(type, items)) if len(items) >= TYPED_MIN else None
            typed = _typed(items, kinds) if kinds else None
            # The decoder's count, exactly: elements, the container, a tuple's tag.
            _spend(budget, len(items) + 1 + (_WEIGHT[EXT_TUPLE] if t is tuple and typed is None
                                             else 0))
            if typed is not None:
                _ext(buf, EXT_ARRAY, bytes((t is tuple, ord(typed.typecode))),
                     2 + len(typed) * typed.itemsize)
                buf += typed  # straight from the array's buffer: one copy
            elif t is list:
                if kinds == {str}:
                    _pack_strs(buf, items)
                elif kinds == {tuple} and _pack_records(buf, items, depth, budget):
                    pass
                else:
                    _pack_items(buf, items, depth, budget)
            else:
                _ext(buf, EXT_TUPLE, _packed_items(items, depth, budget))
        elif t is dict:
            _pack_map(buf, v, depth, budget)
        elif t is set or t is frozenset or (t is _deque and v.maxlen is None):
            items = v
            code = EXT_SET if t is set else EXT_FROZENSET if t is frozenset else EXT_DEQUE
            _spend(budget, _WEIGHT[code] + len(items) + 1)
            inner = bytearray()
            # A set of tuples (of edges, of pairs) carries them as records: one C call.
            if not (len(items) >= TYPED_MIN and set(map(type, items)) == {tuple}
                    and _pack_records(inner, items, depth, budget)):
                _pack_items(inner, items, depth, budget)
            _ext(buf, code, inner)
        elif t is _Counter or t is _OrderedDict:  # a defaultdict's factory: see _stdvalues
            code = EXT_COUNTER if t is _Counter else EXT_ORDERED
            _spend(budget, _WEIGHT[code])
            inner = bytearray()
            _pack_map(inner, v, depth, budget)
            _ext(buf, code, inner)
        else:
            _pack_other(buf, v, t, depth, budget)


_ITERATORS = _stdvalues.ITERATOR_TYPES
_describe = _stdvalues.describe
_mro = type.__dict__["__mro__"].__get__
_NONE = object()


def _pack_other(buf: bytearray, v: Any, t: type, depth: int, budget: list[int]) -> None:
    """An iterator, a standard-library value, or a builtin's subclass (as its base's content)."""
    if t in _ITERATORS:
        _pack_iterator(buf, v, t, depth, budget)
        return
    described = _describe(v)
    if described is not None:
        kind, parts = described
        if kind == "range":
            _spend(budget, len(v))  # the decoder counts a range as its items
        _spend(budget, _WEIGHT[EXT_STD] + 3)
        inner = bytearray(b"\x92")  # [kind, parts]
        _pack(inner, kind, depth + 1, budget)
        _pack(inner, parts, depth + 1, budget)
        _ext(buf, EXT_STD, inner)
        return
    try:
        base = _base_copy(v, t)
    except (TypeError, ValueError, AttributeError):
        base = _NONE
    if base is _NONE:
        raise NotPlainData(_type_label(v))
    _pack(buf, base, depth, budget)


_VALUE_BASES = (int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset,
                _deque, memoryview, range)


def is_value(value: Any) -> bool:
    """Whether ``value`` is (or claims by its class structure to be) a value: a builtin, a
    subclass of one, an iterator or a standard-library value. A value that fails to encode (a
    list holding an object) is still one: the check's operations on it must not run where the
    candidate's overrides of them would answer (see ``_runner``)."""
    t = type(value)
    if t in _ITERATORS:
        return True
    mro = _mro(t)
    return any(base in mro for base in _VALUE_BASES) or _describe(value) is not None


def _base_copy(v: Any, t: type) -> Any:
    """A subclass of a builtin (or ``collections``) type as an exact copy of its base's content,
    read with the base type's own methods: the subclass's overrides (a ``__len__``, a
    ``startswith``, an ``__eq__`` that lie) do not run and do not cross."""
    mro = _mro(t)
    if int in mro:
        return int.__index__(v)
    if float in mro:
        return float.__float__(v)
    if complex in mro:
        return complex(complex.__dict__["real"].__get__(v), complex.__dict__["imag"].__get__(v))
    if str in mro:
        return str.__str__(v)
    if bytes in mro:
        return bytes.__getitem__(v, slice(None))
    if bytearray in mro:
        return bytearray.__getitem__(v, slice(None))
    if list in mro:
        return list(list.__iter__(v))
    if tuple in mro:
        return tuple(tuple.__iter__(v))
    if _OrderedDict in mro:
        return _OrderedDict(_OrderedDict.items(v))
    if _defaultdict in mro:
        out: Any = _defaultdict(_defaultdict.__dict__["default_factory"].__get__(v))
        dict.update(out, dict.items(v))
        return out
    if _Counter in mro:
        counter: Any = _Counter()
        dict.update(counter, dict.items(v))
        return counter
    if dict in mro:
        return dict(dict.items(v))
    if frozenset in mro:
        return frozenset(frozenset.__iter__(v))
    if set in mro:
        return set(set.__iter__(v))
    if _deque in mro:
        return _deque(_deque.__iter__(v), _deque.__dict__["maxlen"].__get__(v))
    return _NONE


def _pack_iterator(buf: bytearray, it: Any, t: type, depth: int, budget: list[int]) -> None:
    """An iterator as the items it yields, pulled here (where it was made) until it is exhausted
    or ``MAX_PULL_BYTES`` of them are encoded; the receiving side replays them as a generator
    that then ends as this one did (exhausted, raised, or cut short: see :mod:`_stdvalues`)."""
    inner = bytearray()
    count = 0
    end: list[str] | None = None
    step = t.__next__  # type: ignore[attr-defined]  # the exact builtin type's own slot
    room = budget[0] - _WEIGHT[EXT_STD] - 16
    while True:
        if len(inner) >= MAX_PULL_BYTES or count >= room:
            end = ["budget", "", f"the iterator yields more than the judge received of it "
                                 f"({count:,} items, _wire.MAX_PULL_BYTES is {MAX_PULL_BYTES:,} "
                                 f"bytes); a check can consume only that much of it"]
            break
        try:
            item = step(it)
        except StopIteration as stop:
            returned = stop.value
            if returned is not None:  # a generator's return value (what ``yield from`` gives)
                try:
                    _pack(bytearray(), returned, depth + 2, [budget[0]])
                    end = ["returned", "", "", returned]
                except NotPlainData as exc:
                    end = ["budget", "", f"the generator returned a "
                                         f"{exc.args[0] if exc.args else 'value'}, not plain data"]
            break
        except Exception as exc:
            end = ["raised", _stdvalues.exception_name(exc), _exc_text(exc)]
            break
        mark = len(inner)
        try:
            _pack(inner, item, depth + 2, budget)
        except NotPlainData as exc:
            del inner[mark:]
            end = ["budget", "", f"the iterator yielded a {exc.args[0] if exc.args else 'value'}, "
                                 f"not plain data"]
            break
        count += 1
    _spend(budget, _WEIGHT[EXT_STD] + 3 + count + 1 + 4)
    payload = bytearray(b"\x92\xa4iter\x92")  # ["iter", [items, end]]
    _head(payload, count, 0x90, 16, 0xDC, 0xDD)
    payload += inner
    _pack(payload, end, depth + 1, budget)
    _ext(buf, EXT_STD, payload)


def _exc_text(exc: BaseException) -> str:
    try:
        return str.__getitem__(str(exc), slice(0, 400))
    except BaseException:
        return ""


def _spend(budget: list[int], n: int) -> None:
    budget[0] -= n
    if budget[0] < 0:
        raise ValueTooLarge(f"a value of more than {MAX_ITEMS} elements and containers (MAX_ITEMS)")


class _NotRecords(Exception):
    pass


_RECORD_SCALARS = frozenset((type(None), bool, float, str, bytes))


def _pack_record(buf: bytearray, record: tuple[Any, ...], depth: int, spent: list[int]) -> None:
    if depth >= MAX_DEPTH:
        raise _NotRecords
    spent[0] += len(record) + 1
    _head(buf, len(record), 0x90, 16, 0xDC, 0xDD)
    for item in record:
        t = type(item)
        if t is int and -0x8000000000000000 <= item < 0x10000000000000000:
            _pack_int(buf, item)
        elif t in _RECORD_SCALARS:
            _pack(buf, item, depth, [0])
        elif t is tuple:
            _pack_record(buf, item, depth + 1, spent)
        else:
            raise _NotRecords


def _pack_records(buf: bytearray, items: Any, depth: int, budget: list[int]) -> bool:
    """A list of tuples of scalars (and tuples of those) as one records extension; else False."""
    inner = bytearray()
    spent = [0]
    try:
        _head(inner, len(items), 0x90, 16, 0xDC, 0xDD)
        for record in items:
            _pack_record(inner, record, depth + 1, spent)
    except _NotRecords:
        return False
    # The list itself was counted by the caller; the records' tuples are counted here.
    _spend(budget, spent[0] + 1)
    _ext(buf, EXT_RECORDS, inner)
    return True


def _pack_strs(buf: bytearray, items: Any) -> None:
    """A list of exact strs: the same bytes as :func:`_pack_items`, without a call per item."""
    _head(buf, len(items), 0x90, 16, 0xDC, 0xDD)
    encode = str.encode
    for item in items:
        data = encode(item, "utf-8", "surrogatepass")
        n = len(data)
        if n < 32:
            buf.append(0xA0 | n)
        elif n < 0x100:
            buf += _B1.pack(0xD9, n)
        else:
            _head(buf, n, 0, 0, 0xDA, 0xDB)
        buf += data


def _pack_items(buf: bytearray, items: Any, depth: int, budget: list[int]) -> None:
    _head(buf, len(items), 0x90, 16, 0xDC, 0xDD)
    for item in items:
        _pack(buf, item, depth + 1, budget)


def _packed_items(items: Any, depth: int, budget: list[int]) -> bytearray:
    inner = bytearray()
    _pack_items(inner, items, depth, budget)
    return inner


def _pack_map(buf: bytearray, mapping: Any, depth: int, budget: list[int]) -> None:
    pairs = list(dict.items(mapping))  # dict's own items: no subclass hook runs
    _spend(budget, 2 * len(pairs) + 1)
    _head(buf, len(pairs), 0x80, 16, 0xDE, 0xDF)
    for key, item in pairs:
        _pack(buf, key, depth + 1, budget)
        _pack(buf, item, depth + 1, budget)


def encode_value(value: Any) -> bytes:
    """Encode plain data as msgpack bytes; raise NotPlainData for anything else.

    Types are checked with ``type(x) is T`` so that no subclass (and no user ``__eq__``,
    ``__iter__`` or ``__reduce__``) is ever invoked: walking exact builtin containers runs no
    user code. Cycles end at ``MAX_DEPTH``; sizes are bounded by ``MAX_ITEMS`` and
    ``MAX_INT_BITS``, so whatever this accepts, the trusted side accepts too.
    """
    buf = bytearray()
    try:
        _pack(buf, value, 0, [MAX_ITEMS])
    except RecursionError:
        raise ValueTooLarge(f"a value nested deeper than {MAX_DEPTH} levels (MAX_DEPTH)") from None
    return bytes(buf)


# --------------------------------------------------------------------------- decoding

class DecodeBudget:
    """What a value (or several values judged together) may still spend while rebuilt.

    Pass one to several :func:`decode_value` calls to make them share ``MAX_ITEMS``: the
    values one check compares are alive at the same time, so they share one budget. On the
    trusted side a ``gate`` (``agentenv.grading.memory``) may also bound what all the values
    decoded at once in the process spend: every spend is charged to it too (``gate.spend``
    raises when it cannot be met), and no array may declare more than it has left.
    """

    __slots__ = ("charged", "depth", "gate", "items")

    def __init__(self, gate: Any = None) -> None:
        self.items = MAX_ITEMS
        self.depth = 0
        self.gate = gate
        self.charged = 0  # bytes charged to the gate (the gate's bookkeeping)

    def spend(self, n: int) -> None:
        self.items -= n
        if self.items < 0:
            raise ValueBudget(f"the value has more than {MAX_ITEMS} elements and containers "
                              f"(MAX_ITEMS)")
        if self.gate is not None:
            self.gate.spend(self, n)

    def room(self) -> int:
        """How many items an array or map may still declare."""
        items = max(0, self.items)
        return items if self.gate is None else min(items, self.gate.room(self))

    def over_room(self) -> Exception:
        """The error for an array that declared more than :meth:`room`: the gate's when its
        room was the smaller (it may raise instead), else ``MAX_ITEMS``'s."""
        if self.gate is not None and self.gate.room(self) < self.items:
            self.gate.refuse(self)
        return ValueBudget(f"the value has more than {MAX_ITEMS} elements and containers "
                           f"(MAX_ITEMS)")


def _no_collisions(keys: Any) -> None:
    """Refuse keys chosen to share hashes: inserting them would be quadratic on this side.

    Distinct hash values never collide in a set of ints, so counting them is linear; honest
    keys almost never share a full hash (``-1`` and ``-2`` do), hence the slack.
    """
    n = len(keys)
    if n >= _COLLIDE_MIN and n - len(set(map(hash, keys))) > n // 16 + 8:
        raise ValueBudget("the value's set members or dict keys collide in the hash table")


_stdvalues._NO_COLLISIONS[0] = _no_collisions


def _build_map(kind: Any, pairs: Any) -> Any:
    if kind is _defaultdict:
        out: Any = _defaultdict()
        out.update(pairs)
        return out
    if kind is _Counter:
        out = _Counter()
        dict.update(out, pairs)  # not Counter.update: that would add counts, not set them
        return out
    return kind(pairs)


def _from_array(payload: bytes) -> Any:
    if len(payload) < 2 or payload[0] not in _ARRAY_KINDS or payload[1] not in _TYPECODES:
        raise ValueError("malformed typed array")
    data = array(_TYPECODES[payload[1]])
    if (len(payload) - 2) % data.itemsize:
        raise ValueError("malformed typed array")
    data.frombytes(payload[2:])
    if not _LITTLE:  # pragma: no cover - big-endian hosts
        data.byteswap()
    return data, _ARRAY_KINDS[payload[0]]


def _from_bigint(payload: bytes) -> int:
    if len(payload) * 8 > MAX_INT_BITS + 8:
        raise ValueBudget(f"an int wider than {MAX_INT_BITS} bits (MAX_INT_BITS)")
    value = int.from_bytes(payload, "big", signed=True)
    if int.bit_length(value) > MAX_INT_BITS:
        raise ValueBudget(f"an int wider than {MAX_INT_BITS} bits (MAX_INT_BITS)")
    return value


def _nested(code: int, payload: bytes, budget: DecodeBudget, items: Any) -> Any:
    """The payload of a container extension, decoded one nesting level down (its weight spent)."""
    budget.spend(_WEIGHT[code])
    budget.depth += 1
    if budget.depth > MAX_DEPTH:
        raise ValueBudget(f"the value nests deeper than {MAX_DEPTH} levels (MAX_DEPTH)")
    try:
        return items(payload)
    finally:
        budget.depth -= 1


def _ext_value(code: int, payload: bytes, budget: DecodeBudget, items: Any) -> Any:
    """Rebuild extension ``code``; ``items(payload)`` decodes a nested msgpack payload."""
    if code == EXT_BIGINT:
        return _from_bigint(payload)
    if code == EXT_COMPLEX:
        if len(payload) != 16:
            raise ValueError("malformed complex")
        return complex(*_DD.unpack(payload))
    if code == EXT_ARRAY:
        data, kind = _from_array(payload)
        budget.spend(len(data) + 1)
        return kind(data.tolist())
    if code == EXT_STD:
        inner = _nested(code, payload, budget, items)
        if type(inner) is not list or len(inner) != 2:
            raise ValueError("malformed standard-library value")
        return _stdvalues.rebuild(inner[0], inner[1], budget)
    if code not in _EXT_ITEMS and code not in _EXT_MAPS:
        raise ValueError(f"unknown value extension {code}")
    inner = _nested(code, payload, budget, items)
    kind = _EXT_ITEMS.get(code) or _EXT_MAPS[code]
    if code in _EXT_MAPS:
        if type(inner) is not dict:
            raise ValueError("malformed mapping")
        return _build_map(kind, inner)
    if type(inner) is not list:
        raise ValueError("malformed container")
    if kind is set or kind is frozenset:
        _no_collisions(inner)
        try:
            return kind(inner)
        except TypeError:
            raise ValueError("unhashable set member") from None
    return kind(inner)


def _msgpack_decoder() -> Any:
    try:
        import msgpack
    except ImportError:  # inside the sandbox, or msgpack missing: the pure-Python decoder
        return None
    unpackb = msgpack.unpackb

    def decode(data: bytes, budget: DecodeBudget) -> Any:

        def on_list(items: list[Any]) -> list[Any]:
            budget.spend(len(items) + 1)
            return items

        def on_pairs(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
            budget.spend(2 * len(pairs) + 1)
            if len(pairs) >= _COLLIDE_MIN:
                _no_collisions([k for k, _ in pairs])
            try:
                return dict(pairs)
            except TypeError:
                raise ValueError("unhashable dict key") from None

        def on_ext(code: int, payload: bytes) -> Any:
            if code == EXT_RECORDS:
                return records(payload)
            return _ext_value(code, payload, budget, nested)

        def records(payload: bytes) -> list[Any]:
            budget.spend(1)
            room = budget.room()
            try:
                rows = unpackb(payload, max_array_len=room, use_list=False, ext_hook=_refuse_ext,
                               object_pairs_hook=_refuse_map, **record_options)
            except ValueError as exc:
                if "exceeds max_array_len" in str(exc):
                    raise budget.over_room() from None
                raise
            if type(rows) is not tuple:
                raise ValueError("malformed records")
            return list(rows)

        def nested(payload: bytes) -> Any:
            # msgpack checks declared lengths against these before allocating anything, and
            # the hooks count what was built: an array of scalars cannot outgrow what is left.
            room = budget.room()
            try:
                return unpackb(payload, max_array_len=room, max_map_len=room // 2, **options)
            except ValueError as exc:
                if "exceeds max_" in str(exc):
                    raise budget.over_room() from None
                raise

        options = {"raw": False, "unicode_errors": "surrogatepass", "strict_map_key": False,
                   "use_list": True, "list_hook": on_list, "object_pairs_hook": on_pairs,
                   "ext_hook": on_ext}
        record_options = {"raw": False, "unicode_errors": "surrogatepass", "list_hook": on_list}
        return nested(data)

    return decode


class _Reader:
    """The pure-Python msgpack reader: the same values, budgets and errors as the C path."""

    __slots__ = ("budget", "data", "extensions", "pos", "tuples")

    def __init__(self, data: bytes, budget: DecodeBudget, extensions: bool = True,
                 tuples: bool = False) -> None:
        self.data = data
        self.pos = 0
        self.budget = budget
        self.extensions = extensions
        self.tuples = tuples  # inside records: arrays are tuples, and nothing else nests

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise ValueError("truncated value")
        out = self.data[self.pos:end]
        self.pos = end
        return out

    def unpack(self, fmt: struct.Struct) -> Any:
        (value,) = fmt.unpack(self.take(fmt.size))
        return value

    def read(self, level: int) -> Any:
        if level > 1024:
            raise ValueBudget("the value nests deeper than msgpack's stack allows")
        pos = self.pos
        if pos >= len(self.data):
            raise ValueError("truncated value")
        b = self.data[pos]
        self.pos = pos + 1
        if b < 0x80:
            return b
        if b >= 0xE0:
            return b - 0x100
        if 0xA0 <= b < 0xC0:
            return self.text(b & 0x1F)
        if 0x90 <= b < 0xA0:
            return self.items(b & 0x0F, level)
        if 0x80 <= b < 0x90:
            return self.pairs(b & 0x0F, level)
        reader = _READ.get(b)
        if reader is None:
            raise ValueError(f"malformed value (byte 0x{b:02x})")
        return reader(self, level)

    def text(self, n: int) -> str:
        return self.take(n).decode("utf-8", "surrogatepass")

    def room(self, n: int) -> None:
        if n > len(self.data) - self.pos:  # every element takes at least one byte
            raise ValueError("truncated value")

    def items(self, n: int, level: int) -> Any:
        self.room(n)
        self.budget.spend(n + 1)
        out = [self.read(level + 1) for _ in range(n)]
        return tuple(out) if self.tuples else out

    def pairs(self, n: int, level: int) -> dict[Any, Any]:
        if self.tuples:
            raise ValueError("records may not hold maps")
        self.room(2 * n)
        self.budget.spend(2 * n + 1)
        pairs = [(self.read(level + 1), self.read(level + 1)) for _ in range(n)]
        _no_collisions([k for k, _ in pairs])
        try:
            return dict(pairs)
        except TypeError:
            raise ValueError("unhashable dict key") from None

    def ext(self, n: int) -> Any:
        if not self.extensions:
            raise ValueError("extension types are not allowed here (a frame, or records)")
        code = self.take(1)[0]
        payload = self.take(n)
        if code == EXT_RECORDS:
            self.budget.spend(1)
            rows = _Reader(payload, self.budget, extensions=False, tuples=True).whole()
            if type(rows) is not tuple:
                raise ValueError("malformed records")
            return list(rows)
        return _ext_value(code, payload, self.budget,
                          lambda inner: _Reader(inner, self.budget).whole())

    def whole(self) -> Any:
        value = self.read(0)
        if self.pos != len(self.data):
            raise ValueError("trailing bytes after the value")
        return value


def _sized(fmt: struct.Struct, then: Any) -> Any:
    return lambda r, level: then(r, r.unpack(fmt), level)


_U8, _U16, _U32, _U64R = (struct.Struct(f">{c}") for c in "BHIQ")
_S8, _S16, _S32, _S64 = (struct.Struct(f">{c}") for c in "bhiq")
_F32R, _F64R = struct.Struct(">f"), struct.Struct(">d")
_READ: dict[int, Any] = {
    0xC0: lambda r, level: None,
    0xC2: lambda r, level: False,
    0xC3: lambda r, level: True,
    0xCA: lambda r, level: r.unpack(_F32R),
    0xCB: lambda r, level: r.unpack(_F64R),
    0xCC: lambda r, level: r.unpack(_U8),
    0xCD: lambda r, level: r.unpack(_U16),
    0xCE: lambda r, level: r.unpack(_U32),
    0xCF: lambda r, level: r.unpack(_U64R),
    0xD0: lambda r, level: r.unpack(_S8),
    0xD1: lambda r, level: r.unpack(_S16),
    0xD2: lambda r, level: r.unpack(_S32),
    0xD3: lambda r, level: r.unpack(_S64),
    0xC4: _sized(_U8, lambda r, n, level: r.take(n)),
    0xC5: _sized(_U16, lambda r, n, level: r.take(n)),
    0xC6: _sized(_U32, lambda r, n, level: r.take(n)),
    0xD9: _sized(_U8, lambda r, n, level: r.text(n)),
    0xDA: _sized(_U16, lambda r, n, level: r.text(n)),
    0xDB: _sized(_U32, lambda r, n, level: r.text(n)),
    0xDC: _sized(_U16, lambda r, n, level: r.items(n, level)),
    0xDD: _sized(_U32, lambda r, n, level: r.items(n, level)),
    0xDE: _sized(_U16, lambda r, n, level: r.pairs(n, level)),
    0xDF: _sized(_U32, lambda r, n, level: r.pairs(n, level)),
    0xD4: lambda r, level: r.ext(1),
    0xD5: lambda r, level: r.ext(2),
    0xD6: lambda r, level: r.ext(4),
    0xD7: lambda r, level: r.ext(8),
    0xD8: lambda r, level: r.ext(16),
    0xC7: _sized(_U8, lambda r, n, level: r.ext(n)),
    0xC8: _sized(_U16, lambda r, n, level: r.ext(n)),
    0xC9: _sized(_U32, lambda r, n, level: r.ext(n)),
}


def decode_value_pure(data: bytes, budget: DecodeBudget | None = None) -> Any:
    """:func:`decode_value` with the standard library only (what the sandboxed side can use)."""
    if type(data) is not bytes:
        raise ValueError("malformed value: expected bytes")
    # A few frames per level: MAX_DEPTH levels need more than the default limit allows.
    limit = sys.getrecursionlimit()
    if limit < _DECODE_RECURSION:
        sys.setrecursionlimit(_DECODE_RECURSION)
    try:
        return _Reader(data, budget or DecodeBudget()).whole()
    except RecursionError:
        raise ValueBudget("the value nests deeper than this decoder's recursion allows") from None
    finally:
        if limit < _DECODE_RECURSION:
            sys.setrecursionlimit(limit)


_DECODE_RECURSION = 8 * MAX_DEPTH + 1000


_fast_decode: Any = None
_fast_checked = False


def decode_value(data: Any, budget: DecodeBudget | None = None) -> Any:
    """Rebuild a value from :func:`encode_value`'s bytes; raise ValueError when malformed.

    ``budget`` (optional) is shared with other values decoded alongside; by default the value
    has a budget of its own.

    :class:`ValueBudget` (a ValueError) names the budget a value exceeded. Hashability and
    hash collisions are checked where a set member or dict key is rebuilt, so a forged
    encoding cannot smuggle an unhashable key in or make this side spend quadratic time;
    nothing but builtin and ``collections`` constructors runs.
    """
    global _fast_decode, _fast_checked
    if type(data) is not bytes:
        raise ValueError("malformed value: expected bytes")
    if not _fast_checked:
        _fast_decode, _fast_checked = _msgpack_decoder(), True
    if budget is None:
        budget = DecodeBudget()
    if _fast_decode is None:
        return decode_value_pure(data, budget)
    try:
        return _fast_decode(data, budget)
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
        if isinstance(exc, ValueBudget):
            raise
        if type(exc).__name__ == "ExtraData":
            raise ValueError("trailing bytes after the value") from None
        if type(exc).__name__ == "StackError" or isinstance(exc, RecursionError):
            raise ValueBudget("the value nests deeper than msgpack's stack allows") from None
        raise ValueError(f"malformed value ({type(exc).__name__})") from None


# --------------------------------------------------------------------------- frames

def _pack_message(buf: bytearray, message: Any, depth: int = 0) -> None:
    """A frame body: small maps of str keys to str/int/bool/None/bytes/lists of those."""
    t = type(message)
    if t is dict:
        _head(buf, len(message), 0x80, 16, 0xDE, 0xDF)
        for key, item in dict.items(message):
            _pack_message(buf, key, depth + 1)
            _pack_message(buf, item, depth + 1)
    elif t is list or t is tuple:
        _head(buf, len(message), 0x90, 16, 0xDC, 0xDD)
        for item in message:
            _pack_message(buf, item, depth + 1)
    elif depth > 8:
        raise NotPlainData("a frame nested too deeply")
    else:
        _pack(buf, message, MAX_DEPTH, [0])


def pack_message(message: dict[str, Any]) -> bytes:
    """A small control message as msgpack: str keys; str/int/float/bool/None/bytes (an encoded
    value travels as bytes) and lists/dicts of those, nested a few levels. Any channel that
    carries :func:`encode_value`'s bytes can use this in place of JSON (which cannot hold bytes).
    """
    body = bytearray()
    _pack_message(body, message)
    return bytes(body)


def unpack_message(body: bytes, max_len: int = 64) -> dict[str, Any]:
    """The inverse of :func:`pack_message`; ValueError unless ``body`` is one small map.

    ``max_len`` bounds every array and map in it (values travel as bytes, so control messages
    never need big containers).
    """
    try:
        message = _message_body(body, max_len)
    except ValueError:
        raise
    except Exception:  # msgpack's own exception classes for malformed input
        raise ValueError("a malformed message") from None
    if type(message) is not dict:
        raise ValueError("a message is not a map")
    return message


def encode_frame(nonce: str, message: dict[str, Any]) -> bytes:
    """One frame of the result channel: ``<nonce> <length>\\n``, a msgpack map, a newline."""
    body = bytearray()
    _pack_message(body, message)
    return b"%s %d\n%s\n" % (nonce.encode("ascii"), len(body), body)


_frame_unpackb: Any = None


def _message_body(body: bytes, max_len: int = 64) -> Any:
    global _frame_unpackb
    if _frame_unpackb is None:
        try:
            import msgpack
        except ImportError:
            _frame_unpackb = False
        else:
            _frame_unpackb = msgpack.unpackb
    if _frame_unpackb is False:
        budget = DecodeBudget()
        budget.items = 16 * max_len
        return _Reader(body, budget, extensions=False).whole()
    # A frame is a small map (its value travels as one bin): no big arrays or maps allowed.
    return _frame_unpackb(body, raw=False, unicode_errors="surrogatepass", strict_map_key=False,
                          ext_hook=_refuse_ext, max_ext_len=0, max_array_len=max_len,
                          max_map_len=max_len)


def _refuse_ext(code: int, payload: bytes) -> Any:
    raise ValueError("extension types are not allowed here (a frame, or records)")


def _refuse_map(pairs: Any) -> Any:
    raise ValueError("records may not hold maps")


def parse_frames(data: bytes, nonce: str) -> list[dict[str, Any]]:
    """Decode the frames of one run from the raw bytes of its result channel.

    Lines without the nonce are skipped; a frame with the nonce but a bad length, a body that
    is not a msgpack map, or a missing newline after it ends the parse (everything after it is
    distrusted). A truncated trailing frame (the child was killed mid-write) is dropped.
    Frame bodies are bounded by ``data``, itself capped by the worker at the run's
    ``max_result_bytes``.
    """
    prefix = nonce.encode("ascii") + b" "
    frames: list[dict[str, Any]] = []
    pos, end = 0, len(data)
    while pos < end:
        eol = data.find(b"\n", pos)
        if eol < 0:
            break  # a partial line: incomplete
        if not data.startswith(prefix, pos):
            pos = eol + 1
            continue
        digits = data[pos + len(prefix):eol]
        if not digits.isdigit() or len(digits) > 10:
            break
        start = eol + 1
        stop = start + int(digits)
        if stop + 1 > end:
            break  # truncated: the child was killed mid-write
        if data[stop:stop + 1] != b"\n":
            break
        try:
            message = _message_body(data[start:stop])
        except (ValueError, TypeError, OverflowError, RecursionError, MemoryError):
            break
        except Exception:  # msgpack's own exception classes for malformed input
            break
        if type(message) is not dict:
            break
        frames.append(message)
        pos = stop + 1
    return frames
