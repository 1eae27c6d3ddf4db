"""The fork server: a long-lived, pre-warmed worker that runs each submission in a fresh fork.

Started by :mod:`agentenv.sandbox._pool` as ``python -I -S -B _worker.py CONFIG``, inside
bubblewrap at the strict level or as a plain process at the rlimits level. Standard library
only; loaded by path. Two long-lived processes and one per run:

- the **worker** ``W`` talks to the trusted parent over its stdin/stdout (length-prefixed
  frames, :mod:`_framing`: JSON messages in; replies out as a small msgpack header and the
  run's raw byte strings), watches each run and sends back what it observed. It never judges;
- the **zygote** ``Z``, forked by ``W`` before any job exists, holds the runner and common
  modules imported and forks every run. It never reads a job or a result, so each run starts
  from the same pristine memory: nothing of an earlier submission can be found in a later one;
- the **candidate process** ``G``. At the strict level ``Z`` clones it straight into new
  user, pid, mount, IPC and network namespaces, where it is pid 1: it cannot name, so cannot signal,
  the worker, the parent or another run, and when it dies the kernel kills everything it left
  behind. Its mounts make the run hermetic (:func:`_make_hermetic`): everything read-only but a
  fresh size-capped tmpfs for ``/tmp`` and ``/dev/shm``, and a ``/proc`` of its own, all torn
  down with it, like its SysV and POSIX IPC and its sockets (its own loopback: a port it
  bound, even one left in ``TIME_WAIT``, is free again for the next run). At the rlimits level it is a plain fork in its own
  session (process group), and the worker empties the shared work directory after each run;
- for a run whose plan has checks that cannot be decomposed, the **judge process** ``J``
  (:mod:`_judge`): a second prepared process, forked and isolated exactly like ``G``, that
  never runs candidate code. The worker gives ``J`` and ``G`` the two ends of a fresh socket
  pair (their only link) with their jobs; ``J`` runs the checks and asks ``G`` about the
  candidate's names over it. Verdicts are read only from ``J``'s result pipe; ``G``'s carries
  only what the parent judges itself (see :class:`_PairedRun`).

Runs are prepared *before* their jobs arrive (fork, namespaces, descriptors, capabilities
dropped; no-new-privs and the syscall filter come from the zygote, :func:`_filter_syscalls`)
and wait on their job socket, warming up meanwhile unless the job is already there; a job then
only costs entering the work dir, taking the environment and rlimits, and
:func:`_runner.run_job`. The worker reads the three pipes (result channel, stdout, stderr) with
caps as they report data, until they close, the result pipe ends with its done frame and the
``FINISHED`` marker (the run is then killed and answered at once), ``G`` exits or the deadline passes; it kills
whatever is left and replies. Only then, off the caller's clock, it waits until the zygote has
reaped the run (nothing of it stays beside the next), asks for more runs (and, at the rlimits
level, wipes the work area), and sends an idle report (:meth:`Worker.health`) the parent reads
before it hands the worker another job.

``W``, ``Z`` and ``G`` are non-dumpable, so candidate code (same uid) cannot read another's
memory, environment or descriptors through ``/proc``.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import fcntl
import gc
import json
import os
import platform
import select
import selectors
import signal
import socket
import struct
import sys
import time
from typing import Any, NoReturn

# The builtins this module's functions use: a copy taken when it is imported, before any
# candidate code runs in this process (the fork server's child runs candidate code, then this
# module's code again), so a candidate that patches ``builtins.len`` changes nothing here.
globals()["__builtins__"] = dict(vars(__import__("builtins")))

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.append(_here)  # last: nothing in this directory may shadow a standard module

import _cleanup  # noqa: E402
import _framing  # noqa: E402
import _judge  # noqa: E402
import _runner  # noqa: E402
import _schema  # noqa: E402
import _wire  # noqa: E402

# Imported once in the zygote, so runs get them for free. Kept to what solutions commonly use:
# every module here makes each fork (and each exit) a little more expensive.
PRELOAD = ("typing", "math", "re", "collections", "itertools", "functools", "heapq", "bisect",
           "string", "random", "operator", "copy", "resource", "ctypes")

# clone(flags, stack, ...) syscall numbers where the first two arguments come in that order.
_CLONE_SYSCALL = {"x86_64": 56, "amd64": 56, "aarch64": 220, "arm64": 220, "riscv64": 220,
                  "ppc64le": 120, "armv7l": 120}
CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
_MOUNT_OPTIONS = {"ro": MS_RDONLY, "nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
                  "noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME,
                  "strictatime": MS_STRICTATIME}
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
PR_CAPBSET_DROP, PR_SET_SECUREBITS = 24, 28
PR_SET_CHILD_SUBREAPER = 36
# noroot, no_setuid_fixup and keep_caps off, each locked: uid 0 regains nothing on execve
SECURE_ALL_LOCKED = 0x01 | 0x02 | 0x04 | 0x08 | 0x20
RESULT_FD = 3
GRACE = 0.25  # seconds of draining after the run has ended
LINGER = 0.05  # seconds G waits, its job done, for the worker to kill it (_become_candidate)
SWEEP_BUDGET = 5.0  # seconds the fallback zygote spends at most killing what a run left (_sweep)
ZYGOTE_WAIT = 30.0  # seconds the worker waits for one answer of the zygote's (Worker._reply)
REPORT_WAIT = 30.0  # seconds a prepared run has to report NODUMP, then READY (Worker._take)
_sleep = time.sleep  # bound before any candidate code runs in a process forked from here


def _pipe_slots() -> int:
    """The most buffer slots a pipe of this machine can have (one page each, at pipe-max-size)."""
    try:
        with open("/proc/sys/fs/pipe-max-size", "rb") as handle:
            # at most 4096 (a 16 MiB pipe): a flood behind the marker is read that often at worst
            return min(4096, max(16, int(handle.read()) // os.sysconf("SC_PAGE_SIZE")))
    except (OSError, ValueError, AttributeError):
        return 256


# Reads of what each pipe holds when a run ends on FINISHED: a read returns up to 64 KiB, but in
# packet mode (O_DIRECT on the write end) at most one slot, so as many as a pipe can have.
DRAIN_ROUNDS = _pipe_slots()
CPU_POLL = 0.01  # seconds between CPU checks, at the least
RUNNABLE_STEP = 0.02  # past its backstop, a runnable run is looked at again this much later
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


# --------------------------------------------------------------------------- small OS helpers

class _Libc:
    """prctl / clone / capset through ctypes; off Linux they do nothing (or raise OSError)."""

    def __init__(self) -> None:
        self.lib: Any = None
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                self.ctypes = ctypes
                self.lib = ctypes.CDLL(None, use_errno=True)
                for name in ("prctl", "capset", "syscall", "mount"):  # resolve once, before any fork
                    getattr(self.lib, name)
                # clone through the GIL-holding flavour (see clone_into_namespaces)
                self.raw_syscall = ctypes.PyDLL(None, use_errno=True).syscall
                self.raw_syscall.restype = ctypes.c_long
            except (OSError, ImportError):  # pragma: no cover - no libc through ctypes
                self.lib = None

    def prctl(self, option: int, arg: int) -> bool:
        if self.lib is None:
            return False
        return bool(self.lib.prctl(option, arg, 0, 0, 0) == 0)

    def seccomp_filter(self, program: list[tuple[int, int, int, int]]) -> bool:
        """Install a classic-BPF seccomp filter (``PR_SET_SECCOMP``; needs no-new-privs first).

        ``program`` is ``(code, jt, jf, k)`` per instruction (``struct sock_filter``).
        """
        if self.lib is None:
            return False
        ct = self.ctypes
        code = ct.create_string_buffer(b"".join(struct.pack("=HBBI", *step) for step in program))
        fprog = ct.create_string_buffer(struct.pack("@HP", len(program), ct.addressof(code)))
        return bool(self.lib.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, fprog, 0, 0) == 0)

    def mount(self, source: str | None, target: str, fstype: str | None, flags: int,
              data: str | None = None) -> None:
        """mount(2); raises OSError on failure."""
        if self.lib is None:
            raise OSError("mount is not available on this platform")

        def enc(text: str | None) -> bytes | None:
            return None if text is None else text.encode()

        if self.lib.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
            errno = self.ctypes.get_errno()
            raise OSError(errno, f"mount {target}: {os.strerror(errno)}")

    def clone_into_namespaces(self, extra: int = 0) -> int:
        """Fork into a new user + pid namespace in one step; returns like ``os.fork``.

        This is ``os.fork`` with the namespace flags added: the same interpreter hooks around
        the raw ``clone`` syscall (``PyOS_BeforeFork`` / ``PyOS_AfterFork_*``, called with
        the GIL held), so the child starts as pid 1 of its own namespace without the extra
        fork an ``unshare`` would need. ``extra`` adds namespace flags (mount, IPC: see
        :func:`_make_hermetic`). Raises OSError where that is not possible.
        """
        number = _CLONE_SYSCALL.get(platform.machine())
        if self.lib is None or number is None:
            raise OSError("raw clone is not supported on this platform")
        ct = self.ctypes
        api = ct.pythonapi
        syscall = self.raw_syscall
        flags = CLONE_NEWUSER | CLONE_NEWPID | extra | int(signal.SIGCHLD)
        api.PyOS_BeforeFork()
        pid = syscall(ct.c_long(number), ct.c_ulong(flags), ct.c_void_p(0), ct.c_void_p(0),
                      ct.c_void_p(0), ct.c_void_p(0))
        if pid == 0:
            api.PyOS_AfterFork_Child()
            return 0
        api.PyOS_AfterFork_Parent()
        if pid < 0:
            raise OSError(ct.get_errno(), "clone into new namespaces failed")
        return int(pid)

    def drop_capabilities(self, for_good: bool = False) -> None:
        """Empty the effective, permitted and inheritable sets (capset, version 3).

        ``for_good`` (a process of host uid 0, at the fallback level) also empties the bounding
        set and locks the securebits that give uid 0 its capabilities back on ``execve``, so
        neither this process nor anything it runs holds one (not ``CAP_SYS_PTRACE``, which would
        open a non-dumpable judge's memory and descriptors). Refused steps (no ``CAP_SETPCAP``:
        not root) are skipped; the capset alone then does all there is to do.
        """
        if self.lib is None:
            return
        if for_good:
            for cap in range(64):
                if self.lib.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and cap > 40:
                    break  # past the last capability this kernel knows
            self.prctl(PR_SET_SECUREBITS, SECURE_ALL_LOCKED)
        ct = self.ctypes
        # struct __user_cap_header_struct {u32 version; int pid;} and two zeroed data structs
        # {u32 effective, permitted, inheritable} (version 3 uses two of them).
        header = (ct.c_uint32 * 2)(0x20080522, 0)
        data = (ct.c_uint32 * 6)()
        self.lib.capset(header, data)


_libc = _Libc()


_write_all = _framing.write_all
_read_exact = _framing.read_exact


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


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


# --------------------------------------------------------------------------- the candidate side

JOB_FD = 4  # the end of its job socket (a prepared run: G or J), until the job has been read
OOM_FD = 5  # a prepared run's /proc/self/oom_score_adj, until the job starts
NODUMP = b"+nodump\n"  # its first bytes: its id maps are written and it is no longer dumpable
READY = b"+ready\n"  # its next bytes: it is locked down
STARTED = b"+started\n"  # G's first bytes on the result channel, written before any candidate code
FINISHED = b"+finished\n"  # a run's last bytes when its job returned (only used to skip waits)


def _ended(nonce: object) -> bytes | None:
    """What a result pipe ends with once its job returned: the job's last frame (``done``), its
    header line with the run's nonce included, then the marker. A frame's own bytes can end like
    the marker or a done frame's body (a value's raw bytes: ``bytes``, a typed array, small ints
    spelling it), never like this without the run's 128-bit nonce. None (no early end) when the
    run header carries no usable nonce.
    """
    if not isinstance(nonce, str) or not nonce:
        return None
    try:
        return _wire.encode_frame(nonce, {_schema.TYPE: _schema.DONE}) + FINISHED
    except (UnicodeError, ValueError):
        return None


def _become_candidate(channel: dict[str, int], namespaces: bool) -> None:
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
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        # Lift every pipe end above the target numbers first, so no dup2 clobbers another.
        if _oom_fd is not None:
            channel = {**channel, "oom": _oom_fd}
        high = {name: fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for name, fd in channel.items()}
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        for name, target in (("out", 1), ("err", 2), ("res", RESULT_FD), ("job", JOB_FD),
                             ("oom", OOM_FD)):
            if name in high:
                os.dup2(high[name], target)
        os.closerange(OOM_FD + 1, 65536)
        if _oom_fd is None:
            _close(OOM_FD)
        os.umask(0o077)
        if namespaces:
            _forbid_nested_user_namespaces()
            _libc.drop_capabilities()
        else:  # the fallback level: as host root (an opt-in) no capability may stay
            _libc.drop_capabilities(for_good=os.geteuid() == 0)
        # No-new-privs and the syscall filter are the zygote's (_filter_syscalls), inherited.
        _write_all(RESULT_FD, READY)  # locked down: see Worker.run
        os.environ.clear()
        _warm_up(JOB_FD)
        payload, peer = _receive_job(JOB_FD)  # blocks until a job is sent (or the worker goes)
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
        _prefer_as_oom_victim()
        _write_all(RESULT_FD, STARTED)  # set-up done; from here on, what happens is the job's
        linger = _ended(job.get("nonce")) is not None  # the worker can end this run early
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


def _forbid_nested_user_namespaces() -> None:
    """Let no process of this run create a user namespace of its own (while we still hold
    ``CAP_SYS_RESOURCE`` in the run's user namespace, which owns this limit).

    In a nested user namespace a candidate regains capabilities there: enough to mount a fresh
    tmpfs, not capped by ``Limits.disk``, that only the memory cgroup (where there is one)
    would stop. The limit is checked against every ancestor namespace, so 0 here holds for
    everything the run forks.
    """
    for name in (b"max_user_namespaces", b"max_mnt_namespaces"):
        with contextlib.suppress(OSError):
            _write_file(b"/proc/sys/user/" + name, b"0")


# Per machine: the audit arch, rt_sigaction's number (the only way to change a signal's
# disposition: no legacy sigaction/signal syscall in these native tables), prlimit64's, and the
# syscalls no run may make at all (see _filter_syscalls). aarch64 and riscv64 share the generic
# table.
_GENERIC = (134, 261, {"sendfile": 71, "vmsplice": 75, "splice": 76, "tee": 77, "userfaultfd": 282,
                  "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
                  "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
                  "pidfd_getfd": 438, "add_key": 217, "request_key": 218, "keyctl": 219})
_SYSCALLS = {
    "x86_64": (0xC000003E, 13, 302, {"sendfile": 40, "splice": 275, "tee": 276, "vmsplice": 278,
                                "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
                                "io_uring_register": 427, "ptrace": 101, "process_vm_readv": 310,
                                "process_vm_writev": 311, "pidfd_getfd": 438, "add_key": 248,
                                "request_key": 249, "keyctl": 250}),
    "aarch64": (0xC00000B7, *_GENERIC),
    "riscv64": (0xC00000F3, *_GENERIC),
}
_SYSCALLS["amd64"], _SYSCALLS["arm64"] = _SYSCALLS["x86_64"], _SYSCALLS["aarch64"]
_X32_BIT = 0x40000000  # x86_64's x32 syscalls: another table, refused outright
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_SECCOMP_ALLOW, _SECCOMP_EPERM = 0x7FFF0000, 0x00050000 | 1


def _seccomp_program(arch: int, rt_sigaction: int, prlimit64: int,
                     refused: list[int]) -> list[tuple[int, int, int, int]]:
    """The classic-BPF program of :func:`_filter_syscalls` (``(code, jt, jf, k)`` per step).

    Jumps count the steps they skip; the last two steps are "allow" and "refuse (EPERM)".
    """
    n = 4 + len(refused) + 16  # steps before the two returns
    allow, deny = n, n + 1

    def to(target: int, at: int) -> int:
        return target - at - 1

    program = [(_LD_W_ABS, 0, 0, 4),                                  # arch
               (_JEQ_K, 0, to(deny, 1), arch),                        # a foreign ABI: refused
               (_LD_W_ABS, 0, 0, 0),                                  # syscall number
               (_JGE_K, to(deny, 3), 0, _X32_BIT)]                    # x32: refused
    for number in refused:
        program.append((_JEQ_K, to(deny, len(program)), 0, number))
    at = len(program)
    rlimits = at + 7  # the prlimit64 steps
    program += [(_JEQ_K, 0, to(rlimits, at), rt_sigaction),          # not rt_sigaction: on
                (_LD_W_ABS, 0, 0, 16),                                # signal (low word of arg 0)
                (_JEQ_K, 0, to(allow, at + 2), int(signal.SIGCHLD)),  # another signal: allowed
                (_LD_W_ABS, 0, 0, 24),                                # new action (arg 1), low word
                (_JEQ_K, 0, to(deny, at + 4), 0),                     # one is given: refused
                (_LD_W_ABS, 0, 0, 28),                                # its high word
                (_JEQ_K, to(allow, at + 6), to(deny, at + 6), 0),     # NULL is only a query
                (_JEQ_K, 0, to(allow, rlimits), prlimit64),           # not prlimit64: allowed
                (_LD_W_ABS, 0, 0, 16),                                # pid (arg 0), low word
                (_JEQ_K, 0, to(rlimits + 5, rlimits + 2), 0),         # not 0: a new limit?
                (_LD_W_ABS, 0, 0, 20),                                # its high word
                (_JEQ_K, to(allow, rlimits + 4), 0, 0),               # pid 0 (itself): allowed
                (_LD_W_ABS, 0, 0, 32),                                # new limit (arg 2), low word
                (_JEQ_K, 0, to(deny, rlimits + 6), 0),                # one is given: refused
                (_LD_W_ABS, 0, 0, 36),                                # its high word
                (_JEQ_K, to(allow, rlimits + 8), to(deny, rlimits + 8), 0),  # NULL: a query
                (_RET_K, 0, 0, _SECCOMP_ALLOW),
                (_RET_K, 0, 0, _SECCOMP_EPERM)]
    assert len(program) == deny + 1
    return program


def _filter_syscalls() -> None:
    """Refuse, for this process and everything it ever forks, the syscalls no run may make.

    Installed once in the zygote (with no-new-privs, which it needs), so every run, candidate
    and judge alike, inherits it from its first instruction. Refused (``EPERM``):

    - changing what ``SIGCHLD`` does. A child whose parent ignores ``SIGCHLD`` (``SIG_IGN`` or
      ``SA_NOCLDWAIT``) is reaped by the kernel the moment it exits, and its CPU time is added
      to nobody's: it vanishes from everything ``/proc`` shows, so a run could compute in many
      short-lived children and never be charged for it (:meth:`Worker._cpu_used`). The
      disposition is the default here and every ``rt_sigaction`` that would set one for
      ``SIGCHLD`` fails; querying it still works;
    - ``splice``, ``tee``, ``vmsplice``, ``sendfile`` and ``io_uring``: each can make the
      kernel hold a pipe's lock while it waits on something else (a socket with no data, an
      io_uring worker), and every read of that pipe, ``O_NONBLOCK`` or not, then sleeps on the
      lock in state D. Aimed at the run's stdout, stderr or result pipe, that would stop the
      worker itself mid-read, past every deadline it keeps. ``shutil`` and ``socket.sendfile``
      fall back to plain reads and writes when ``sendfile`` is refused;
    - ``userfaultfd``, whose faults can stall a kernel copy from user memory (a ``write`` to
      such a pipe) for as long as the run likes;
    - ``ptrace``, ``process_vm_readv``/``writev`` and ``pidfd_getfd``: reaching into another
      process's memory or descriptors. Where runs share a uid (the fallback level), a traced
      run's zombie is its tracer's to reap, so a candidate that traced itself from a process
      it left behind held the zygote in ``waitpid``; no honest solution traces anything;
    - setting another process's resource limits (``prlimit64`` with a pid and a new limit;
      a process's own, pid 0 as ``setrlimit`` passes it, and every query still work). Where
      runs share a uid (the fallback level), a run lowered the zygote's limits and every later
      run inherited them;
    - the kernel keyrings (``add_key``, ``request_key``, ``keyctl``). Keys belong to a uid, not
      to a namespace: a key a run made stays listed in ``/proc/keys`` (description and size)
      for every later run of the same uid until the kernel collects it, and a description can
      hold a hidden input. No honest solution uses them (Docker's default profile refuses them
      too);
    - any syscall through another ABI (i386, x32), which has its own table and numbers.

    Machines without a table entry above (or a kernel without seccomp filters) get no filter.
    """
    entry = _SYSCALLS.get(platform.machine())
    if entry is None:
        return
    arch, rt_sigaction, prlimit64, refused = entry
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1)
    _libc.seccomp_filter(_seccomp_program(arch, rt_sigaction, prlimit64,
                                          sorted(refused.values())))


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


def _warm_up(job_fd: int) -> None:
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
    if _job_waiting(job_fd):
        return
    sink = os.open(os.devnull, os.O_WRONLY)
    try:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            _send_job(ours.fileno(), _WARM_UP_JOB.encode("utf-8"), sink)
        finally:
            ours.close()
        payload, peer = _receive_job(theirs.detach())
        if peer is not None:
            os.close(peer)
        job = json.loads(payload)
        _runner.apply_limits(dict(job.get("limits", {})))
        if not _job_waiting(job_fd):
            _runner.run_job(job, sink, stop=lambda: _job_waiting(job_fd))
    except BaseException:
        pass
    finally:
        os.close(sink)
    gc.freeze()  # what the warm-up left is never the candidate's collector's work (or faults)


def _job_waiting(fd: int) -> bool:
    """Has the worker sent this prepared process its job yet? (Never blocks.)"""
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return False


def _enter_namespaces(uid: int, gid: int) -> None:
    """In a child just cloned into new namespaces: map our own ids (the only mapping allowed).

    A non-dumpable process's ``/proc/self`` files belong to root, so unless the host user is
    root the maps can only be written while dumpable (``_needs_dumpable``, known from
    :func:`_probe_namespaces`, so no run tries in vain first). During that moment another
    run's candidate (same uid) could open this process's memory; the worker therefore never
    lets a candidate run while a prepared process has not yet reported NODUMP, written as soon
    as the moment is over (``Worker._confirm_all``).
    """
    global _oom_fd
    if not _needs_dumpable:
        try:
            _write_id_maps(uid, gid)
            return
        except PermissionError:
            pass
    _libc.prctl(PR_SET_DUMPABLE, 1)
    try:
        _write_id_maps(uid, gid)
        # Only openable now (a non-dumpable process's /proc files are root's); written when
        # the job starts, see _prefer_as_oom_victim.
        with contextlib.suppress(OSError):
            _oom_fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)
    finally:
        _libc.prctl(PR_SET_DUMPABLE, 0)


def _write_id_maps(uid: int, gid: int) -> None:
    for name, text in ((b"setgroups", b"deny"), (b"uid_map", b"%d %d 1" % (uid, uid)),
                       (b"gid_map", b"%d %d 1" % (gid, gid))):
        _write_file(b"/proc/self/" + name, text)


def _write_file(path: bytes, data: bytes) -> None:
    """Write a small kernel file with bare system calls (no file object: fewer pages touched)."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- hermetic runs

