"""Plain values on the trusted side: how they are compared, formatted and computed on, within budgets.

What it owns, for :mod:`agentenv.grading.judging`:

- **equality**, by :class:`agentenv.choices.Equality`: :func:`python_equal` (the default, ``equality="python"``: Python's own ``==``,
  so ``1 == 1.0``, ``True == 1``, a ``Counter`` equals a dict with the same items, NaN is never
  equal to anything) and :func:`strict_equal` (``equality="strict"``: same exact type all the
  way down, NaN equal to NaN). Both accept a float tolerance. Values reaching them are plain
  data rebuilt on this side (:mod:`agentenv.sandbox._wire`), so ``==`` runs only builtin and
  standard-library code: a candidate's class, and its ``__eq__``, never crosses the boundary.
- **formatting**: :func:`bounded_repr`, a repr that stops after a few hundred characters
  whatever the value (a 100,000-digit int, a million-element list) and never raises;
- **computing**: :func:`guarded_binop` and :func:`guarded_call`, through which a check's
  trusted expression applies operators and builtins to candidate values. Operations whose
  cost or result can grow beyond the size of their operands (``**``, ``*``, ``<<``, ``pow``,
  ``range``, ``math.factorial``...) are refused *before* they run when the result would pass
  a budget, so a check like ``isqrt(x) ** 2 == x`` or ``2 ** f() == 8`` costs this process
  bounded time and memory whatever ``f`` returned. Methods a check calls on a returned value
  run here too, so they are guarded the same way: ``str.join``, widths in ``str.format``
  templates and computed f-string specs, ``int.to_bytes``; numpy broadcasting and ``@`` are
  sized from the shapes first, and only numpy methods that build nothing larger than their
  array run here. A refusal raises :class:`BudgetExceeded`, which the judge turns into a failed
  check naming the limit.

Not here: the wire format and its decoding budgets (``sandbox._wire``), and deciding what a
check computes (``grading.plan``).
"""

from __future__ import annotations

import builtins
import cmath
import collections
import math
import operator
import string
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from agentenv.choices import Equality
from agentenv.sandbox.contract import loaded

__all__ = [
    "COMPUTE_INT_BITS",
    "MAX_SEQUENCE",
    "BudgetExceeded",
    "bounded_repr",
    "contains",
    "equal",
    "guarded_binop",
    "guarded_call",
    "guarded_format",
    "python_equal",
    "strict_equal",
]


COMPUTE_INT_BITS = 1 << 19  # widest int an expression may compute (twice the wire's MAX_INT_BITS)
MAX_SEQUENCE = 10_000_000  # longest str/bytes/list/range an expression may build
_MAX_POWMOD = 1 << 24  # bits(exponent) * bits(modulus) of a three-argument pow
_MAX_WIDTH = 100_000  # a format width taken from a value

_DICTS = (dict, collections.Counter, collections.OrderedDict, collections.defaultdict)
_SEQUENCES = (list, tuple, collections.deque)
_NUMBERS = (int, float, bool)


class BudgetExceeded(ArithmeticError):
    """An operation on a candidate value would pass a budget; the message names it."""


# --------------------------------------------------------------------------- equality

def python_equal(actual: Any, expected: Any, tolerance: float | None = None) -> bool:
    """Python's ``==`` on plain data; with ``tolerance``, numbers match within it (abs or rel).

    ``True == 1 == 1.0``; a Counter, OrderedDict or defaultdict equals a dict with the same
    items; a list never equals a tuple (as in Python); NaN equals nothing, itself included.
    The plain ``==`` is tried first (one C loop for flat lists), the tolerant walk only when
    it fails and a tolerance is given.
    """
    if _plain_equal(actual, expected):
        return True
    if tolerance is None:
        return False
    return _close(actual, expected, tolerance, 0)


