"""The pool of fork-server workers that ``run_tests`` uses behind the scenes.

:class:`SandboxPool` keeps up to ``size`` workers (default: the number of cores). A caller takes
an idle worker, sends one job, waits for its raw observations (:class:`RawRun`) and gives it
back, so threads and asyncio callers (through a thread) share it safely. A worker found dead is
replaced; a run whose worker died mid-flight is retried once on a fresh worker and then raises
``SandboxError``: an infrastructure fault is never silently scored 0.

Before a worker is handed out again it must have reported itself healthy after its last run
(its idle report: work area clean, runs prepared, zygote alive); one that does not, or does not
answer in time, is replaced first, so whatever a candidate did, the next submission gets a
fresh-equivalent worker. Each strict worker lives in a cgroup of its own (:mod:`._cgroup`)
sized to the run it is about to do.

Workers are started from one long-lived thread, because bubblewrap's ``--die-with-parent``
(``PR_SET_PDEATHSIG``) fires when the *thread* that forked it exits. ``close()`` is idempotent
and also runs at interpreter exit; if the interpreter is killed outright, the kernel kills the
workers through that same death signal.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import select
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from agentenv import settings
from agentenv.errors import ConfigError, IsolationUnavailable, SandboxError
from agentenv.log import get_logger
from agentenv.sandbox import _cgroup, _cleanup, _framing, _isolation
from agentenv.sandbox._cleanup import remove_tree
from agentenv.sandbox._jobs import Job, JudgeJob
from agentenv.sandbox._limits import Limits, scrubbed_env
from agentenv.sandbox._wire import unpack_message

__all__ = ["PREPARED_RUNS", "Pool", "RawRun", "SandboxPool", "WorkerDied", "default_pool", "default_size",
           "set_default_pool", "shutdown_default_pool"]

log = get_logger(__name__)

STARTUP_TIMEOUT = 30.0  # seconds for a worker to come up (bwrap + imports on a loaded box)
PREPARED_RUNS = 2  # runs each worker keeps forked and isolated ahead of their jobs
BACKSTOP = 10.0  # seconds past a run's latest wall backstop before its worker is presumed wedged
SCHEDULE_EVERY = 0.05  # seconds between CPU-weight updates of the runs in flight
HOST_DIR_PREFIX = "agentenv-sandbox-"  # the fallback's work root; then _cleanup.owner_tag
# Bytes asked of the worker's pipe per read: a pipe's default capacity. A larger request costs
# the allocator an mmap and munmap of that size per read (the unmap interrupts every CPU this
# process's threads ran on: ~0.1 ms a read here), however few bytes come.
READ_SIZE = 1 << 16
NUDGE = 0.1  # seconds between SIGCONTs to a fallback worker the parent is waiting for
IDLE_TIMEOUT = 10.0  # seconds a worker may take between runs (reaping, wiping) before it is replaced


@dataclass(frozen=True)
class RawRun:
    """What the process layer observed for one run; judged later by :mod:`agentenv.grading`."""

    result: bytes
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float
    died: str | None
    isolation: str
    judge_result: bytes = b""  # the judge process's result channel, for runs that had one
    judge_died: str | None = None
    limits: tuple[tuple[str, str], ...] = ()  # what enforced each run-wide limit (RunResult.limits_enforced)


class Pool(Protocol):
    """What ``run_tests`` needs of a pool: a local :class:`SandboxPool` or a cluster's
    (:class:`agentenv.sandbox.ray_pool.RayPool`)."""

    @property
    def level(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    def run(self, job: Job, timeout: float, limits: Limits,
            judge: JudgeJob | None = None) -> RawRun: ...

    def close(self) -> None: ...


def default_size() -> int:
    """How many runs a pool keeps in flight by default: not bounded by the cores.

    A run's time limit is judged on its own CPU time (see ``Limits``), so a candidate that
    sleeps, waits or loops holds a worker, not a core's worth of the queue; workers start only
    when callers need them. Bounded by memory: a worker with its prepared runs is a few tens of
    MiB, and its run may take up to ``Limits.memory``, so at most one per 512 MiB of RAM.
    """
    cores = os.cpu_count() or 1
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 8 * 1024**3
    return max(1, min(max(16, 8 * cores), ram // (512 * 1024**2)))


def _blob(reply: dict[str, Any], name: str) -> bytes:
    """A raw byte string of a worker's reply (see :func:`_framing.read_reply`)."""
    value = reply.get(name, b"")
    if type(value) is not bytes:
        raise WorkerDied("the worker sent a malformed result")
    return value


