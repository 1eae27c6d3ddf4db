"""Helpers for testing code that uses the sandbox: find processes a run may have left behind.

Linux only (they read ``/proc``). :func:`leftover_processes` lists what runs under a pool's
workers beyond the workers themselves (bubblewrap's own processes, the fork server, its
zygote and the runs it keeps prepared are expected); :func:`processes_matching` finds any process on the machine
whose command line contains a marker, which catches daemons that escaped the worker's tree.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from agentenv.sandbox._pool import PREPARED_RUNS, SandboxPool

__all__ = ["HostFigures", "ProcessInfo", "host_figures", "leftover_processes", "pool_cpu_seconds",
           "process_table", "processes_matching"]


@dataclass(frozen=True)
class ProcessInfo:
    """One live (non-zombie) process: pid, parent pid, and its command line."""

    pid: int
    ppid: int
    cmdline: str


@dataclass(frozen=True)
class HostFigures:
    """What the machine has left: ``MemAvailable`` (bytes) and its task count (threads included)."""

    mem_available: int
    tasks: int

    def __str__(self) -> str:
        return f"MemAvailable {self.mem_available / 1024**2:.0f} MiB, {self.tasks} tasks"


def host_figures() -> HostFigures:
    """``MemAvailable`` from ``/proc/meminfo`` and the number of tasks from ``/proc/loadavg``."""
    available = 0
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
                break
    with open("/proc/loadavg") as handle:
        tasks = int(handle.read().split()[3].split("/")[1])
    return HostFigures(available, tasks)


def process_table() -> dict[int, ProcessInfo]:
    """Every live process visible in ``/proc`` (zombies excluded)."""
    table: dict[int, ProcessInfo] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read().decode("utf-8", "replace")
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if not fields or fields[0] in ("Z", "X"):
            continue
        table[int(name)] = ProcessInfo(int(name), int(fields[1]), cmdline)
    return table


def _descendants(root: int, table: dict[int, ProcessInfo]) -> list[ProcessInfo]:
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    out, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        out.append(table[pid])
        stack.extend(children.get(pid, []))
    return out


def _is_bwrap(info: ProcessInfo) -> bool:
    return os.path.basename(info.cmdline.split(" ")[0]) == "bwrap"


def _is_server(info: ProcessInfo) -> bool:
    """A fork-server process (worker, zygote or run), not bubblewrap around it."""
    return "_worker.py" in info.cmdline and not _is_bwrap(info)


def _unexpected(pool: SandboxPool) -> list[ProcessInfo]:
    table = process_table()
    extra: list[ProcessInfo] = []
    for root in pool.worker_pids:
        tree = [info for info in _descendants(root, table) if not _is_bwrap(info)]
        if root in table and not _is_bwrap(table[root]):
            worker = root  # the rlimits level: the root is the worker itself
        else:  # under bubblewrap: the fork server is the first python below bwrap
            worker = next((i.pid for i in tree if _is_bwrap(table.get(i.ppid, i))), -1)
        # Expected: the worker, its zygote, and up to PREPARED_RUNS runs forked ahead of their
        # jobs: children of the zygote that have not started anything yet.
        zygotes = [i.pid for i in tree if i.ppid == worker and "_worker.py" in i.cmdline]
        expected = {worker, *zygotes}
        idle = [i for i in tree if i.ppid in zygotes and not any(j.ppid == i.pid for j in tree)]
        idle.sort(key=lambda i: _started(i.pid))
        expected.update(i.pid for i in idle[-PREPARED_RUNS:])
        extra += [info for info in tree if info.pid not in expected]
    return extra


def _started(pid: int) -> int:
    """A process's start time in clock ticks since boot (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("utf-8", "replace")
    except OSError:
        return 0
    return int(stat[stat.rfind(")") + 2:].split()[19])


def leftover_processes(pool: SandboxPool, wait: float = 2.0) -> list[ProcessInfo]:
    """Processes under the pool's workers other than the workers; polls up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        extra = _unexpected(pool)
        if not extra or time.monotonic() >= deadline:
            return extra
        time.sleep(0.05)


def processes_matching(marker: str, wait: float = 2.0) -> list[ProcessInfo]:
    """Live processes anywhere whose command line contains ``marker``; polls up to ``wait``."""
    deadline = time.monotonic() + wait
    me = os.getpid()
    while True:
        found = [p for p in process_table().values() if marker in p.cmdline and p.pid != me]
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)


def pool_cpu_seconds(pool: SandboxPool) -> float:
    """CPU seconds used so far by the pool's workers, zygotes and the runs they have reaped.

    Reads ``/proc/<pid>/stat`` (utime, stime, cutime, cstime) of each worker's fork server and
    zygote; runs still alive (prepared ones) are not counted until they are reaped.
    """
    table = process_table()
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for root in pool.worker_pids:
        for info in [table[root], *_descendants(root, table)] if root in table else []:
            if _is_bwrap(info) or "_worker.py" not in info.cmdline:
                continue
            parent = table.get(info.ppid)
            grandparent = table.get(parent.ppid) if parent is not None else None
            if parent is not None and grandparent is not None and _is_server(parent) \
                    and _is_server(grandparent):
                continue  # a run (child of a zygote): counted through the zygote's cutime
            try:
                with open(f"/proc/{info.pid}/stat", "rb") as handle:
                    stat = handle.read().decode("utf-8", "replace")
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            total += sum(int(x) for x in fields[11:15]) / tick
    return total
