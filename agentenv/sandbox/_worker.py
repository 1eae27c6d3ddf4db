"""The fork server: a long-lived, pre-warmed worker that runs each submission in a fresh fork.

Started by :mod:`agentenv.sandbox._pool` as ``python -I -S -B`` importing this module, inside
bubblewrap at the strict level or as a plain process at the rlimits level. Standard library
only; loaded by path. Two long-lived processes and one per run:

- the **worker** ``W`` (this module) talks to the trusted parent over its stdin/stdout
  (length-prefixed frames, :mod:`_framing`: JSON messages in; replies out as a small msgpack
  header and the run's raw byte strings), hands each job to a prepared run, watches it
  (:mod:`_monitor`) and sends back what it observed. It never judges;
- the **zygote** ``Z`` (:mod:`_zygote`), forked by ``W`` before any job exists, holds the
  runner and common modules imported and forks every run. It never reads a job or a result,
  so each run starts from the same pristine memory: nothing of an earlier submission can be
  found in a later one. It installs the syscall filter every run inherits (:mod:`_seccomp`);
- the **candidate process** ``G`` (:mod:`_candidate`). At the strict level ``Z`` clones it
  straight into new user, pid, mount, IPC and network namespaces, where it is pid 1: it
  cannot name, so cannot signal, the worker, the parent or another run, and when it dies the
  kernel kills everything it left behind. Its mounts make the run hermetic
  (:mod:`_namespaces`): everything read-only but a fresh size-capped tmpfs for ``/tmp`` and
  ``/dev/shm``, and a ``/proc`` of its own, all torn down with it, like its SysV and POSIX IPC
  and its sockets (its own loopback: a port it bound, even one left in ``TIME_WAIT``, is free
  again for the next run). At the rlimits level it is a plain fork in its own session
  (process group); the zygote kills what it leaves behind (:mod:`_strays`) and the worker
  empties the shared work directory after each run;
- for a run whose plan has checks that cannot be decomposed, the **judge process** ``J``
  (:mod:`_judge`): a second prepared process, forked and isolated exactly like ``G``, that
  never runs candidate code. The worker gives ``J`` and ``G`` the two ends of a fresh socket
  pair (their only link) with their jobs; ``J`` runs the checks and asks ``G`` about the
  candidate's names over it. Verdicts are read only from ``J``'s result pipe; ``G``'s carries
  only what the parent judges itself (see :class:`_PairedRun`).

Runs are prepared *before* their jobs arrive (fork, namespaces, descriptors, capabilities
dropped) and wait on their job socket, warming up meanwhile unless the job is already there; a
job then only costs entering the work dir, taking the environment and rlimits, and
:func:`_runner.run_job`. The monitor reads the three pipes until they close, the result pipe
ends with its done frame and the ``FINISHED`` marker (the run is then killed and answered at
once), ``G`` exits or a limit passes; it kills whatever is left and the worker replies. Only
then, off the caller's clock, the worker waits until the zygote has reaped the run (nothing of
it stays beside the next), asks for more runs (and, at the rlimits level, wipes the work area),
and sends an idle report (:meth:`Worker.health`) the parent reads before it hands the worker
another job. The kernel calls all of this needs beyond the standard library are
:mod:`_kernel`'s.

``W``, ``Z`` and ``G`` are non-dumpable, so candidate code (same uid) cannot read another's
memory, environment or descriptors through ``/proc``.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import json
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any

# The builtins this module's functions use: a copy taken when it is imported, before any
# candidate code runs in this process (the fork server's child runs candidate code, then this
# module's code again), so a candidate that patches ``builtins.len`` changes nothing here.
globals()["__builtins__"] = dict(vars(__import__("builtins")))

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.append(_here)  # last: nothing in this directory may shadow a standard module

import _candidate  # noqa: E402
import _cleanup  # noqa: E402
import _framing  # noqa: E402
import _monitor  # noqa: E402
import _namespaces  # noqa: E402
import _seccomp  # noqa: E402
import _wire  # noqa: E402
import _zygote  # noqa: E402
from _candidate import NODUMP, READY, STARTED  # noqa: E402
from _kernel import PR_SET_DUMPABLE, PR_SET_PDEATHSIG, close_fds, libc  # noqa: E402
from _zygote import Answer, Op  # noqa: E402

# Imported once in the zygote, so runs get them for free. Kept to what solutions commonly use:
# every module here makes each fork (and each exit) a little more expensive.
PRELOAD = ("typing", "math", "re", "collections", "itertools", "functools", "heapq", "bisect",
           "string", "random", "operator", "copy", "resource", "ctypes")
REPORT_WAIT = 30.0  # seconds a prepared run has to report NODUMP, then READY (Worker._take)


def read_message(fd: int) -> dict[str, Any] | None:
    """The parent's next message (a JSON frame); None when the parent is gone."""
    body = _framing.read_frame(fd)
    if body is None:
        return None
    message = json.loads(body)
    return message if isinstance(message, dict) else None


