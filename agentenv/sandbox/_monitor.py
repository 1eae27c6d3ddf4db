"""Watching one run: its pipes, its CPU time and its deadlines, until it ends; then killing it.

A run is ``G`` alone, or ``G`` and its judge ``J``. :func:`watch` reads their pipes (result
channel, stdout, stderr) with caps as they report data, while a :class:`Clock` (every time
limit of the run, in one value) moves through its states: *running*, *ended* (the run timed
out, every process exited, or every result pipe ended with its marker) and *done* (a grace
period of draining after the end, or every pipe closed). What the run used is measured from
``/proc`` (:func:`processes`), never from anything the run reports. The
monitor never judges: it hands back bytes and how the processes ended. Standard library only;
loaded by path inside the sandbox.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

# The builtins this module's functions use: a copy taken when it is imported, before any
# candidate code runs in this process (see _worker).
globals()["__builtins__"] = dict(vars(__import__("builtins")))

GRACE = 0.25  # seconds of draining after the run has ended
CPU_POLL = 0.01  # seconds between CPU checks, at the least
RUNNABLE_STEP = 0.02  # past its backstop, a runnable run is looked at again this much later
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _pipe_slots() -> int:
    """The most buffer slots a pipe of this machine can have (one page each, at pipe-max-size)."""
    try:
        with open("/proc/sys/fs/pipe-max-size", "rb") as handle:
            # at most 4096 (a 16 MiB pipe): a flood behind the marker is read that often at worst
            return min(4096, max(16, int(handle.read()) // os.sysconf("SC_PAGE_SIZE")))
    except (OSError, ValueError, AttributeError):
        return 256


# Reads of what each pipe holds when a run ends on its marker: a read returns up to 64 KiB, but
# in packet mode (O_DIRECT on the write end) at most one slot, so as many as a pipe can have.
DRAIN_ROUNDS = _pipe_slots()


class Process(NamedTuple):
    """One process of a run, as ``/proc`` shows it."""

    pid: int
    first: bool  # G or J itself (not something it forked)
    state: bytes  # R: running or waiting for a core
    ticks: int  # CPU time used, with the children it reaped (clock ticks)
    delay: float  # seconds spent runnable but waiting for a core (run delay), when asked for


class Run(Protocol):
    """A run's process and the worker's ends of its pipes."""

    pid: int
    res_r: int


class Supervisor(Protocol):
    """What the monitor asks of the worker (which speaks to the zygote)."""

    def exited(self, pid: int) -> bool:
        """Has run ``pid`` ended? (Never blocks.)"""

    def reap(self, pid: int) -> int:
        """Wait for run ``pid`` to be reaped; its status (minus the signal that killed it)."""

    def reap_later(self, pid: int) -> None:
        """Run ``pid`` ended normally: reap it between runs, off the caller's clock."""

    def processes(self, pids: Sequence[int], since: int, delays: bool = False) -> list[Process]:
        """The processes of the run whose first processes are ``pids`` (:func:`processes`)."""