def _plain_equal(actual: Any, expected: Any) -> bool:
    result = actual == expected
    if type(result) is bool:
        return result
    if type(result).__module__ == "numpy":
        # A numpy bool, or an array of them: Python's ``assert`` takes its truth (an array of
        # more than one element raises ValueError, as it does there).
        return bool(result)
    return False  # pragma: no cover - rebuilt values always answer a bool


def _close(a: Any, e: Any, tol: float, depth: int) -> bool:
    if depth > 200:
        raise BudgetExceeded("values nested too deeply to compare")
    ta, te = type(a), type(e)
    if ta in _NUMBERS and te in _NUMBERS:
        if a == e:
            return True
        if ta is float or te is float:
            return math.isclose(a, e, rel_tol=tol, abs_tol=tol)
        return False
    if ta is complex or te is complex:
        if ta in (*_NUMBERS, complex) and te in (*_NUMBERS, complex):
            return a == e or cmath.isclose(a, e, rel_tol=tol, abs_tol=tol)
        return False
    if ta in _SEQUENCES and te in _SEQUENCES:
        if (ta is tuple) is not (te is tuple) or (ta is collections.deque) is not (te is collections.deque):
            return False
        return len(a) == len(e) and all(_close(x, y, tol, depth + 1) for x, y in zip(a, e, strict=False))
    if ta in _DICTS and te in _DICTS:
        if len(a) != len(e):
            return False
        for key, value in a.items():
            if key not in e or not _close(value, e[key], tol, depth + 1):
                return False
        return True
    return bool(a == e)


def strict_equal(actual: Any, expected: Any, tolerance: float | None = None) -> bool:
    """Equality that an impostor cannot satisfy, for tasks that ask for ``equality="strict"``.

    Both sides must have the same exact type (``True`` is not ``1``, ``1`` is not ``1.0``, a
    ``Counter`` is not a ``dict``); containers are compared element by element with the same
    rule; floats are equal when ``==`` holds, when both are NaN, or when they are within
    ``tolerance`` (absolute or relative) if one is given.
    """
    return _strict(actual, expected, tolerance, 0)


_SCALARS = frozenset((type(None), bool, int, str, bytes, complex))


def _strict(actual: Any, expected: Any, tolerance: float | None, depth: int) -> bool:
    if depth > 200:
        raise BudgetExceeded("values nested too deeply to compare")
    kind = type(actual)
    if kind is not type(expected):
        return False
    if kind is float:
        if actual == expected or (math.isnan(actual) and math.isnan(expected)):
            return True
        return tolerance is not None and math.isclose(actual, expected, rel_tol=tolerance,
                                                      abs_tol=tolerance)
    if kind is list or kind is tuple or kind is collections.deque:
        if len(actual) != len(expected):
            return False
        # The fast path for flat data: one C comparison and one pass over the types.
        kinds = list(map(type, actual))
        if kinds == list(map(type, expected)) and _SCALARS.issuperset(kinds) and actual == expected:
            return True
        return all(_strict(a, e, tolerance, depth + 1) for a, e in zip(actual, expected, strict=False))
    if kind in _DICTS:
        if len(actual) != len(expected):
            return False
        keys = {k: k for k in expected}
        for key, value in actual.items():
            if key not in keys or type(keys[key]) is not type(key):
                return False
            if not _strict(value, expected[key], tolerance, depth + 1):
                return False
        return kind is not collections.OrderedDict or list(actual) == list(expected)
    if kind is set or kind is frozenset:
        if len(actual) != len(expected):
            return False
        members = {m: m for m in expected}
        return all(m in members and type(members[m]) is type(m) for m in actual)
    if kind in _SCALARS:
        return bool(actual == expected)
    return False


def equal(mode: str, actual: Any, expected: Any, tolerance: float | None = None) -> bool:
    """:func:`python_equal` or :func:`strict_equal`, by ``mode``."""
    if mode == Equality.STRICT:
        return strict_equal(actual, expected, tolerance)
    return python_equal(actual, expected, tolerance)


