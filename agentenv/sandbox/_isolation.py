"""Isolation levels and how a fork-server worker is launched at each.

- ``"strict"``: the worker runs under bubblewrap with new user, pid, net, ipc and uts
  namespaces (and cgroup when possible), an unprivileged uid (65534), read-only system paths
  holding only what Python needs (``/usr``, the ``/lib*`` links, ``ld.so.cache``, the
  interpreter's own prefix), a private size-capped tmpfs as its only writable place, no view
  of the host's home, the project or ``/tmp``, ``--die-with-parent``, ``--new-session`` and an
  empty environment. Each run is then cloned into a user + pid namespace of its own inside it
  (see ``_worker``), with rlimits, no capabilities and no-new-privs.
- ``"rlimits"``: the fallback where bubblewrap is missing or refused (macOS, locked-down
  containers): a plain worker process whose forked runs get rlimits (no process-count limit,
  which the kernel counts per user across the machine), their own session (process group)
  and a scrubbed environment. There is no filesystem or network isolation at this level.

The candidate's interpreter is started with ``-I -S``: standard library only, no
site-packages, no user site, no ``PYTHON*`` variables.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

__all__ = [
    "ISOLATION_LEVELS",
    "SANDBOX_FILES",
    "bwrap_command",
    "bwrap_path",
    "python_executable",
]

ISOLATION_LEVELS = ("rlimits", "strict")  # weakest first
SANDBOX_DIR = Path(__file__).resolve().parent
SANDBOX_FILES = ("_worker.py", "_runner.py", "_wire.py", "_judge.py", "_rpc.py")
INSIDE_DIR = "/opt/agentenv"
INSIDE_WORKROOT = "/tmp"
SANDBOX_UID = 65534
TMPFS_BYTES = 512 * 1024**2

_lock = threading.Lock()
_bwrap_size: dict[str, bool] = {}


def python_executable() -> str:
    """The real interpreter behind ``sys.executable`` (a venv's python is a symlink to it)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base)


def bwrap_path() -> str | None:
    """Where bubblewrap is, or None. ``AGENTENV_BWRAP`` overrides the lookup ("" disables it)."""
    override = os.environ.get("AGENTENV_BWRAP")
    if override is not None:
        return override or None
    return shutil.which("bwrap")


def _supports_size(bwrap: str) -> bool:
    with _lock:
        if bwrap not in _bwrap_size:
            try:
                text = subprocess.run([bwrap, "--help"], capture_output=True, text=True,
                                      timeout=10).stdout
            except (OSError, subprocess.SubprocessError):
                text = ""
            _bwrap_size[bwrap] = "--size" in text
        return _bwrap_size[bwrap]


def _system_mounts() -> list[str]:
    """Read-only binds for the system paths Python needs; merged-/usr symlinks kept as links."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for path in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/alternatives"):
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


def _python_mounts(python: str) -> list[str]:
    """The interpreter's installation, read-only, at the same path (when it is not in /usr)."""
    roots = {os.path.realpath(sys.base_prefix), os.path.dirname(os.path.dirname(python))}
    args: list[str] = []
    for root in sorted(roots):
        if root == "/usr" or root.startswith("/usr/") or not os.path.isdir(root):
            continue
        args += ["--ro-bind", root, root]
    return args


def bwrap_command(bwrap: str, config_json: str) -> list[str]:
    """The full command that starts one strict fork-server worker."""
    python = python_executable()
    args = [
        bwrap,
        "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
        "--unshare-cgroup-try",
        "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
        "--hostname", "sandbox",
        "--die-with-parent", "--new-session",
        "--clearenv",
        "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
        "--setenv", "LANG", "C.UTF-8",
        "--setenv", "HOME", INSIDE_WORKROOT,
        *_system_mounts(),
        *_python_mounts(python),
        "--proc", "/proc",
        "--dev", "/dev",
    ]
    if _supports_size(bwrap):
        args += ["--size", str(TMPFS_BYTES)]
    args += ["--tmpfs", INSIDE_WORKROOT]
    for name in SANDBOX_FILES:
        args += ["--ro-bind", str(SANDBOX_DIR / name), f"{INSIDE_DIR}/{name}"]
    args += ["--chdir", INSIDE_WORKROOT, "--",
             python, "-I", "-S", "-B", f"{INSIDE_DIR}/_worker.py", config_json]
    return args


def plain_command(config_json: str) -> list[str]:
    """The command that starts one rlimits-level (fallback) worker."""
    return [python_executable(), "-I", "-S", "-B", str(SANDBOX_DIR / "_worker.py"), config_json]