class Clock:
    """Every time limit of one run, in one value, and the state they put it in.

    The time limit is ``cpu_limit`` seconds of CPU used by the run's processes, checked as often
    as they could have reached it at ``cpu_rate`` CPUs. ``backstop`` is the wall-clock deadline,
    for a run that sleeps or blocks; it does not count the time the run spent runnable but
    waiting for a core (other runs, other load: :func:`run_delay`; ``G``'s and ``J``'s stood at
    ``waited`` when the job was sent), so a run starved of CPU is not stopped for what it never
    got, up to ``cap``. A run whose CPU time is spent is stopped at once, however long it
    waited.
    """

    def __init__(self, now: float, cpu_limit: float, cpu_rate: float, backstop: float,
                 cap: float | None = None, waited: float = 0.0) -> None:
        self.cpu_limit = cpu_limit
        self.cpu_rate = cpu_rate
        self.backstop = backstop
        self.deadline = backstop  # moved past the backstop for time spent waiting for a core
        self.cap = backstop if cap is None else max(cap, backstop)
        self.waited = waited
        self.cpu_check = now + cpu_limit / cpu_rate  # the earliest it could be spent
        self.cpu_spent = False
        self.ended_at: float | None = None  # None while running
        self.timed_out = False

    @property
    def running(self) -> bool:
        return self.ended_at is None

    def tick(self, now: float, used: float | None, look: Callable[[bool], list[Process]]) -> bool:
        """Take the time: ``used`` is the CPU time measured now when :meth:`cpu_due` said so;
        ``look`` lists the run's processes when the backstop needs them. Whether the run has
        just timed out (the caller kills it)."""
        if not self.running:
            return False
        if used is not None:
            left = self.cpu_limit - used
            if left <= 0:
                self.deadline = now  # its CPU time is spent: a timeout, whatever the load
                self.cpu_spent = True
            self.cpu_check = now + max(CPU_POLL, left / self.cpu_rate)
        if now >= self.deadline and not self.cpu_spent and self.deadline < self.cap:
            # Time spent waiting for a core is not the run's: move the backstop by what it
            # waited, and past now while it is runnable (a wait in progress is added to the run
            # delay only when the wait ends; a run that is computing instead is the CPU limit's
            # to stop).
            seen = look(True)
            later = self.backstop + max(0.0, run_delay(seen) - self.waited)
            if any(p.state == b"R" for p in seen):
                later = max(later, now + RUNNABLE_STEP)
            self.deadline = min(self.cap, later)
            if self.deadline - now < 0.005:
                self.deadline = now  # nothing (or too little) to add: it is a timeout
        if now >= self.deadline:
            self.timed_out = True
            self.ended_at = now
            return True
        return False

    def cpu_due(self, now: float) -> bool:
        return self.running and now >= self.cpu_check

    def end(self, now: float) -> None:
        if self.running:
            self.ended_at = now

    def done(self, now: float) -> bool:
        """Ended, and its grace period of draining is over."""
        return self.ended_at is not None and now >= self.ended_at + GRACE

    def sleep(self, now: float, polling: bool) -> float:
        """How long to wait for the pipes before the clock needs looking at again (at most 20
        ms while some process can only be polled for its exit)."""
        limit = (self.ended_at + GRACE) if self.ended_at is not None else min(self.deadline,
                                                                             self.cpu_check)
        wait = max(0.0, limit - now)
        return min(wait, 0.02) if polling else wait


class _Pipes:
    """The run's pipes as they are read: what is kept of each (up to its cap), what was dropped,
    and the last bytes of each result pipe (to see its end marker)."""

    def __init__(self, caps: dict[int, int], ends: dict[int, bytes | None]) -> None:
        self.caps = caps
        self.ends = ends
        self.kept: dict[int, list[bytes]] = {fd: [] for fd in caps}
        self.size = dict.fromkeys(caps, 0)
        self.dropped = dict.fromkeys(caps, 0)
        self.tails = {fd: b"" for fd in ends}

    def read(self, fd: int) -> bool:
        """Read what ``fd`` reports (select said so); False once it is closed."""
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        if not data:
            return False
        room = self.caps[fd] - self.size[fd]
        if room > 0:
            self.kept[fd].append(data[:room])
            self.size[fd] += min(room, len(data))
        self.dropped[fd] += max(0, len(data) - max(room, 0))
        end = self.ends.get(fd)
        if end is not None:
            self.tails[fd] = (self.tails[fd] + data[-len(end):])[-len(end):]
        return True

    def ended(self, fd: int) -> bool:
        return self.tails.get(fd, b"") == self.ends.get(fd)

    def blob(self, fd: int, note_dropped: bool) -> bytes:
        blob = b"".join(self.kept[fd])
        if note_dropped and self.dropped[fd]:
            blob += f"\n[... {self.dropped[fd]} more bytes dropped]".encode()
        return blob