def contains(mode: str, item: Any, container: Any, tolerance: float | None = None) -> bool:
    """``item in container`` under the equality ``mode`` (members compared with :func:`equal`)."""
    if type(container) in (str, bytes):
        if mode == Equality.STRICT and type(item) is not type(container):
            return False
        return item in container
    if type(container) is range:
        if type(item) is int or (mode == Equality.PYTHON and type(item) is bool):
            return item in container
        if len(container) > MAX_SEQUENCE:
            raise BudgetExceeded(f"'in' over a range of more than {MAX_SEQUENCE} items")
    if type(container) in _DICTS:
        container = list(container)
    if type(container) not in (list, tuple, set, frozenset, range, collections.deque):
        # A standard-library value rebuilt on this side (a generator replaying an iterator's
        # items, a dict view, a ChainMap, a network...): its own ``in``, standard-library code.
        return item in container
    if mode == Equality.PYTHON and tolerance is None and type(container) in (set, frozenset):
        try:
            return item in container
        except TypeError:  # an unhashable item: compare one by one
            pass
    return any(equal(mode, item, member, tolerance) for member in container)


# --------------------------------------------------------------------------- formatting

def bounded_repr(value: Any, limit: int = 120) -> str:
    """A repr of plain data clipped to about ``limit`` characters; never raises, never runs long.

    Ints too wide to print in decimal cheaply are described ("<int of 52,000 digits>"),
    containers are walked only until the budget is spent.
    """
    out: list[str] = []
    room = [limit]
    try:
        _repr_into(value, out, room, 0)
    except _Full:
        pass
    except Exception:
        return f"<{type(value).__name__}>"
    text = "".join(out)
    return text if len(text) <= limit else text[:limit] + "…"


class _Full(Exception):
    pass


def _emit(out: list[str], room: list[int], text: str) -> None:
    out.append(text)
    room[0] -= len(text)
    if room[0] < 0:
        raise _Full


def _repr_into(v: Any, out: list[str], room: list[int], depth: int) -> None:
    t = type(v)
    if t is int:
        bits = v.bit_length()
        if bits > 1000:
            _emit(out, room, f"<int of about {int(bits * 0.30103):,} digits>")
        else:
            _emit(out, room, repr(v))
    elif t is str or t is bytes:
        _emit(out, room, repr(v[: room[0] + 2]) + ("…" if len(v) > room[0] + 2 else ""))
    elif t in (float, complex, bool, type(None)):
        _emit(out, room, repr(v))
    elif depth > 20:
        _emit(out, room, "…")
    elif t in _SEQUENCES or t in (set, frozenset) or t in _DICTS:
        if t is list:
            open_, close = "[", "]"
        elif t is tuple:
            open_, close = "(", ",)" if len(v) == 1 else ")"
        elif t is dict:
            open_, close = "{", "}"
        elif t is set:
            open_, close = ("{", "}") if v else ("set(", ")")
        else:
            open_, close = f"{t.__name__}(" + ("[" if t is collections.deque else "{"), \
                           ("]" if t is collections.deque else "}") + ")"
            if t is frozenset:
                open_, close = "frozenset({", "})"
        _emit(out, room, open_)
        mapping = t in _DICTS
        for n, item in enumerate(v.items() if mapping else v):
            if n:
                _emit(out, room, ", ")
            if mapping:
                _repr_into(item[0], out, room, depth + 1)
                _emit(out, room, ": ")
                _repr_into(item[1], out, room, depth + 1)
            else:
                _repr_into(item, out, room, depth + 1)
        _emit(out, room, close)
    elif t.__module__ in _REPR_MODULES:  # a standard-library value rebuilt here: its own repr
        text = repr(v)
        _emit(out, room, text[: room[0] + 2] + ("…" if len(text) > room[0] + 2 else ""))
    else:
        _emit(out, room, f"<{t.__name__}>")


