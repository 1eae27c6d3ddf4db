"""One fresh interpreter per run: the simplest process layer, used when no fork server runs.

:func:`spawn_run` starts ``python -I -S _runner.py`` in a new session (its own process group)
inside a temporary directory, hands it the job on a pipe, and reads three pipes at once: the
result channel, stdout and stderr (both capped). At the deadline, or as soon as the runner
exits, it kills the whole process group, so grandchildren holding the pipes die with it. The
temporary directory is always removed.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentenv.sandbox._limits import Limits, scrubbed_env

__all__ = ["RUNNER", "RawRun", "kill_group", "remove_tree", "spawn_run"]

RUNNER = str(Path(__file__).with_name("_runner.py"))
GRACE = 0.2  # seconds to keep reading pipes after the runner exits


@dataclass(frozen=True)
class RawRun:
    """What the process layer observed: channel bytes, capped output, and how the run ended."""

    result: bytes
    stdout: bytes
    stderr: bytes
    timed_out: bool
    seconds: float
    died: str | None = None  # e.g. "killed by signal 9" when the runner did not exit normally


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group; a group that is already gone is fine."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def remove_tree(path: str) -> None:
    """Remove a directory tree even when the candidate made parts of it unwritable."""
    def fix(func: Any, p: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(p), stat.S_IRWXU)
            os.chmod(p, stat.S_IRWXU)
        except OSError:
            pass
        try:
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=fix)
    if os.path.exists(path):
        shutil.rmtree(path, ignore_errors=True)


class _Capped:
    """Keeps the first ``limit`` bytes of a stream and counts (then discards) the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.limit - self.size
        if room > 0:
            self.parts.append(data[:room])
            self.size += min(room, len(data))
        self.dropped += max(0, len(data) - max(room, 0))

    def value(self) -> bytes:
        data = b"".join(self.parts)
        if self.dropped:
            data += f"\n[... {self.dropped} more bytes dropped]".encode()
        return data


def _describe(status: int | None) -> str | None:
    if status is None:
        return None
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = str(-status)
        return f"killed by {name}"
    return None


def spawn_run(job: dict[str, Any], timeout: float, limits: Limits) -> RawRun:
    """Run one job in a fresh ``python -I -S`` process; never raises for candidate behaviour."""
    workdir = tempfile.mkdtemp(prefix="agentenv-run-")
    job_r, job_w = os.pipe()
    res_r, res_w = os.pipe()
    start = time.monotonic()
    proc: subprocess.Popen[bytes] | None = None
    try:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", RUNNER, str(job_r), str(res_w)],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                pass_fds=(job_r, res_w), cwd=workdir, env=scrubbed_env(workdir),
                start_new_session=True, close_fds=True,
            )
        finally:
            os.close(job_r)
            os.close(res_w)
        payload = json.dumps(job).encode("utf-8")
        try:
            view = memoryview(payload)
            while view:  # the runner reads the whole job before doing anything else
                view = view[os.write(job_w, view):]
        except BrokenPipeError:
            pass
        finally:
            os.close(job_w)
        return _collect(proc, res_r, timeout, limits, start)
    finally:
        if proc is not None:
            kill_group(proc.pid)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL not delivered
                pass
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        try:
            os.close(res_r)
        except OSError:
            pass
        remove_tree(workdir)


def _collect(proc: subprocess.Popen[bytes], res_r: int, timeout: float, limits: Limits,
             start: float) -> RawRun:
    assert proc.stdout is not None and proc.stderr is not None
    deadline = start + timeout
    result = _Capped(limits.max_result_bytes)
    out = _Capped(limits.max_output)
    err = _Capped(limits.max_output)
    sinks = {res_r: result, proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    sel = selectors.DefaultSelector()
    for fd in sinks:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    timed_out = False
    exited_at: float | None = None
    status: int | None = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if exited_at is None:
                if now >= deadline:
                    timed_out = True
                    kill_group(proc.pid)
                    break
                wait = min(deadline - now, 0.05)
            else:
                if now >= exited_at + GRACE:
                    break
                wait = exited_at + GRACE - now
            for key, _ in sel.select(wait):
                fd = int(key.fd)
                try:
                    data = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    sinks[fd].add(data)
                else:
                    sel.unregister(fd)
            if exited_at is None:
                status = _exited(proc)
                if status is not None:
                    # The runner is done: kill what it left in its group, then drain briefly.
                    kill_group(proc.pid)
                    exited_at = time.monotonic()
        if exited_at is None and not timed_out:
            status = _exited(proc)
    finally:
        sel.close()
    seconds = time.monotonic() - start
    if timed_out:
        proc.wait()
    return RawRun(result.value() if not result.dropped else b"".join(result.parts),
                  out.value(), err.value(), timed_out, seconds,
                  None if timed_out else _describe(status if status is not None else proc.poll()))


def _exited(proc: subprocess.Popen[bytes]) -> int | None:
    """The runner's status if it has exited, without reaping it (so its pgid stays ours)."""
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return proc.returncode
    if info is None:
        return None
    if info.si_code == os.CLD_EXITED:
        return info.si_status
    return -info.si_status