def watch(runs: Sequence[Run], caps: dict[int, int], clock: Clock, since: int,
          supervisor: Supervisor, *, ends: dict[int, bytes | None],
          started: bytes) -> dict[str, Any]:
    """Read the runs' pipes until they close, every run ends, or a limit; then kill them.

    A run is ended at once when every result pipe ends with its run's ``ends`` (see
    :func:`_candidate.ended`), or the process that did not end so has exited, without waiting
    for ``G`` (or ``J``) to exit. ``since`` is when the job was sent, in ``/proc``'s clock ticks
    since boot; a run's result pipe must start with ``started`` (its set-up went well). The
    outcome: ``timed_out``, how ``G`` (``died``) and ``J`` (``judge_died``) ended, and ``data``,
    each pipe's bytes in the order of ``caps``; or ``error`` when a run failed before its job.
    """
    pipes = _Pipes(caps, ends)
    sel = selectors.DefaultSelector()
    for fd in caps:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    pidfds: dict[int, int] = {}  # pidfd -> pid, readable once that process has exited
    for run in runs:
        handle = pidfd(run.pid)
        if handle is not None:
            pidfds[handle] = run.pid
            sel.register(handle, selectors.EVENT_READ)
    polled = [run.pid for run in runs if run.pid not in pidfds.values()]
    exited: set[int] = set()
    pids = [run.pid for run in runs]

    def look(delays: bool = False) -> list[Process]:
        return supervisor.processes(pids, since, delays)

    def take(fd: int) -> None:
        if fd in pidfds:
            sel.unregister(fd)
            exited.add(pidfds[fd])
        elif not pipes.read(fd):
            sel.unregister(fd)

    try:
        while True:
            now = time.monotonic()
            used = cpu_used(look()) if clock.cpu_due(now) else None
            if clock.tick(now, used, look):
                for run in runs:
                    kill(run.pid)
            if not any(fd in sel.get_map() for fd in caps):
                break  # every holder of the pipes closed them: nothing more can arrive
            if clock.running:
                exited.update(pid for pid in polled if pid not in exited and supervisor.exited(pid))
                if len(exited) == len(runs):
                    for run in runs:
                        kill(run.pid)  # all done: whatever they left behind goes with them
                    clock.end(now)
            if clock.done(now):
                break
            for key, _ in sel.select(clock.sleep(now, bool(polled))):
                take(int(key.fd))
            finished = [run for run in runs if pipes.ended(run.res_r)]
            if clock.running and finished and all(run in finished or run.pid in exited
                                                  for run in runs):
                # G (and J) wrote their last bytes after flushing their output (or the one that
                # did not has exited, which waits for nothing either): all the run wrote before
                # is in the pipes already. An honest value never ends a pipe like this (the
                # bytes need the nonce's header line right before the marker); a candidate that
                # writes them into G's pipe itself (it knows G's nonce) only cuts its own later
                # checks short; J's end cannot be forged (its frames quote candidate text, but
                # no candidate ever sees J's nonce). End the run now, read what the pipes report
                # holding, and answer without waiting for their ends (which come only once the
                # kernel has torn the run down); never read a pipe that reports nothing, which a
                # process still splicing into it could block. The teardown finishes off the
                # caller's clock (the worker's after_run).
                for run in runs:
                    kill(run.pid)
                for _round in range(DRAIN_ROUNDS):
                    ready = [int(key.fd) for key, _ in sel.select(0)]
                    for fd in ready:
                        take(fd)
                    if not ready:
                        break
                break
    finally:
        sel.close()
        for handle in pidfds:
            with contextlib.suppress(OSError):
                os.close(handle)
    statuses = []
    ok = True
    for run in runs:
        kill(run.pid)  # whatever is left of the run dies now
        result = b"".join(pipes.kept[run.res_r])
        end = ends.get(run.res_r)
        if not clock.timed_out and end is not None and result.endswith(end):
            supervisor.reap_later(run.pid)  # a normal end: no need to wait for the teardown
            statuses.append(0)
        else:
            statuses.append(supervisor.reap(run.pid))
        ok = ok and (clock.timed_out or result.startswith(started))
    if not ok:
        return {"error": "a run's process failed before running its job"}
    results = {run.res_r for run in runs}
    outcome: dict[str, Any] = {
        "timed_out": clock.timed_out,
        "died": None if clock.timed_out else describe(statuses[0]),
        "data": [pipes.blob(fd, fd not in results) for fd in caps]}
    if len(runs) > 1:
        outcome["judge_died"] = None if clock.timed_out else describe(statuses[1])
    return outcome