class WorkerDied(Exception):
    """The worker process vanished or broke protocol (internal; becomes SandboxError)."""


class _Spawner:
    """A daemon thread that owns every worker's creation (see the module docstring)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="agentenv-sandbox-spawner",
                                        daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            make, future = item
            try:
                future.set_result(make())
            except BaseException as exc:
                future.set_exception(exc)

    def call(self, make: Callable[[], Any]) -> Any:
        future: Future[Any] = Future()
        self._jobs.put((make, future))
        return future.result()


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def _get_spawner() -> _Spawner:
    global _spawner
    with _spawner_lock:
        if _spawner is None or not _spawner._thread.is_alive():
            _spawner = _Spawner()
        return _spawner


class _WorkerHandle:
    """The parent's end of one worker process."""

    def __init__(self, level: str, allow_root_fallback: bool = False) -> None:
        self.level = level
        self._next_id = 0
        self.host_dir: str | None = None
        self.idle_pending = False  # True after a run, until the worker's idle report is read
        self.busy: tuple[float, float] | None = None  # (start, timeout) of the run in flight
        self.cgroup = _cgroup.create()
        self.ooms = 0  # OOM kills seen in the cgroup so far: more after a run means it hit the limit
        procs = self.cgroup.procs_files if self.cgroup is not None else []
        # How many CPUs a run can use at once paces the worker's CPU checks: the cgroup quota if
        # there is one, else (0) every core the worker may run on.
        cpu_rate = _cgroup.CPU_SHARE if self.cgroup is not None and "cpu" in self.cgroup.dirs else 0
        self.host_uid = os.geteuid()
        if level == "strict":
            bwrap = _isolation.bwrap_path()
            if bwrap is None:
                raise IsolationUnavailable("bubblewrap (bwrap) is not installed")
            config = {"namespaces": True, "hermetic": True, "prepared": PREPARED_RUNS,
                      "workroot": _isolation.INSIDE_WORKROOT, "disk": Limits().disk,
                      "cpu_rate": cpu_rate, **_isolation.package_config(strict=True)}
            argv = _isolation.strict_command(bwrap, json.dumps(config), procs)
            if self.host_uid == 0:
                self.host_uid = _isolation.SANDBOX_UID
            env: dict[str, str] = {"PATH": settings.search_path()}
            cwd = "/"
        else:
            drop = _fallback_identity(allow_root_fallback)
            _cleanup.sweep_stale(tempfile.gettempdir(), HOST_DIR_PREFIX)  # a SIGKILLed caller's
            self.host_dir = tempfile.mkdtemp(prefix=f"{HOST_DIR_PREFIX}{_cleanup.owner_tag()}-")
            config = {"namespaces": False, "prepared": PREPARED_RUNS, "workroot": self.host_dir,
                      "parent_pid": os.getpid(), "cpu_rate": cpu_rate,
                      **_isolation.package_config(strict=False)}
            argv = _isolation.plain_command(json.dumps(config))
            if drop is not None or procs:
                uid, gid = drop if drop is not None else (os.getuid(), os.getgid())
                os.chown(self.host_dir, uid, gid)
                self.host_uid = uid
                argv = _isolation.launch_command({"cgroups": procs, "binds": [], "uid": uid,
                                                  "gid": gid}) + argv
            env = scrubbed_env(self.host_dir)
            cwd = self.host_dir
        self.limits = self._enforcement(config)

        # The worker's own stderr (bubblewrap's complaints, a crash) goes to an unlinked file
        # that startup errors quote; candidate output never goes there.
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115 - open as long as the worker

        def start() -> subprocess.Popen[bytes]:
            return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=self._errors, env=env, cwd=cwd,
                                    start_new_session=True, close_fds=True)

        self.proc: subprocess.Popen[bytes] = _get_spawner().call(start)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._out = self.proc.stdout.fileno()
        self._in = self.proc.stdin.fileno()
        self._poll = select.poll()
        self._poll.register(self._out, select.POLLIN)
        self._buffer = bytearray()  # bytes the worker sent that no read has taken yet
        try:
            ready = self._read(time.monotonic() + STARTUP_TIMEOUT)
        except WorkerDied as exc:
            said = self._stderr_tail()
            self.close()
            raise SandboxError(f"a {level} sandbox worker failed to start: {exc}{said}") from None
        if not ready.get("ready"):
            self.close()
            raise SandboxError(f"a {level} sandbox worker sent {ready!r} instead of ready")
        if level == "strict" and not ready.get("namespaces"):
            self.close()
            raise IsolationUnavailable(
                "bubblewrap runs but nested user/pid namespaces are refused inside it "
                "(check kernel.unprivileged_userns_clone / user.max_user_namespaces)")
        if level == "strict" and not ready.get("hermetic"):
            self.close()
            raise IsolationUnavailable(
                "bubblewrap runs but a run cannot get mount and IPC namespaces of its own "
                f"({ready.get('not_hermetic') or 'unknown reason'}); strict isolation needs them. "
                "Where AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+), allow them "
                "for bwrap (an AppArmor profile, or kernel.apparmor_restrict_unprivileged_userns=0)")

    def _enforcement(self, config: dict[str, Any]) -> tuple[tuple[str, str], ...]:
        """What holds each run-wide limit on this worker (see ``RunResult.limits_enforced``)."""
        controllers = self.cgroup.controllers if self.cgroup is not None else ()
        # RLIMIT_NPROC binds a run only in a user namespace of its own and never for host root.
        nproc = bool(config.get("namespaces")) and self.host_uid != 0
        processes = "+".join([*(["cgroup"] if "pids" in controllers else []),
                              *(["rlimit"] if nproc else [])]) or "none"
        memory = "cgroup" if "memory" in controllers else "per-process"
        disk = "tmpfs" if config.get("hermetic") else "per-process"
        cpu = "cgroup" if "cpu" in controllers else "per-process"
        return (("processes", processes), ("memory", memory), ("cpu", cpu),
                ("cpu_time", "worker"), ("wall", "worker"), ("disk", disk))

    def _stderr_tail(self) -> str:
        try:
            self._errors.seek(0)
            text = self._errors.read()[-2000:].decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""
        return f"; it said: {text}" if text else ""

    @property
    def workdir(self) -> str:
        """The run's work directory as the candidate sees it (emptied after every run)."""
        root = self.host_dir if self.host_dir is not None else _isolation.INSIDE_WORKROOT
        return os.path.join(root, "run")

    def child_env(self) -> dict[str, str]:
        """The candidate's environment: empty, but for HOME and TMPDIR in the fallback's work dir."""
        if self.host_dir is None:
            return {}
        return {"HOME": self.workdir, "TMPDIR": self.workdir}

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, job: Job, timeout: float, limits: Limits,
            judge: JudgeJob | None = None) -> RawRun:
        """Send one job (with this worker's work dir and child environment) and await the reply.

        ``judge`` is the judge process's job, sent as a payload of its own: the worker hands it
        to the judge only, never to the candidate's process.
        """
        self._next_id += 1
        wall = limits.wall_seconds(timeout)
        cap = limits.wall_cap_seconds(timeout)
        header = json.dumps({"op": "run", "id": self._next_id, "timeout": timeout, "wall": wall,
                             "wall_cap": cap,
                             "max_output": limits.max_output, "judge": judge is not None,
                             "disk": limits.disk,
                             "max_result": limits.max_result_bytes,
                             # so the worker knows each result pipe's true end (see _candidate.ended)
                             "nonce": job.get("nonce"),
                             "judge_nonce": judge.get("nonce") if judge is not None else None,
                             }).encode("utf-8")
        if self.cgroup is not None:
            try:
                self.cgroup.reclaim()  # first: what it frees is not the next run's allowance
                self.cgroup.set_limits(limits.memory, limits.processes)
            except OSError as exc:
                raise WorkerDied(f"could not set the worker's cgroup limits ({exc})") from None
        payload = json.dumps({**job, "workdir": self.workdir, "env": self.child_env()}).encode("utf-8")
        message = _framing.frame(header) + _framing.frame(payload)
        if judge is not None:
            message += _framing.frame(json.dumps(judge).encode("utf-8"))
        self.busy = (time.monotonic(), timeout)
        try:
            try:
                self._write(message)
            except OSError as exc:
                raise WorkerDied(f"could not send the job ({exc})") from None
            reply = self._read(time.monotonic() + cap + BACKSTOP)
        finally:
            self.busy = None
            if self.cgroup is not None:
                self.cgroup.set_weight(100)  # a write only if the scheduler had lowered it
        if reply.get("id") != self._next_id:
            raise WorkerDied("the worker answered out of turn")
        self.idle_pending = True
        if "error" in reply:
            raise WorkerDied(str(reply["error"]))
        died = reply.get("died")
        if self.cgroup is not None:
            ooms, self.ooms = self.ooms, self.cgroup.oom_kills()
            if self.ooms > ooms and limits.memory is not None:
                died = f"killed: the run went over its memory limit ({limits.memory // 1024**2} MiB)"
        return RawRun(
            result=_blob(reply, "result"),
            stdout=_blob(reply, "stdout").decode("utf-8", "replace"),
            stderr=_blob(reply, "stderr").decode("utf-8", "replace"),
            timed_out=bool(reply.get("timed_out")), seconds=float(reply.get("seconds", 0.0)),
            died=died, isolation=self.level, limits=self.limits,
            judge_result=_blob(reply, "judge_result"), judge_died=reply.get("judge_died"),
        )

    def healthy(self) -> bool:
        """Read the idle report the worker sends after each run: may it take another job?"""
        if not self.alive:
            return False
        if not self.idle_pending:
            return True
        try:
            report = self._read(time.monotonic() + IDLE_TIMEOUT)
        except WorkerDied as exc:
            log.warning("sandbox_worker_unhealthy", level=self.level, reason=str(exc))
            return False
        self.idle_pending = False
        if report.get("idle") is not True or report.get("healthy") is not True:
            log.warning("sandbox_worker_unhealthy", level=self.level,
                        reason="; ".join(map(str, report.get("problems", ()))) or repr(report))
            return False
        return True

    def _write(self, data: bytes) -> None:
        _framing.write_all(self._in, data)

    def _read(self, deadline: float) -> dict[str, Any]:
        """The worker's next reply: a msgpack header and the raw byte strings it names."""
        try:
            message = _framing.read_reply(
                self._out, unpack_message, lambda _fd, n: self._read_exact(n, deadline))
        except ValueError:
            raise WorkerDied("the worker sent a malformed reply") from None
        if message is None:  # pragma: no cover - _read_exact raises at end of stream
            raise WorkerDied(f"the worker exited (status {self.proc.poll()})")
        return message

    def _read_exact(self, n: int, deadline: float) -> bytes:
        """``n`` bytes of the worker's output, by ``deadline`` (else the worker is killed).

        Reads whatever the pipe holds, up to :data:`READ_SIZE` at a time, and keeps the rest for
        the next call: a reply's frames and the idle report behind it take one or two system
        calls, not two per frame.
        """
        buffer = self._buffer
        while len(buffer) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise WorkerDied("the worker did not answer in time")
            # At the fallback level a run shares the worker's uid and may stop it: the worker
            # and its zygote (one process group) get SIGCONT every NUDGE seconds of waiting.
            fallback = self.level != "strict"
            if not self._poll.poll((min(remaining, NUDGE) if fallback else remaining) * 1000):
                if fallback:
                    with contextlib.suppress(OSError):
                        os.killpg(self.proc.pid, signal.SIGCONT)
                continue
            chunk = os.read(self._out, READ_SIZE)
            if not chunk:
                raise WorkerDied(f"the worker exited (status {self.proc.poll()})")
            buffer += chunk
        with memoryview(buffer) as view, view[:n] as head:
            data = bytes(head)  # one copy (a bytearray slice would be a second)
        del buffer[:n]
        return data

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()

    def close(self) -> None:
        """Ask the worker to exit, then make sure it did; never raises."""
        try:
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.close()  # EOF: the worker leaves its loop
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=1.0)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=5.0)
        except (OSError, subprocess.SubprocessError):
            pass
        finally:
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
            if self.host_dir is not None:
                remove_tree(self.host_dir)
            if self.cgroup is not None:
                self.cgroup.remove()
            with contextlib.suppress(OSError):
                self._errors.close()


