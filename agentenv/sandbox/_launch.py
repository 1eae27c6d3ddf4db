"""The root-side launcher: start a sandbox worker under an unprivileged host uid.

Used only when the caller is root (CI, containers, most training clusters). The kernel never
applies ``RLIMIT_NPROC`` to host uid 0, whatever namespace a process is in, so a sandbox whose
uid maps to root has no process limit; and bubblewrap run as root maps its sandbox uid to root.
This launcher is what the trusted parent starts instead of bubblewrap::

    python -I -S -B _launch.py CONFIG -- bwrap ARGS...

As root, still trusted (no candidate code has run), it

1. moves itself into the worker's cgroups (each path in ``config["cgroups"]`` is a
   ``cgroup.procs`` file), so bubblewrap and everything below it are counted there;
2. makes the paths bubblewrap will bind reachable by the unprivileged uid without changing
   anything on the host: in a private mount namespace of its own it mounts a tmpfs on
   ``config["stage"]`` and bind-mounts each ``(source, staged)`` pair there read-only (the
   interpreter may live under ``/root``, which only root can traverse);
3. drops every supplementary group and switches to ``config["uid"]``/``config["gid"]`` for
   good (real, effective and saved ids);
4. executes bubblewrap, which then runs unprivileged and maps the sandbox uid to that host uid.

Standard library only; loaded by path. Any failure exits with status 97 and a line on stderr
(the pool quotes it).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

CLONE_NEWNS = 0x00020000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


def _fail(what: str) -> None:
    sys.stderr.write(f"agentenv launcher: {what}\n")
    sys.stderr.flush()
    os._exit(97)


def _check(result: int, what: str) -> None:
    if result != 0:
        _fail(f"{what}: {os.strerror(ctypes.get_errno())}")


def _join_cgroups(procs_files: list[str]) -> None:
    for path in procs_files:
        try:
            with open(path, "w") as handle:
                handle.write("0")  # "0" is the writing process itself
        except OSError as exc:
            _fail(f"could not join {path}: {exc}")


def _stage(libc: ctypes.CDLL, stage: str, binds: list[list[str]]) -> None:
    if not binds:
        return
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    # Private first: nothing mounted from here on propagates back to the host.
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making / private")
    _check(libc.mount(b"tmpfs", stage.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755"),
           f"mounting a tmpfs on {stage}")
    for source, staged in binds:
        kind_dir = os.path.isdir(source)
        if kind_dir:
            os.makedirs(staged, mode=0o755, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(staged), mode=0o755, exist_ok=True)
            with open(staged, "w"):
                pass
        _check(libc.mount(source.encode(), staged.encode(), None, MS_BIND | MS_REC, None),
               f"binding {source}")
        _check(libc.mount(None, staged.encode(), None,
                          MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None),
               f"making {staged} read-only")


def main(argv: list[str]) -> None:
    if "--" not in argv:
        _fail("usage: _launch.py CONFIG -- COMMAND...")
    split = argv.index("--")
    config = json.loads(argv[1])
    command = argv[split + 1:]
    libc = ctypes.CDLL(None, use_errno=True)
    _join_cgroups(list(config.get("cgroups", ())))
    _stage(libc, str(config.get("stage", "/tmp")), list(config.get("binds", ())))
    uid, gid = int(config["uid"]), int(config["gid"])
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as exc:
        _fail(f"could not switch to uid {uid}: {exc}")
    if os.getuid() != uid or os.geteuid() != uid:
        _fail("the uid switch did not hold")
    try:
        os.execv(command[0], command)
    except OSError as exc:
        _fail(f"could not execute {command[0]}: {exc}")


if __name__ == "__main__":
    main(sys.argv)
