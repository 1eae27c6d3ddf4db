"""The judge process ``J``: runs a task's check program and setup code where no candidate code ran.

Loaded by path inside the sandbox (standard library only). The fork server forks ``J`` from
the same pristine zygote as the candidate process ``G``, with the same isolation and limits
(task data is untrusted input too), for runs whose plan has checks the trusted side cannot
decompose (loops, several statements, helper functions, names from the setup code). Its job is
``{"role": "judge", "nonce", "prelude", "setup", "checks": [{"i", "src"}, ...], "limits",
"float_tolerance", "imports", "packages", "defines"}``; besides its
result pipe it holds one descriptor: its end of the channel to ``G`` (:mod:`_rpc`). ``G`` never
sees this job: not the checks, not their expected values, not the setup as the judge runs it.

**Names.** The prelude, the setup code, then each check, run here in one namespace with this
process's own builtins and standard library; what they bind (earlier checks included) stays
bound here, whatever the candidate rebinds. A name the candidate's code imported from the
standard library (the job's ``imports``, read from its code by the parent) is imported here,
fresh; so is a third-party package exposed to the candidate (the job's ``packages``). With
the job's ``defines`` (the names the task asks the candidate to define), only those are looked
up in the candidate's namespace; every other free name stays unbound here, so a helper the
candidate defines (``isclose``, an ``np`` of its own) never receives the check's data. Without
it, every other free global name that is not a builtin is looked up in the candidate's
namespace when the check starts. A module there is answered with its name: one named as a
standard-library module or an exposed package is imported here (whatever module object the
candidate made and named so), any other is a handle. Otherwise ``G``
answers with plain data (a copy, rebuilt by
:func:`_wire.decode_value`: only builtin and standard-library values are ever
constructed here; an iterator consumed past what crossed of it fails the check, even if it
caught that; a global or an
attribute that is a list, dict, set or other mutable container is a handle instead, so the
check sees later changes as Python's would), a builtin container holding candidate objects
(rebuilt here with handles inside), or a handle to the object, which it keeps.

**Candidate objects.** A handle is an instance of the *mirror* of the object's class: a class
built here once per candidate class (same name, qualname, module, doc, ``__slots__``,
dataclass fields), whose bases are the mirrors of the candidate class's bases, down to the
real builtin exception class when it derives from one (identity against the builtins ``G``
saved before any candidate code ran: a class merely named ``ValueError``, or one planted in a
module called ``builtins``, is not one), and registered with the standard ABCs it derives
from. So ``isinstance``, ``issubclass``, ``type(x) is C``, ``C.__mro__``, ``except C`` and
``dataclasses.fields`` work with this process's own builtins: the candidate is never asked
whether something is an instance (its metaclass's ``__instancecheck__`` decides nothing here).
The same candidate object is always the same handle (``is`` holds for the run); objects of
builtin or standard classes (a generator, a function) are handles whose ``__class__`` is that
class, so ``inspect.isfunction`` and ``isinstance(g, types.GeneratorType)`` hold. An exception
the candidate raises arrives as an instance of its class's mirror (or as the real builtin
exception), with its ``args``, its ``str()``, its ``__cause__`` and the rest of its attributes
read from ``G``. ``StopIteration`` still arrives as :class:`CandidateError` (see
:func:`_exception`).

Everything else on a handle is one request to ``G``, which applies Python's own dispatch there
(reflected operators, ``__iadd__``, ``__index__``, ``__format__``...): calls, attributes
(properties, class- and static methods), ``len``, ``hash``, ``bool``, ``str``/``repr``/``format``,
items, ``abs``/``round``/``int``/``float``, ``with``, and iteration, which fetches
items in growing batches. Results that are plain data come back as copies, anything else as
handles.

**Operands.** The check's own data (its expected values above all) never crosses to the
candidate as the operand of an operation on an object the candidate returned: a dunder that
received it could record it and answer a later exact ``==`` with it. So where the check's data
meets a candidate object, the operation is decided here, on the object's value as its builtin
base class holds it (an ``int`` subclass by its int value, a ``list`` subclass by a copy of its
items), never by the candidate's dunder:

- ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``: an object whose class derives from no builtin
  value type is equal only to itself and not ordered against data;
- arithmetic (``+ - * / // % ** << >> & | ^ @``, ``divmod``, the augmented forms, reflected
  or not): computed here on the base value, giving plain data; with no base value it is a
  ``TypeError``, as for a class without the operator. So ``abs(f(x) - expected) < 1e-6`` is
  decided on real numbers, whatever ``__sub__``/``__abs__``/``__lt__`` the candidate wrote;
- ``x in obj``: decided on the base value, or a ``TypeError``.

Two exceptions, both Python's semantics where the check itself hands the candidate its
operands. Between two candidate objects (``v + Vector(1, 2)``) the candidate's dunder decides,
as in Python: no check data crosses, and a do-nothing stub cannot define the class (such a task
is hackable in Python too). And an instance of a class the check names by a class name (looks
up a capitalised name, PEP 8's convention for classes, which the planner relies on too; this
check or an earlier one of the run) gets
the check's operands: ``Vector(1, 1) * 3``, ``c = Counter2(); c += 3``, ``1 in stack``: a task
about a class's operators passes them as that class's inputs. So does an instance of a class
the task asks the candidate to define (a capitalised name among the job's ``defines``:
``price('pen') + 3`` when the reference defines ``Money``). A function entry point (named in
lower case) that returns an object never does, even if the candidate made it a class. With
``defines``, the same holds for methods, subscripts and attribute writes: a method of an
object whose class the task does not ask for (``f(0).startswith(expected)`` on an object of the
candidate's own) gets none of the check's data, only handles (a ``TypeError``), nor does
``obj.x = value``, and ``obj[key]`` reads the base value; without it, a method call or a subscript is the candidate's, as calling the entry point
is. (The operations on a call's result that the fast path writes into the candidate's job are
only those that carry no check data: see :mod:`agentenv.grading.plan`.)

Where the check meets the candidate otherwise:

- *Impostors*: a candidate class bound to a name the standard library's value modules use
  (``Fraction``, ``Decimal``, ``date``, ``Counter``...) never decides a comparison, not even
  between two of its instances (the task means the standard class).
- ``with``: the candidate's ``__exit__`` runs (it sees an exception of its own that ends the
  block) but never suppresses one: swallowing whatever is raised before the body's ``assert``
  would skip the assert. A context manager that is meant to suppress fails its checks here.
- A message never asks ``G`` anything (handles show a label), so nothing ``G`` observes
  depends on whether a check failed.

A name the candidate does not define stays unbound (``NameError``, as in Python). Builtin names are the judge's own, except in a check that uses no
other name at all and calls one builtin name (MBPP's task about its own ``sum``): there that
builtin is the candidate's, as on the fast path. Standard-library modules are always the judge's own, so
a candidate that patched ``math``, ``re.fullmatch`` or ``sorted`` in its own process changes
nothing here.

With the job's ``float_tolerance``, each single ``==`` / ``!=`` of a check also holds for floats
within that tolerance (absolute or relative), inside lists, tuples and dict values too, as on
the fast path; otherwise comparisons are Python's own.

Arguments are copies: plain data, candidate handles, or callables of the check (``G`` gets a
stub that calls back here; nesting is capped). Lists, dicts and sets a call mutated are copied
back into the check's objects (in place, keeping their inner lists), so "must not modify its
argument" checks still see the change. An argument the call returns is the check's own object
(``ident(x) is x``). A copy the candidate keeps (``self.items = items``) is kept in step with
the check's object from then on: each message carries the changes either side made since the
last one, so the two behave as Python's one object at every crossing.

**Shared state.** A call result the candidate keeps (its own list, dict, set, deque..., an item
of one, such lists inside a fresh tuple, list or dict), a generator or iterator, and a dict
view are handles, read when the check reads them (a generator runs as the check pulls it; see
:meth:`_Channel.next`); a fresh result is a copy. The candidate's globals are read each time
the check reads them (:class:`_Namespace`). What the candidate prints while it answers is
written to the check's redirected ``sys.stdout``/``sys.stderr``.

**Verdicts.** One frame per check on this process's own result pipe, which only the worker
reads: passed when the check ran to its end without an exception, and nothing that a check
could have swallowed went wrong on the way (the candidate's process ended or broke protocol,
callbacks nested too deep, a value over the decoder's budgets). A candidate that hangs in a
call leaves the check unreported; the worker's deadline ends both processes and the parent
marks it a timeout.
"""

from __future__ import annotations

import abc
import ast
import builtins
import collections
import contextlib
import functools
import importlib
import math
import operator
import os
import symtable
import sys
import types
from collections.abc import Callable
from typing import Any, Literal

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)

import _rpc  # noqa: E402  (loaded by path inside the sandbox)
import _stdvalues  # noqa: E402
import _wire  # noqa: E402
from _schema import (  # noqa: E402  (the wire schema: keys and kinds, declared once)
    ASSERTION,
    CHECK,
    CHECK_SOURCE,
    DONE,
    EXCEPTION,
    INDEX,
    ITEM_INDEX,
    KIND,
    MESSAGE,
    NO_RESULT,
    OK,
    SETUP,
    SYNTAX,
    TYPE,
)

__all__ = ["MAX_NESTING", "Remote", "run_judge"]

MAX_NESTING = 32  # calls between the check and the candidate nested inside each other
MAX_SHARED = 32  # objects of the check's the candidate keeps copies of, kept in step
MAX_MESSAGE = 400
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))
_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType, functools.partial)