HERMETIC_FLAGS = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET  # added to each run's clone (strict)
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = struct.Struct("16sH22x")  # struct ifreq: the interface's name, then ifr_flags
SHM_DIR = "/tmp/.shm"  # the run's /dev/shm: part of the run's one tmpfs, so one cap covers both


def _make_hermetic(disk: int) -> None:
    """In a run just cloned into its own user, pid, mount, IPC and network namespaces.

    Every mount the run inherited becomes read-only for it (``/`` and its directories,
    ``/dev``, ``/etc``, the runner's directory, the worker's own ``/tmp``), and one fresh tmpfs
    of ``disk`` bytes (and a matching inode cap) is mounted on ``/tmp``, also serving as
    ``/dev/shm``. These mounts exist only in the run's mount namespace, and the IPC namespace
    (SysV shared memory, semaphores, message queues; POSIX message queues) is the run's own:
    all of it is torn down by the kernel when the run's last process is gone, so nothing a
    run writes can outlive it or be found by a later run. ``/proc`` is a fresh one for the
    run's own pid namespace; device nodes stay writable (``/dev/null`` must stay usable).
    The network namespace is the run's own too, with only a loopback interface, brought up
    here (:func:`_loopback_up`): ports bound, connections left in ``TIME_WAIT`` and abstract
    unix socket names stay in it, so the next run on this worker finds every port free and
    no trace of this one in ``/proc/net``.
    """
    _libc.mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing propagates back to the worker
    for point, flags in _writable_mounts():
        _libc.mount(None, point, None, flags)
    inodes = max(1024, disk // 4096)
    _libc.mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
                f"size={disk},nr_inodes={inodes},mode=0755")
    os.mkdir("/tmp/run", 0o700)
    os.mkdir(SHM_DIR, 0o1777)
    os.chmod(SHM_DIR, 0o1777)
    _libc.mount(SHM_DIR, "/dev/shm", None, MS_BIND)
    # A /proc of the run's own pid namespace: the worker, the zygote and the runs prepared
    # beside this one cannot even be named from inside (so a prepared run's brief dumpable
    # moment, see _enter_namespaces, is out of reach). Its kernel knobs need capabilities
    # the run does not have in any namespace that owns them.
    _libc.mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _loopback_up()


