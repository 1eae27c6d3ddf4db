"""The child side of a run: execute one job inside the sandbox and report on the result channel.

This is the only agentenv code that shares a process with candidate code. It is loaded by path
inside the sandbox (standard library only, no package-relative imports) either as a script
(``python -I -S _runner.py JOB_FD RESULT_FD``) or by the fork server, which calls
:func:`run_job` in a freshly forked child.

A job is JSON: ``{"nonce", "code", "setup", "prelude", "items", "limits"}``. Each item says what to compute
for one check (the plan comes from :mod:`agentenv.grading.plan`; keys and kinds of items and of
the frames sent back are declared in :mod:`_schema`):

- ``{"i", "k": "calls", "calls": [src, ...]}``: evaluate each call expression in the candidate's
  namespace and send back its *value* as plain data (never a verdict; expected values are not in
  the job);
- ``{"i", "k": "stdio", "stdin"}``: run the candidate as a program in a forked process with that
  stdin and send back what it wrote to fd 1.

When the run has checks that cannot be decomposed, the worker also hands this process one end
of a channel to a judge process (:mod:`_judge`), which runs those checks itself; after the items
above, :func:`serve_judge` answers the judge's questions (call this name with these arguments,
read this attribute) with plain data until the judge hangs up. Those checks, their expected
values and their helper code never reach this process.

The child never decides a grade. It reports facts; the parent (or the judge) judges them.
Whatever the candidate does to this process (patching modules, forging frames, exiting) can at
most lose it points.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import gc
import io
import os
import sys
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

import _rpc  # noqa: E402  (loaded by path inside the sandbox)
import _wire  # noqa: E402
from _schema import (  # noqa: E402  (the wire schema: keys and kinds, declared once)
    ASSERTION,
    CALL,
    CALL_INDEX,
    CALL_SOURCES,
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
    SYNTAX,
    TYPE,
    VALUE,
)

__all__ = ["apply_limits", "main", "run_job", "serve_judge"]

MAX_MESSAGE = 400  # characters of an exception message sent back
MAX_STDIO_OUT = 8 * 1024 * 1024  # bytes of a stdio case's stdout kept

# Bound before any candidate code runs, so later monkeypatching of these modules cannot
# change what the runner itself does.
_os_write = os.write
_os_read = os.read
_os_close = os.close
_os_fork = os.fork
_os_exit = os._exit
_os_pipe = os.pipe
_os_dup2 = os.dup2
_os_waitpid = os.waitpid
_sched_setaffinity = getattr(os, "sched_setaffinity", lambda pid, cpus: None)
_compile = compile
_exec = exec
_gc_collect = gc.collect
_run_exitfuncs = atexit._run_exitfuncs
_clear_exitfuncs = atexit._clear
_eval = eval
_encode_value = _wire.encode_value
_decode_value = _wire.decode_value
_encode_frame = _wire.encode_frame
_NotPlainData = _wire.NotPlainData
_ValueTooLarge = _wire.ValueTooLarge
_rpc_send = _rpc.send
_rpc_recv = _rpc.recv
_RpcErrors = (_rpc.ChannelClosed, _rpc.ProtocolError)
_ModuleType = type(sys)
_STDLIB_NAMES = frozenset(getattr(sys, "stdlib_module_names", ()))
_getattribute = object.__getattribute__


def _module_name(module: Any) -> Any:
    """A module's ``__name__`` as its dict holds it (no ``__getattr__`` of the module runs)."""
    return _getattribute(module, "__name__")
MAX_HANDLES = 100_000  # objects kept for the judge in one run
_REQUESTS = ("name", "call", "get", "set")


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
    """Execute the task's prelude, the candidate code, then the task's setup code in one fresh namespace."""
    ns: dict[str, Any] = {"__name__": "solution", "__builtins__": builtins}
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
               max_bytes: int = 0) -> None:
    for j, source in enumerate(calls):
        try:
            compiled = _compile(source, f"<check {index}>", "eval", dont_inherit=True)
            value = _eval(compiled, ns)
        except BaseException as exc:
            chan.send({TYPE: CALL, INDEX: index, CALL_INDEX: j, KIND: _kind(exc), MESSAGE: _message(exc)})
            continue
        try:
            encoded = _encode_value(value)
        except _ValueTooLarge as exc:  # plain data, over a wire budget: say which
            chan.send({TYPE: CALL, INDEX: index, CALL_INDEX: j, KIND: OVER_BUDGET,
                       MESSAGE: str(exc.args[0])})
            continue
        except _NotPlainData as exc:
            chan.send({TYPE: CALL, INDEX: index, CALL_INDEX: j, KIND: NOT_PLAIN,
                       MESSAGE: str(exc.args[0])})
            continue
        except BaseException as exc:  # RecursionError, MemoryError on a huge value
            chan.send({TYPE: CALL, INDEX: index, CALL_INDEX: j, KIND: NOT_PLAIN, MESSAGE: _message(exc)})
            continue
        if max_bytes and len(encoded) > max_bytes:  # it could never arrive whole: say why now
            chan.send({TYPE: CALL, INDEX: index, CALL_INDEX: j, KIND: OVER_BUDGET,
                       MESSAGE: f"a value of {len(encoded)} bytes (Limits.max_result_bytes is "
                              f"{max_bytes})"})
            continue
        chan.send({TYPE: CALL, INDEX: index, CALL_INDEX: j, VALUE: encoded})


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
    program's non-daemon threads, run its ``atexit`` handlers, then drop its globals as a
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
    with contextlib.suppress(BaseException):
        for private in (True, False):
            for name in list(namespace):
                if name != "__builtins__" and private == (
                        isinstance(name, str) and name[:1] == "_" and name[1:2] != "_"):
                    namespace[name] = None
        _gc_collect()


