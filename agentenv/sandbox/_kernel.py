"""Kernel calls the sandbox makes that the standard library does not offer, and their flags.

``prctl``, installing a seccomp filter, ``mount``, ``clone`` into new namespaces and ``capset``
go through ctypes (:class:`Libc`; off Linux each does nothing or raises OSError), beside two
bare-syscall helpers for small kernel files and descriptors. No policy lives here: what to
refuse is :mod:`_seccomp`'s, what to mount :mod:`_namespaces`'. Standard library only; loaded
by path inside the sandbox.
"""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import struct
import sys
from typing import Any

# The builtins this module's functions use: a copy taken when it is imported, before any
# candidate code runs in this process (see _worker).
globals()["__builtins__"] = dict(vars(__import__("builtins")))

# clone(flags, stack, ...) syscall numbers where the first two arguments come in that order.
CLONE_SYSCALL = {"x86_64": 56, "amd64": 56, "aarch64": 220, "arm64": 220, "riscv64": 220,
                 "ppc64le": 120, "armv7l": 120}
CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
MOUNT_OPTIONS = {"ro": MS_RDONLY, "nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
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


class Libc:
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
        :func:`_namespaces.make_hermetic`). Raises OSError where that is not possible.
        """
        number = CLONE_SYSCALL.get(platform.machine())
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


libc = Libc()


def close_fds(*fds: int) -> None:
    """Close each descriptor that is still open."""
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def write_file(path: bytes, data: bytes) -> None:
    """Write a small kernel file with bare system calls (no file object: fewer pages touched)."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_to_end(fd: int) -> bytes:
    """Everything ``fd`` yields until its end."""
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 16)  # a pipe's capacity: a larger request costs an mmap and munmap
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)