def processes(pids: Sequence[int], since: int, *, namespaces: bool, zygote_pid: int,
              delays: bool = False) -> list[Process]:
    """The processes of the run whose first processes are ``pids``.

    In namespaces every process the worker can see belongs to the run except the worker,
    bubblewrap's init, the zygote and the zygote's other children (runs prepared, or ended and
    not yet reaped, including one forked while this run goes on), and anything that started
    before this run did (``since``, in ``/proc``'s clock ticks since boot: what is left of
    earlier runs until the zygote has reaped it). No process of the run is ever a child of the
    zygote but ``G`` and ``J`` (orphans are the run's own init's), so whatever the candidate
    forked counts too, whatever pid it was given, and nothing another run (or a prepared one)
    used is ever charged to this one. At the rlimits level only ``G`` (and ``J``) are read.
    """
    own = set(pids)
    if namespaces:
        try:
            seen = [int(n) for n in os.listdir("/proc") if n.isdigit()]
        except OSError:
            seen = list(own)
        seen = [p for p in seen if p not in (os.getpid(), zygote_pid, 1)]
    else:
        seen = list(own)
    found = []
    for pid in seen:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                data = handle.read()
            fields = data[data.rindex(b")") + 2:].split()
            if pid not in own and (int(fields[1]) == zygote_pid or int(fields[19]) < since):
                continue  # another run (prepared, or an earlier one), or left over from one
            ticks = int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        except (OSError, ValueError, IndexError):
            continue  # gone in between: its time is now in its parent's
        found.append(Process(pid, pid in own, fields[0], ticks, delay(pid) if delays else 0.0))
    return found


def delay(pid: int) -> float:
    """Seconds process ``pid`` spent runnable but waiting for a core (``/proc/PID/schedstat``);
    0 where the kernel does not say."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as handle:
            return int(handle.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def cpu_used(seen: Sequence[Process]) -> float:
    """CPU seconds the run's processes have used so far (with the children they reaped)."""
    return sum(p.ticks for p in seen) / TICKS


def run_delay(seen: Sequence[Process]) -> float:
    """Seconds the run spent runnable but waiting for a core (the run delay in
    ``/proc/PID/schedstat``), at least: ``G``'s and ``J``'s added up, or, where more, the
    longest of any process they forked (a run that waits on its children while they wait for a
    core). Waits of different processes are never added up: they may be the same wall-clock
    moment. 0 where the kernel does not say.
    """
    first = sum(p.delay for p in seen if p.first)
    return max([first, *(p.delay for p in seen if not p.first)])


def first_delay(runs: Sequence[Run]) -> float:
    """``G``'s and ``J``'s run delay so far, added up (the clock's baseline)."""
    return sum(delay(run.pid) for run in runs)


def kill(pid: int) -> None:
    """SIGKILL a run: G itself (at the strict level its pid namespace dies with it) and its group."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def describe(status: int) -> str | None:
    """How a candidate process ended, for messages only: exit codes never decide a grade."""
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return None if status == 0 else f"exited with status {status}"