def _run_stdio(index: int, code: str, stdin: str, chan: _Channel, prelude: str = "") -> None:
    """Run the candidate as ``__main__`` in a forked process; report its fd-1 output."""
    in_fd = _stdin_fd(stdin.encode("utf-8"))
    _flush_stdout()  # what this process printed so far is not the program's
    out_r, out_w = _os_pipe()
    st_r, st_w = _os_pipe()
    pid = _os_fork()
    if pid == 0:  # the program's process
        try:
            _clear_exitfuncs()  # handlers registered before the fork are not the program's
            _os_close(out_r)
            _os_close(st_r)
            _os_dup2(in_fd, 0)
            _os_dup2(out_w, 1)
            _os_close(in_fd)
            _os_close(out_w)
            sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
        except BaseException:
            _os_exit(70)
        status = b""
        try:
            program_ns = {"__name__": "__main__", "__builtins__": builtins}
            if prelude:
                _exec(_compile(prelude, "<prelude>", "exec", dont_inherit=True), program_ns)
            compiled = _compile(code, "<solution>", "exec", dont_inherit=True)
            _exec(compiled, program_ns)
        except SystemExit:
            pass
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
    chunks: list[bytes] = []
    kept = 0
    while True:
        chunk = _os_read(out_r, 65536)
        if not chunk:
            break
        if kept < MAX_STDIO_OUT:
            chunks.append(chunk[: MAX_STDIO_OUT - kept])
            kept += len(chunks[-1])
    _os_close(out_r)
    _os_waitpid(pid, 0)
    status = _os_read(st_r, 8192)
    _os_close(st_r)
    out = b"".join(chunks).decode("utf-8", "replace")
    message: dict[str, Any] = {TYPE: STDIO, INDEX: index, OUT: out}
    if status:
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