class _Gone(BaseException):
    """The channel to the candidate is unusable. A BaseException, so that a check's
    ``except Exception`` cannot swallow it; the verdict is also decided from the channel's
    state, so a bare ``except:`` gains nothing either."""


class CandidateError(Exception):
    """An exception the candidate raised whose type is not a builtin exception (or is one that
    would end the check's iteration quietly: see :func:`_exception`)."""


class _NotPlain(TypeError):
    """A check used a candidate object as if it were a value."""


def _clip(text: str, limit: int = MAX_MESSAGE) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _show(value: Any, limit: int = 80) -> str:
    before = _QUIET[0]
    _QUIET[0] = True  # a handle shows its label: a message never asks the candidate anything
    try:
        return _clip(repr(value), limit)
    except BaseException:  # a huge int, a deep value: never let a message fail a check
        return f"<a {type(value).__name__}>"
    finally:
        _QUIET[0] = before


def _message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:
        text = ""
    name = type(exc).__name__
    return _clip(f"{name}: {text}" if text else name)


def _exception(name: Any, text: Any) -> BaseException:
    """The judge's own copy of an exception the candidate raised (only a name and a message).

    A builtin exception type is rebuilt as itself, except ``StopIteration`` and
    ``StopAsyncIteration``: raised as themselves inside the check they would end a ``map``,
    ``zip`` or ``filter`` the check iterates quietly, so a candidate that answers nothing would
    pass (PEP 479 turns them into ``RuntimeError`` out of generators for the same reason). They
    arrive as :class:`CandidateError`, which the check can still catch as an ``Exception``.
    """
    name, text = str(name)[:100], _clip(str(text))
    kind = getattr(builtins, name, None)
    if (isinstance(kind, type) and issubclass(kind, Exception)
            and not issubclass(kind, (StopIteration, StopAsyncIteration))
            and kind.__module__ == "builtins"):
        try:
            return kind(text)
        except BaseException:
            pass
    return CandidateError(f"{name}: {text}" if text else name)


MAX_MIXED = 4096  # items of one container that holds candidate objects
MAX_MIXED_DEPTH = 8
MAX_BATCH = 256  # items of an iterator fetched in one request (the first request takes one)
ONE_BY_ONE = 8  # items of an iterator fetched one per request before batches grow
_MIXED: dict[type, str] = {list: "l", tuple: "t", set: "s", frozenset: "fs"}
_BUILD: dict[str, Callable[[Any], Any]] = dict(l=list, t=tuple, s=set, fs=frozenset)
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge}
_NO_BASE = object()  # the candidate object's class derives from no builtin value type
# The operators of ``_binary``, applied here to a candidate object's builtin base value.
_ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {"divmod": divmod}
for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift",
            "and_", "or_", "xor", "matmul"):
    _ARITHMETIC[_op.rstrip("_")] = getattr(operator, _op)
    _ARITHMETIC["i" + _op.rstrip("_")] = getattr(operator, "i" + _op.rstrip("_"))
_own_dict = type.__dict__["__dict__"].__get__  # a class's own namespace (never a mirror's property)
# A dict view's items -> a view of the same kind over a dict built here.
_VIEWS: dict[Any, Callable[[list[Any]], Any]] = {
    type({}.keys()): lambda items: dict.fromkeys(items).keys(),
    type({}.items()): lambda items: dict(items).items(),
    type({}.values()): lambda items: dict(enumerate(items)).values(),
}


class _Buffer:
    """Items of a candidate iterator fetched ahead (in growing batches), and how it ended."""

    __slots__ = ("ended", "error", "items", "pulled", "returned", "size", "taken")

    def __init__(self) -> None:
        self.items: collections.deque[Any] = collections.deque()
        self.error: BaseException | None = None
        self.ended = False
        self.returned: Any = None
        self.pulled = -1  # the channel's request count when the buffered items were pulled
        self.taken = 0  # items received so far
        self.size = 1


@contextlib.contextmanager
def _quiet() -> Any:
    """While building a message, a handle shows its label: no request to the candidate."""
    before = _QUIET[0]
    _QUIET[0] = True
    try:
        yield
    finally:
        _QUIET[0] = before


def _fields(raw: list[Any]) -> dict[str, Any]:
    """A candidate dataclass's fields as ``dataclasses.Field`` objects of this process."""
    import dataclasses

    fields: dict[str, Any] = {}
    for name, shown, default, flags, kind in raw:
        options: dict[str, Any] = {}
        if type(default) is list and default[:1] == ["v"]:
            options["default"] = _wire.decode_value(default[1])
        elif default == ["f"]:
            options["default_factory"] = _no_factory
        init, show, compare = (bool(f) for f in flags)
        field = dataclasses.field(init=init, repr=show, compare=compare, **options)
        field.name = str(name)
        annotation = getattr(builtins, str(shown[1]), None) if shown[0] == "b" else str(shown[1])
        field.type = annotation
        field._field_type = getattr(dataclasses, str(kind), None) or dataclasses._FIELD  # type: ignore[attr-defined]
        fields[field.name] = field
    return fields


_STREAMS = {"stdout": sys.stdout, "stderr": sys.stderr}  # this process's own, never a check's


def _update(original: Any, new: Any, depth: int = 0) -> None:
    """Make the check's ``original`` equal to ``new`` (what the candidate made of its copy) in
    place, keeping the check's inner lists and dicts where the shapes still match, so a name
    bound to one of them (``row`` in ``m = [row, ...]``) sees the change too."""
    if type(original) is list and type(new) is list:
        if len(original) == len(new) and depth < 8:
            for i, (old, fresh) in enumerate(zip(original, new, strict=True)):
                if type(old) is type(fresh) and type(old) in (list, dict) and old is not original:
                    _update(old, fresh, depth + 1)
                elif not (type(old) is type(fresh) and old == fresh):
                    original[i] = fresh
        else:
            original[:] = new
    elif type(original) is dict and type(new) is dict:
        for key in [k for k in original if k not in new]:
            del original[key]
        for key, fresh in new.items():
            old = original.get(key, _NO_BASE)
            if (type(old) is type(fresh) and type(old) in (list, dict) and old is not original
                    and depth < 8):
                _update(old, fresh, depth + 1)
            else:
                original[key] = fresh
        if list(original) != list(new):  # the candidate reordered the keys
            items = [(k, original[k]) for k in new]
            original.clear()
            original.update(items)
    elif type(original) is bytearray:
        original[:] = new
    elif type(original) is set:
        original.clear()
        original.update(new)


class _Ref:
    """What a judge object stands for: an object the candidate's process holds."""

    __slots__ = ("chan", "label", "ref", "text")

    def __init__(self, chan: _Channel, ref: list[Any], label: str, text: str = "") -> None:
        self.chan, self.ref, self.label, self.text = chan, ref, label, text


# id(judge object) -> what it stands for. Every object listed is kept alive by its channel
# (``_Channel.objects`` / ``kept``), so an id here is never reused by another object.
_STATE: dict[int, _Ref] = {}
_QUIET = [False]  # while set, a handle's repr/str is its label: no request (messages, _show)


def _state(obj: Any) -> _Ref:
    found = _STATE.get(id(obj))
    if found is None:
        raise TypeError("not an object of the candidate's")
    return found


def _do(op: str, *operands: Any) -> Any:
    for operand in operands:
        found = _STATE.get(id(operand))
        if found is not None:
            return found.chan.do(op, operands)
    raise TypeError("no candidate object among the operands")  # pragma: no cover


def _binary(op: str, reflected: bool = False) -> Callable[..., Any]:
    def method(self: Any, other: Any) -> Any:
        return _state(self).chan.arithmetic(op, self, other, reflected)
    method.__name__ = f"__{'r' if reflected else ''}{op}__"
    return method


def _unary(op: str) -> Callable[..., Any]:
    def method(self: Any, *args: Any) -> Any:
        return _state(self).chan.do(op, (self, *args))
    method.__name__ = f"__{op}__"
    return method


def _item(op: str) -> Callable[..., Any]:
    def method(self: Any, *args: Any) -> Any:
        return _state(self).chan.item(op, self, args)
    method.__name__ = f"__{op}__"
    return method


def _comparison(op: str) -> Callable[..., Any]:
    def method(self: Any, other: Any) -> Any:
        return _state(self).chan.compare(op, self, other)
    method.__name__ = f"__{op}__"
    return method