class SandboxPool:
    """Fork-server workers at one isolation level, shared by threads and asyncio callers.

    ``isolation=None`` picks the best level available (strict when bubblewrap works, else the
    rlimits fallback with a one-time warning); ``"strict"`` requires it and raises
    ``IsolationUnavailable`` otherwise; ``"rlimits"`` forces the fallback. As root the fallback
    refuses (``IsolationUnavailable``) unless ``allow_root_fallback=True`` or
    ``AGENTENV_SANDBOX_ALLOW_ROOT_FALLBACK=1``: it has no filesystem or network isolation.
    """

    def __init__(self, size: int | None = None, isolation: str | None = None, *,
                 allow_root_fallback: bool = False) -> None:
        if isolation is not None and isolation not in _isolation.ISOLATION_LEVELS:
            raise ConfigError(f"isolation must be one of {_isolation.ISOLATION_LEVELS} or None, "
                              f"got {isolation!r}")
        if size is not None and size < 1:
            raise ConfigError(f"a sandbox pool needs at least one worker, got size={size}")
        self.size = size or default_size()
        self._idle: queue.LifoQueue[_WorkerHandle] = queue.LifoQueue()
        self._workers: set[_WorkerHandle] = set()
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(self.size)
        self._closed = False
        self._pid = os.getpid()
        self._allow_root = allow_root_fallback
        self._scheduler: threading.Thread | None = None
        self._stop = threading.Event()
        self.level = self._resolve(isolation)
        if self.level == "rlimits":
            _fallback_identity(self._allow_root)  # refuse now, not at the first run
        atexit.register(_close_ref, weakref.ref(self))

    def _resolve(self, isolation: str | None) -> str:
        if isolation == "rlimits":
            return "rlimits"
        try:
            worker = _WorkerHandle("strict")
        except (IsolationUnavailable, SandboxError) as exc:
            if isolation == "strict":
                raise IsolationUnavailable(
                    f"strict isolation is unavailable here: {exc}. Install bubblewrap "
                    f"(Debian/Ubuntu: apt-get install bubblewrap) and allow unprivileged user "
                    f"namespaces, or pass isolation=None to accept the rlimits fallback."
                ) from None
            _warn_fallback(str(exc))
            return "rlimits"
        self._workers.add(worker)
        self._idle.put(worker)
        return "strict"

    @property
    def closed(self) -> bool:
        return self._closed

    def run(self, job: Job, timeout: float, limits: Limits,
            judge: JudgeJob | None = None) -> RawRun:
        """Run one job (and its judge's, if any) on some worker; retry once if the worker dies."""
        if self._closed:
            raise SandboxError("this sandbox pool is closed; create a new SandboxPool")
        if os.getpid() != self._pid:
            raise SandboxError("a SandboxPool cannot be used from a forked child; create a new one")
        errors = []
        with self._slots:
            for _attempt in range(2):
                worker = self._acquire()
                self._start_scheduler(worker)
                missing = _unenforced(worker.limits, limits.require)
                if missing:
                    self._release(worker)
                    raise IsolationUnavailable(
                        f"Limits.require asks for {', '.join(missing)} to hold for the whole run, "
                        f"but this {self.level} sandbox enforces them only as "
                        f"{', '.join(f'{k}={v}' for k, v in worker.limits if k in missing)}; "
                        f"give the sandbox writable cgroups (v2 delegation or v1 memory/pids; "
                        f"{_cgroup.available()[1] or 'see agentenv.sandbox._cgroup'}) or drop "
                        "them from Limits.require")
                try:
                    raw = worker.run(job, timeout, limits, judge)
                except WorkerDied as exc:
                    errors.append(str(exc))
                    self._discard(worker)
                    log.warning("sandbox_worker_died", level=self.level, reason=str(exc))
                    continue
                self._release(worker)
                return raw
        raise SandboxError(
            "the sandbox worker died twice while running this submission "
            f"({'; '.join(errors)}); this is an infrastructure fault, not a score")

    def _schedule(self) -> None:
        """Give the newest runs in flight the most CPU, relative to the oldest.

        A run's age counts in halvings (one every tenth of its timeout); the oldest run in
        flight weighs 100 (an ordinary process's weight) and each run weighs twice as much per
        halving it is younger, up to 10000. Time limits are judged on CPU time, so how the CPU
        is shared out decides only how soon verdicts come, and which runs meet the wall-clock
        backstop first. Favouring new runs, a solution submitted while many loops hold the
        machine gets most of a core at once and finishes inside its budget, while loops that
        have had their turn yield to it. Weights are relative, so they never flatten out however
        long the loops have run, and no run ever weighs less than an ordinary process. Runs only
        while this pool's workers have cgroups with a cpu controller.
        """
        while not self._stop.wait(SCHEDULE_EVERY):
            now = time.monotonic()
            with self._lock:
                workers = list(self._workers)
            ages: list[tuple[_cgroup.WorkerCgroup, int]] = []
            for worker in workers:
                busy, group = worker.busy, worker.cgroup
                if busy is not None and group is not None:
                    ages.append((group, int((now - busy[0]) / max(busy[1] / 10, 1e-3))))
            if not ages:
                continue
            oldest = max(age for _, age in ages)
            for group, age in ages:
                group.set_weight(min(10000, 100 << min(oldest - age, 7)))

    def _start_scheduler(self, worker: _WorkerHandle) -> None:
        if self._scheduler is None and worker.cgroup is not None and "cpu" in worker.cgroup.dirs:
            with self._lock:
                if self._scheduler is None:
                    self._scheduler = threading.Thread(target=self._schedule, daemon=True,
                                                       name="agentenv-sandbox-scheduler")
                    self._scheduler.start()

    def _acquire(self) -> _WorkerHandle:
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                worker = _WorkerHandle(self.level, self._allow_root)
                with self._lock:
                    self._workers.add(worker)
                return worker
            if worker.healthy():
                return worker
            self._discard(worker)

    def _release(self, worker: _WorkerHandle) -> None:
        if self._closed:
            self._discard(worker)
        else:
            self._idle.put(worker)

    def _discard(self, worker: _WorkerHandle) -> None:
        with self._lock:
            self._workers.discard(worker)
        worker.close()

    @property
    def worker_pids(self) -> list[int]:
        """Pids of the live worker processes (bwrap's pid at the strict level)."""
        with self._lock:
            return [w.proc.pid for w in self._workers if w.alive]

    def close(self) -> None:
        """Stop every worker; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if os.getpid() != self._pid:
            return  # a forked copy: the workers belong to the parent process
        with self._lock:
            workers = list(self._workers)
            self._workers.clear()
        for worker in workers:
            worker.close()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _unenforced(enforced: tuple[tuple[str, str], ...], required: tuple[str, ...]) -> list[str]:
    weak = ("none", "per-process")
    table = dict(enforced)
    return [name for name in required if table.get(name, "none") in weak]


def _root_fallback_allowed(allow: bool) -> bool:
    return allow or settings.allow_root_fallback()


def _fallback_identity(allow: bool) -> tuple[int, int] | None:
    """Who a fallback worker runs as: the caller, unless the caller is root (see _isolation)."""
    if os.geteuid() != 0:
        return None
    if not _root_fallback_allowed(allow):
        raise IsolationUnavailable(
            "the rlimits fallback has no filesystem or network isolation, and this process runs "
            "as root: refusing to run candidate code that way. Install bubblewrap (Debian/"
            "Ubuntu: apt-get install bubblewrap) for strict isolation, or set "
            f"{_isolation.ALLOW_ROOT_FALLBACK}=1 (or pass SandboxPool(allow_root_fallback=True)) "
            f"to accept the fallback (candidates then run as uid {_isolation.SANDBOX_UID} where "
            "that uid can run this interpreter, else as root without capabilities, where they "
            "can still write root-owned files such as /proc/sys and the cgroup tree: only for "
            "trusted code)")
    return _isolation.fallback_uid()


def _close_ref(ref: weakref.ref[SandboxPool]) -> None:
    pool = ref()
    if pool is not None:
        pool.close()


_warned = False


def _warn_fallback(reason: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning("sandbox_isolation_fallback", level="rlimits", reason=reason,
                    hint="install bubblewrap for strict isolation (no network, private fs)")


_default: SandboxPool | None = None
_default_lock = threading.Lock()
_chosen: Pool | None = None


def set_default_pool(pool: Pool | None) -> None:
    """Make ``pool`` the one every ``run_tests`` without ``pool=`` uses, in this process.

    ``code_reward``, both environments and the rollout runner grade through it; for example a
    :class:`~agentenv.sandbox.ray_pool.RayPool` moves all grading onto a Ray cluster. ``None``
    goes back to the local pool. The caller keeps ownership: closing it is theirs to do.
    """
    global _chosen
    with _default_lock:
        _chosen = pool


def default_pool() -> Pool:
    """The process-wide pool ``run_tests`` uses (created on first use).

    ``AGENTENV_SANDBOX_ISOLATION`` (``strict``/``rlimits``) and ``AGENTENV_SANDBOX_WORKERS``
    configure it; :func:`set_default_pool` replaces it.
    """
    global _default
    with _default_lock:
        if _chosen is not None and not _chosen.closed:
            return _chosen
        if _default is None or _default.closed or _default._pid != os.getpid():
            isolation = settings.sandbox_isolation()
            workers = settings.sandbox_workers()
            _default = SandboxPool(size=int(workers) if workers else None, isolation=isolation)
        return _default


def shutdown_default_pool() -> None:
    """Close the process-wide pool (a new one starts on the next ``run_tests``)."""
    global _default
    with _default_lock:
        if _default is not None:
            _default.close()
            _default = None


def _forget_after_fork() -> None:
    global _default, _spawner, _chosen
    _chosen = None
    _default = None  # the child must not talk to the parent's workers
    _spawner = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
