"""A prepared run's own side: the process ``G`` (or the judge ``J``) from its fork to its end.

Forked by the zygote (:mod:`_zygote`) before any job exists, it takes its descriptors (the
layout below), drops its capabilities, reports READY, warms up on a dummy job while it waits
(:func:`warm_up`), reads its job from its job socket (:func:`receive_job`; the worker's half is
:func:`send_job`), applies the job's limits and runs it (:func:`_runner.run_job`, or
:func:`_judge.run_judge` for ``J``). Its result pipe starts with :data:`STARTED` and ends with
the job's done frame and :data:`FINISHED` (:func:`ended`), which lets the worker answer without
waiting for the process to exit. Standard library only; loaded by path inside the sandbox.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import os
import select
import signal
import socket
import struct
import sys
import time

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.append(_here)  # last: nothing in this directory may shadow a standard module

import _framing  # noqa: E402
import _judge  # noqa: E402
import _namespaces  # noqa: E402
import _runner  # noqa: E402
import _schema  # noqa: E402
import _wire  # noqa: E402
from _kernel import PR_SET_PDEATHSIG, close_fds, libc, write_file  # noqa: E402

# The builtins this module's functions use: a copy taken when it is imported, before any
# candidate code runs in this process (the zygote's child runs candidate code, then this
# module's code again), so a candidate that patches ``builtins.len`` changes nothing here.
globals()["__builtins__"] = dict(vars(__import__("builtins")))

RESULT_FD = 3  # its result channel
JOB_FD = 4  # the end of its job socket (a prepared run: G or J), until the job has been read
OOM_FD = 5  # a prepared run's /proc/self/oom_score_adj, until the job starts
NODUMP = b"+nodump\n"  # its first bytes: its id maps are written and it is no longer dumpable
READY = b"+ready\n"  # its next bytes: it is locked down
STARTED = b"+started\n"  # G's first bytes on the result channel, written before any candidate code
FINISHED = b"+finished\n"  # a run's last bytes when its job returned (only used to skip waits)
LINGER = 0.05  # seconds G waits, its job done, for the worker to kill it (become_candidate)
_write_all = _framing.write_all
_read_exact = _framing.read_exact
_sleep = time.sleep  # bound before any candidate code runs in a process forked from here


def ended(nonce: object) -> bytes | None:
    """What a result pipe ends with once its job returned: the job's last frame (``done``), its
    header line with the run's nonce included, then the marker. A frame's own bytes can end like
    the marker or a done frame's body (a value's raw bytes: ``bytes``, a typed array, small ints
    spelling it), never like this without the run's 128-bit nonce. None (no early end) when the
    run header carries no usable nonce.
    """
    if not isinstance(nonce, str) or not nonce:
        return None
    try:
        frame: bytes = _wire.encode_frame(nonce, {_schema.TYPE: _schema.DONE})
        return frame + FINISHED
    except (UnicodeError, ValueError):
        return None


def become_candidate(channel: dict[str, int], namespaces: bool) -> None:
    """``G``: lock down, wait for the job, run it. Never returns."""
    code = 0
    linger = False  # see the end of this function
    # What the end below uses, held here before any candidate code runs: the job can rebind
    # this module's names and patch ``os`` (which could only keep its own run going until the
    # worker's limits stop it), not these.
    finished, write_all, close, sleep, wait, leave = (
        FINISHED, _write_all, os.close, _sleep, LINGER, os._exit)
    try:
        if namespaces:
            os.setsid()  # its own group and session, apart from the zygote's
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        # Lift every pipe end above the target numbers first, so no dup2 clobbers another.
        if _namespaces.oom_fd is not None:
            channel = {**channel, "oom": _namespaces.oom_fd}
        high = {name: fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for name, fd in channel.items()}
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        for name, target in (("out", 1), ("err", 2), ("res", RESULT_FD), ("job", JOB_FD),
                             ("oom", OOM_FD)):
            if name in high:
                os.dup2(high[name], target)
        os.closerange(OOM_FD + 1, 65536)
        if _namespaces.oom_fd is None:
            close_fds(OOM_FD)
        os.umask(0o077)
        if namespaces:
            _namespaces.forbid_nested_user_namespaces()
            libc.drop_capabilities()
        else:  # the fallback level: as host root (an opt-in) no capability may stay
            libc.drop_capabilities(for_good=os.geteuid() == 0)
        # No-new-privs and the syscall filter are the zygote's (_seccomp.filter_syscalls), inherited.
        _write_all(RESULT_FD, READY)  # locked down: see Worker.run
        os.environ.clear()
        warm_up(JOB_FD)
        payload, peer = receive_job(JOB_FD)  # blocks until a job is sent (or the worker goes)
        if not payload:
            os._exit(0)
        job = json.loads(payload)
        judging = job.get("role") == "judge"
        if judging:
            os.chdir("/")  # the judge has no work dir and no environment: it never writes
        else:
            os.chdir(job["workdir"])
            for key, value in job.get("env", {}).items():  # not update(): its ABC check
                os.environ[key] = value  # alone costs ~20 copy-on-write faults
        limits = dict(job.get("limits", {}))
        if not namespaces:
            limits["nproc"] = None  # counted per real uid across the machine: unusable here
        _runner.apply_limits(limits)
        prefer_as_oom_victim()
        _write_all(RESULT_FD, STARTED)  # set-up done; from here on, what happens is the job's
        linger = ended(job.get("nonce")) is not None  # the worker can end this run early
        if judging and peer is not None:
            _judge.run_judge(job, RESULT_FD, peer)
        elif not judging:
            _runner.run_job(job, RESULT_FD, peer)
    except BaseException:
        code = 70
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        if code == 0:
            with contextlib.suppress(BaseException):
                write_all(RESULT_FD, finished)
        for fd in (1, 2, RESULT_FD):
            with contextlib.suppress(BaseException):
                close(fd)
        if code == 0 and linger:
            # Wait to be killed rather than exit. The pipe writes above wake the worker on this
            # CPU, behind this process (the kernel expects a writer to sleep next); exiting
            # would make the worker wait out this process's teardown (its memory, its
            # namespaces: a millisecond or more here) before it could read the end and answer.
            # Asleep, the worker runs at once, ends the run and answers; the teardown follows
            # off the caller's clock. A run the worker cannot end early (junk after the marker)
            # still exits by itself soon.
            with contextlib.suppress(BaseException):
                sleep(wait)
        leave(code)


def prefer_as_oom_victim() -> None:
    """Make this run (and what it forks) the first process the OOM killer picks, before the
    worker, the zygote or a prepared run (raising it needs no privilege, only the open file)."""
    if _namespaces.oom_fd is not None:
        with contextlib.suppress(OSError):
            os.write(OOM_FD, b"1000")
        close_fds(OOM_FD)
        return
    with contextlib.suppress(OSError):
        write_file(b"/proc/self/oom_score_adj", b"1000")



# The warm-up's job: the kinds of code a task's solution and checks commonly hold (annotations,
# loops, branches, comprehensions, float and str literals, keyword arguments), so the pages the
# compiler and the evaluator write for them are copied before a real job comes.
_WARM_UP_JOB = json.dumps({
    "nonce": "0" * 32,
    "code": ("from typing import List, Optional, Tuple\n\n"
             "def f(xs: List[float], k: Optional[str] = None) -> Tuple[int, str]:\n"
             "    \"\"\"Sum, count and join.\"\"\"\n"
             "    total = 0\n"
             "    for i, x in enumerate(xs):\n"
             "        if x > 0.5 and i % 2 == 0:\n"
             "            total += int(x * 2)\n"
             "        elif x < -1.0:\n"
             "            total -= 1\n"
             "    words = [str(x) for x in xs if x != 0]\n"
             "    seen = {w: len(w) for w in words}\n"
             "    while total > 100:\n"
             "        total //= 2\n"
             "    return total, (k or '').join(sorted(seen))\n"),
    "setup": "", "limits": {}, "env": {}, "workdir": "/",
    "items": [{"i": 0, "k": "calls", "calls": ["f([1.0, 2.5, -3.9, 4.0], 'ab')", "f([])"]},
              {"i": 1, "k": "calls", "calls": ["f([3, 0.25, 1e3], k=None)"]},
              {"i": 2, "k": "calls", "calls": ["f(['x'])"]}],
})


def warm_up(job_fd: int) -> None:
    """Run a dummy job into /dev/null while the prepared process waits for its real one.

    A fresh fork pays a copy-on-write fault for every page the interpreter writes; taking
    those faults now moves them off the caller's clock. The dummy job comes the way a real one
    does (a socket carrying a descriptor, read to its end, decoded, its limits applied) and
    runs through the runner (compile, exec, the wire encoder). It is ours and fixed, so nothing
    of any submission is involved.

    The warm-up only pays while nothing waits for this process: it costs more CPU than it
    saves the job (it touches pages the job never will), so when the real job is already on
    ``job_fd`` (runs come faster than they are prepared) it is skipped, or cut short between
    its steps (decoding, loading the code, each item), and the job goes first.
    """
    if job_waiting(job_fd):
        return
    sink = os.open(os.devnull, os.O_WRONLY)
    try:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            send_job(ours.fileno(), _WARM_UP_JOB.encode("utf-8"), sink)
        finally:
            ours.close()
        payload, peer = receive_job(theirs.detach())
        if peer is not None:
            os.close(peer)
        job = json.loads(payload)
        _runner.apply_limits(dict(job.get("limits", {})))
        if not job_waiting(job_fd):
            _runner.run_job(job, sink, stop=lambda: job_waiting(job_fd))
    except BaseException:
        pass
    finally:
        os.close(sink)
    gc.freeze()  # what the warm-up left is never the candidate's collector's work (or faults)


def job_waiting(fd: int) -> bool:
    """Has the worker sent this prepared process its job yet? (Never blocks.)"""
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return False



# What comes first on a job socket: a marker byte, carrying the judge channel's end
# (SCM_RIGHTS) for runs with a judge, and the job's length in bytes.
JOB_HEAD = struct.Struct(">cQ")


def receive_job(fd: int) -> tuple[bytes, int | None]:
    """Read the job from its socket, and the judge channel when one comes with it; closes ``fd``.

    The job comes after its head (:data:`JOB_HEAD`), in the same message where it fits, so the
    process waiting for it wakes once: the length, not the end of the stream, says when it is
    all here. An empty job when the worker hung up first, the job came short, or the marker and
    the descriptors that came with it disagree (``J`` and one channel end, or ``-`` and none).
    """
    sock = socket.socket(fileno=fd)
    peer: int | None = None
    try:
        head, fds, _flags, _addr = socket.recv_fds(sock, JOB_HEAD.size, 1)
        if head and len(head) < JOB_HEAD.size:
            head += _read_exact(fd, JOB_HEAD.size - len(head)) or b""
        if len(head) == JOB_HEAD.size:
            marker, size = JOB_HEAD.unpack(head)
            if (marker, len(fds)) in ((b"J", 1), (b"-", 0)):
                peer = fds.pop() if fds else None
                job = (_read_exact(fd, size) or b"") if size else b""
                if job or not size:
                    return job, peer
        close_fds(*fds, *(() if peer is None else (peer,)))
        return b"", None
    finally:
        sock.close()


def send_job(fd: int, job: bytes, peer: int | None) -> None:
    """The worker's half of :func:`receive_job`: the head and the job in one ``sendmsg``."""
    sock = socket.socket(fileno=fd)
    try:
        head = JOB_HEAD.pack(b"J" if peer is not None else b"-", len(job))
        sent = socket.send_fds(sock, [head, job], [peer] if peer is not None else [])
        if sent < len(head):
            _write_all(fd, head[sent:])
        _write_all(fd, memoryview(job)[max(0, sent - len(head)):])
    finally:
        sock.detach()