class Remote:
    """An object of the candidate's, as the check sees it (see the module docstring).

    Every mirror class of a candidate class derives from this; its instances are the handles.
    Attribute reads, writes and deletes, calls and every protocol operation go to the
    candidate's process, which applies Python's own dispatch; comparisons and ``in`` with the
    check's plain data follow the rule in the module docstring.
    """

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        return _state(self).chan.get(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        _state(self).chan.set(self, name, value)

    def __delattr__(self, name: str) -> None:
        _state(self).chan.delete(self, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _state(self).chan.call(self, args, kwargs)

    def __repr__(self) -> str:
        if _QUIET[0]:
            return f"<the candidate's {type(self).__name__}>"
        return _state(self).chan.do("repr", (self,))

    def __str__(self) -> str:
        if _QUIET[0]:
            return f"<the candidate's {type(self).__name__}>"
        return _state(self).chan.do("str", (self,))

    def __format__(self, spec: str) -> str:
        return _state(self).chan.do("format", (self, spec))

    def __iter__(self) -> Any:
        return _state(self).chan.iterate(self, "iter")

    def __reversed__(self) -> Any:
        return _state(self).chan.iterate(self, "reversed")

    def __next__(self) -> Any:
        return _state(self).chan.next(self)

    def __contains__(self, item: Any) -> bool:
        return _state(self).chan.contains(self, item)

    def __enter__(self) -> Any:
        return _state(self).chan.do("enter", (self,))

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> Literal[False]:
        chan = _state(self).chan
        if exc is not None and id(exc) in _STATE and id(type(exc)) in _STATE:
            chan.do("exit", (self, type(exc), exc, None))  # its own exception: it sees it
        else:
            chan.do("exit", (self, None, None, None))
        # Never suppressed: an exception raised before the body's assert would otherwise
        # skip the assert (see "with" in the module docstring).
        return False

    def __dir__(self) -> Any:
        return _state(self).chan.do("dir", (self,))

    def __copy__(self) -> Any:
        # a list, dict... of the candidate's: a copy of its value; anything else: a
        # reference to the object in the candidate's process
        value = _state(self).chan.base(self)
        return self if value is _NO_BASE else value

    def __deepcopy__(self, memo: Any) -> Any:
        return self.__copy__()

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(f"the candidate's {_state(self).label} cannot be pickled by the check")

    __eq__ = _comparison("eq")
    __ne__ = _comparison("ne")
    __lt__ = _comparison("lt")
    __le__ = _comparison("le")
    __gt__ = _comparison("gt")
    __ge__ = _comparison("ge")
    __hash__ = _unary("hash")  # type: ignore[assignment,unused-ignore]
    __bool__ = _unary("truth")
    __len__ = _unary("len")
    __getitem__ = _item("getitem")
    __setitem__ = _item("setitem")
    __delitem__ = _item("delitem")
    __neg__ = _unary("neg")
    __pos__ = _unary("pos")
    __invert__ = _unary("invert")
    __abs__ = _unary("abs")
    __round__ = _unary("round")
    __int__ = _unary("int")
    __float__ = _unary("float")
    __complex__ = _unary("complex")
    __index__ = _unary("index")
    __bytes__ = _unary("bytes")
    __floor__ = _unary("floor")
    __ceil__ = _unary("ceil")
    __trunc__ = _unary("trunc")
    __add__, __radd__, __iadd__ = _binary("add"), _binary("add", True), _binary("iadd")
    __sub__, __rsub__, __isub__ = _binary("sub"), _binary("sub", True), _binary("isub")
    __mul__, __rmul__, __imul__ = _binary("mul"), _binary("mul", True), _binary("imul")
    __truediv__, __rtruediv__, __itruediv__ = (_binary("truediv"), _binary("truediv", True),
                                               _binary("itruediv"))
    __floordiv__, __rfloordiv__, __ifloordiv__ = (_binary("floordiv"), _binary("floordiv", True),
                                                  _binary("ifloordiv"))
    __mod__, __rmod__, __imod__ = _binary("mod"), _binary("mod", True), _binary("imod")
    __pow__, __rpow__, __ipow__ = _binary("pow"), _binary("pow", True), _binary("ipow")
    __lshift__, __rlshift__, __ilshift__ = (_binary("lshift"), _binary("lshift", True),
                                            _binary("ilshift"))
    __rshift__, __rrshift__, __irshift__ = (_binary("rshift"), _binary("rshift", True),
                                            _binary("irshift"))
    __and__, __rand__, __iand__ = _binary("and"), _binary("and", True), _binary("iand")
    __or__, __ror__, __ior__ = _binary("or"), _binary("or", True), _binary("ior")
    __xor__, __rxor__, __ixor__ = _binary("xor"), _binary("xor", True), _binary("ixor")
    __matmul__, __rmatmul__, __imatmul__ = (_binary("matmul"), _binary("matmul", True),
                                            _binary("imatmul"))
    __divmod__, __rdivmod__ = _binary("divmod"), _binary("divmod", True)


class _RemoteError:
    """The mixin of a mirror exception class: attributes the judge's copy lacks are read from
    the candidate's exception; ``str()`` is the candidate's text."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        return _state(self).chan.get(self, name)

    def __str__(self) -> str:
        found = _STATE.get(id(self))
        return found.text if found is not None else ""


class _Mirror(type):
    """The metaclass of mirror classes: constructing one, or reading or writing a class
    attribute it does not hold, asks the candidate's class. ``__bases__``, ``__mro__`` and
    ``__dict__`` read as the candidate's class has them (no mixin of the judge's in sight)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return _state(cls).chan.call(cls, args, kwargs)

    def __getattr__(cls, name: str) -> Any:
        found = _STATE.get(id(cls))
        if found is None or name.startswith("_agentenv"):
            raise AttributeError(name)
        return found.chan.get(cls, name)

    def __setattr__(cls, name: str, value: Any) -> None:
        _state(cls).chan.set(cls, name, value)

    def __delattr__(cls, name: str) -> None:
        _state(cls).chan.delete(cls, name)

    def __dir__(cls) -> Any:
        return _state(cls).chan.do("dir", (cls,))

    # A class is true; the container protocols are its metaclass's (an Enum's members,
    # ``Color['RED']``, ``list(Color)``) or ``__class_getitem__``, asked of the candidate's.
    def __bool__(cls) -> bool:
        return True

    def __len__(cls) -> int:
        return _state(cls).chan.do("len", (cls,))

    def __iter__(cls) -> Any:
        return _state(cls).chan.iterate(cls, "iter")

    def __getitem__(cls, key: Any) -> Any:
        return _state(cls).chan.do("getitem", (cls, key))

    def __contains__(cls, item: Any) -> bool:
        return bool(_state(cls).chan.do("contains", (cls, item)))

    def __repr__(cls) -> str:
        return f"<class '{type.__dict__['__module__'].__get__(cls)}.{cls.__qualname__}'>"

    @property
    def __bases__(cls) -> tuple[type, ...]:  # type: ignore[override]
        return type.__dict__["__dict__"].__get__(cls)["_agentenv_bases"]

    @property
    def __mro__(cls) -> tuple[type, ...]:
        hidden = (Remote, _RemoteError)
        return tuple(k for k in type.__dict__["__mro__"].__get__(cls) if k not in hidden)

    @property  # type: ignore[misc]
    def __dict__(cls) -> Any:  # type: ignore[override]
        return _state(cls).chan.get(cls, "__dict__")


# Classes written in C that no module names, by the name ``G`` reports for them.
_C_TYPES: dict[str, type] = {t.__qualname__: t for t in (  # type: ignore[var-annotated]
    type({}.keys()), type({}.values()), type({}.items()), type(iter([])), type(iter(())),
    type(iter(range(0))), type(iter("")), type(iter(set())), type(iter({})),
    type(reversed([])), type(map(abs, ())), type(filter(None, ())), type(zip()),
    type(enumerate(())), type(iter({}.items())), type(iter({}.values())))}


class _StandIn(type):
    """The metaclass of the classes of handles to builtin or standard objects: calling
    ``type(handle)`` (as ``dataclasses.asdict`` does to copy a list) makes the real thing."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        real = type.__dict__["__dict__"].__get__(cls)["_agentenv_real"]
        if not isinstance(real, type):
            raise TypeError(f"cannot create '{real}' instances")
        return real(*args, **kwargs)


def _safe_exception_base(kind: type) -> type:
    """The real exception class a mirror derives from: ``StopIteration`` and anything that is not
    an ``Exception`` arrive as :class:`CandidateError` (see :func:`_exception`)."""
    if issubclass(kind, (StopIteration, StopAsyncIteration)) or not issubclass(kind, Exception):
        return CandidateError
    return kind


def _stdlib_class(module: Any, name: Any) -> type | None:
    """A standard-library class of this process's own, by module and name."""
    if type(module) is not str or type(name) is not str:
        return None
    if module.split(".")[0] not in _STDLIB and module not in ("types", "functools", "abc"):
        return None
    try:
        found = getattr(importlib.import_module(module), name)
    except Exception:
        return None
    return found if isinstance(found, type) else None


_VALUE_MODULES = ("fractions", "decimal", "datetime", "collections", "pathlib", "uuid",
                  "ipaddress", "array", "enum")
_value_names: list[frozenset[str]] = []


def _stdlib_value_names() -> frozenset[str]:
    """Public class names of the standard library's value modules (``Fraction``, ``date``,
    ``Counter``...): a check using one of them means that class."""
    if not _value_names:
        names: set[str] = set()
        for module_name in _VALUE_MODULES:
            with contextlib.suppress(Exception):
                module = importlib.import_module(module_name)
                names.update(n for n, v in vars(module).items()
                             if isinstance(v, type) and not n.startswith("_"))
        _value_names.append(frozenset(names))
    return _value_names[0]


def _no_factory() -> Any:
    raise TypeError("the default factory of a candidate's dataclass field runs in its process")


class _Channel:
    """The judge's end of the channel: one request at a time, callbacks served while waiting."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.broken: str | None = None
        self.depth = 0
        self.requests = 0  # requests sent so far (see ``next``)
        self.callbacks: dict[int, Callable[..., Any]] = {}
        self.placed = False  # whether G was told which CPU this process runs on
        # One judge object per candidate object for the whole run (``is`` holds), the mirror
        # classes, and every other object listed in _STATE, kept alive here.
        self.objects: dict[int, Any] = {}
        self.classes: dict[int, type] = {}
        self.stand_ins: dict[type | str, type] = {}
        self.kept: list[Any] = []
        self.buffers: dict[int, _Buffer] = {}
        self.impostors: set[type] = set()
        self.methods: dict[tuple[int, str], int] = {}  # (id(mirror), name) -> key of MethodType
        self.named: set[type] = set()  # classes a check of this run named (see "Operands")
        self.asked_classes: frozenset[str] = frozenset()  # the task's asked class names
        self.defines: frozenset[str] | None = None  # what the task asks for (None: not said)
        # Objects of the check's that the candidate keeps a copy of (``self.items = items``):
        # the copy's handle key -> [the check's object, its content as last sent]. See ``push``.
        self.shared: dict[int, list[Any]] = {}
        self.begin()

    def begin(self) -> None:
        """Forget the previous check's bookkeeping."""
        self.callbacks.clear()
        self.poisoned: str | None = None
        self.broke_now = False
        self.raised: BaseException | None = None
        self.raised_in = ""
        self.last: tuple[str, Any] | None = None

    # ---------------------------------------------------------------- requests

    def request(self, message: dict[str, Any], what: str) -> dict[str, Any]:
        if self.broken is not None:
            raise _Gone(self.broken)
        if self.depth >= MAX_NESTING:
            self.poisoned = (f"calls between the check and the candidate nested deeper than "
                             f"{MAX_NESTING} levels")
            raise RecursionError(self.poisoned)
        self.depth += 1
        self.requests += 1
        try:
            self.push(message)
            _rpc.send(self.fd, message)
            while True:
                reply = _rpc.recv(self.fd)
                self.printed(reply)
                self.pull(reply)
                if reply.get("op") == "cb":
                    self.callback(reply)
                    continue
                if "op" in reply:
                    raise _rpc.ProtocolError("a request arrived where an answer was due")
                return reply
        except _rpc.ChannelClosed:
            self.fail(f"the candidate's process ended during {_clip(what, 80)}")
        except _rpc.ProtocolError as exc:
            self.fail(f"the candidate's process broke the protocol during {_clip(what, 80)} ({exc})")
        finally:
            self.depth -= 1
        raise AssertionError("unreachable")  # pragma: no cover

    def printed(self, reply: dict[str, Any]) -> None:
        """Write what the candidate printed while answering to the check's own streams, when
        the check redirected them (``contextlib.redirect_stdout(buf)``): in one Python process
        the candidate's ``print`` writes there."""
        for key, name in (("o", "stdout"), ("e", "stderr")):
            text = reply.get(key)
            if type(text) is not str or not text:
                continue
            stream = getattr(sys, name)
            if stream is _STREAMS[name]:
                continue  # not redirected: nothing of the check's reads it
            if reply.get(key + "!"):
                self.poisoned = (f"the candidate printed more than the judge takes of one "
                                 f"request to a {name} the check redirected")
            stream.write(text)

    def push(self, message: dict[str, Any]) -> None:
        """Objects of the check's that the candidate keeps a copy of are one object in Python:
        before each message, the changes the check made to them go along, and the candidate
        makes them to its copies (``xs.append(5)`` after ``s = Stack(xs)``); its changes
        come back with its answers (``pull``). Pairs whose object the check no longer holds
        are dropped. An object that can no longer be sent (it holds something of the
        check's) fails the check."""
        sync, dropped = [], []
        for key, entry in list(self.shared.items()):
            if sys.getrefcount(entry[0]) <= 2:  # only this table (and the call's argument)
                del self.shared[key]
                dropped.append(key)
                continue
            try:
                now = self.argument(entry[0], allow_callable=False, own=True)
            except Exception:
                del self.shared[key]
                dropped.append(key)
                if self.poisoned is None:
                    self.poisoned = ("the check put something the candidate cannot hold into an "
                                     "object the candidate keeps a copy of")
                continue
            if now != entry[1]:
                entry[1] = now
                sync.append([key, now])
        if sync:
            message["sync"] = sync
        if dropped:
            message["unsync"] = dropped

    def pull(self, reply: dict[str, Any]) -> None:
        """The candidate changed its kept copies of the check's objects: the same change here."""
        for item in reply.get("sync") or ():
            if type(item) is list and len(item) == 2 and item[0] in self.shared:
                entry = self.shared[item[0]]
                _update(entry[0], self.value(item[1], "a kept argument"))
                with contextlib.suppress(Exception):
                    entry[1] = self.argument(entry[0], allow_callable=False, own=True)

    def keeps(self, obj: Any, key: int) -> None:
        """The candidate keeps a copy (``key``) of the check's ``obj``: keep the two in step."""
        if len(self.shared) >= MAX_SHARED:
            if self.poisoned is None:
                self.poisoned = (f"the candidate keeps copies of more than {MAX_SHARED} of the "
                                 "check's objects (they are kept in step with the check's)")
            return
        try:
            self.shared[key] = [obj, self.argument(obj, allow_callable=False, own=True)]
        except Exception:
            if self.poisoned is None:
                self.poisoned = "the candidate keeps a copy of an object the check cannot send"

    def fail(self, why: str) -> Any:
        self.broken = why
        self.broke_now = True
        raise _Gone(why)

    def sendable(self, value: Any) -> bool:
        """Whether ``value`` can be handed to the candidate's process (data and handles)."""
        try:
            self.argument(value, allow_callable=False)
        except TypeError:
            return False
        return True

    def argument(self, value: Any, allow_callable: bool = True, depth: int = 0,
                 own: bool = False) -> list[Any]:
        found = _STATE.get(id(value))
        if found is not None:
            buffer = self.buffers.get(id(value))
            if buffer is not None and buffer.items and self.poisoned is None:
                # the judge pulled items of this iterator ahead that the check has not read:
                # the candidate would go on past them, as Python's one iterator never does
                self.poisoned = (f"the check handed back {_clip(found.label, 80)} after the judge "
                                 "had pulled items of it ahead that the check had not read")
            return list(found.ref)
        if not own and depth == 0 and self.shared:
            for key, entry in self.shared.items():
                if entry[0] is value:  # the candidate keeps a copy: that copy, in step
                    return ["h", key]
        try:
            return ["v", _wire.encode_value(value)]
        except _wire.NotPlainData:
            pass
        kind = type(value)
        if depth < MAX_MIXED_DEPTH and len(value if kind in _MIXED else ()) <= MAX_MIXED:
            if kind in (list, tuple, set, frozenset):
                return [_MIXED[kind], [self.argument(v, allow_callable, depth + 1) for v in value]]
            if kind is dict:
                return ["d", [[self.argument(k, allow_callable, depth + 1),
                               self.argument(v, allow_callable, depth + 1)]
                              for k, v in value.items()]]
        name = getattr(value, "__name__", None) if kind is type else None
        if type(name) is str and getattr(builtins, name, None) is value:
            return ["bt", name]  # a builtin class: G's own, by name
        if kind is range:
            return ["rg", [self.argument(v, allow_callable, depth + 1)
                           for v in (value.start, value.stop, value.step)]]
        if kind is slice:
            return ["sl", [self.argument(v, allow_callable, depth + 1)
                           for v in (value.start, value.stop, value.step)]]
        if allow_callable and callable(value):
            key = len(self.callbacks) + 1
            self.callbacks[key] = value
            return ["c", key]
        raise TypeError(f"a check can pass the candidate plain data, the candidate's own objects "
                        f"or a function, not a {type(value).__name__}")

    def lookup(self, name: str) -> tuple[bool, Any]:
        """The candidate's global ``name``: ``(True, value or Remote)``, or ``(False, None)``
        when the candidate does not define it."""
        message: dict[str, Any] = {"op": "name", "n": name}
        if not self.placed:  # the first request: ask G to answer from this CPU (see _rpc)
            self.placed = True
            cpu = _current_cpu()
            if cpu is not None:
                message["cpu"] = cpu
                with contextlib.suppress(OSError, AttributeError):
                    os.sched_setaffinity(0, (cpu,))
        reply = self.request(message, name)
        if reply.get("x") == "NameError" and "e" not in reply:
            return False, None
        result = reply.get("r")
        if type(result) is list and len(result) == 3 and result[0] == "m":
            # The candidate's name is bound to a module: one named as a standard-library module
            # or a package exposed to the candidate is imported here, fresh (whatever the
            # candidate did to its copy, or whatever module object it made and named so); any
            # other is the candidate's own object, a handle.
            module = _stdlib_module(result[1])
            if module is not None:
                return True, module
            reply = {"r": result[2]}
        value = self.outcome(reply, name)
        if isinstance(value, _Mirror):
            if name in _stdlib_value_names():
                self.impostors.add(value)  # see "Impostors" in the module docstring
            elif name[:1].isupper():
                self.named.add(value)  # a class the check names: see "Operands" in the docstring
        return True, value

    def outcome(self, reply: dict[str, Any], what: str) -> Any:
        if "x" in reply:
            exc = self.exception(reply)
            self.raised, self.raised_in = exc, what
            raise exc
        value = self.value(reply.get("r"), what)
        self.last = (what, value)
        return value

    def value(self, result: Any, what: str, depth: int = 0) -> Any:
        """A RESULT of the candidate's process as the check sees it (see :mod:`_rpc`)."""
        if type(result) is not list or not result or depth > MAX_MIXED_DEPTH:
            return self.fail(f"the candidate's process sent a malformed answer to {_clip(what, 80)}")
        tag, body = result[0], result[1:]
        if tag == "v" and len(body) == 1:
            try:
                return _wire.decode_value(body[0])
            except Exception as exc:  # malformed, or over the decoder's budgets
                self.poisoned = f"{_clip(what, 80)} returned a value the judge refused ({_message(exc)})"
                raise _NotPlain(self.poisoned) from None
        if tag == "b" and len(body) == 1:
            self.poisoned = (f"{_clip(what, 80)} returned a value over a budget: "
                             f"{_clip(str(body[0]), 200)}")
            raise _NotPlain(self.poisoned)
        if (tag == "h" and len(body) == 4 and type(body[0]) is int and type(body[1]) is int
                and type(body[2]) is str):
            return self.handle(body[0], body[1], _clip(what, 120),
                               body[3] == "c")
        if (tag == "a" and len(body) == 3 and type(body[0]) is int and type(body[1]) is str
                and type(body[2]) is int):
            method = self.instance(self.mirror(body[2]), ["a", body[0], body[1]],
                                   _clip(f"{what}", 120))
            self.kept.append(method)
            return method
        if tag in _BUILD and len(body) == 1 and type(body[0]) is list and len(body[0]) <= MAX_MIXED:
            return _BUILD[tag](self.value(item, what, depth + 1) for item in body[0])
        if tag == "d" and len(body) == 1 and type(body[0]) is list and len(body[0]) <= MAX_MIXED:
            pairs = body[0]
            if all(type(p) is list and len(p) == 2 for p in pairs):
                return {self.value(k, what, depth + 1): self.value(v, what, depth + 1)
                        for k, v in pairs}
        if tag == "n" and not body:
            return _NO_BASE
        return self.fail(f"the candidate's process sent a malformed answer to {_clip(what, 80)}")

    def handle(self, key: int, kind: int, label: str, is_class: bool) -> Any:
        """The judge's object for the candidate's object ``key``: one per object for the run."""
        known = self.objects.get(key)
        if known is not None:
            return known
        if is_class:
            return self.mirror(key)
        obj = self.instance(self.mirror(kind), ["h", key], label)
        self.objects[key] = obj
        return obj

    def instance(self, cls: type, ref: list[Any], label: str, text: str = "") -> Any:
        if not (isinstance(cls, _Mirror) or issubclass(cls, (Remote, _RemoteError))):
            cls = self.stand_in(cls)
        maker: Any = BaseException.__new__ if issubclass(cls, BaseException) else object.__new__
        obj = maker(cls)
        _STATE[id(obj)] = _Ref(self, ref, label, text)
        return obj

    def stand_in(self, real: type | str) -> type:
        """The class of handles to objects of a builtin or standard-library class (a
        generator, a function, a ``range``): ``isinstance`` against that class holds. A class
        written in C that this process cannot name (``real`` is then its name) gets one too."""
        known = self.stand_ins.get(real)
        if known is None:
            namespace: dict[str, Any] = {
                "_agentenv_real": real,
                "__slots__": (),
                "__doc__": property(lambda self: _state(self).chan.get(self, "__doc__")),
                "__module__": property(lambda self: _state(self).chan.get(self, "__module__")),
            }
            if isinstance(real, type):
                namespace["__class__"] = property(lambda self: real)
            known = _StandIn(real.__name__ if isinstance(real, type) else real, (Remote,),
                             namespace)
            self.stand_ins[real] = known
        return known

    def mirror(self, key: int) -> type:
        """The judge's class for the candidate's class ``key`` (built once per run)."""
        known = self.classes.get(key)
        if known is not None:
            return known
        reply = self.request({"op": "type", "f": ["h", key]}, "a class")
        desc = reply.get("r")
        if "x" in reply or type(desc) is not dict:
            return self.fail("the candidate's process could not describe a class")
        cls: type | None = None
        if type(desc.get("b")) is str:
            found = getattr(builtins, desc["b"], None)
            cls = found if isinstance(found, type) else None
        elif type(desc.get("s")) is list and len(desc["s"]) == 2:
            cls = _stdlib_class(*desc["s"])
        elif type(desc.get("c")) is str:  # a class written in C (dict_keys, an iterator)
            cls = self.stand_in(_C_TYPES.get(desc["c"]) or _clip(desc["c"], 60))
        else:
            cls = self.build(key, desc)
        if cls is None:
            return self.fail("the candidate's process described a class the judge cannot build")
        self.classes[key] = cls
        if isinstance(cls, _Mirror):
            self.objects[key] = cls
        return cls

    def build(self, key: int, desc: dict[str, Any]) -> type | None:
        name, qualname = desc.get("n"), desc.get("q")
        raw_bases = desc.get("bases")
        if type(name) is not str or type(qualname) is not str or type(raw_bases) is not list:
            return None
        real: list[type] = []
        visible: list[type] = []
        register: list[type] = []
        for base in raw_bases:
            if type(base) is list and len(base) == 2 and base[0] == "h" and type(base[1]) is int:
                mirrored = self.mirror(base[1])
                visible.append(mirrored)
                real.append(mirrored if isinstance(mirrored, _Mirror) else Remote)
            elif type(base) is list and len(base) == 2 and base[0] == "b":
                found = getattr(builtins, str(base[1]), None)
                if not isinstance(found, type):
                    return None
                visible.append(found)
                if issubclass(found, BaseException):
                    real.append(_safe_exception_base(found))
            elif type(base) is list and len(base) == 3 and base[0] == "s":
                found = _stdlib_class(base[1], base[2])
                if found is None:
                    return None
                visible.append(found)
                if isinstance(found, abc.ABCMeta):
                    register.append(found)
        mixin: type = (_RemoteError if any(issubclass(b, BaseException) for b in real)
                       else Remote)
        if not any(issubclass(b, mixin) for b in real):
            real.insert(0, mixin)
        namespace = {"__slots__": (), "__module__": str(desc.get("m", "")),
                     "__qualname__": qualname, "__doc__": desc.get("d")}
        bases = tuple(dict.fromkeys(real))
        try:
            cls = _Mirror(name, bases, namespace)
        except TypeError:  # a layout or order the judge's classes cannot take
            cls = _Mirror(name, tuple(b for b in bases if issubclass(mixin, b) or b is mixin
                                      or (mixin is _RemoteError and issubclass(b, BaseException)
                                          and b is bases[-1])) or (mixin,), namespace)
        _STATE[id(cls)] = _Ref(self, ["h", key], qualname)
        setter = type.__setattr__
        setter(cls, "_agentenv_bases", tuple(visible))
        if "slots" in desc:
            try:
                setter(cls, "__slots__", _wire.decode_value(desc["slots"]))
            except Exception:
                type.__delattr__(cls, "__slots__")
        else:
            type.__delattr__(cls, "__slots__")
        if type(desc.get("fields")) is list:
            with contextlib.suppress(Exception):
                setter(cls, "__dataclass_fields__", _fields(desc["fields"]))
        for parent in register:
            with contextlib.suppress(Exception):
                parent.register(cls)  # type: ignore[attr-defined]
        return cls

    def exception(self, reply: dict[str, Any]) -> BaseException:
        """The judge's copy of an exception the candidate raised: an instance of the mirror of
        its class (a real builtin exception class when it is one, by identity)."""
        name, text = str(reply.get("x"))[:100], _clip(str(reply.get("msg", "")))
        raw = reply.get("e")
        args: Any = None
        if "args" in reply:
            with contextlib.suppress(Exception):
                args = _wire.decode_value(reply["args"])
        if not (type(raw) is list and len(raw) == 2 and all(type(k) is int for k in raw)):
            return CandidateError(f"{name}: {text}" if text else name)
        cls = self.mirror(raw[1])
        exc = self.rebuild(cls, raw[0], name, text, args)
        cause = reply.get("cause")
        if type(cause) is dict and "x" in cause and exc.__cause__ is None:
            with contextlib.suppress(Exception):
                exc.__cause__ = self.exception(cause)
        return exc

    def rebuild(self, cls: type, key: int, name: str, text: str, args: Any) -> BaseException:
        if not isinstance(cls, _Mirror):  # a builtin exception class, or a standard one
            if isinstance(cls, type) and issubclass(cls, BaseException):
                safe = _safe_exception_base(cls)
                if safe is cls:
                    with contextlib.suppress(BaseException):
                        return cls(*args) if type(args) is tuple else cls(text)
                    with contextlib.suppress(BaseException):
                        made = cls.__new__(cls)
                        BaseException.__init__(made, *(args if type(args) is tuple else (text,)))
                        return made
            return CandidateError(f"{name}: {text}" if text else name)
        known = self.objects.get(key)
        if isinstance(known, BaseException):
            return known
        if not issubclass(cls, BaseException):
            return CandidateError(f"{name}: {text}" if text else name)
        exc = self.instance(cls, ["h", key], f"{name} raised", text)
        BaseException.__init__(exc, *(args if type(args) is tuple else (text,)))
        self.objects[key] = exc
        return exc

    def do(self, op: str, operands: tuple[Any, ...]) -> Any:
        """A protocol operation applied in the candidate's process (Python's own dispatch)."""
        labels = [_STATE[id(o)].label if id(o) in _STATE else _show(o, 40) for o in operands]
        what = f"{op}({', '.join(labels)})"
        message = {"op": "do", "w": op, "a": [self.argument(o) for o in operands]}
        return self.outcome(self.request(message, what), what)

    def base(self, obj: Any) -> Any:
        """The value of ``obj`` as its builtin base class has it (see the module docstring),
        or ``_NO_BASE``."""
        found = _state(obj)
        reply = self.request({"op": "base", "f": list(found.ref)}, found.label)
        if "x" in reply:
            return self.outcome(reply, found.label)
        return self.value(reply.get("r"), found.label)  # not the check's "last value"

    def compare(self, op: str, handle: Any, other: Any) -> Any:
        if self.impostors and any(isinstance(x, cls) for x in (handle, other)
                                  for cls in self.impostors):
            if op in ("eq", "ne"):  # an impostor's __eq__ never decides: identity, as object's
                return (handle is other) == (op == "eq")
            return NotImplemented
        if id(other) in _STATE:  # two candidate objects: the candidate's dunder decides
            return self.do(op, (handle, other))
        if type(other).__module__ != "builtins":  # an object of the check's: its own
            if isinstance(type(handle), _StandIn):    # (reflected) method decides, except
                value = self.base(handle)             # against a deque, a Counter... the
                if value is not _NO_BASE:             # candidate keeps: its copy, here
                    return _COMPARE[op](value, other)
            return NotImplemented
        view = _VIEWS.get(_own_dict(type(handle)).get("_agentenv_real"))
        if view is not None:  # a dict view: as a view of a dict with its items, built here
            return _COMPARE[op](view(list(handle)), other)
        value = self.base(handle)
        if value is _NO_BASE:
            if op in ("eq", "ne"):
                return op == "ne"  # as Python's default: not the same object
            return NotImplemented
        return _COMPARE[op](value, other)

    def asked(self, obj: Any) -> bool:
        """Whether ``obj`` is (an instance of) a class the check names by a class name, or one
        the task asks the candidate to define (see "Operands" in the module docstring): only
        then do its dunders and methods get the check's data."""
        classes = [obj] if isinstance(obj, _Mirror) else type.__dict__["__mro__"].__get__(type(obj))
        return any(cls in self.named or (isinstance(cls, _Mirror)
                                         and cls.__qualname__.split(".")[0] in self.asked_classes)
                   for cls in classes)

    def arithmetic(self, op: str, handle: Any, other: Any, reflected: bool) -> Any:
        """``handle <op> other`` (``other <op> handle`` when ``reflected``): see "Operands"."""
        if id(other) in _STATE or self.asked(handle):
            # two candidate objects, or an instance of a class the check names: Python's
            # dispatch, in the candidate's process
            if not self.sendable(other):
                return NotImplemented
            return self.do(op, (other, handle) if reflected else (handle, other))
        # a dict view (keys() | {'c'}): a view with its items, built here
        view = _VIEWS.get(_own_dict(type(handle)).get("_agentenv_real"))
        value = view(list(handle)) if view is not None else self.base(handle)
        if value is _NO_BASE:
            return NotImplemented  # as for a class without the operator: a TypeError
        return _ARITHMETIC[op](other, value) if reflected else _ARITHMETIC[op](value, other)

    def contains(self, container: Any, item: Any) -> bool:
        if id(item) in _STATE or self.asked(container):
            return bool(self.do("contains", (container, item)))
        value = self.base(container)
        if value is not _NO_BASE:
            return item in value
        if isinstance(type(container), _StandIn):
            # a generator, a dict view...: its items, compared here (an item of the
            # candidate's is equal to the check's value only as the rule above says)
            return any(x is item or x == item for x in container)
        label = _state(container).label
        raise TypeError(f"'in' a {_clip(label, 80)}: the check does not name its class, so the "
                        "candidate's __contains__ does not decide about the check's value")

    def iterate(self, obj: Any, op: str) -> Any:
        iterator = self.do(op, (obj,))
        if id(iterator) not in _STATE:
            return iter(iterator)
        return iterator

    def next(self, obj: Any) -> Any:
        """The next item of a candidate iterator. Items are pulled in growing batches while
        the check does nothing else with the candidate; once it does (``for x in g: f(x)``)
        one at a time, so a generator runs after the calls the check made before pulling its
        next item, as in Python. An item pulled ahead of a later request of the check's, and
        read after it, may not be what Python would give: the check fails."""
        found = _state(obj)
        buffer = self.buffers.get(id(obj))
        if buffer is None:
            buffer = self.buffers[id(obj)] = _Buffer()
        while True:
            if buffer.items:
                if buffer.pulled != self.requests and self.poisoned is None:
                    self.poisoned = (f"the check read an item of {_clip(found.label, 80)} that "
                                     "the judge had pulled before the check's later calls into "
                                     "the candidate: Python would have run the iterator after them")
                return buffer.items.popleft()
            if buffer.error is not None:
                error, buffer.error = buffer.error, None
                raise error
            if buffer.ended:
                raise StopIteration(buffer.returned)
            if buffer.pulled != self.requests:
                buffer.size = 1  # the check asked the candidate something since the last pull
            reply = self.request({"op": "take", "f": list(found.ref), "n": buffer.size},
                                 f"next({found.label})")
            batch = reply.get("r")
            if not (type(batch) is list and len(batch) == 2 and batch[0] == "l"
                    and type(batch[1]) is list):
                return self.fail(f"the candidate's process sent a malformed answer to "
                                 f"next({_clip(found.label, 80)})")
            # one at a time for the first items (a check that reads a few with next() and hands
            # the rest to the candidate), then in growing batches
            buffer.taken += len(batch[1])
            buffer.size = 1 if buffer.taken < ONE_BY_ONE else min(buffer.size * 2, MAX_BATCH)
            buffer.items.extend(self.value(item, f"next({found.label})") for item in batch[1])
            if "x" in reply:
                buffer.error = self.exception(reply)
                self.raised, self.raised_in = buffer.error, f"next({found.label})"
            buffer.ended = reply.get("end") is True
            if buffer.ended and "rv" in reply:
                buffer.returned = self.value(reply["rv"], f"next({found.label})")
            buffer.pulled = self.requests
            if not buffer.items and not buffer.ended and buffer.error is None:
                return self.fail("the candidate's process sent an empty batch")

    def item(self, op: str, obj: Any, args: tuple[Any, ...]) -> Any:
        """``obj[key]`` (set, del): with ``defines``, a key of the check's reaches only an
        object whose class the task asks for; any other is indexed on its builtin base value
        (a copy: setting or deleting there is a ``TypeError``)."""
        if (self.defines is None or isinstance(type(obj), _StandIn) or self.asked(obj)
                or all(id(a) in _STATE for a in args)):
            return self.do(op, (obj, *args))
        value = self.base(obj)
        if value is _NO_BASE or op != "getitem":
            raise TypeError(f"{_clip(_state(obj).label, 80)}: an object whose class the task does "
                            "not ask for gets none of the check's data")
        return value[args[0]]

    def call(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        found = _state(target)
        if self.defines is not None and found.ref[0] == "a":
            owner = self.objects.get(found.ref[1])
            if (owner is not None and not isinstance(type(owner), _StandIn)
                    and not self.asked(owner)
                    and any(id(a) not in _STATE for a in (*args, *kwargs.values()))):
                raise TypeError(
                    f"{_clip(found.label, 80)}: a method of an object whose class the task does not "
                    "ask for gets none of the check's data")
        with _quiet():
            shown = [_show(a, 40) for a in args] + [f"{k}={_show(v, 40)}" for k, v in kwargs.items()]
        what = f"{_clip(found.label, 80)}({', '.join(shown)})"
        message = {"op": "call", "f": list(found.ref),
                   "a": [self.argument(a) for a in args],
                   "k": [[str(k), self.argument(v)] for k, v in kwargs.items()]}
        reply = self.request(message, what)
        result = reply.get("r")
        back = (result[1] if "x" not in reply and type(result) is list and len(result) == 2
                and result[0] == "r" else None)
        value = None if back is not None else self.outcome(reply, what)
        changed = reply.get("m")
        if type(changed) is list:
            for item in changed:
                self.copy_back(item, args, kwargs)
        if back is not None:
            value = self.at(back, args, kwargs)
            self.last = (what, value)
        kept = reply.get("kept")
        if type(kept) is list:
            for item in kept:
                if type(item) is list and len(item) == 2 and type(item[1]) is int:
                    self.keeps(self.at(item[0], args, kwargs), item[1])
        return value

    def at(self, path: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The check's own object at ``path`` (an argument's position or keyword, then list
        indices) among a call's arguments."""
        if type(path) is not list or not path:
            return self.fail("the candidate's process named an argument that was not passed")
        try:
            obj = args[path[0]] if type(path[0]) is int else kwargs[str(path[0])]
            for step in path[1:]:
                if type(step) is not int:
                    raise TypeError
                obj = obj[step]
        except Exception:
            return self.fail("the candidate's process named an argument that was not passed")
        return obj

    def copy_back(self, item: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if type(item) is not list or len(item) != 2:
            return
        position, data = item
        if type(position) is int and 0 <= position < len(args):
            original = args[position]
        elif type(position) is str and position in kwargs:
            original = kwargs[position]
        else:
            return
        try:
            new = _wire.decode_value(data)
        except Exception:
            return
        if type(original) is not type(new):
            return
        _update(original, new)

    def get(self, target: Any, name: str) -> Any:
        found = _state(target)
        what = f"{_clip(found.label, 80)}.{name}"
        cls = type(target)
        held = isinstance(cls, _Mirror) and found.ref[0] == "h"
        if held and (id(cls), name) in self.methods:
            # a method of this class, read before: no request (the call names it; G looks
            # it up then, so an attribute set since still wins)
            return self.value(["a", found.ref[1], name, self.methods[id(cls), name]], what)
        reply = self.request({"op": "get", "f": list(found.ref), "n": name}, what)
        if reply.get("x") == "AttributeError":
            raise AttributeError(str(reply.get("msg", name)))  # hasattr() asks this way
        result = reply.get("r")
        if (held and "x" not in reply and type(result) is list and len(result) == 4
                and result[0] == "a" and type(result[3]) is int):
            self.methods[id(cls), name] = result[3]
        return self.outcome(reply, what)

    def forget(self, name: str) -> None:
        """An attribute was set or deleted: methods of that name are read afresh."""
        for key in [k for k in self.methods if k[1] == name]:
            del self.methods[key]

    def set(self, target: Any, name: str, value: Any) -> None:
        found = _state(target)
        if (self.defines is not None and id(value) not in _STATE
                and not isinstance(type(target), _StandIn) and not self.asked(target)):
            raise TypeError(f"{_clip(found.label, 80)}.{name}: an object whose class the task does "
                            "not ask for gets none of the check's data")
        self.forget(name)
        with _quiet():
            what = f"{_clip(found.label, 80)}.{name} = {_show(value, 40)}"
        reply = self.request({"op": "set", "f": list(found.ref), "n": name,
                              "v": self.argument(value)}, what)
        self.outcome(reply, what)

    def delete(self, target: Any, name: str) -> None:
        self.forget(name)
        found = _state(target)
        what = f"del {_clip(found.label, 80)}.{name}"
        self.outcome(self.request({"op": "del", "f": list(found.ref), "n": name}, what), what)

    # ---------------------------------------------------------------- callbacks

    def callback(self, message: dict[str, Any]) -> None:
        """``G`` calls a function the check passed it; run it here, send back what it returns."""
        try:
            fn = self.callbacks.get(message.get("c"))  # type: ignore[arg-type]
            raw_args, raw_kwargs = message.get("a"), message.get("k")
            if fn is None or type(raw_args) is not list or type(raw_kwargs) is not list:
                raise ValueError("the candidate called back a function it was never given")
            args = [self.value(a, "a callback's argument") for a in raw_args]
            kwargs = {str(p[0]): self.value(p[1], "a callback's argument") for p in raw_kwargs}
            answer: dict[str, Any] = {"r": self.argument(fn(*args, **kwargs), allow_callable=False)}
        except _Gone:
            raise
        except BaseException as exc:
            answer = {"x": type(exc).__name__, "msg": _clip(_message(exc))}
        self.push(answer)
        try:
            _rpc.send(self.fd, answer)
        except _rpc.ChannelClosed:
            self.fail("the candidate's process ended during a callback")


def _current_cpu() -> int | None:
    """The CPU this thread runs on now (``/proc/thread-self/stat``), or None where unknown."""
    try:
        with open("/proc/thread-self/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


# -------------------------------------------------------------------- names

def _free_globals(source: str) -> tuple[set[str], set[str], set[str]]:
    """The global names a program reads but never binds, the plain names it calls, and the
    standard-library module names among them that it only uses as modules (``re.fullmatch``:
    every use is the base of an attribute)."""
    table = symtable.symtable(source, "<check>", "exec")
    bound = {s.get_name() for s in table.get_symbols()
             if s.is_assigned() or s.is_imported() or s.is_namespace()}
    free: set[str] = set()

    def walk(scope: symtable.SymbolTable, top: bool) -> None:
        for symbol in scope.get_symbols():
            name = symbol.get_name()
            if name in bound or not symbol.is_referenced():
                continue
            if top or (symbol.is_global() and not symbol.is_assigned()):
                free.add(name)
        for child in scope.get_children():
            walk(child, False)

    walk(table, True)
    tree = ast.parse(source)
    called = {n.func.id for n in ast.walk(tree)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    bases = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    other = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in bases}
    modules = {name for name in free & _STDLIB if name not in other}
    return free, called & free, modules


_PACKAGES: set[str] = set()  # the third-party packages exposed to the candidate (the job's)


def _stdlib_module(name: Any) -> Any:
    """The judge's own import of a standard-library module or of a package exposed to the
    candidate (fresh in this process, whatever the candidate did to its copy), or None."""
    if type(name) is not str or (name.split(".")[0] not in _STDLIB
                                 and name.split(".")[0] not in _PACKAGES):
        return None
    try:
        return importlib.import_module(name)
    except BaseException:
        return None


def _imported(entry: Any) -> tuple[bool, Any]:
    """The judge's own copy of what the candidate imported from the standard library:
    ``[name, module, attribute]`` (attribute empty for the module itself)."""
    _name, module_name, attribute = [*list(entry), "", "", ""][:3]
    module = _stdlib_module(module_name)
    if module is None:
        return False, None
    if not attribute:
        return True, module
    try:
        return True, getattr(module, str(attribute))
    except AttributeError:
        sub = _stdlib_module(f"{module_name}.{attribute}")  # ``from concurrent import futures``
        return (sub is not None), sub


class _Imported:
    """A function the candidate imported from the standard library, as a check sees it: the
    judge's own, except when a call passes it one of the candidate's objects (``astuple(p)``).
    That object exists only in the candidate's process, so the call is the candidate's binding
    of the name, run there: Python's verdict, where the candidate controls the object anyway.
    Plain arguments never reach the candidate's copy of the function."""

    __slots__ = ("_chan", "_fn", "_name")

    def __init__(self, fn: Any, name: str, chan: _Channel) -> None:
        self._fn, self._name, self._chan = fn, name, chan

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if any(type(a) is Remote for a in (*args, *kwargs.values())):
            defined, theirs = self._chan.lookup(self._name)
            if defined and type(theirs) is Remote:
                return theirs(*args, **kwargs)
        return self._fn(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_fn"), name)

    def __repr__(self) -> str:
        return repr(self._fn)


def _bind(names: tuple[set[str], set[str], set[str]], ns: dict[str, Any], chan: _Channel, *,
          check: bool, imports: dict[str, Any] | None = None,
          defines: frozenset[str] | None = None) -> list[str]:
    """Bind a program's free names (``_free_globals``' answer for it) in ``ns``; returns the
    proxies it added.

    A name the task binds is already in ``ns``. A name the candidate imported from the standard
    library (``imports``, read from its code by the parent) is the judge's own import; so is a
    standard-library module name the program only uses as a module (``math.isclose``: whatever
    the candidate bound to ``math``), and one the candidate's process says is a
    standard-library module. Only a ``check`` may get the
    candidate's version of a builtin name: setup code is helper code, and its builtins are
    always the judge's own. With ``defines`` (the names the task asks the candidate to define),
    no other name is looked up in the candidate's namespace: it stays unbound.
    """
    free, called, modules = names
    added: list[str] = []
    for name in sorted(free):
        if name in ns:
            continue
        if name in modules or name in _PACKAGES:
            module = _stdlib_module(name)
            if module is not None:
                dict.__setitem__(ns, name, module)
                continue
        if imports and name in imports:
            found, value = _imported(imports[name])
            if found:
                dict.__setitem__(ns, name, _Imported(value, name, chan)
                                 if isinstance(value, _FUNCTIONS) else value)
                added.append(name)
                continue
        # Anything else is the candidate's, looked up each time it is read (_Namespace),
        # unless the task says what it asks the candidate to define and this is not among it.
    if (check and len(called) == 1 and (defines is None or called <= defines)
            and all(hasattr(builtins, name) and name not in ns for name in free)):
        # A check about a builtin name the candidate defines (see the module docstring): it
        # uses nothing but builtins and calls one name, which can only mean the candidate's.
        # With two (``all`` over ``sum``s) nothing says which one the task is about: a
        # candidate's ``all`` would decide the verdict, so all of them stay the judge's own.
        for name in sorted(called):
            defined, value = chan.lookup(name)  # the candidate's, or the builtin as G has it
            if defined:
                dict.__setitem__(ns, name, value)
                added.append(name)
    return added


_MISSING = object()
_BUILTIN_NAMES: dict[str, Any] = dict(vars(builtins))


def _stable(value: Any) -> bool:
    """A binding a check may keep for the rest of the check once read: a class, a module or a
    function (the candidate rebinding its own function mid-check gains nothing it does not
    have already). Data is read afresh at every use."""
    return isinstance(value, (type, types.ModuleType, *_FUNCTIONS))


class _Namespace(dict[str, Any]):
    """The check's module namespace, shared by the prelude, the setup and every check, as one
    Python module is. A name nothing here binds and that is not a builtin is the candidate's:
    read from its process each time the check reads it (``COUNTER`` after ``bump()``; a class
    or function once per check), so the check sees the module's globals as they are now, as
    Python would.

    A check's top-level assignment to a global the candidate defines (``LIMIT = 3``) would, in
    one module, hand the candidate the check's value; the check's data never crosses except
    as call arguments (a candidate defining ``expected`` would read the expected answer). So
    the name is bound here, and when the candidate's code reads that name the check fails:
    the candidate would go on with its own value where Python gives it the check's. Assigning
    one of the candidate's own objects (a handle) reveals nothing and is made there."""

    def __init__(self, chan: _Channel) -> None:
        super().__init__()
        self.chan = chan
        self.cached: dict[str, Any] = {}
        self.theirs: frozenset[str] = frozenset()
        self.read: frozenset[str] = frozenset()
        self.hidden: frozenset[str] = frozenset()  # see ``begin``: dropped when the check ends

    def begin(self, assigned: list[str], declared: frozenset[str] = frozenset()) -> None:
        """A new check, which assigns ``assigned`` at its top level (and ``declared`` in its
        functions, after ``global``)."""
        self.cached.clear()
        self.theirs = self.read = self.hidden = frozenset()
        if assigned or declared:
            reply = self.chan.request({"op": "defines", "n": sorted({*assigned, *declared})},
                                      "the candidate's globals")
            found = self.chan.value(reply.get("r"), "the candidate's globals") if "x" not in reply else []
            pairs = [p for p in found if type(p) is list and len(p) == 2 and type(p[0]) is str] \
                if type(found) is list else []
            self.theirs = frozenset(p[0] for p in pairs)
            self.read = frozenset(p[0] for p in pairs if p[1] is not False)
            hidden = self.read & declared
            self.hidden = hidden
            if hidden and self.chan.poisoned is None:
                # ``global X; X = ...`` in a function of the check stores past this namespace
                self.chan.poisoned = (
                    f"a function of the check assigns {sorted(hidden)[0]}, a global the "
                    f"candidate's code reads: in one Python module the candidate would see the "
                    f"check's value, and the judge never hands the candidate the check's data")

    def __missing__(self, name: str) -> Any:
        found = _BUILTIN_NAMES.get(name, _MISSING)
        if found is not _MISSING:
            return found
        if name.startswith("__") or name.startswith("_agentenv"):
            raise KeyError(name)
        found = self.cached.get(name, _MISSING)
        if found is not _MISSING:
            return found
        if self.chan.defines is not None and name not in self.chan.defines:
            raise KeyError(name)  # not what the task asks for: never the candidate's binding
        defined, value = self.chan.lookup(name)
        if not defined:
            raise KeyError(name)
        if _stable(value):
            self.cached[name] = value
        return value

    def __setitem__(self, name: str, value: Any) -> None:
        if name in self.theirs:
            self.cached.pop(name, None)
            if id(value) in _STATE:  # one of the candidate's own objects: nothing of the check's
                dict.pop(self, name, None)
                self.chan.request({"op": "setname", "n": name, "v": self.chan.argument(value)},
                                  f"{name} = ...")
                return
            if name in self.read:
                self.hidden = self.hidden | {name}  # the candidate's binding again after it
            if name in self.read and self.chan.poisoned is None:
                self.chan.poisoned = (
                    f"the check assigns {name}, a global the candidate's code reads: in one "
                    f"Python module the candidate would see the check's value, and the judge "
                    f"never hands the candidate the check's data")
        dict.__setitem__(self, name, value)

    def __delitem__(self, name: str) -> None:
        if name in self.theirs and not dict.__contains__(self, name):
            self.cached.pop(name, None)
            reply = self.chan.request({"op": "delname", "n": name}, f"del {name}")
            if "x" in reply:
                raise KeyError(name)
            return
        dict.__delitem__(self, name)


# -------------------------------------------------------------------- tolerance

_CLOSE = "_agentenv_close"


def _close(a: Any, b: Any, tolerance: float) -> bool:
    """``a == b``, or floats within ``tolerance`` (element-wise in lists, tuples, dict values)."""
    if a == b:
        return True
    if type(a) in (int, float) and type(b) in (int, float) and float in (type(a), type(b)):
        try:
            return math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)
        except OverflowError:
            return False
    if type(a) is type(b) and type(a) in (list, tuple):
        return len(a) == len(b) and all(_close(x, y, tolerance) for x, y in zip(a, b, strict=True))
    if type(a) is dict and type(b) is dict:
        return a.keys() == b.keys() and all(_close(a[k], b[k], tolerance) for k in a)
    return False


class _Tolerant(ast.NodeTransformer):
    """Rewrites each single ``x == y`` / ``x != y`` into a call of :func:`_close`."""

    def visit_Compare(self, node: ast.Compare) -> Any:
        self.generic_visit(node)
        if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            return node  # chained comparisons stay Python's (no operand is evaluated twice)
        call: ast.expr = ast.Call(ast.Name(_CLOSE, ast.Load()), [node.left, node.comparators[0]], [])
        if isinstance(node.ops[0], ast.NotEq):
            call = ast.UnaryOp(ast.Not(), call)
        return ast.copy_location(call, node)


def _compile(source: str, name: str, tolerance: float | None) -> Any:
    tree = ast.parse(source)
    # ``global X`` at a check's top level changes nothing in Python but how X is compiled
    # (STORE_GLOBAL, which skips the namespace's own assignment): dropped, so ``X = 3`` is
    # made where the candidate reads X.
    tree.body = [ast.copy_location(ast.Pass(), n) if isinstance(n, ast.Global) else n
                 for n in tree.body]
    if tolerance is not None:
        tree = _Tolerant().visit(tree)
    return compile(ast.fix_missing_locations(tree), name, "exec", dont_inherit=True)


def _declared_global(source: str) -> frozenset[str]:
    """Names a function of the check declares ``global`` and assigns: its stores skip the
    namespace (STORE_GLOBAL), so the candidate's module would never see them."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = list(ast.walk(node))
            declared = {n for g in inner if isinstance(g, ast.Global) for n in g.names}
            found |= {n.id for n in inner if isinstance(n, ast.Name) and n.id in declared
                      and isinstance(n.ctx, (ast.Store, ast.Del))}
    return frozenset(found)


def _assigned(source: str) -> list[str]:
    """The names a check assigns at its top level with ``=``, ``+=``, ``for``, ``with``... (not
    ``def``, ``class`` or ``import``): those it may share with the candidate's module."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names: set[str] = set()
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda,
                             ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        stack.extend(ast.iter_child_nodes(node))
    return sorted(names)


# -------------------------------------------------------------------- checks

def _verdict(index: int, source: str, ns: dict[str, Any], chan: _Channel,
             tolerance: float | None = None, imports: dict[str, Any] | None = None,
             defines: frozenset[str] | None = None) -> dict[str, Any]:
    base: dict[str, Any] = {TYPE: CHECK, INDEX: index}
    try:
        code = _compile(source, f"<check {index}>", tolerance)
        names = _free_globals(source)
    except BaseException as exc:
        return {**base, KIND: SYNTAX, MESSAGE: _message(exc)}
    chan.begin()
    error: BaseException | None = None
    added: list[str] = []
    unreadable = _stdvalues.UNREADABLE[0]
    try:
        if isinstance(ns, _Namespace):
            ns.begin(_assigned(source), _declared_global(source))
        added = _bind(names, ns, chan, check=True, imports=imports, defines=defines)
        exec(code, ns)
    except BaseException as exc:
        error = exc
    finally:
        for name in added:  # the next check looks them up afresh
            ns.pop(name, None)
        if isinstance(ns, _Namespace):
            ns.theirs = frozenset()
            for name in ns.hidden:  # what a check's function stored past the namespace: the
                dict.pop(ns, name, None)  # next check reads the candidate's binding again
    if _stdvalues.UNREADABLE[0] != unreadable and chan.poisoned is None:
        # An iterator was consumed past what crossed of it: failed, even if the check caught it.
        chan.poisoned = (str(error) if isinstance(error, _stdvalues.Unreadable) else
                         "an iterator the candidate returned was consumed past what crossed of it")
    if chan.broke_now or isinstance(error, _Gone):
        return {**base, KIND: NO_RESULT, MESSAGE: chan.broken or "the candidate is gone"}
    if isinstance(error, _NotPlain) or (error is None and chan.poisoned is not None):
        return {**base, KIND: ASSERTION, MESSAGE: _clip(chan.poisoned or str(error))}
    if chan.poisoned is not None:
        return {**base, KIND: EXCEPTION, MESSAGE: chan.poisoned}
    if error is None:
        return {**base, OK: True}
    if error is chan.raised:
        raised = _clip(str(error)) if type(error) is CandidateError else _message(error)
        return {**base, KIND: EXCEPTION, MESSAGE: f"{_clip(chan.raised_in, 80)} raised {raised}"}
    if isinstance(error, AssertionError):
        text = _message(error).partition(": ")[2]
        if not text and chan.last is not None:
            what, value = chan.last
            text = f"{_clip(what, 80)} returned {_show(value)}"
        return {**base, KIND: ASSERTION, MESSAGE: text or "assertion failed"}
    return {**base, KIND: EXCEPTION, MESSAGE: _message(error)}


class _Verdicts:
    """This process's result pipe: nonce-prefixed frames, as the candidate's are."""

    def __init__(self, fd: int, nonce: str) -> None:
        self.fd, self.nonce = fd, nonce

    def send(self, message: dict[str, Any]) -> None:
        view = memoryview(_wire.encode_frame(self.nonce, message))
        while view:
            try:
                view = view[os.write(self.fd, view):]
            except OSError:
                os._exit(3)


def run_judge(job: dict[str, Any], result_fd: int, peer_fd: int) -> None:
    """Run the job's setup, then each check, reporting one verdict frame per check."""
    out = _Verdicts(result_fd, str(job["nonce"]))
    chan = _Channel(peer_fd)
    ns: dict[str, Any] = _Namespace(chan)
    ns.update({"__name__": "__check__", "__builtins__": builtins})
    raw_tolerance = job.get("float_tolerance")
    tolerance = float(raw_tolerance) if isinstance(raw_tolerance, (int, float)) else None
    if tolerance is not None:
        ns[_CLOSE] = lambda a, b: _close(a, b, tolerance)
    imports = {str(entry[0]): entry for entry in job.get("imports") or ()
               if type(entry) is list and len(entry) == 3}
    _PACKAGES.update(str(n) for n in job.get("packages") or () if type(n) is str and n.isidentifier())
    raw_defines = job.get("defines")
    defines = (frozenset(str(n) for n in raw_defines) if type(raw_defines) is list else None)
    chan.defines = defines
    chan.asked_classes = frozenset(n for n in defines or () if n[:1].isupper())
    label = "setup"
    try:
        # The task's prelude (a benchmark's implicit imports), then its setup: the judge's own.
        for label in ("prelude", "setup"):
            source = str(job.get(label) or "")
            if source.strip():
                code = compile(source, f"<{label}>", "exec", dont_inherit=True)
                _bind(_free_globals(source), ns, chan, check=False, defines=defines)
                exec(code, ns)
    except BaseException as exc:
        gone = isinstance(exc, _Gone) or chan.broke_now
        out.send({TYPE: SETUP, KIND: NO_RESULT if gone else EXCEPTION,
                  MESSAGE: f"{label}: {chan.broken if gone else _message(exc)}"})
    else:
        for item in job.get("checks", ()):
            out.send(_verdict(int(item[ITEM_INDEX]), str(item[CHECK_SOURCE]), ns, chan, tolerance,
                              imports, defines))
    with contextlib.suppress(OSError):
        os.close(peer_fd)
    out.send({TYPE: DONE})
