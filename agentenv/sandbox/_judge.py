"""The judge process ``J``: runs a task's check program and setup code where no candidate code ran.

Loaded by path inside the sandbox (standard library only). The fork server forks ``J`` from
the same pristine zygote as the candidate process ``G``, with the same isolation and limits
(task data is untrusted input too), for runs whose plan has checks the trusted side cannot
decompose (loops, several statements, helper functions, names from the setup code). Its job is
``{"role": "judge", "nonce", "prelude", "setup", "checks": [{"i", "src"}, ...], "limits",
"float_tolerance", "imports"}``; besides its
result pipe it holds one descriptor: its end of the channel to ``G`` (:mod:`_rpc`). ``G`` never
sees this job: not the checks, not their expected values, not the setup as the judge runs it.

**Names.** The prelude, the setup code, then each check, run here in one namespace with this
process's own builtins and standard library; what they bind (earlier checks included) stays
bound here, whatever the candidate rebinds. A name the candidate's code imported from the
standard library (the job's ``imports``, read from its code by the parent) is imported here,
fresh. Every other free global name that is not a builtin is looked up in the
candidate's namespace when the check starts; a module there is answered with its name only,
and a standard-library one is imported here (any other module stays unbound): ``G`` answers with plain data (a copy, rebuilt by
:func:`_wire.decode_value`: only builtin values are ever constructed here) or a handle to the
object, which it keeps. A handle is a :class:`Remote`: calling it, or reading or setting an
attribute of it, is one more request, answered the same way. A ``Remote`` cannot be compared,
hashed, iterated or truth-tested: a candidate that returns anything but plain data fails the
check. A name the candidate does not define stays unbound (``NameError``, as in Python). Builtin names are the judge's own, except in a check that uses no
other name at all and calls one builtin name (MBPP's task about its own ``sum``): there that
builtin is the candidate's, as on the fast path. Standard-library modules are always the judge's own, so
a candidate that patched ``math``, ``re.fullmatch`` or ``sorted`` in its own process changes
nothing here.

With the job's ``float_tolerance``, each single ``==`` / ``!=`` of a check also holds for floats
within that tolerance (absolute or relative), inside lists, tuples and dict values too, as on
the fast path; otherwise comparisons are Python's own.

Arguments are copies: plain data, candidate handles, or callables of the check (``G`` gets a
stub that calls back here; nesting is capped). Lists, dicts and sets a call mutated are copied
back into the check's objects, so "must not modify its argument" checks still see the change.

**Verdicts.** One frame per check on this process's own result pipe, which only the worker
reads: passed when the check ran to its end without an exception, and nothing that a check
could have swallowed went wrong on the way (the candidate's process ended or broke protocol,
callbacks nested too deep, a value over the decoder's budgets). A candidate that hangs in a
call leaves the check unreported; the worker's deadline ends both processes and the parent
marks it a timeout.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import importlib
import math
import os
import symtable
import sys
import types
from collections.abc import Callable
from typing import Any

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)

import _rpc  # noqa: E402  (loaded by path inside the sandbox)
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
    try:
        return _clip(repr(value), limit)
    except BaseException:  # a huge int, a deep value: never let a message fail a check
        return f"<a {type(value).__name__}>"


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


class Remote:
    """A name or an object of the candidate's, as the check sees it: call it, use its attributes."""

    __slots__ = ("_agentenv_chan", "_agentenv_kind", "_agentenv_label", "_agentenv_named",
                 "_agentenv_ref")

    def __init__(self, chan: _Channel, ref: list[Any], label: str, kind: str,
                 named: bool = False) -> None:
        object.__setattr__(self, "_agentenv_chan", chan)
        object.__setattr__(self, "_agentenv_ref", ref)
        object.__setattr__(self, "_agentenv_label", label)
        object.__setattr__(self, "_agentenv_kind", kind)
        object.__setattr__(self, "_agentenv_named", named)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        chan = object.__getattribute__(self, "_agentenv_chan")
        return chan.call(self, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        chan = object.__getattribute__(self, "_agentenv_chan")
        return chan.get(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        chan = object.__getattribute__(self, "_agentenv_chan")
        chan.set(self, name, value)

    def __repr__(self) -> str:
        return f"<the candidate's {object.__getattribute__(self, '_agentenv_label')}>"

    def __copy__(self) -> Remote:
        return self  # a reference to an object in the candidate's process

    def __deepcopy__(self, memo: Any) -> Remote:
        return self

    def _agentenv_refuse(self, *args: Any) -> Any:
        label = _clip(object.__getattribute__(self, "_agentenv_label"), 80)
        kind = object.__getattribute__(self, "_agentenv_kind")
        if object.__getattribute__(self, "_agentenv_named"):
            why = (f"{label} is a {kind} of the candidate's, not plain data: a check can call "
                   "it or use its attributes, not use it as a value")
        else:
            why = f"{label} returned a {kind}, not plain data (only plain data is accepted)"
        chan = object.__getattribute__(self, "_agentenv_chan")
        if chan.poisoned is None:  # the check fails even if it catches the TypeError
            chan.poisoned = why
        raise _NotPlain(why)

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _agentenv_refuse
    __hash__ = __bool__ = __len__ = __iter__ = __contains__ = _agentenv_refuse
    __getitem__ = __setitem__ = __delitem__ = __index__ = __int__ = __float__ = _agentenv_refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _agentenv_refuse
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _agentenv_refuse
    __pow__ = __rpow__ = __neg__ = __pos__ = __abs__ = __and__ = __or__ = __xor__ = _agentenv_refuse
    __reduce__ = __reduce_ex__ = __format__ = __reversed__ = __enter__ = __exit__ = _agentenv_refuse


class _Channel:
    """The judge's end of the channel: one request at a time, callbacks served while waiting."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.broken: str | None = None
        self.depth = 0
        self.callbacks: dict[int, Callable[..., Any]] = {}
        self.placed = False  # whether G was told which CPU this process runs on
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
        try:
            _rpc.send(self.fd, message)
            while True:
                reply = _rpc.recv(self.fd)
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

    def fail(self, why: str) -> Any:
        self.broken = why
        self.broke_now = True
        raise _Gone(why)

    def argument(self, value: Any, allow_callable: bool = True) -> list[Any]:
        if type(value) is Remote:
            return list(object.__getattribute__(value, "_agentenv_ref"))
        try:
            return ["v", _wire.encode_value(value)]
        except _wire.NotPlainData:
            pass
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
        if reply.get("x") == "NameError":
            return False, None
        result = reply.get("r")
        if type(result) is list and len(result) == 2 and result[0] == "m":
            # The candidate's name is bound to a module: a standard-library one is imported
            # here, fresh (whatever the candidate did to its copy); any other is not plain data.
            module = _stdlib_module(result[1])
            return (False, None) if module is None else (True, module)
        return True, self.outcome(reply, name, named=True)

    def outcome(self, reply: dict[str, Any], what: str, named: bool = False) -> Any:
        if "x" in reply:
            exc = _exception(reply.get("x"), reply.get("msg", ""))
            self.raised, self.raised_in = exc, what
            raise exc
        result = reply.get("r")
        if type(result) is list and len(result) == 2 and result[0] == "v":
            try:
                value = _wire.decode_value(result[1])
            except Exception as exc:  # malformed, or over the decoder's budgets
                self.poisoned = f"{_clip(what, 80)} returned a value the judge refused ({_message(exc)})"
                raise _NotPlain(self.poisoned) from None
            self.last = (what, value)
            return value
        if type(result) is list and len(result) == 2 and result[0] == "b":
            self.poisoned = (f"{_clip(what, 80)} returned a value over a budget: "
                             f"{_clip(str(result[1]), 200)}")
            raise _NotPlain(self.poisoned)
        if (type(result) is list and len(result) == 3 and result[0] == "h"
                and type(result[1]) is int and type(result[2]) is str):
            return Remote(self, ["h", result[1]], what, _clip(result[2], 60), named)
        return self.fail(f"the candidate's process sent a malformed answer to {_clip(what, 80)}")

    def call(self, target: Remote, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        label = object.__getattribute__(target, "_agentenv_label")
        shown = [_show(a, 40) for a in args] + [f"{k}={_show(v, 40)}" for k, v in kwargs.items()]
        what = f"{label}({', '.join(shown)})"
        message = {"op": "call", "f": object.__getattribute__(target, "_agentenv_ref"),
                   "a": [self.argument(a) for a in args],
                   "k": [[str(k), self.argument(v)] for k, v in kwargs.items()]}
        reply = self.request(message, what)
        value = self.outcome(reply, what)
        changed = reply.get("m")
        if type(changed) is list:
            for item in changed:
                self.copy_back(item, args, kwargs)
        return value

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
        if type(original) is list:
            original[:] = new
        elif type(original) in (dict, set):
            original.clear()
            original.update(new)

    def get(self, target: Remote, name: str) -> Any:
        what = f"{object.__getattribute__(target, '_agentenv_label')}.{name}"
        reply = self.request({"op": "get", "f": object.__getattribute__(target, "_agentenv_ref"),
                              "n": name}, what)
        return self.outcome(reply, what)

    def set(self, target: Remote, name: str, value: Any) -> None:
        what = f"{object.__getattribute__(target, '_agentenv_label')}.{name} = {_show(value, 40)}"
        reply = self.request({"op": "set", "f": object.__getattribute__(target, "_agentenv_ref"),
                              "n": name, "v": self.argument(value)}, what)
        self.outcome(reply, what)

    # ---------------------------------------------------------------- callbacks

    def callback(self, message: dict[str, Any]) -> None:
        """``G`` calls a function the check passed it; run it here, send back plain data."""
        try:
            fn = self.callbacks.get(message.get("c"))  # type: ignore[arg-type]
            raw_args, raw_kwargs = message.get("a"), message.get("k")
            if fn is None or type(raw_args) is not list or type(raw_kwargs) is not list:
                raise ValueError("the candidate called back a function it was never given")
            args = [_wire.decode_value(a) for a in raw_args]
            kwargs = {str(p[0]): _wire.decode_value(p[1]) for p in raw_kwargs}
            answer: dict[str, Any] = {"r": ["v", _wire.encode_value(fn(*args, **kwargs))]}
        except _Gone:
            raise
        except BaseException as exc:
            answer = {"x": type(exc).__name__, "msg": _clip(_message(exc))}
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


def _stdlib_module(name: Any) -> Any:
    """The judge's own import of a standard-library module, or None."""
    if type(name) is not str or name.split(".")[0] not in _STDLIB:
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
          check: bool, imports: dict[str, Any] | None = None) -> list[str]:
    """Bind a program's free names (``_free_globals``' answer for it) in ``ns``; returns the
    proxies it added.

    A name the task binds is already in ``ns``. A name the candidate imported from the standard
    library (``imports``, read from its code by the parent) is the judge's own import; so is a
    standard-library module name the program only uses as a module (``math.isclose``: whatever
    the candidate bound to ``math``), and one the candidate's process says is a
    standard-library module. Only a ``check`` may get the
    candidate's version of a builtin name: setup code is helper code, and its builtins are
    always the judge's own.
    """
    free, called, modules = names
    added: list[str] = []
    for name in sorted(free):
        if name in ns:
            continue
        if name in modules:
            module = _stdlib_module(name)
            if module is not None:
                ns[name] = module
                continue
        if imports and name in imports:
            found, value = _imported(imports[name])
            if found:
                ns[name] = _Imported(value, name, chan) if isinstance(value, _FUNCTIONS) else value
                added.append(name)
                continue
        if hasattr(builtins, name):
            continue
        defined, value = chan.lookup(name)
        if defined:
            ns[name] = value
            added.append(name)
    if (check and len(called) == 1
            and all(hasattr(builtins, name) and name not in ns for name in free)):
        # A check about a builtin name the candidate defines (see the module docstring): it
        # uses nothing but builtins and calls one name, which can only mean the candidate's.
        # With two (``all`` over ``sum``s) nothing says which one the task is about: a
        # candidate's ``all`` would decide the verdict, so all of them stay the judge's own.
        for name in sorted(called):
            defined, value = chan.lookup(name)  # the candidate's, or the builtin as G has it
            if defined:
                ns[name] = value
                added.append(name)
    return added


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
    if tolerance is None:
        return compile(source, name, "exec", dont_inherit=True)
    tree = ast.fix_missing_locations(_Tolerant().visit(ast.parse(source)))
    return compile(tree, name, "exec", dont_inherit=True)


# -------------------------------------------------------------------- checks

def _verdict(index: int, source: str, ns: dict[str, Any], chan: _Channel,
             tolerance: float | None = None, imports: dict[str, Any] | None = None) -> dict[str, Any]:
    base: dict[str, Any] = {TYPE: CHECK, INDEX: index}
    try:
        code = _compile(source, f"<check {index}>", tolerance)
        names = _free_globals(source)
    except BaseException as exc:
        return {**base, KIND: SYNTAX, MESSAGE: _message(exc)}
    chan.begin()
    error: BaseException | None = None
    added: list[str] = []
    try:
        added = _bind(names, ns, chan, check=True, imports=imports)
        exec(code, ns)
    except BaseException as exc:
        error = exc
    finally:
        for name in added:  # the next check looks them up afresh
            ns.pop(name, None)
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
    ns: dict[str, Any] = {"__name__": "__check__", "__builtins__": builtins}
    raw_tolerance = job.get("float_tolerance")
    tolerance = float(raw_tolerance) if isinstance(raw_tolerance, (int, float)) else None
    if tolerance is not None:
        ns[_CLOSE] = lambda a, b: _close(a, b, tolerance)
    imports = {str(entry[0]): entry for entry in job.get("imports") or ()
               if type(entry) is list and len(entry) == 3}
    label = "setup"
    try:
        # The task's prelude (a benchmark's implicit imports), then its setup: the judge's own.
        for label in ("prelude", "setup"):
            source = str(job.get(label) or "")
            if source.strip():
                code = compile(source, f"<{label}>", "exec", dont_inherit=True)
                _bind(_free_globals(source), ns, chan, check=False)
                exec(code, ns)
    except BaseException as exc:
        gone = isinstance(exc, _Gone) or chan.broke_now
        out.send({TYPE: SETUP, KIND: NO_RESULT if gone else EXCEPTION,
                  MESSAGE: f"{label}: {chan.broken if gone else _message(exc)}"})
    else:
        for item in job.get("checks", ()):
            out.send(_verdict(int(item[ITEM_INDEX]), str(item[CHECK_SOURCE]), ns, chan, tolerance,
                              imports))
    with contextlib.suppress(OSError):
        os.close(peer_fd)
    out.send({TYPE: DONE})
