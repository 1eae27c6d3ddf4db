"""A run's namespaces and mounts: what makes it hermetic at the strict level.

A run is cloned into new user, pid, mount, IPC and network namespaces (:func:`_kernel.Libc.
clone_into_namespaces` with :data:`HERMETIC_FLAGS`); here it maps its ids
(:func:`enter_namespaces`), makes every inherited mount read-only with a fresh size-capped tmpfs
of its own for ``/tmp`` and ``/dev/shm``, a ``/proc`` of its own and its own loopback
(:func:`make_hermetic`), and forbids nested user namespaces
(:func:`forbid_nested_user_namespaces`). :func:`probe_namespaces` and :func:`probe_hermetic`
find out, once per worker, what this machine allows. Standard library only; loaded by path
inside the sandbox.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import struct
import sys

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.append(_here)  # last: nothing in this directory may shadow a standard module

import _kernel  # noqa: E402
from _kernel import (  # noqa: E402
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    MOUNT_OPTIONS,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    PR_SET_DUMPABLE,
    libc,
    write_file,
)

# The builtins this module's functions use: a copy taken when it is imported, before any
# candidate code runs in this process (see _worker).
globals()["__builtins__"] = dict(vars(__import__("builtins")))

oom_fd: int | None = None  # this run's /proc/self/oom_score_adj, opened in enter_namespaces
needs_dumpable = False  # id maps need a dumpable moment here: set by the worker before the zygote


def forbid_nested_user_namespaces() -> None:
    """Let no process of this run create a user namespace of its own (while we still hold
    ``CAP_SYS_RESOURCE`` in the run's user namespace, which owns this limit).

    In a nested user namespace a candidate regains capabilities there: enough to mount a fresh
    tmpfs, not capped by ``Limits.disk``, that only the memory cgroup (where there is one)
    would stop. The limit is checked against every ancestor namespace, so 0 here holds for
    everything the run forks.
    """
    for name in (b"max_user_namespaces", b"max_mnt_namespaces"):
        with contextlib.suppress(OSError):
            write_file(b"/proc/sys/user/" + name, b"0")



def enter_namespaces(uid: int, gid: int) -> None:
    """In a child just cloned into new namespaces: map our own ids (the only mapping allowed).

    A non-dumpable process's ``/proc/self`` files belong to root, so unless the host user is
    root the maps can only be written while dumpable (``needs_dumpable``, known from
    :func:`probe_namespaces`, so no run tries in vain first). During that moment another
    run's candidate (same uid) could open this process's memory; the worker therefore never
    lets a candidate run while a prepared process has not yet reported NODUMP, written as soon
    as the moment is over (``_worker.Worker.confirm_all``).
    """
    global oom_fd
    if not needs_dumpable:
        try:
            write_id_maps(uid, gid)
            return
        except PermissionError:
            pass
    libc.prctl(PR_SET_DUMPABLE, 1)
    try:
        write_id_maps(uid, gid)
        # Only openable now (a non-dumpable process's /proc files are root's); written when
        # the job starts, see _candidate.prefer_as_oom_victim.
        with contextlib.suppress(OSError):
            oom_fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)
    finally:
        libc.prctl(PR_SET_DUMPABLE, 0)


def write_id_maps(uid: int, gid: int) -> None:
    for name, text in ((b"setgroups", b"deny"), (b"uid_map", b"%d %d 1" % (uid, uid)),
                       (b"gid_map", b"%d %d 1" % (gid, gid))):
        write_file(b"/proc/self/" + name, text)



HERMETIC_FLAGS = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET  # added to each run's clone (strict)
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = struct.Struct("16sH22x")  # struct ifreq: the interface's name, then ifr_flags
SHM_DIR = "/tmp/.shm"  # the run's /dev/shm: part of the run's one tmpfs, so one cap covers both


def make_hermetic(disk: int) -> None:
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
    here (:func:`loopback_up`): ports bound, connections left in ``TIME_WAIT`` and abstract
    unix socket names stay in it, so the next run on this worker finds every port free and
    no trace of this one in ``/proc/net``.
    """
    libc.mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing propagates back to the worker
    for point, flags in writable_mounts():
        libc.mount(None, point, None, flags)
    inodes = max(1024, disk // 4096)
    libc.mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
                f"size={disk},nr_inodes={inodes},mode=0755")
    os.mkdir("/tmp/run", 0o700)
    os.mkdir(SHM_DIR, 0o1777)
    os.chmod(SHM_DIR, 0o1777)
    libc.mount(SHM_DIR, "/dev/shm", None, MS_BIND)
    # A /proc of the run's own pid namespace: the worker, the zygote and the runs prepared
    # beside this one cannot even be named from inside (so a prepared run's brief dumpable
    # moment, see enter_namespaces, is out of reach). Its kernel knobs need capabilities
    # the run does not have in any namespace that owns them.
    libc.mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    loopback_up()


def loopback_up() -> None:
    """Bring ``lo`` up in this run's network namespace (``SIOCSIFFLAGS``: the run still holds
    ``CAP_NET_ADMIN`` in the user namespace that owns it); raises OSError on failure."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        name = b"lo"
        flags = _IFREQ.unpack(fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, _IFREQ.pack(name, 0)))[1]
        if not flags & IFF_UP:
            fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, _IFREQ.pack(name, flags | IFF_UP))


_remounts: list[tuple[str, int]] | None = None


def writable_mounts() -> list[tuple[str, int]]:
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
            point = unescape(fields[4])
            options = fields[5].split(",")
            if "ro" in options or point == "/proc" or point.startswith("/proc/"):
                continue
            if not os.path.isdir(point) or os.path.islink(point):
                continue  # a device node bound under /dev
            flags = MS_REMOUNT | MS_BIND | MS_RDONLY
            for option in options:
                flags |= MOUNT_OPTIONS.get(option, 0)  # keep what is there (locked flags stay)
            found.append((point, flags))
        _remounts = found
    return _remounts


def unescape(text: str) -> str:
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




def probe_namespaces() -> tuple[bool, bool]:
    """Can a child be cloned into a new user + pid namespace here (bwrap may forbid nesting)?

    Returns ``(works, needs_dumpable)``: the second is True when the child could only write its
    id maps by becoming dumpable for a moment (any host user but root).
    """
    uid, gid = os.getuid(), os.getgid()
    try:
        pid = libc.clone_into_namespaces()
    except OSError:
        return False, True
    if pid == 0:
        try:
            try:
                write_id_maps(uid, gid)
                clean = True
            except PermissionError:
                enter_namespaces(uid, gid)
                clean = False
            os._exit((0 if clean else 10) if os.getpid() == 1 else 1)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
    return code in (0, 10), code != 0


def probe_hermetic() -> str:
    """Can a run get its own mount, IPC and network namespaces, its mounts and its loopback
    (``make_hermetic``)?

    Returns "" when it can, else what failed.
    """
    uid, gid = os.getuid(), os.getgid()
    why_r, why_w = os.pipe()
    try:
        pid = libc.clone_into_namespaces(HERMETIC_FLAGS)
    except OSError as exc:
        _kernel.close_fds(why_r, why_w)
        return f"clone with new mount, IPC and network namespaces failed: {exc}"
    if pid == 0:
        code = 0
        try:
            os.close(why_r)
            enter_namespaces(uid, gid)
            make_hermetic(1 << 20)
        except BaseException as exc:
            with contextlib.suppress(BaseException):
                os.write(why_w, str(exc).encode("utf-8", "replace")[:500])
            code = 1
        os._exit(code)
    os.close(why_w)
    why = _kernel.read_to_end(why_r).decode("utf-8", "replace")
    os.close(why_r)
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return ""
    return why or "the hermetic set-up of a run failed"


