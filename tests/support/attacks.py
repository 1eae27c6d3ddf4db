"""What the sandbox suites share: an attack case, candidate code that finds its sockets, stops
the zygote's children or forks with clone flags of its own, and a strict pool that skips
outside CI and fails in it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from agentenv import settings
from agentenv.errors import IsolationUnavailable
from agentenv.sandbox import SandboxPool

# Candidate-side helper: the socket descriptors this process holds (the judge channel among them).
FIND_SOCKETS = """
import os, stat
def sockets():
    found = []
    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                found.append(fd)
        except OSError:
            pass
    return found
"""

# Candidate-side helper, for what a run leaves behind at the fallback level: stop every child of
# the zygote (the runs it prepares for the next submissions) but those in ``mine``, until ``end``.
STOP_THE_ZYGOTES_CHILDREN = """
import os, signal, time
def stop_the_zygotes_children(zygote, end, mine=()):
    me = os.getpid()
    while time.time() < end:
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me or int(name) in mine:
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    data = handle.read()
                if int(data[data.rindex(b")") + 2:].split()[1]) == zygote:
                    os.kill(int(name), signal.SIGSTOP)
            except (OSError, ValueError):
                pass
        time.sleep(0.0005)
"""

# Candidate-side helper: clone(flags | SIGCHLD) through the interpreter's fork hooks.
# clone_parent(): CLONE_PARENT, the child is the caller's sibling (a child of the zygote's when
# the caller is one, and in no stray's subtree). vfork_copy(): CLONE_VFORK without CLONE_VM, a
# plain fork (memory copied) whose parent waits in state D (TASK_KILLABLE) until the child exits
# or execs; SIGSTOP never ends that wait.
# A stray waits until G is dead (the run has been answered), then stops the worker W (the
# zygote's parent, same uid) and the zygote. The ticks that would continue the zygote come from
# W, and nothing continues W: the parent waits IDLE_TIMEOUT for the idle report.
STOP_THE_WORKER = """
import os, signal, time
ZYGOTE = os.getppid()
with open(f"/proc/{ZYGOTE}/stat", "rb") as handle:
    WORKER = int(handle.read().rsplit(b")", 1)[1].split()[1])
G = os.getpid()
def alive(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False
if os.fork() == 0:
    os.setsid()
    while alive(G):
        time.sleep(0.0005)
    os.kill(WORKER, signal.SIGSTOP)
    os.kill(ZYGOTE, signal.SIGSTOP)
    os._exit(0)
def f():
    return 0
"""

CLONE = """
import ctypes
_api = ctypes.pythonapi
_syscall = ctypes.PyDLL(None, use_errno=True).syscall
_syscall.restype = ctypes.c_long
def clone_with(flags):
    _api.PyOS_BeforeFork()
    pid = _syscall(ctypes.c_long(56), ctypes.c_ulong(flags | 17), ctypes.c_void_p(0),
                   ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_void_p(0))
    if pid == 0:
        _api.PyOS_AfterFork_Child()
        return 0
    _api.PyOS_AfterFork_Parent()
    return pid
def clone_parent():
    return clone_with(0x8000)
def vfork_copy():
    return clone_with(0x4000)
"""


@dataclass(frozen=True)
class Case:
    """One attack (or control): code, checks, setup, and exactly what honest work scores."""

    name: str
    code: str
    checks: tuple[str, ...]
    expected: float = 0.0
    setup: str = ""
    timeout: float = 1.0


def make_case(marker: str, name: str, code: str, checks: tuple[str, ...], **kwargs: object) -> Case:
    """A Case whose code has ``MARKER`` replaced by this run's marker."""
    return Case(name, code.replace("MARKER", marker), checks, **kwargs)  # type: ignore[arg-type]


def strict_pool(size: int, what: str) -> SandboxPool:
    """A strict pool; where bubblewrap cannot run, a skip naming ``what`` needs it, except in CI
    (``AGENTENV_REQUIRE_STRICT=1``), where a missing sandbox must fail the build instead."""
    try:
        return SandboxPool(size=size, isolation="strict")
    except IsolationUnavailable as exc:  # pragma: no cover - CI installs bubblewrap
        if settings.require_strict():
            raise
        pytest.skip(f"{what} need(s) strict isolation: {exc}")