def write_message(fd: int, message: dict[str, Any]) -> None:
    """A reply to the parent: its ``bytes`` values go as raw frames after a msgpack header."""
    blobs = {key: value for key, value in message.items() if type(value) is bytes}
    header = {key: value for key, value in message.items() if key not in blobs}
    _framing.write_reply(fd, header, blobs, _wire.pack_message)


def read_job(fd: int) -> bytes | None:
    """A job's payload (JSON bytes, handed on to the child as they are); None at end of stream."""
    frame: bytes | None = _framing.read_frame(fd)
    return frame


def _reported(fd: int, report: bytes) -> bool:
    """Whether a prepared run's next bytes on ``fd`` are ``report``, sent within
    :data:`REPORT_WAIT` seconds (a run that something stopped or slowed is dropped, not
    waited for)."""
    try:
        ready = select.poll()
        ready.register(fd, select.POLLIN)
        if not ready.poll(REPORT_WAIT * 1000):
            return False
    except OSError:
        return False
    return bool(_framing.read_exact(fd, len(report)) == report)


def _scheduling(pid: int) -> tuple[int, int, set[int]]:
    """A process's scheduling policy, nice value and CPUs (0: this process)."""
    return (os.sched_getscheduler(pid), os.getpriority(os.PRIO_PROCESS, pid),
            os.sched_getaffinity(pid))


class _Prepared:
    """A run forked and isolated ahead of its job: its pid and the worker's pipe ends."""

    def __init__(self, pid: int, fds: list[int]) -> None:
        self.pid = pid
        self.job_w, self.res_r, self.out_r, self.err_r = fds
        self.confirmed = False  # NODUMP read: it can no longer be read through /proc
        self.ready = False  # READY read: locked down and waiting for its job

    def close(self) -> None:
        close_fds(self.job_w, self.res_r, self.out_r, self.err_r)