# Modules whose values the wire rebuilds (sandbox._stdvalues): their reprs are standard-library
# code, bounded by the value's own size.
_REPR_MODULES = frozenset(("fractions", "decimal", "datetime", "uuid", "ipaddress", "pathlib",
                           "array", "types", "collections", "builtins", "agentenv.mirror",
                           "numpy"))


# --------------------------------------------------------------------------- computing

def _as_int(value: Any) -> int | None:
    """``value`` as an int when it is one to Python's operators (an int, a bool, an IntEnum
    member, a numpy integer: anything with ``__index__``), else None. Values here are rebuilt
    on this side (builtin and standard-library types), so ``__index__`` is never a candidate's."""
    if type(value) in (int, bool):
        return int(value)
    if type(value) in (str, bytes, float, complex, list, tuple, dict, set, frozenset):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _bits(value: Any) -> int:
    number = _as_int(value)
    if number is not None:
        return abs(number).bit_length()
    if isinstance(value, Fraction):
        return max(abs(value.numerator).bit_length(), value.denominator.bit_length())
    return 0


def _check_int(bits: int, what: str) -> None:
    if bits > COMPUTE_INT_BITS:
        raise BudgetExceeded(f"{what} would be an int of about {bits:,} bits; the judge computes "
                             f"ints up to {COMPUTE_INT_BITS:,} bits (COMPUTE_INT_BITS)")


def _check_length(n: int, what: str) -> None:
    if n > MAX_SEQUENCE:
        raise BudgetExceeded(f"{what} would hold {n:,} items; the judge builds at most "
                             f"{MAX_SEQUENCE:,} (MAX_SEQUENCE)")


def _is_int(v: Any) -> bool:
    return _as_int(v) is not None


def _check_pow(base: Any, exponent: Any, modulus: Any = None) -> None:
    exponent = _as_int(exponent)
    if not (_is_int(base) or isinstance(base, Fraction)) or exponent is None or abs(exponent) <= 1:
        return
    if modulus is not None:
        if _bits(exponent) * max(1, _bits(modulus)) > _MAX_POWMOD:
            raise BudgetExceeded("a modular pow this wide is over the judge's budget")
        return
    if _bits(base) > 1:
        _check_int(max(1, _bits(base) - 1) * abs(exponent), "the power")


def _check_mul(a: Any, b: Any) -> None:
    if _is_int(a) and _is_int(b):
        _check_int(_bits(a) + _bits(b), "the product")
    elif _is_int(a) and hasattr(b, "__len__"):
        _check_length(len(b) * max(0, _as_int(a) or 0), "the repeated sequence")
    elif _is_int(b) and hasattr(a, "__len__"):
        _check_length(len(a) * max(0, _as_int(b) or 0), "the repeated sequence")


def _check_mod(a: Any, b: Any) -> None:
    if type(a) in (str, bytes):  # printf-style formatting: widths and precisions from values
        args = b if type(b) is tuple else (b,)
        for arg in args:
            if _is_int(arg) and abs(arg) > _MAX_WIDTH:
                raise BudgetExceeded(f"a format width of {arg}; at most {_MAX_WIDTH} (a budget)")


def _check_lshift(a: Any, b: Any) -> None:
    shift = _as_int(b)
    if _is_int(a) and shift is not None and shift > 0 and _as_int(a):
        _check_int(_bits(a) + shift, "the shifted int")


_BINOP_CHECKS: dict[str, Callable[[Any, Any], None]] = {
    "**": _check_pow, "*": _check_mul, "<<": _check_lshift, "%": _check_mod,
}


