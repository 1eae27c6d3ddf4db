"""What a run leaves behind at the fallback level, found and killed by the zygote.

Without namespaces nothing dies with a run's first process: one that left its group
(``setsid``) would outlive it, beside every later run. There the zygote is a child subreaper, so
whatever a run leaves becomes its child, and after each run it kills every child that is not a
run it forked (:func:`sweep`), reaping the run itself without blocking (:func:`reap_swept`), or
gives up and ends the worker (:func:`give_up`). Processes are read from ``/proc`` and signalled
through pidfds, never by a pid the kernel may have given to another process. Standard library
only; loaded by path inside the sandbox.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from typing import NoReturn

# The builtins this module's functions use: a copy taken when it is imported, before any
# candidate code runs in this process (see _worker).
globals()["__builtins__"] = dict(vars(__import__("builtins")))

SWEEP_BUDGET = 5.0  # seconds the zygote spends at most killing what a run left (sweep)


def reap_swept(pid: int, forked: set[int]) -> int | None:
    """The fallback zygote's WAIT: reap run ``pid`` and sweep away what it left (:func:`sweep`),
    never blocking: a process it left may hold it (a tracer reaps its tracee's zombie), so
    sweeps and non-blocking waits take turns, within :data:`SWEEP_BUDGET` seconds. Its exit
    code, or None when the run or what it left could not be ended in time."""
    deadline = time.monotonic() + SWEEP_BUDGET
    while True:
        clean = sweep(forked, deadline)
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0 if clean else None
        if done:  # what it left at its exit is swept too
            if not sweep(forked, deadline):
                return None
            return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.001)


def give_up(forked: set[int]) -> NoReturn:
    """The fallback zygote could not end what a run left in time: kill every process below it
    (its prepared runs and every stray, whatever its state, for up to a second) and exit, so
    the worker reports itself unhealthy and the pool replaces it. Never returns."""
    me = os.getpid()
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        seen = _processes()
        below = _below(seen)
        doomed = _trees([pid for pid, (parent, _, _) in seen.items() if parent == me], below)
        if not doomed:
            break
        for pid in reversed(doomed):
            _signal(pid, seen[pid][1], signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        time.sleep(0.001)
    os._exit(0)


def _below(seen: dict[int, tuple[int, int, bytes]]) -> dict[int, list[int]]:
    """Each process's children, from :func:`_processes`."""
    below: dict[int, list[int]] = {}
    for pid, (parent, _, _) in seen.items():
        below.setdefault(parent, []).append(pid)
    return below


def _trees(roots: list[int], below: dict[int, list[int]]) -> list[int]:
    """``roots`` and everything below them, each process before its children."""
    found, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(below.get(pid, ()))
    return found


def sweep(forked: set[int], deadline: float) -> bool:
    """The zygote, a subreaper at the fallback level: kill and reap every process that
    descends from it but not through a run it forked (what earlier runs left behind), then
    send the runs it forked SIGCONT (a stray may have stopped one). Whether none is left.

    Each look takes every stray at once, the whole tree under each child that is not a run (a
    chain of any depth, not one generation a look). Strays that still move are sent SIGSTOP
    and looked at again; only once every one of them stands still (stopped or dead) are they
    killed, children before parents, so none can fork into the slots the kills free or be
    woken by its parent's death signal (a fork bomb at its process limit refilled each
    freed slot otherwise). Looks go on until none is left, or ``deadline`` passes. Signals go
    through pidfds opened on the very processes seen (same start time), never to a pid the
    kernel has since given to another process.
    """
    me = os.getpid()
    asked: set[tuple[int, int]] = set()  # (pid, start time) of every process sent SIGSTOP
    while True:
        try:  # the cheap look first: most runs leave nothing behind
            with open(f"/proc/self/task/{me}/children", "rb") as handle:
                if all(int(word) in forked for word in handle.read().split()):
                    break
        except (OSError, ValueError):
            pass
        seen = _processes()
        strays = [pid for pid, (parent, _, _) in seen.items() if parent == me and pid not in forked]
        if not strays:
            break
        if time.monotonic() > deadline:
            return False  # the runs it prepared stay as they are: the caller gives up
        doomed = _trees(strays, _below(seen))
        # A process sent SIGSTOP that is in an uninterruptible wait (a vfork parent waiting on
        # its child) runs no code of its own before it stops, and SIGKILL ends such a wait.
        moving = [pid for pid in doomed if seen[pid][2] not in STILL
                  and not (seen[pid][2] == b"D" and (pid, seen[pid][1]) in asked)]
        if moving:  # stop them and look again: nothing is killed until all stand still
            for pid in moving:
                asked.add((pid, seen[pid][1]))
                _signal(pid, seen[pid][1], signal.SIGSTOP)
            time.sleep(0.0002)
            continue
        doomed.reverse()  # each process before its parent: no death signal wakes a child
        for pid in doomed:
            _signal(pid, seen[pid][1], signal.SIGKILL)
        waiting = False
        for pid in strays:  # its own children: their pids stay theirs until reaped
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                waiting |= os.waitpid(pid, os.WNOHANG)[0] == 0  # never blocks: next round
        if waiting:
            time.sleep(0.0005)
    for pid in forked:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGCONT)
    return True


STILL = (b"T", b"t", b"Z", b"X")  # stopped, traced, dead: a process that cannot fork


def _processes() -> dict[int, tuple[int, int, bytes]]:
    """Every process this one can see: its parent's pid, start time and state (``/proc/PID/stat``)."""
    seen: dict[int, tuple[int, int, bytes]] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit():
                stat = _stat(int(name))
                if stat is not None:
                    seen[int(name)] = stat
    return seen


def _stat(pid: int) -> tuple[int, int, bytes] | None:
    """A process's parent pid, start time and state, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return int(fields[1]), int(fields[19]), fields[0]
    except (OSError, ValueError, IndexError):
        return None


def _signal(pid: int, started: int, sig: int) -> None:
    """Send ``sig`` to process ``pid`` if it is still the one that started at ``started``:
    through a pidfd opened before that check, so never to a process that took its pid since."""
    try:
        handle = os.pidfd_open(pid)
    except OSError as error:
        stat = _stat(pid)
        if error.errno == errno.ENOSYS and stat is not None and stat[1] == started:  # before 5.3
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        return
    try:
        stat = _stat(pid)
        if stat is not None and stat[1] == started:
            signal.pidfd_send_signal(handle, sig)
    except OSError:
        pass
    finally:
        os.close(handle)