class Worker:
    """The fork server's front: talks to the parent, drives the zygote, watches each run."""

    def __init__(self, config: dict[str, Any], zygote: socket.socket, zygote_pid: int) -> None:
        self.namespaces = bool(config.get("namespaces"))
        self.hermetic = bool(config.get("hermetic")) and self.namespaces
        self.disk_kib = max(1, int(config.get("disk", 256 << 20)) // 1024)  # each run's tmpfs
        self.workroot = str(config["workroot"])
        self.clean = True  # False once a wipe of the work area failed: see health()
        self.depth = max(1, int(config.get("prepared", 2)))  # runs kept ready ahead of their jobs
        # CPUs a run can use at once at most, which paces the CPU checks (see _monitor.Clock): the
        # cores it may run on, or fewer where the parent gave the worker a cgroup CPU quota.
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        quota = float(config.get("cpu_rate") or 0)
        self.cpu_rate = float(min(cores or 1, quota) if quota > 0 else cores or 1)
        self.pid = os.getpid()
        self.zygote = _zygote.Link(zygote, zygote_pid)
        self.zygote_pid = zygote_pid
        self.ready: collections.deque[_Prepared] = collections.deque()
        self.unreaped: list[int] = []
        self.forks_pending = 0
        self.confirm_early = True  # see _confirm_all; False where runs never become dumpable
        self.scheduling = _scheduling(0)  # the zygote's too: it was forked from this process

    def _collect_forks(self) -> None:
        """Read the answers to every fork request sent so far (answers come in order)."""
        while self.forks_pending:
            kind, pid, fds = self.zygote.answer()
            self.forks_pending -= 1
            if kind != Answer.FORKED or len(fds) != 4 or pid <= 0:
                raise SystemExit("the zygote could not fork a run")
            self.ready.append(_Prepared(pid, fds))

    def _ask(self, op: bytes, pid: int = 0) -> _zygote.Reply:
        self._collect_forks()
        self.zygote.send(op, pid)
        return self.zygote.answer()

    def prepare(self, at_least: int = 0) -> None:
        """Ask for ``depth`` runs (or ``at_least``) to be forked and isolated ahead of their jobs,
        without waiting."""
        while len(self.ready) + self.forks_pending < max(self.depth, at_least):
            self.zygote.send(Op.FORK, self.disk_kib if self.hermetic else 0)
            self.forks_pending += 1

    def _resize(self, disk: int) -> None:
        """A job asks for another disk allowance: runs prepared with the old one are dropped."""
        kib = max(1, disk // 1024)
        if not self.hermetic or kib == self.disk_kib:
            return
        self._collect_forks()
        while self.ready:
            run = self.ready.popleft()
            _monitor.kill(run.pid)
            run.close()
            self.unreaped.append(run.pid)
        self.disk_kib = kib

    def _confirm_all(self) -> None:
        """Wait until no prepared run is dumpable any more; drop any that failed to get there.

        Called before a candidate may run: no candidate ever coexists with a prepared process
        that is still dumpable (see ``_namespaces.enter_namespaces``). Only that moment is waited for; the
        rest of a run's set-up (mounts, lockdown, warm-up) goes on alongside.
        """
        self._collect_forks()
        for run in list(self.ready):
            if run.confirmed:
                continue
            if _reported(run.res_r, NODUMP):
                run.confirmed = True
            else:
                self.ready.remove(run)
                _monitor.kill(run.pid)
                run.close()
                self.unreaped.append(run.pid)

    def _take(self) -> _Prepared:
        """The next prepared run that is locked down (dropping any that never got there)."""
        while self.ready or self.forks_pending:
            if not self.ready:
                self._collect_forks()
            run = self.ready.popleft()
            if not run.confirmed:
                run.confirmed = _reported(run.res_r, NODUMP)
            if run.confirmed and _reported(run.res_r, READY):
                return run
            _monitor.kill(run.pid)  # it never got locked down: drop it
            run.close()
            self.unreaped.append(run.pid)
        raise SystemExit("no run could be prepared")

    def run(self, header: dict[str, Any], job: bytes, judge_job: bytes | None = None) -> dict[str, Any]:
        """Hand ``job`` to a prepared run and report what happened (never a verdict).

        With ``judge_job``, a second prepared run becomes the judge ``J`` (see
        :class:`_PairedRun`); its frames come back apart, as ``judge_result``.
        """
        timeout = float(header["timeout"])
        max_output = int(header.get("max_output", 65536))
        max_result = int(header.get("max_result", 16 << 20))
        if header.get("disk"):
            self._resize(int(header["disk"]))
        if not self.hermetic:
            os.makedirs(os.path.join(self.workroot, "run"), mode=0o700, exist_ok=True)
        self.prepare()
        if judge_job is not None:
            _PairedRun.reserve(self)
        if self.confirm_early:
            self._confirm_all()
        run = self._take()
        pair = _PairedRun(self._take(), judge_job) if judge_job is not None else None
        runs = [run] if pair is None else [run, pair.judge]
        waited = _monitor.first_delay(runs)  # blocked on their job sockets: not runnable, so not moving
        start = time.monotonic()
        since = int(time.clock_gettime(time.CLOCK_BOOTTIME) * _monitor.TICKS)  # /proc's starttime clock
        try:
            peer = pair.connect() if pair is not None else None
            with contextlib.suppress(OSError):
                _candidate.send_job(run.job_w, job, peer)  # G is blocked reading it
            close_fds(run.job_w)
            run.job_w = -1
            if pair is not None:
                pair.start()
            caps = {run.res_r: max_result, run.out_r: max_output, run.err_r: max_output}
            if pair is not None:
                caps.update(pair.caps(max_result))
            wall = float(header.get("wall") or timeout)
            cap = float(header.get("wall_cap") or wall)  # the clock keeps it past the deadline
            ends = {run.res_r: _candidate.ended(header.get("nonce"))}
            if pair is not None:
                ends[pair.judge.res_r] = _candidate.ended(header.get("judge_nonce"))
            clock = _monitor.Clock(time.monotonic(), timeout, self.cpu_rate,
                                   start + max(wall, timeout), start + cap, waited)
            outcome: dict[str, Any] = _monitor.watch(runs, caps, clock, since, self, ends=ends,
                                                     started=STARTED)
        finally:
            for each in runs:
                each.close()
            if pair is not None:
                pair.close()
        if "error" in outcome:
            return {"id": header.get("id"), "error": outcome["error"]}
        outcome["seconds"] = time.monotonic() - start
        blobs = outcome.pop("data")
        # Raw bytes: write_message sends them as frames of their own (no base64, no JSON).
        outcome["result"], outcome["stdout"], outcome["stderr"] = blobs[:3]
        if pair is not None:
            outcome["judge_result"] = blobs[3]
        outcome["id"] = header.get("id")
        return outcome

    def after_run(self) -> None:
        """Between runs, off the caller's clock: reap, wipe the work area, prepare more runs.

        The run just answered (and any prepared run dropped) was killed but may still be in
        the kernel's teardown, its memory still charged to this worker's cgroup: the idle
        report waits until the zygote has reaped it (at the strict level ``G`` is its pid
        namespace's init, reaped only once every process of the run is gone), so the next run
        never starts beside what is left of this one. Hermetic runs leave nothing to wipe
        (their files die with their mount namespace); at the fallback level the shared work
        directory is emptied, and a wipe that fails marks this worker unhealthy instead of
        raising (see :meth:`health`).
        """
        while self.unreaped:
            self._ask(Op.WAIT, self.unreaped.pop())
        if not self.hermetic:
            self.clean = _cleanup.remove_contents(self.workroot) and self.clean
        self.prepare()  # confirmed when the next job comes (run), by when they are long done

    def health(self) -> dict[str, Any]:
        """The idle report the parent reads before it hands this worker another job."""
        problems = []
        if not self.clean:
            problems.append("its work directory could not be emptied")
        if not self.ready and not self.forks_pending:
            problems.append("no run is prepared")
        try:
            if os.waitpid(self.zygote_pid, os.WNOHANG)[0]:
                problems.append("its zygote is gone")
        except ChildProcessError:
            problems.append("its zygote is gone")
        if not self.namespaces and self._rescheduled():
            problems.append("its zygote's scheduling was changed (every later run would inherit it)")
        return {"idle": True, "healthy": not problems, "problems": problems}

    def _rescheduled(self) -> bool:
        """Whether the zygote's scheduling (policy, nice, CPUs) is no longer what it was when
        this worker started. At the fallback level a run shares the zygote's uid and can change
        them (and this process's: so the baseline is the start, not this process now)."""
        try:
            return _scheduling(self.zygote_pid) != self.scheduling
        except OSError:
            return False  # gone: reported above

    # What the run monitor asks of the worker (_monitor.Supervisor).

    def exited(self, pid: int) -> bool:
        return bool(self._ask(Op.POLL, pid).kind == Answer.ENDED)

    def reap(self, pid: int) -> int:
        return int(self._ask(Op.WAIT, pid).value)

    def reap_later(self, pid: int) -> None:
        self.unreaped.append(pid)

    def processes(self, pids: Sequence[int], since: int,
                  delays: bool = False) -> list[_monitor.Process]:
        seen: list[_monitor.Process] = _monitor.processes(
            pids, since, namespaces=self.namespaces, zygote_pid=self.zygote_pid, delays=delays)
        return seen

class _PairedRun:
    """The judge half of a run with non-decomposable checks: a prepared run turned into ``J``.

    ``J`` and ``G`` come from the same pristine zygote and get the same lockdown; they share only
    the socket pair made here, passed to each with its job. ``J``'s result pipe is read apart
    from ``G``'s, so a frame ``G`` writes can never count as a verdict; ``J``'s stdout and
    stderr are drained (so a chatty check cannot block) and dropped.
    """

    def __init__(self, judge: _Prepared, job: bytes) -> None:
        self.judge = judge
        self.job = job
        self.ends: tuple[int, int] | None = None

    @staticmethod
    def reserve(worker: Worker) -> None:
        """Make sure two prepared runs exist (forked now only when the pool keeps fewer)."""
        worker.prepare(at_least=2)

    def connect(self) -> int:
        """Make the J<->G channel; returns G's end (the worker closes its copies once sent)."""
        first, second = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ends = (first.detach(), second.detach())
        return self.ends[0]

    def start(self) -> None:
        assert self.ends is not None
        with contextlib.suppress(OSError):
            _candidate.send_job(self.judge.job_w, self.job, self.ends[1])
        close_fds(self.judge.job_w)
        self.judge.job_w = -1
        self.close()

    def caps(self, max_result: int) -> dict[int, int]:
        return {self.judge.res_r: max_result, self.judge.out_r: 0, self.judge.err_r: 0}

    def close(self) -> None:
        if self.ends is not None:
            close_fds(*self.ends)
            self.ends = None

def _load_packages(config: dict[str, Any]) -> None:
    """The third-party packages candidates may import (``paths``, read-only), imported once
    here so no run pays for it (``preload``). Math libraries run single-threaded: a run's
    process limit and CPU share are for one thread, and a zygote must not fork with a
    thread pool alive."""
    paths = [str(p) for p in config.get("paths") or ()]
    if not paths:
        return
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    sys.path.extend(p for p in paths if p not in sys.path)
    for name in config.get("preload") or ():
        with contextlib.suppress(Exception):
            __import__(str(name))


def main(argv: list[str]) -> None:
    config = json.loads(argv[1])
    # Move the control pipes off fds 0/1 so nothing the children inherit can reach them.
    control = os.dup(0)
    reply = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    close_fds(null)
    libc.prctl(PR_SET_DUMPABLE, 0)
    if config.get("parent_pid"):
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != int(config["parent_pid"]):
            os._exit(0)
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(name)
    _load_packages(config)
    os.makedirs(config["workroot"], mode=0o700, exist_ok=True)
    namespaces, needs_dumpable = (_namespaces.probe_namespaces() if config.get("namespaces")
                                  else (False, False))
    _namespaces.needs_dumpable = needs_dumpable
    if namespaces and config.get("hermetic"):
        _namespaces.writable_mounts()  # read once, here: every run inherits the list
    not_hermetic = _namespaces.probe_hermetic() if namespaces and config.get("hermetic") else ""
    if not_hermetic:
        config["hermetic"] = False
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    zygote_pid = os.fork()
    if zygote_pid == 0:
        ours.close()
        close_fds(control, reply)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        # Everything imported so far is shared, read-mostly, by every run: keep the collector
        # from walking (and so copying) those pages in each child.
        gc.collect()
        gc.freeze()
        _seccomp.filter_syscalls()
        _zygote.serve(theirs, namespaces, bool(config.get("hermetic")))
    theirs.close()
    worker = Worker(config, ours, zygote_pid)
    # Hermetic runs each see only their own /proc, so no candidate can reach a prepared run
    # during its dumpable moment: nothing to wait for.
    worker.confirm_early = needs_dumpable and not worker.hermetic
    if not config.get("namespaces") or namespaces:
        worker.prepare()
    write_message(reply, {"ready": True, "namespaces": namespaces, "pid": os.getpid(),
                          "hermetic": worker.hermetic, "not_hermetic": not_hermetic,
                          "python": sys.version.split()[0]})
    if config.get("namespaces") and not namespaces:
        return
    while True:
        message = read_message(control)
        if message is None or message.get("op") == "exit":
            break
        if message.get("op") == "run":
            job = read_job(control)
            judge_job = read_job(control) if message.get("judge") else None
            if job is None or (message.get("judge") and judge_job is None):
                break
            write_message(reply, worker.run(message, job, judge_job))
            try:
                worker.after_run()
                idle = worker.health()
            except BaseException as exc:  # reported; the parent replaces this worker
                idle = {"idle": True, "healthy": False, "problems": [f"after the run: {exc!r}"]}
            write_message(reply, idle)  # read by the parent before it sends the next job
        elif message.get("op") == "ping":
            write_message(reply, {"id": message.get("id"), "pong": True})
    _cleanup.remove_contents(config["workroot"])


if __name__ == "__main__":
    main(sys.argv)