def guarded_binop(op: str, a: Any, b: Any, compute: Callable[[Any, Any], Any]) -> Any:
    """``compute(a, b)`` for the operator ``op``, refused first when its result would pass a budget."""
    np = loaded("numpy")
    if np is not None and (isinstance(a, np.ndarray) or isinstance(b, np.ndarray)):
        _check_numpy_binop(np, op, a, b)
    elif op in _FRACTION_OPS and (isinstance(a, Fraction) or isinstance(b, Fraction)):
        # Each of these reduces by a gcd, quadratic in the width of the parts.
        if _bits(a) + _bits(b) > _FRACTION_BITS:
            raise BudgetExceeded(f"Fraction arithmetic on parts of {_bits(a) + _bits(b):,} bits; "
                                 f"the judge computes up to {_FRACTION_BITS:,} (a budget)")
        if op == "**":
            _check_pow(a, b)
    else:
        check = _BINOP_CHECKS.get(op)
        if check is not None:
            check(a, b)
    return compute(a, b)


_FRACTION_OPS = frozenset(("+", "-", "*", "/", "//", "%", "**"))
_FRACTION_BITS = 1 << 16


def _check_numpy_binop(np: Any, op: str, a: Any, b: Any) -> None:
    """Broadcasting (``column + row``) and ``@`` build results far larger than their operands:
    their sizes are computed from the shapes before anything is built."""
    try:
        sa, sb = np.shape(a), np.shape(b)
        if op == "@" and len(sa) >= 1 and len(sb) >= 1:
            outer = math.prod(np.broadcast_shapes(sa[:-2], sb[:-2]))
            rows = sa[-2] if len(sa) >= 2 else 1
            cols = sb[-1] if len(sb) >= 2 else 1
            size, work = outer * rows * cols, outer * rows * cols * sa[-1]
        else:
            size = math.prod(np.broadcast_shapes(sa, sb))
            work = size
    except ValueError:
        return  # shapes that do not combine: numpy itself will say so
    _check_length(size, "the array")
    _check_length(work // 10, "the matrix product's work")


# numpy methods that build nothing larger than the array they are called on (the rest are
# refused on the trusted side: a check that needs them runs in the judge process).
_NUMPY_METHODS = frozenset((
    "tolist", "item", "sum", "mean", "min", "max", "all", "any", "argmax", "argmin", "argsort",
    "sort", "copy", "flatten", "ravel", "reshape", "transpose", "round", "cumsum", "cumprod",
    "prod", "std", "var", "nonzero", "clip", "squeeze", "tobytes", "swapaxes", "conj",
    "diagonal", "trace", "searchsorted", "astype", "dot", "view", "is_integer", "as_integer_ratio",
    "count", "index",
))


def _check_numpy_method(np: Any, owner: Any, name: str, args: tuple[Any, ...]) -> None:
    if name not in _NUMPY_METHODS:
        raise BudgetExceeded(f"numpy's {name}() is not evaluated on the trusted side (it can "
                             f"build more than the value holds); write the check as statements, "
                             f"which run in the judge process")
    if name == "dot" and args:
        _check_numpy_binop(np, "@", owner, args[0])
    if name == "astype" and args:
        try:
            itemsize = np.dtype(args[0]).itemsize
        except TypeError:
            return
        _check_length(getattr(owner, "size", 1) * max(itemsize, 1) // 8, "the converted array")


def _guard_range(*args: Any) -> range:
    made = range(*args)
    _check_length(len(made), "the range")
    return made


def _guard_pow(*args: Any, **kwargs: Any) -> Any:
    values = list(args) + [kwargs.get(k) for k in ("base", "exp", "mod") if k in kwargs]
    if len(values) >= 2:
        _check_pow(values[0], values[1], values[2] if len(values) > 2 else None)
    return builtins.pow(*args, **kwargs)


def _guard_sized(factory: Callable[..., Any]) -> Callable[..., Any]:
    def make(*args: Any, **kwargs: Any) -> Any:
        if args and _is_int(args[0]):
            _check_length(args[0], f"{factory.__name__}()")
        return factory(*args, **kwargs)
    return make


def _guard_round(number: Any, ndigits: Any = None) -> Any:
    if _is_int(ndigits) and abs(ndigits) > 10_000:
        raise BudgetExceeded(f"round() to {ndigits} digits; at most 10000 (a budget)")
    return builtins.round(number, ndigits)


def _guard_factorial(n: Any) -> Any:
    if _is_int(n) and n > 1:
        _check_int(n * max(1, _bits(n)), "the factorial")
    return math.factorial(n)


def _guard_comb(n: Any, k: Any) -> Any:
    if _is_int(n) and _is_int(k) and n > 0:
        _check_int(min(k, max(0, n - k)) * max(1, _bits(n)), "the binomial coefficient")
    return math.comb(n, k)


def _guard_perm(n: Any, k: Any = None) -> Any:
    if _is_int(n) and n > 0:
        _check_int((n if k is None else min(k, n)) * max(1, _bits(n)), "the permutation count")
    return math.perm(n, k)


def _guard_product(fn: Callable[..., Any]) -> Callable[..., Any]:
    def product(*args: Any, **kwargs: Any) -> Any:
        items = list(args[0]) if fn is math.prod and args else list(args)
        _check_int(sum(_bits(x) for x in items) + _bits(kwargs.get("start", 1)), f"{fn.__name__}()")
        return fn(items, **kwargs) if fn is math.prod else fn(*items)
    return product


def _guard_sum(iterable: Any, /, start: Any = 0) -> Any:
    items = list(iterable)
    if type(start) not in (int, float, bool, complex):
        total = sum(len(x) for x in items if hasattr(x, "__len__"))
        if len(items) * total > 100 * MAX_SEQUENCE:
            raise BudgetExceeded(f"sum() concatenating {len(items):,} sequences is over the judge's budget")
    return builtins.sum(items, start)


def _guard_hashed(factory: Callable[..., Any]) -> Callable[..., Any]:
    def make(*args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], Mapping) and not isinstance(args[0], dict):
            _refuse_collisions(list(args[0]))  # a ChainMap, a mappingproxy: built from its keys
        elif args and not isinstance(args[0], (set, frozenset, dict, range, str, bytes)):
            items = list(args[0])
            keys = items
            if factory is dict:
                keys = [p[0] for p in items if type(p) in (tuple, list) and len(p) == 2]
            _refuse_collisions(keys)
            args = (items, *args[1:])
        return factory(*args, **kwargs)
    return make


def _refuse_collisions(keys: list[Any]) -> None:
    """Refuse many *distinct* keys that share hashes (inserting them would be quadratic).

    Repeated keys are not collisions: ``set([1] * 1000)`` is cheap and common (a list with
    duplicates turned into a set), so a key equal to the first one seen with its hash counts
    for nothing; only keys unequal to it do. Each key costs one hash and at most one
    comparison, so this stays linear.
    """
    n = len(keys)
    if n < 64:
        return
    first: dict[int, Any] = {}
    collisions = 0
    try:
        for key in keys:
            seen = first.setdefault(hash(key), key)
            if seen is not key and seen != key:
                collisions += 1
    except TypeError:
        return  # unhashable: the constructor itself will say so
    if collisions > n // 16 + 8:
        raise BudgetExceeded("the values collide in the hash table (building the set would be quadratic)")


# Keyed by id(): builtins and math's functions live as long as the process, and a lookup by id
# costs the same whatever the argument is (hashing a candidate's tuple would not).
_GUARDED: dict[int, Callable[..., Any]] = {}


def _register() -> None:
    pairs: list[tuple[Any, Callable[..., Any]]] = [
        (builtins.range, _guard_range), (builtins.pow, _guard_pow),
        (builtins.round, _guard_round), (builtins.sum, _guard_sum),
        (builtins.bytes, _guard_sized(builtins.bytes)),
        (builtins.bytearray, _guard_sized(builtins.bytearray)),
        (builtins.set, _guard_hashed(builtins.set)),
        (builtins.frozenset, _guard_hashed(builtins.frozenset)),
        (builtins.dict, _guard_hashed(builtins.dict)),
        (math.factorial, _guard_factorial), (math.comb, _guard_comb), (math.perm, _guard_perm),
        (math.prod, _guard_product(math.prod)), (math.lcm, _guard_product(math.lcm)),
    ]
    for original, guard in pairs:
        _GUARDED[id(original)] = guard


_register()

# Methods of str/bytes whose result grows with an int argument (a width, a count).
_WIDENING = frozenset(("ljust", "rjust", "center", "zfill", "expandtabs", "format", "format_map",
                       "replace", "join"))


def _guarded(fn: Any) -> Any:
    return _GUARDED.get(id(fn), fn)


def guarded_call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with budgets on the builtins whose cost can outgrow their inputs.

    Guarded callables passed as arguments (``map(pow, ...)``) are swapped for their guarded
    twins too, so no trusted builtin runs unguarded on a candidate value. Attribute calls
    on trusted strings (``"x".ljust(n)``) have their widths bounded.
    """
    guard = _GUARDED.get(id(fn))
    args = tuple(_guarded(a) for a in args)
    if kwargs:
        kwargs = {k: _guarded(v) for k, v in kwargs.items()}
    if guard is not None:
        return guard(*args, **kwargs)
    owner: Any = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", "")
    np = loaded("numpy")
    if np is not None and isinstance(owner, (np.ndarray, np.generic)):
        _check_numpy_method(np, owner, name, args)
    elif type(owner) in (str, bytes, bytearray) and name in _WIDENING:
        if name == "join" and args:
            items = list(args[0])  # materialised once: its length decides the result's
            total = len(owner) * max(0, len(items) - 1)
            total += sum(len(x) for x in items if type(x) in (str, bytes, bytearray))
            if total > MAX_SEQUENCE:
                raise BudgetExceeded(f"join() would build {total:,} characters; the judge builds "
                                     f"at most {MAX_SEQUENCE:,} (MAX_SEQUENCE)")
            return fn(items, *args[1:], **kwargs)
        sizes = [len(owner)]
        for arg in (*args, *kwargs.values()):
            if _is_int(arg):
                if abs(_as_int(arg) or 0) > _MAX_WIDTH:
                    raise BudgetExceeded(f"a width or count of {arg}; at most {_MAX_WIDTH} (a budget)")
            elif type(arg) in (str, bytes, bytearray):
                sizes.append(len(arg))
        if len(owner) * max(sizes[1:], default=1) > 10 * MAX_SEQUENCE:
            raise BudgetExceeded("the string this builds is over the judge's budget")
        if name in ("format", "format_map") and type(owner) is str:
            _check_format_widths(owner)
    elif name == "to_bytes" and _is_int(owner):
        length = _as_int(args[0]) if args else _as_int(kwargs.get("length", 1))
        if length is not None and length > MAX_SEQUENCE:
            raise BudgetExceeded(f"to_bytes() of {length:,} bytes; the judge builds at most "
                                 f"{MAX_SEQUENCE:,} (MAX_SEQUENCE)")
    return fn(*args, **kwargs)


def _check_format_widths(template: str) -> None:
    """Refuse a format string (possibly the candidate's) whose widths or precisions would build
    more than ``_MAX_WIDTH`` characters per field."""
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:
        return  # str.format itself will say what is wrong
    for _text, _field, spec, _conversion in fields:
        digits = "".join(c if c.isdigit() else " " for c in spec or "").split()
        if any(len(d) > 6 or int(d) > _MAX_WIDTH for d in digits):
            raise BudgetExceeded(f"a format width or precision over {_MAX_WIDTH} (a budget)")


def guarded_format(value: Any, conversion: int, spec: str) -> str:
    """An f-string field whose format spec was computed (``f"{x:{w}}"``): the conversion
    (``!r``, ``!s``, ``!a``), then ``format`` with the spec's widths bounded."""
    if conversion == ord("r"):
        value = repr(value)
    elif conversion == ord("s"):
        value = str(value)
    elif conversion == ord("a"):
        value = ascii(value)
    _check_format_widths("{:" + str(spec) + "}")
    return format(value, spec)
