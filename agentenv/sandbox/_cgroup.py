"""One cgroup per sandbox worker: process and memory limits that hold for a run as a whole.

A worker runs one candidate at a time, so a cgroup around the worker bounds that run: every
process and thread it starts (``pids``), all the memory its processes and its tmpfs files
use together (``memory``), whatever uid they run as, and the CPU all of them may burn at once
(``cpu``: :data:`CPU_SHARE` CPUs, so a run's total CPU time is bounded by its wall time). The limits are the run's own plus an
allowance for the worker's resident processes (bubblewrap, the fork server, its zygote, the
runs prepared ahead: for memory, what they are measured to hold before the run); the candidate
makes itself the preferred OOM victim, so going over the memory limit kills the run and never
the worker.

Both hierarchies are supported: cgroup v2 when this process's cgroup delegates the
controllers (``cgroup.subtree_control``), else the v1 ``pids``, ``memory`` and ``cpu``
hierarchies when they are mounted and writable. Where neither is possible :func:`create` returns None and the
rlimits (per process, per run's user namespace) are what is left; ``RunResult.limits_enforced``
says which held. Trusted side only.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass, field

from agentenv import settings

__all__ = ["MEMORY_ALLOWANCE", "PIDS_ALLOWANCE", "WorkerCgroup", "available", "create"]

MEMORY_ALLOWANCE = 192 * 1024**2  # at most, for the worker's own processes and page tables, and the kernel's
WORKER_SLACK = 48 * 1024**2  # what the worker may buffer during a run (its result pipes), beyond its idle size
_STEP = 16 * 1024**2  # the allowance is rounded up to this, so the limit is rewritten only when it moves
LEFTOVER = 64 * 1024**2  # charged between runs beyond this (page cache left by one): reclaimed
PIDS_ALLOWANCE = 16  # bubblewrap (2), fork server, zygote, prepared runs, a judge, slack
SETTLE = 2.0  # seconds a new memory limit waits for an earlier run's memory to be freed
CPU_SHARE = 1.5  # CPUs a worker may use at once: a run's CPU time is at most this times its wall time
_CONTROLLERS = ("memory", "pids", "cpu")
_ROOT = "/sys/fs/cgroup"
_counter = itertools.count()
_lock = threading.Lock()
_layout: dict[str, str] | None = None  # controller -> the directory new cgroups go under
_version = 0
_layout_reason = ""


@dataclass
class WorkerCgroup:
    """The cgroup directories of one worker (one per controller, or one for v2)."""

    dirs: dict[str, str]  # controller -> its cgroup directory
    version: int
    _memory: str = ""  # the memory limit last written
    _pids: int | None = -1
    _weight: int = 100
    _limited: int | None = -1  # the run memory the limit was last computed for, and its allowance
    _allowance: int = -1
    _readers: dict[str, int] = field(default_factory=dict)  # file name -> a descriptor kept open

    def _read(self, controller: str, name: str) -> bytes | None:
        """A control file's content, from a descriptor opened once and read with ``pread``.

        Read before and after every run, on the caller's clock: a kept descriptor costs one
        system call where opening the file each time costs a path walk and a buffered reader
        (an order of magnitude more). None if the file cannot be read.
        """
        fd = self._readers.get(name)
        try:
            if fd is None:
                fd = self._readers[name] = os.open(os.path.join(self.dirs[controller], name),
                                                   os.O_RDONLY | os.O_CLOEXEC)
            return os.pread(fd, 4096, 0)
        except (OSError, KeyError):
            return None

    @property
    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a process writes itself into to join (one per directory)."""
        return sorted({os.path.join(d, "cgroup.procs") for d in self.dirs.values()})

    @property
    def controllers(self) -> tuple[str, ...]:
        return tuple(sorted(self.dirs))

    def set_limits(self, memory: int | None, pids: int | None) -> None:
        """Apply a run's limits plus the worker allowance (written only when they change).

        The memory allowance is what the idle worker is measured to hold now (its processes,
        the runs prepared ahead, their kernel objects) plus :data:`WORKER_SLACK` for what it
        buffers while the run goes on, never more than :data:`MEMORY_ALLOWANCE`: whatever the
        worker does not use is not the run's to take on top of its own limit. An allowance one
        step (16 MiB) above what the worker holds now is kept rather than lowered.
        """
        if "memory" in self.dirs:
            if memory is None:
                value = "-1" if self.version == 1 else "max"
            else:
                held = self.usage()
                allowance = MEMORY_ALLOWANCE if held is None else min(
                    MEMORY_ALLOWANCE, -(-(held + WORKER_SLACK) // _STEP) * _STEP)
                if memory == self._limited and allowance < self._allowance <= allowance + _STEP:
                    # One step of hysteresis: an idle worker hovering at a step boundary would
                    # rewrite the limit every other run (a write the kernel answers with a
                    # reclaim pass, on the caller's clock).
                    allowance = self._allowance
                self._limited, self._allowance = memory, allowance
                value = str(memory + allowance)
            if value != self._memory:
                if self.version == 1:
                    _write_limit(self.dirs["memory"], "memory.limit_in_bytes", value)
                else:
                    _write(self.dirs["memory"], "memory.max", value)
                    _write(self.dirs["memory"], "memory.swap.max", "0", quiet=True)
                self._memory = value
        if "pids" in self.dirs and pids != self._pids:
            _write(self.dirs["pids"], "pids.max", "max" if pids is None else str(pids + PIDS_ALLOWANCE))
            self._pids = pids

    def reclaim(self) -> None:
        """Give back what earlier runs left charged here (page cache of files they read), before
        the next run; never raises.

        Clean page cache outlives the run that read it and stays charged to this cgroup, so the
        next run, going for memory its limit allows, would have to reclaim it first, with that
        CPU counted on its own clock (reading a gigabyte of files cost the next run 100 ms more
        to allocate 900 MiB). Done from the trusted side, where it costs no run's budget; only
        when more than :data:`LEFTOVER` bytes are charged.
        """
        usage = self.usage()
        if usage is None or usage <= LEFTOVER:
            return
        with contextlib.suppress(OSError):
            if self.version == 1:
                _write(self.dirs["memory"], "memory.force_empty", "0")
            else:
                _write(self.dirs["memory"], "memory.reclaim", str(usage))

    def usage(self) -> int | None:
        """Bytes charged to this cgroup now, or None without a memory controller."""
        if "memory" not in self.dirs:
            return None
        data = self._read("memory", "memory.usage_in_bytes" if self.version == 1 else "memory.current")
        try:
            return int(data) if data is not None else None
        except ValueError:
            return None

    def set_weight(self, weight: int) -> None:
        """The worker's CPU weight (100 is an ordinary process's, up to 10000), as
        ``SandboxPool``'s scheduler sets it while a run ages; never raises."""
        if "cpu" not in self.dirs or weight == self._weight:
            return
        try:
            if self.version == 1:
                _write(self.dirs["cpu"], "cpu.shares", str(max(2, weight * 1024 // 100)))
            else:
                _write(self.dirs["cpu"], "cpu.weight", str(max(1, min(10000, weight))))
        except OSError:
            return
        self._weight = weight

    def oom_kills(self) -> int:
        """How many processes the kernel has killed in this cgroup for want of memory."""
        if "memory" not in self.dirs:
            return 0
        data = self._read("memory", "memory.oom_control" if self.version == 1 else "memory.events")
        for line in (data or b"").splitlines():
            key, _, value = line.partition(b" ")
            if key == b"oom_kill":
                try:
                    return int(value)
                except ValueError:
                    return 0
        return 0

    def remove(self) -> None:
        """Kill whatever is still inside, then delete the directories; never raises."""
        for fd in self._readers.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._readers.clear()
        for directory in self.dirs.values():
            for _attempt in range(50):
                with contextlib.suppress(OSError):  # cgroup v2 (5.14+): every process at once
                    _write(directory, "cgroup.kill", "1")
                try:
                    with open(os.path.join(directory, "cgroup.procs")) as handle:
                        pids = [int(p) for p in handle.read().split()]
                except (OSError, ValueError):
                    pids = []
                # Stop them all before killing any, so none forks into the slots kills free.
                for sig in (signal.SIGSTOP, signal.SIGKILL):
                    for pid in pids:
                        with contextlib.suppress(OSError):
                            os.kill(pid, sig)
                try:
                    os.rmdir(directory)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _write_limit(directory: str, name: str, value: str) -> None:
    """Lower (or raise) a v1 memory limit, waiting out an earlier run's teardown.

    The kernel refuses a limit below what is charged (``EBUSY``) when it cannot reclaim the
    difference: memory of an earlier run's processes, which the worker does not wait to see
    freed before its next job. That is freed within moments, so the write is retried for up to
    :data:`SETTLE` seconds before it raises.
    """
    deadline = time.monotonic() + SETTLE
    while True:
        try:
            _write(directory, name, value)
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def _write(directory: str, name: str, value: str, *, quiet: bool = False) -> None:
    try:
        with open(os.path.join(directory, name), "w") as handle:
            handle.write(value)
    except OSError:
        if not quiet:
            raise


def _mounts() -> list[tuple[str, str, set[str]]]:
    """``(mount point, fs type, options)`` of every cgroup mount."""
    found = []
    try:
        with open("/proc/self/mountinfo") as handle:
            for line in handle:
                left, _, right = line.partition(" - ")
                fields, tail = left.split(), right.split()
                if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
                    continue
                options = set(tail[2].split(",")) | set(fields[5].split(","))
                found.append((fields[4], tail[0], options))
    except OSError:
        pass
    return found


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under key "" for v2."""
    paths: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as handle:
            for line in handle:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for name in controllers.split(",") if controllers else [""]:
                    paths[name] = path
    except (OSError, ValueError):
        pass
    return paths


def _probe(directory: str) -> bool:
    """Can we create (and remove) a cgroup under ``directory``?"""
    test = os.path.join(directory, f"agentenv-probe-{os.getpid()}")
    try:
        os.mkdir(test)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        os.rmdir(test)
    return True


def _discover() -> tuple[dict[str, str], int, str]:
    own = _own_paths()
    mounts = _mounts()
    for point, fstype, _options in mounts:  # v2, when our cgroup delegates both controllers
        if fstype != "cgroup2" or "" not in own:
            continue
        base = os.path.join(point, own[""].lstrip("/"))
        try:
            with open(os.path.join(base, "cgroup.subtree_control")) as handle:
                delegated = set(handle.read().split())
        except OSError:
            continue
        wanted = set(_CONTROLLERS) & delegated
        if wanted and _probe(base):
            return {name: base for name in wanted}, 2, ""
    layout: dict[str, str] = {}
    for point, fstype, options in mounts:
        if fstype != "cgroup":
            continue
        for name in _CONTROLLERS:
            if name in options and name in own and name not in layout:
                base = os.path.join(point, own[name].lstrip("/"))
                if _probe(base):
                    layout[name] = base
    if layout:
        return layout, 1, ""
    return {}, 0, "no writable cgroup (v2 delegation, or v1 memory/pids/cpu) was found"


def _remove_stale(layout: dict[str, str]) -> None:
    """Remove empty cgroups a killed process of ours left behind (its pid is in the name)."""
    for parent in set(layout.values()):
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            parts = name.split("-")
            if len(parts) != 3 or parts[0] != "agentenv" or not parts[1].isdigit():
                continue
            if int(parts[1]) == os.getpid() or os.path.exists(f"/proc/{parts[1]}"):
                continue
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(parent, name))  # fails (and stays) while anything is inside


def available() -> tuple[dict[str, str], str]:
    """Where worker cgroups can be made (controller -> parent directory), or why not."""
    global _layout, _version, _layout_reason
    with _lock:
        if _layout is None:
            if not settings.sandbox_cgroups():
                _layout, _version, _layout_reason = {}, 0, "disabled by AGENTENV_SANDBOX_CGROUPS=0"
            else:
                _layout, _version, _layout_reason = _discover()
                _remove_stale(_layout)
        return dict(_layout), _layout_reason


def create() -> WorkerCgroup | None:
    """A fresh cgroup for one worker, or None where this machine offers none."""
    layout, _ = available()
    if not layout:
        return None
    name = f"agentenv-{os.getpid()}-{next(_counter)}"
    version = _version
    dirs: dict[str, str] = {}
    for controller, parent in layout.items():
        path = os.path.join(parent, name)
        try:
            os.makedirs(path, exist_ok=True)
        except OSError:
            continue
        dirs[controller] = path
    if not dirs:
        return None
    group = WorkerCgroup(dirs=dirs, version=version)
    if version == 1 and "memory" in dirs:
        # Keep the kernel's OOM killer on (so the run dies, not the allocation loop forever).
        _write(dirs["memory"], "memory.oom_control", "0", quiet=True)
        _write(dirs["memory"], "memory.swappiness", "0", quiet=True)
    if "cpu" in dirs:
        period = 100_000
        quota = str(int(CPU_SHARE * period))
        try:
            if version == 1:
                _write(dirs["cpu"], "cpu.cfs_period_us", str(period))
                _write(dirs["cpu"], "cpu.cfs_quota_us", quota)
            else:
                _write(dirs["cpu"], "cpu.max", f"{quota} {period}")
        except OSError:
            if version == 1:
                with contextlib.suppress(OSError):
                    os.rmdir(dirs["cpu"])
            del dirs["cpu"]
    return group