class _JudgeServer:
    """This process's side of the judge channel (see :mod:`_rpc` for the messages).

    Runs candidate code on the judge's behalf; sends back only plain data, or a handle for any
    other object (kept here, so the judge can call its methods or pass it back). Candidate code
    may write on the channel itself: whatever it sends is at most a wrong answer.
    """

    def __init__(self, fd: int, ns: dict[str, Any], max_bytes: int = 0) -> None:
        self.fd = fd
        self.ns = ns
        self.max_bytes = max_bytes
        self.handles: dict[int, Any] = {}

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
        try:
            reply = self.handle(message)
        except _Hangup:
            raise
        except BaseException as exc:
            try:
                text = str(exc)
            except BaseException:
                text = ""
            reply = {"x": _type_name(exc), "msg": str.__getitem__(text, slice(0, MAX_MESSAGE))}
        try:
            _rpc_send(self.fd, reply)
        except _RpcErrors:
            raise _Hangup from None

    def target(self, ref: Any) -> Any:
        if type(ref) is list and len(ref) == 2 and ref[0] == "n" and type(ref[1]) is str:
            if ref[1] in self.ns:
                return self.ns[ref[1]]
            if hasattr(builtins, ref[1]):
                return getattr(builtins, ref[1])
            raise NameError(f"name {ref[1]!r} is not defined")
        if type(ref) is list and len(ref) == 2 and ref[0] == "h" and ref[1] in self.handles:
            return self.handles[ref[1]]
        raise ValueError("the judge named an object this process does not hold")

    def argument(self, arg: Any) -> Any:
        if type(arg) is list and len(arg) == 2:
            if arg[0] == "v":
                return _decode_value(arg[1])
            if arg[0] == "h":
                return self.target(arg)
            if arg[0] == "c" and type(arg[1]) is int:
                return self._callback(arg[1])
        raise ValueError("malformed argument from the judge")

    def result(self, value: Any) -> list[Any]:
        try:
            encoded = _encode_value(value)
        except _ValueTooLarge as exc:  # plain data, over a wire budget: say which
            return ["b", str(exc.args[0])]
        except _NotPlainData:
            encoded = None
        if encoded is not None:
            if self.max_bytes and len(encoded) > self.max_bytes:
                return ["b", f"a value of {len(encoded)} bytes (Limits.max_result_bytes is "
                             f"{self.max_bytes})"]
            return ["v", encoded]
        if len(self.handles) >= MAX_HANDLES:
            raise MemoryError(f"more than {MAX_HANDLES} objects kept for the judge")
        key = len(self.handles) + 1
        self.handles[key] = value
        return ["h", key, _type_name_of(value)]

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        op = message["op"]
        if op == "name":
            cpu = message.get("cpu")
            if type(cpu) is int:  # answer from the judge's CPU: a wake-up there costs half
                with contextlib.suppress(BaseException):
                    _sched_setaffinity(0, (cpu,))
            value = self.target(["n", message.get("n")])
            if type(value) is _ModuleType:  # a standard-library module: its name only, the
                try:                          # judge imports its own
                    name = str(_module_name(value))
                    if str.partition(name, ".")[0] in _STDLIB_NAMES:
                        return {"r": ["m", name]}
                except BaseException:
                    pass
            return {"r": self.result(value)}
        target = self.target(message.get("f"))
        if op == "get":
            return {"r": self.result(getattr(target, str(message.get("n"))))}
        if op == "set":
            setattr(target, str(message.get("n")), self.argument(message.get("v")))
            return {"r": ["v", _encode_value(None)]}
        raw_args, raw_kwargs = message.get("a"), message.get("k")
        if type(raw_args) is not list or type(raw_kwargs) is not list:
            raise ValueError("malformed call from the judge")
        args = [self.argument(a) for a in raw_args]
        kwargs = {str(pair[0]): self.argument(pair[1]) for pair in raw_kwargs}
        value = target(*args, **kwargs)
        reply: dict[str, Any] = {"r": self.result(value)}
        # Arguments are copies: send back the ones the call changed, so a check that tests
        # "does not modify its argument" sees what the candidate did to it.
        changed: list[list[Any]] = []
        for position, raw, arg in [*((i, raw_args[i], a) for i, a in enumerate(args)),
                                   *((k, raw_kwargs[n][1], kwargs[k])
                                     for n, k in enumerate(kwargs))]:
            if raw[0] == "v" and type(arg) in (list, dict, set):
                try:
                    after = _encode_value(arg)
                except BaseException:
                    continue
                if after != raw[1]:
                    changed.append([position, after])
        if changed:
            reply["m"] = changed
        return reply

    def _callback(self, key: int) -> Any:
        server = self

        def call_the_judge(*args: Any, **kwargs: Any) -> Any:
            try:
                message = {"op": "cb", "c": key, "a": [_encode_value(a) for a in args],
                           "k": [[str(k), _encode_value(v)] for k, v in kwargs.items()]}
            except _NotPlainData as exc:
                raise TypeError(f"a callback of the check takes plain data only, not {exc}") from None
            try:
                _rpc_send(server.fd, message)
                while True:
                    reply = _rpc_recv(server.fd)
                    if reply.get("op") in _REQUESTS:
                        server.answer(reply)  # the callback calls back into the candidate
                        continue
                    break
            except _RpcErrors:
                raise _Hangup from None
            if "x" in reply:
                raise RuntimeError(f"the check's callback raised {reply.get('x')}: {reply.get('msg')}")
            result = reply.get("r")
            if type(result) is not list or len(result) != 2 or result[0] != "v":
                raise RuntimeError("the check's callback returned something that is not plain data")
            return _decode_value(result[1])

        return call_the_judge


def _type_name_of(value: Any) -> str:
    try:
        return str(type.__dict__["__qualname__"].__get__(type(value)))
    except BaseException:
        return "object"


def serve_judge(ns: dict[str, Any], fd: int, max_bytes: int = 0) -> None:
    """Answer the judge's questions about the candidate's namespace until it hangs up."""
    _JudgeServer(fd, ns, max_bytes).serve()


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
    if judge_fd is not None or any(item[ITEM_KIND] != ITEM_STDIO for item in items):
        ns = _load_candidate(code, str(job.get("setup", "")), chan, str(job.get("prelude", "")))
    for item in items:
        if stop is not None and stop():
            return
        kind, index = item[ITEM_KIND], int(item[ITEM_INDEX])
        if kind == ITEM_STDIO:
            _run_stdio(index, code, str(item[STDIN]), chan, str(job.get("prelude", "")))
        elif ns is None:
            continue  # the parent marks these with the load failure
        elif kind == ITEM_CALLS:
            _run_calls(index, list(item[CALL_SOURCES]), ns, chan, int(job.get("max_value_bytes", 0)))
    if judge_fd is not None:
        if ns is not None:
            serve_judge(ns, judge_fd, int(job.get("max_value_bytes", 0)))
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
