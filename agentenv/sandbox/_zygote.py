"""The zygote ``Z``, the process every run is forked from, and the protocol the worker speaks
to it.

``Z`` is forked by the worker before any job exists and holds the runner and common modules
imported; it never reads a job or a result, so each run starts from the same pristine memory.
The worker (:class:`Link`) sends it requests, one :data:`COMMAND` each (an :class:`Op` byte and
an int), over a socket pair; :func:`serve` answers them in order (an :class:`Answer` byte, an
int, and for a fork the run's pipe ends passed with ``SCM_RIGHTS``). Standard library only;
loaded by path inside the sandbox.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import struct
import sys
import time
from typing import NamedTuple, NoReturn

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.append(_here)  # last: nothing in this directory may shadow a standard module

import _candidate  # noqa: E402
import _framing  # noqa: E402
import _namespaces  # noqa: E402
import _strays  # noqa: E402
from _kernel import PR_SET_CHILD_SUBREAPER, close_fds, libc  # noqa: E402

# The builtins this module's functions use: a copy taken when it is imported, before any
# candidate code runs in this process (see _worker).
globals()["__builtins__"] = dict(vars(__import__("builtins")))

COMMAND = struct.Struct(">ci")  # an opcode byte and an int
ZYGOTE_WAIT = 30.0  # seconds the worker waits for one answer of the zygote's (Link.answer)


class Op:
    """What the worker asks of the zygote, and the int that comes with it."""

    FORK = b"F"  # fork and isolate a run; the run's disk allowance in KiB (hermetic runs), else 0
    WAIT = b"W"  # reap a run (blocking); its pid
    POLL = b"Q"  # has a run ended? (never blocks; the status is kept for a later WAIT); its pid


class Answer:
    """What the zygote answers, and the int that comes with it."""

    FORKED = b"P"  # the run's pid, -1 on failure; its four pipe ends come with it
    RUNNING = b"R"  # -1
    ENDED = b"S"  # its exit code, or minus the signal that killed it


class Reply(NamedTuple):
    kind: bytes
    value: int
    fds: list[int]


def _code(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def serve(sock: socket.socket, namespaces: bool, hermetic: bool) -> NoReturn:
    """``Z``'s loop: answer the worker's requests in order until it hangs up. Never returns.

    At the fallback level (no namespaces) the zygote is a child subreaper and, at each WAIT,
    kills what the run left behind (:mod:`_strays`), then resumes the runs prepared meanwhile
    (one stopped by a stray).
    """
    uid, gid = os.getuid(), os.getgid()
    reaped: dict[int, int] = {}
    forked: set[int] = set()  # runs (prepared, running or ended) not reaped yet
    if not namespaces:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1)
    while True:
        while True:  # collect every supervisor that has ended
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in forked:  # (a stray's exit is nobody's answer)
                reaped[pid] = _code(status)
                forked.discard(pid)
        data = recv_exact(sock, COMMAND.size)
        if data is None:
            os._exit(0)
        op, value = COMMAND.unpack(data)
        if op == Op.FORK:
            child, ends = _fork_run(sock, namespaces, hermetic, value, uid, gid)
            if child > 0:
                forked.add(child)
            socket.send_fds(sock, [COMMAND.pack(Answer.FORKED, child)], ends)
            close_fds(*ends)
        elif op in (Op.WAIT, Op.POLL):
            pid = value
            if op == Op.WAIT and not namespaces:
                ended = _strays.reap_swept(pid, forked) if pid not in reaped else reaped[pid]
                if ended is None:
                    _strays.give_up(forked)
                reaped[pid] = ended
                forked.discard(pid)
            elif pid not in reaped and op == Op.WAIT:
                try:
                    reaped[pid] = _code(os.waitpid(pid, 0)[1])
                except ChildProcessError:
                    reaped[pid] = 0
                forked.discard(pid)
            if pid not in reaped:
                sock.sendall(COMMAND.pack(Answer.RUNNING, -1))
            else:
                status = reaped[pid] if op == Op.POLL else reaped.pop(pid)
                sock.sendall(COMMAND.pack(Answer.ENDED, status))


def _fork_run(sock: socket.socket, namespaces: bool, hermetic: bool, disk_kib: int,
              uid: int, gid: int) -> tuple[int, list[int]]:
    """Fork one run (into its namespaces at the strict level); in the child, isolate it and
    become the candidate (never returns there). The run's pid (-1 on failure) and the worker's
    ends of its job socket, result pipe, stdout and stderr."""
    job_r, job_w = (end.detach() for end in socket.socketpair())  # fds travel on it
    res_r, res_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        if namespaces:
            child = libc.clone_into_namespaces(_namespaces.HERMETIC_FLAGS if hermetic else 0)
        else:
            child = os.fork()
    except OSError:
        child = -1
    if child == 0:
        try:
            sock.close()
            close_fds(job_w, res_r, out_r, err_r)
            if namespaces:
                _namespaces.enter_namespaces(uid, gid)
            else:
                os.setsid()
            _framing.write_all(res_w, _candidate.NODUMP)
            if namespaces and hermetic:
                _namespaces.make_hermetic(max(1, disk_kib) * 1024)
        except BaseException:
            os._exit(71)
        _candidate.become_candidate({"job": job_r, "res": res_w, "out": out_w, "err": err_w},
                                    namespaces)
    close_fds(job_r, res_w, out_w, err_w)
    return child, [job_w, res_r, out_r, err_r]


def recv_exact(sock: socket.socket, n: int) -> bytes | None:
    """Exactly ``n`` bytes from ``sock``; None when it ends first."""
    parts, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


class Link:
    """The worker's end of the protocol: requests out, answers in, in order."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock = sock
        self.pid = pid

    def send(self, op: bytes, value: int = 0) -> None:
        self.sock.sendall(COMMAND.pack(op, value))

    def answer(self) -> Reply:
        """The zygote's next answer. Where runs share its uid (the fallback level) a run can
        stop it: every 0.1 s without an answer it is sent SIGCONT, and after
        :data:`ZYGOTE_WAIT` seconds the worker gives up (it exits; the pool replaces it)."""
        waiting = select.poll()
        waiting.register(self.sock, select.POLLIN)
        deadline = time.monotonic() + ZYGOTE_WAIT
        while not waiting.poll(100):
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGCONT)
            if time.monotonic() > deadline:
                raise SystemExit("the zygote did not answer")
        data, fds, _flags, _addr = socket.recv_fds(self.sock, COMMAND.size, 8)
        if len(data) < COMMAND.size:
            rest = recv_exact(self.sock, COMMAND.size - len(data))
            if rest is None:
                raise SystemExit("the zygote is gone")
            data += rest
        kind, value = COMMAND.unpack(data)
        return Reply(kind, value, fds)