def _loopback_up() -> None:
    """Bring ``lo`` up in this run's network namespace (``SIOCSIFFLAGS``: the run still holds
    ``CAP_NET_ADMIN`` in the user namespace that owns it); raises OSError on failure."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        name = b"lo"
        flags = _IFREQ.unpack(fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, _IFREQ.pack(name, 0)))[1]
        if not flags & IFF_UP:
            fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, _IFREQ.pack(name, flags | IFF_UP))


_remounts: list[tuple[str, int]] | None = None


def _writable_mounts() -> list[tuple[str, int]]:
    """Each writable mount of this mount namespace, with the flags that remount it read-only.

    Read from ``/proc/self/mountinfo`` once, by the worker before it forks the zygote, and
    inherited by every run: a run's mount namespace starts as a copy of the worker's, which
    never changes (nothing in it may mount), so the list holds for all of them.
    """
    global _remounts
    if _remounts is None:
        with open("/proc/self/mountinfo", "rb") as handle:
            table = handle.read().decode("utf-8", "surrogateescape").splitlines()
        found = []
        for line in table:
            fields = line.split()
            if len(fields) < 6:
                continue
            point = _unescape(fields[4])
            options = fields[5].split(",")
            if "ro" in options or point == "/proc" or point.startswith("/proc/"):
                continue
            if not os.path.isdir(point) or os.path.islink(point):
                continue  # a device node bound under /dev
            flags = MS_REMOUNT | MS_BIND | MS_RDONLY
            for option in options:
                flags |= _MOUNT_OPTIONS.get(option, 0)  # keep what is there (locked flags stay)
            found.append((point, flags))
        _remounts = found
    return _remounts


def _unescape(text: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes come as octal escapes."""
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 4 <= len(text) and text[i + 1:i + 4].isdigit():
            out.append(chr(int(text[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


_oom_fd: int | None = None  # this run's /proc/self/oom_score_adj, opened in _enter_namespaces
_needs_dumpable = False  # id maps need a dumpable moment here: set by main() before the zygote


def _prefer_as_oom_victim() -> None:
    """Make this run (and what it forks) the first process the OOM killer picks, before the
    worker, the zygote or a prepared run (raising it needs no privilege, only the open file)."""
    if _oom_fd is not None:
        with contextlib.suppress(OSError):
            os.write(OOM_FD, b"1000")
        _close(OOM_FD)
        return
    with contextlib.suppress(OSError):
        _write_file(b"/proc/self/oom_score_adj", b"1000")


def _read_to_end(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 16)  # a pipe's capacity: a larger request costs an mmap and munmap
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


# What comes first on a job socket: a marker byte, carrying the judge channel's end
# (SCM_RIGHTS) for runs with a judge, and the job's length in bytes.
_JOB_HEAD = struct.Struct(">cQ")


def _receive_job(fd: int) -> tuple[bytes, int | None]:
    """Read the job from its socket, and the judge channel when one comes with it; closes ``fd``.

    The job comes after its head (:data:`_JOB_HEAD`), in the same message where it fits, so the
    process waiting for it wakes once: the length, not the end of the stream, says when it is
    all here. An empty job when the worker hung up first, the job came short, or the marker and
    the descriptors that came with it disagree (``J`` and one channel end, or ``-`` and none).
    """
    sock = socket.socket(fileno=fd)
    peer: int | None = None
    try:
        head, fds, _flags, _addr = socket.recv_fds(sock, _JOB_HEAD.size, 1)
        if head and len(head) < _JOB_HEAD.size:
            head += _read_exact(fd, _JOB_HEAD.size - len(head)) or b""
        if len(head) == _JOB_HEAD.size:
            marker, size = _JOB_HEAD.unpack(head)
            if (marker, len(fds)) in ((b"J", 1), (b"-", 0)):
                peer = fds.pop() if fds else None
                job = (_read_exact(fd, size) or b"") if size else b""
                if job or not size:
                    return job, peer
        _close(*fds, *(() if peer is None else (peer,)))
        return b"", None
    finally:
        sock.close()


def _send_job(fd: int, job: bytes, peer: int | None) -> None:
    """The worker's half of :func:`_receive_job`: the head and the job in one ``sendmsg``."""
    sock = socket.socket(fileno=fd)
    try:
        head = _JOB_HEAD.pack(b"J" if peer is not None else b"-", len(job))
        sent = socket.send_fds(sock, [head, job], [peer] if peer is not None else [])
        if sent < len(head):
            _write_all(fd, head[sent:])
        _write_all(fd, memoryview(job)[max(0, sent - len(head)):])
    finally:
        sock.detach()


# --------------------------------------------------------------------------- the zygote

_COMMAND = struct.Struct(">ci")  # an opcode byte and an int (a pid, or 0)


def _zygote(sock: socket.socket, namespaces: bool, hermetic: bool) -> None:
    """``Z``: the process every run is forked from (see the module docstring). Never returns.

    Commands from the worker, answered in order: ``F`` fork a run (reply ``P`` with its pid,
    -1 on failure, the other pipe ends passed with ``SCM_RIGHTS``; its int is the run's disk
    allowance in KiB when runs are hermetic); ``W`` wait for a run's
    process and reply its status; ``Q`` the same without blocking (``R`` if still running,
    the status kept for a later ``W``).

    At the fallback level (no namespaces) nothing dies with ``G``: a process of the run that
    left its group (``setsid``) would outlive it, beside every later run. There the zygote is
    a child subreaper, so whatever a run leaves behind becomes its child when its parent
    ends, and after each ``W`` it kills every child that is not a run it forked
    (:func:`_sweep`), then resumes the runs prepared meanwhile (one stopped by a stray).
    """
    uid, gid = os.getuid(), os.getgid()
    reaped: dict[int, int] = {}
    forked: set[int] = set()  # runs (prepared, running or ended) not reaped yet
    if not namespaces:
        _libc.prctl(PR_SET_CHILD_SUBREAPER, 1)

    def code(status: int) -> int:
        return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)

    while True:
        while True:  # collect every supervisor that has ended
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in forked:  # (a stray's exit is nobody's answer)
                reaped[pid] = code(status)
                forked.discard(pid)
        data = _recv_exact(sock, _COMMAND.size)
        if data is None:
            os._exit(0)
        op, pid = _COMMAND.unpack(data)
        if op == b"F":
            job_r, job_w = (end.detach() for end in socket.socketpair())  # fds travel on it
            res_r, res_w = os.pipe()
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            try:
                if namespaces:
                    child = _libc.clone_into_namespaces(HERMETIC_FLAGS if hermetic else 0)
                else:
                    child = os.fork()
            except OSError:
                child = -1
            if child == 0:
                try:
                    sock.close()
                    _close(job_w, res_r, out_r, err_r)
                    if namespaces:
                        _enter_namespaces(uid, gid)
                    else:
                        os.setsid()
                    _write_all(res_w, NODUMP)
                    if namespaces and hermetic:
                        _make_hermetic(max(1, pid) * 1024)
                except BaseException:
                    os._exit(71)
                _become_candidate({"job": job_r, "res": res_w, "out": out_w, "err": err_w},
                                  namespaces)
            _close(job_r, res_w, out_w, err_w)
            if child > 0:
                forked.add(child)
            socket.send_fds(sock, [_COMMAND.pack(b"P", child)], [job_w, res_r, out_r, err_r])
            _close(job_w, res_r, out_r, err_r)
        elif op in (b"W", b"Q"):
            if op == b"W" and not namespaces:
                ended = _reap_swept(pid, forked) if pid not in reaped else reaped[pid]
                if ended is None:
                    _give_up(forked)
                reaped[pid] = ended
                forked.discard(pid)
            elif pid not in reaped and op == b"W":
                try:
                    reaped[pid] = code(os.waitpid(pid, 0)[1])
                except ChildProcessError:
                    reaped[pid] = 0
                forked.discard(pid)
            if pid not in reaped:
                sock.sendall(_COMMAND.pack(b"R", -1))
            else:
                sock.sendall(_COMMAND.pack(b"S", reaped[pid] if op == b"Q" else reaped.pop(pid)))


def _reap_swept(pid: int, forked: set[int]) -> int | None:
    """The fallback zygote's ``W``: reap run ``pid`` and sweep away what it left (:func:`_sweep`),
    never blocking: a process it left may hold it (a tracer reaps its tracee's zombie), so
    sweeps and non-blocking waits take turns, within :data:`SWEEP_BUDGET` seconds. Its exit
    code, or None when the run or what it left could not be ended in time."""
    deadline = time.monotonic() + SWEEP_BUDGET
    while True:
        clean = _sweep(forked, deadline)
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0 if clean else None
        if done:  # what it left at its exit is swept too
            if not _sweep(forked, deadline):
                return None
            return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.001)


def _give_up(forked: set[int]) -> NoReturn:
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


def _sweep(forked: set[int], deadline: float) -> bool:
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
        moving = [pid for pid in doomed if seen[pid][2] not in _STILL
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


_STILL = (b"T", b"t", b"Z", b"X")  # stopped, traced, dead: a process that cannot fork


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


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    parts, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


# --------------------------------------------------------------------------- the worker side

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
    return _read_exact(fd, len(report)) == report


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
        _close(self.job_w, self.res_r, self.out_r, self.err_r)


class Worker:
    """The fork server's front: talks to the parent, drives the zygote, watches each run."""

    def __init__(self, config: dict[str, Any], zygote: socket.socket, zygote_pid: int) -> None:
        self.namespaces = bool(config.get("namespaces"))
        self.hermetic = bool(config.get("hermetic")) and self.namespaces
        self.disk_kib = max(1, int(config.get("disk", 256 << 20)) // 1024)  # each run's tmpfs
        self.workroot = str(config["workroot"])
        self.clean = True  # False once a wipe of the work area failed: see health()
        self.depth = max(1, int(config.get("prepared", 2)))  # runs kept ready ahead of their jobs
        # CPUs a run can use at once at most, which paces the CPU checks (see _collect): the
        # cores it may run on, or fewer where the parent gave the worker a cgroup CPU quota.
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        quota = float(config.get("cpu_rate") or 0)
        self.cpu_rate = float(min(cores or 1, quota) if quota > 0 else cores or 1)
        self.pid = os.getpid()
        self.zygote = zygote
        self.zygote_pid = zygote_pid
        self.ready: collections.deque[_Prepared] = collections.deque()
        self.unreaped: list[int] = []
        self.forks_pending = 0
        self.confirm_early = True  # see _confirm_all; False where runs never become dumpable
        self.scheduling = _scheduling(0)  # the zygote's too: it was forked from this process

    def _reply(self) -> tuple[bytes, int, list[int]]:
        """The zygote's next answer. Where runs share its uid (the fallback level) a run can
        stop it: every 0.1 s without an answer it is sent SIGCONT, and after
        :data:`ZYGOTE_WAIT` seconds the worker gives up (it exits; the pool replaces it)."""
        waiting = select.poll()
        waiting.register(self.zygote, select.POLLIN)
        deadline = time.monotonic() + ZYGOTE_WAIT
        while not waiting.poll(100):
            with contextlib.suppress(OSError):
                os.kill(self.zygote_pid, signal.SIGCONT)
            if time.monotonic() > deadline:
                raise SystemExit("the zygote did not answer")
        data, fds, _flags, _addr = socket.recv_fds(self.zygote, _COMMAND.size, 8)
        if len(data) < _COMMAND.size:
            rest = _recv_exact(self.zygote, _COMMAND.size - len(data))
            if rest is None:
                raise SystemExit("the zygote is gone")
            data += rest
        kind, value = _COMMAND.unpack(data)
        return kind, value, fds

    def _collect_forks(self) -> None:
        """Read the answers to every fork request sent so far (answers come in order)."""
        while self.forks_pending:
            kind, pid, fds = self._reply()
            self.forks_pending -= 1
            if kind != b"P" or len(fds) != 4 or pid <= 0:
                raise SystemExit("the zygote could not fork a run")
            self.ready.append(_Prepared(pid, fds))

    def _ask(self, op: bytes, pid: int = 0) -> tuple[bytes, int, list[int]]:
        self._collect_forks()
        self.zygote.sendall(_COMMAND.pack(op, pid))
        return self._reply()

    def prepare(self, at_least: int = 0) -> None:
        """Ask for ``depth`` runs (or ``at_least``) to be forked and isolated ahead of their jobs,
        without waiting."""
        while len(self.ready) + self.forks_pending < max(self.depth, at_least):
            self.zygote.sendall(_COMMAND.pack(b"F", self.disk_kib if self.hermetic else 0))
            self.forks_pending += 1

    def _resize(self, disk: int) -> None:
        """A job asks for another disk allowance: runs prepared with the old one are dropped."""
        kib = max(1, disk // 1024)
        if not self.hermetic or kib == self.disk_kib:
            return
        self._collect_forks()
        while self.ready:
            run = self.ready.popleft()
            _kill(run.pid)
            run.close()
            self.unreaped.append(run.pid)
        self.disk_kib = kib

    def _confirm_all(self) -> None:
        """Wait until no prepared run is dumpable any more; drop any that failed to get there.

        Called before a candidate may run: no candidate ever coexists with a prepared process
        that is still dumpable (see ``_enter_namespaces``). Only that moment is waited for; the
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
                _kill(run.pid)
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
            _kill(run.pid)  # it never got locked down: drop it
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
        waited = _waiting(runs)  # blocked on their job sockets: not runnable, so not moving
        start = time.monotonic()
        since = int(time.clock_gettime(time.CLOCK_BOOTTIME) * _TICKS)  # /proc's starttime clock
        try:
            peer = pair.connect() if pair is not None else None
            with contextlib.suppress(OSError):
                _send_job(run.job_w, job, peer)  # G is blocked reading it
            _close(run.job_w)
            run.job_w = -1
            if pair is not None:
                pair.start()
            caps = {run.res_r: max_result, run.out_r: max_output, run.err_r: max_output}
            if pair is not None:
                caps.update(pair.caps(max_result))
            wall = float(header.get("wall") or timeout)
            cap = float(header.get("wall_cap") or wall)  # _collect keeps it past the deadline
            ends = {run.res_r: _ended(header.get("nonce"))}
            if pair is not None:
                ends[pair.judge.res_r] = _ended(header.get("judge_nonce"))
            outcome = self._collect(runs, caps, timeout, start + max(wall, timeout), since,
                                    start + cap, waited, ends=ends)
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
            self._ask(b"W", self.unreaped.pop())
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

    def _exited(self, pid: int) -> bool:
        kind, _, _ = self._ask(b"Q", pid)
        return kind == b"S"

    def _cpu_used(self, runs: list[_Prepared], since: int) -> float:
        """CPU seconds the run's processes have used so far (with the children they reaped).

        In namespaces every process this worker can see belongs to the run except the worker,
        bubblewrap's init, the zygote and the zygote's other children (runs prepared, or ended
        and not yet reaped, including one forked while this run goes on), and anything that
        started before this run did (what is left of earlier runs until the zygote has reaped
        it). No process of the run is ever a child of the zygote but ``G`` and ``J`` (orphans
        are the run's own init's), so whatever the candidate forked counts too, whatever pid it
        was given, and nothing another run (or a prepared one) used is ever charged to this one.
        At the rlimits level only ``G`` (and ``J``) are read.
        """
        own = {r.pid for r in runs}
        if self.namespaces:
            try:
                pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
            except OSError:
                pids = list(own)
            pids = [p for p in pids if p not in (os.getpid(), self.zygote_pid, 1)]
        else:
            pids = list(own)
        total = 0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat", "rb") as handle:
                    data = handle.read()
                fields = data[data.rindex(b")") + 2:].split()
                if pid not in own and (int(fields[1]) == self.zygote_pid or int(fields[19]) < since):
                    continue  # another run (prepared, or an earlier one), or left over from one
                total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
            except (OSError, ValueError, IndexError):
                continue  # gone in between: its time is now in its parent's
        return total / _TICKS

    def _collect(self, runs: list[_Prepared], caps: dict[int, int], cpu_limit: float,
                 deadline: float, since: int, cap: float | None = None,
                 waited: float = 0.0, *, ends: dict[int, bytes | None]) -> dict[str, Any]:
        """Read the runs' pipes until they close, every run ends, or a limit; then kill them.
        A run is ended at once when every result pipe ends with its run's ``ends`` (see
        :func:`_ended`), or the process that did not end so has exited, without waiting for
        ``G`` (or ``J``) to exit.

        ``runs`` is ``G`` alone, or ``G`` and its judge ``J``; the run ends when all have exited.
        The time limit is ``cpu_limit`` seconds of CPU used by the run's processes, checked as
        often as they could have reached it; ``since`` is when the job was sent, in /proc's
        clock ticks since boot. ``deadline`` is the wall-clock backstop, for a run that sleeps or
        blocks; it does not count the time ``G`` and ``J`` spent runnable but waiting for a core
        (other runs, other load: :func:`_waiting`, which stood at ``waited`` when the job was
        sent), so a run starved of CPU is not stopped for what it never got, up to ``cap``.
        A run whose CPU time is spent is stopped at once, however long it waited.
        """
        base = deadline
        cap = deadline if cap is None else max(cap, deadline)
        cpu_spent = False
        kept: dict[int, list[bytes]] = {fd: [] for fd in caps}
        size = dict.fromkeys(caps, 0)
        dropped = dict.fromkeys(caps, 0)
        sel = selectors.DefaultSelector()
        for fd in caps:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        pidfds: dict[int, int] = {}  # pidfd -> pid, readable once that process has exited
        for run in runs:
            pidfd = _pidfd(run.pid)
            if pidfd is not None:
                pidfds[pidfd] = run.pid
                sel.register(pidfd, selectors.EVENT_READ)
        polled = [run.pid for run in runs if run.pid not in pidfds.values()]
        results = {run.res_r for run in runs}
        tails = dict.fromkeys(results, b"")  # each result pipe's last bytes so far, across reads
        timed_out = False
        exited: set[int] = set()
        ended_at: float | None = None
        check_cpu = time.monotonic() + cpu_limit / self.cpu_rate  # the earliest it could be spent

        def take(fd: int) -> None:
            """Read what ``fd`` reports (select said so): a pidfd's exit, or a pipe's bytes."""
            if fd in pidfds:
                sel.unregister(fd)
                exited.add(pidfds[fd])
                return
            try:
                data = os.read(fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                sel.unregister(fd)
                return
            room = caps[fd] - size[fd]
            if room > 0:
                kept[fd].append(data[:room])
                size[fd] += min(room, len(data))
            dropped[fd] += max(0, len(data) - max(room, 0))
            end = ends.get(fd)
            if end is not None:
                tails[fd] = (tails[fd] + data[-len(end):])[-len(end):]

        try:
            while True:
                now = time.monotonic()
                if ended_at is None and now >= check_cpu:
                    left = cpu_limit - self._cpu_used(runs, since)
                    if left <= 0:
                        deadline = now  # its CPU time is spent: a timeout, whatever the load
                        cpu_spent = True
                    check_cpu = now + max(CPU_POLL, left / self.cpu_rate)
                if ended_at is None and now >= deadline and not cpu_spent and deadline < cap:
                    # Time spent waiting for a core is not the run's: move the backstop by what
                    # it waited, and past now while it is runnable (a wait in progress is added
                    # to the run delay only when the wait ends; a run that is computing instead
                    # is the CPU limit's to stop).
                    later = base + max(0.0, _waiting(runs) - waited)
                    if _runnable(runs):
                        later = max(later, now + RUNNABLE_STEP)
                    deadline = min(cap, later)
                    if deadline - now < 0.005:
                        deadline = now  # nothing (or too little) to add: it is a timeout
                if ended_at is None and now >= deadline:
                    timed_out = True
                    for run in runs:
                        _kill(run.pid)
                    ended_at = now
                if not any(fd in sel.get_map() for fd in caps):
                    break  # every holder of the pipes closed them: nothing more can arrive
                if ended_at is None:
                    exited.update(pid for pid in polled if pid not in exited and self._exited(pid))
                    if len(exited) == len(runs):
                        for run in runs:
                            _kill(run.pid)  # all done: whatever they left behind goes with them
                        ended_at = now
                if ended_at is not None and now >= ended_at + GRACE:
                    break
                limit = (ended_at + GRACE) if ended_at is not None else min(deadline, check_cpu)
                wait = max(0.0, limit - now)
                for key, _ in sel.select(min(wait, 0.02) if polled else wait):
                    take(int(key.fd))
                done = [run for run in runs if tails[run.res_r] == ends.get(run.res_r)]
                if ended_at is None and done and all(run in done or run.pid in exited
                                                     for run in runs):
                    # G (and J) wrote their last bytes after flushing their output (or the one
                    # that did not has exited, which waits for nothing either): all the run
                    # wrote before is in the pipes already. An honest value never ends a pipe
                    # like this (the bytes need the nonce's header line right before the
                    # marker); a candidate that writes them into G's pipe itself (it knows G's
                    # nonce) only cuts its own later checks short; J's end cannot be forged
                    # (its frames quote candidate text, but no candidate ever sees J's nonce).
                    # End the run now,
                    # read what the pipes report holding, and answer without waiting for their
                    # ends (which come only once the kernel has torn the run down); never read
                    # a pipe that reports nothing, which a process still splicing into it
                    # could block. The teardown finishes off the caller's clock (after_run).
                    for run in runs:
                        _kill(run.pid)
                    for _round in range(DRAIN_ROUNDS):
                        ready = [int(key.fd) for key, _ in sel.select(0)]
                        for fd in ready:
                            take(fd)
                        if not ready:
                            break
                    break
        finally:
            sel.close()
            _close(*pidfds)
        statuses = []
        started = True
        for run in runs:
            _kill(run.pid)  # whatever is left of the run dies now
            result = b"".join(kept[run.res_r])
            end = ends.get(run.res_r)
            if not timed_out and end is not None and result.endswith(end):
                # A normal end: no need to wait for the teardown; reaped between runs.
                self.unreaped.append(run.pid)
                statuses.append(0)
            else:
                statuses.append(self._ask(b"W", run.pid)[1])
            started = started and (timed_out or result.startswith(STARTED))
        if not started:
            return {"error": "a run's process failed before running its job"}
        blobs: list[bytes] = []
        for fd in caps:
            blob = b"".join(kept[fd])
            if dropped[fd] and fd not in results:
                blob += f"\n[... {dropped[fd]} more bytes dropped]".encode()
            blobs.append(blob)
        outcome: dict[str, Any] = {"timed_out": timed_out,
                                   "died": None if timed_out else _describe(statuses[0]),
                                   "data": blobs}
        if len(runs) > 1:
            outcome["judge_died"] = None if timed_out else _describe(statuses[1])
        return outcome


def _waiting(runs: list[_Prepared]) -> float:
    """Seconds ``G`` and ``J`` have spent runnable but waiting for a core, since they were
    forked (the run delay in ``/proc/PID/schedstat``); 0 where the kernel does not say.

    Only the run's own first processes count: processes they fork wait alongside them, and
    adding up their waits would count the same wall-clock moment more than once.
    """
    total = 0
    for run in runs:
        try:
            with open(f"/proc/{run.pid}/schedstat", "rb") as handle:
                total += int(handle.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def _runnable(runs: list[_Prepared]) -> bool:
    """Whether ``G`` or ``J`` is running or waiting for a core right now (state ``R``)."""
    for run in runs:
        try:
            with open(f"/proc/{run.pid}/stat", "rb") as handle:
                data = handle.read()
            if data[data.rindex(b")") + 2:][:1] == b"R":
                return True
        except (OSError, ValueError):
            continue
    return False


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
            _send_job(self.judge.job_w, self.job, self.ends[1])
        _close(self.judge.job_w)
        self.judge.job_w = -1
        self.close()

    def caps(self, max_result: int) -> dict[int, int]:
        return {self.judge.res_r: max_result, self.judge.out_r: 0, self.judge.err_r: 0}

    def close(self) -> None:
        if self.ends is not None:
            _close(*self.ends)
            self.ends = None


def _kill(pid: int) -> None:
    """SIGKILL a run: G itself (at the strict level its pid namespace dies with it) and its group."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _describe(status: int) -> str | None:
    """How a candidate process ended, for messages only: exit codes never decide a grade."""
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return None if status == 0 else f"exited with status {status}"


def _probe_namespaces() -> tuple[bool, bool]:
    """Can a child be cloned into a new user + pid namespace here (bwrap may forbid nesting)?

    Returns ``(works, needs_dumpable)``: the second is True when the child could only write its
    id maps by becoming dumpable for a moment (any host user but root).
    """
    uid, gid = os.getuid(), os.getgid()
    try:
        pid = _libc.clone_into_namespaces()
    except OSError:
        return False, True
    if pid == 0:
        try:
            try:
                _write_id_maps(uid, gid)
                clean = True
            except PermissionError:
                _enter_namespaces(uid, gid)
                clean = False
            os._exit((0 if clean else 10) if os.getpid() == 1 else 1)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
    return code in (0, 10), code != 0


def _probe_hermetic() -> str:
    """Can a run get its own mount, IPC and network namespaces, its mounts and its loopback
    (``_make_hermetic``)?

    Returns "" when it can, else what failed.
    """
    uid, gid = os.getuid(), os.getgid()
    why_r, why_w = os.pipe()
    try:
        pid = _libc.clone_into_namespaces(HERMETIC_FLAGS)
    except OSError as exc:
        _close(why_r, why_w)
        return f"clone with new mount, IPC and network namespaces failed: {exc}"
    if pid == 0:
        code = 0
        try:
            os.close(why_r)
            _enter_namespaces(uid, gid)
            _make_hermetic(1 << 20)
        except BaseException as exc:
            with contextlib.suppress(BaseException):
                os.write(why_w, str(exc).encode("utf-8", "replace")[:500])
            code = 1
        os._exit(code)
    os.close(why_w)
    why = _read_to_end(why_r).decode("utf-8", "replace")
    os.close(why_r)
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return ""
    return why or "the hermetic set-up of a run failed"


def read_job(fd: int) -> bytes | None:
    """A job's payload (JSON bytes, handed on to the child as they are); None at end of stream."""
    return _framing.read_frame(fd)


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
    _close(null)
    _libc.prctl(PR_SET_DUMPABLE, 0)
    if config.get("parent_pid"):
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != int(config["parent_pid"]):
            os._exit(0)
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(name)
    _load_packages(config)
    os.makedirs(config["workroot"], mode=0o700, exist_ok=True)
    global _needs_dumpable
    namespaces, needs_dumpable = _probe_namespaces() if config.get("namespaces") else (False, False)
    _needs_dumpable = needs_dumpable
    if namespaces and config.get("hermetic"):
        _writable_mounts()  # read once, here: every run inherits the list
    not_hermetic = _probe_hermetic() if namespaces and config.get("hermetic") else ""
    if not_hermetic:
        config["hermetic"] = False
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    zygote_pid = os.fork()
    if zygote_pid == 0:
        ours.close()
        _close(control, reply)
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        # Everything imported so far is shared, read-mostly, by every run: keep the collector
        # from walking (and so copying) those pages in each child.
        gc.collect()
        gc.freeze()
        _filter_syscalls()
        _zygote(theirs, namespaces, bool(config.get("hermetic")))
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
