"""Isolation levels and how a fork-server worker is launched at each.

- ``"strict"``: the worker runs under bubblewrap with new user, pid, net, ipc and uts
  namespaces (and cgroup when possible), uid 65534, read-only system paths holding only what
  Python needs (``/usr``, the ``/lib*`` links, ``ld.so.cache``, the interpreter's own prefix),
  no view of the host's home, the project or ``/tmp``, ``--die-with-parent``,
  ``--new-session`` and an empty environment. Each run is then cloned into user, pid, mount,
  IPC and network namespaces of its own inside it (see ``_namespaces``): everything read-only but a
  fresh size-capped tmpfs for ``/tmp`` and ``/dev/shm``, a loopback of its own, with rlimits,
  no capabilities, no-new-privs and a seccomp filter that keeps ``SIGCHLD``'s disposition (so every process's
  CPU time reaches the run's count). The host uid behind the sandbox is never 0: when the
  caller is root, the worker is started through ``_launch`` as host uid :data:`SANDBOX_UID`,
  so the kernel applies ``RLIMIT_NPROC`` (it never does to uid 0) and the sandbox owns
  nothing on the host.
- ``"rlimits"``: the fallback where bubblewrap is missing or refused (macOS, locked-down
  containers): a plain worker process whose forked runs get rlimits (no process-count limit,
  which the kernel counts per user across the machine), their own session (process group)
  and an empty environment. There is no filesystem or network isolation at this level, so as
  root it refuses to start unless the caller opts in (:data:`ALLOW_ROOT_FALLBACK`), and then
  runs the worker as :data:`SANDBOX_UID` wherever that uid can run the interpreter.

Both levels share the seccomp policy (:mod:`_seccomp`), capabilities dropped, no-new-privs,
rlimits and output caps, and at both verdicts are decided on the trusted side; the README's
table sets the two levels' guarantees side by side. Where a run's processes, files, network
and IPC are its own is the strict level only (:mod:`_namespaces`); the fallback kills what a
run left behind after it (:mod:`_strays`) and empties its work directory.

The candidate's interpreter is started with ``-I -S``: no site-packages, no user site, no
``PYTHON*`` variables; the third-party packages candidates may import are bound read-only
(:func:`package_dirs`).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import py_compile
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from agentenv import settings
from agentenv.choices import IsolationLevel, values
from agentenv.sandbox import _cleanup

__all__ = [
    "ALLOW_ROOT_FALLBACK",
    "ISOLATION_LEVELS",
    "SANDBOX_FILES",
    "SANDBOX_UID",
    "bwrap_command",
    "bwrap_path",
    "fallback_uid",
    "launch_command",
    "plain_command",
    "python_executable",
    "reachable_by",
    "strict_command",
]

ISOLATION_LEVELS = values(IsolationLevel)  # weakest first
SANDBOX_DIR = Path(__file__).resolve().parent
SANDBOX_FILES = ("_worker.py", "_kernel.py", "_seccomp.py", "_namespaces.py", "_candidate.py",
                 "_zygote.py", "_strays.py", "_monitor.py", "_runner.py", "_wire.py", "_stdvalues.py",
                 "_schema.py", "_framing.py", "_judge.py", "_rpc.py", "_cleanup.py")
INSIDE_DIR = "/opt/agentenv"
INSIDE_PACKAGES = "/opt/agentenv-packages"  # third-party packages candidates may import
DEFAULT_PACKAGES = ("numpy",)  # exposed when installed and AGENTENV_SANDBOX_PACKAGES is unset
INSIDE_WORKROOT = "/tmp"
SANDBOX_UID = 65534  # inside the sandbox, and the host uid behind it when the caller is root
TMPFS_BYTES = 64 * 1024**2  # the worker's own /tmp; every run gets a fresh tmpfs of its own
STAGE_PARENT = "/tmp"  # where the stage directory (see stage_dir) is made
STAGE_PREFIX = "agentenv-stage-"  # then the maker's _cleanup.owner_tag, swept once it is dead
PYC_PREFIX = "agentenv-pyc-"
ALLOW_ROOT_FALLBACK = "AGENTENV_SANDBOX_ALLOW_ROOT_FALLBACK"  # =1: rlimits level as root

_lock = threading.Lock()
_bwrap_size: dict[str, bool] = {}


def python_executable() -> str:
    """The real interpreter behind ``sys.executable`` (a venv's python is a symlink to it)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base)


def bwrap_path() -> str | None:
    """Where bubblewrap is, or None. ``AGENTENV_BWRAP`` overrides the lookup ("" disables it)."""
    override = settings.bwrap_path()
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


def package_dirs() -> list[tuple[str, str]]:
    """``(host directory, name)`` of each third-party package candidates may import, and of the
    libraries its wheel vendors beside it (``numpy.libs``): only those packages' own files,
    never the rest of site-packages (where agentenv's task data could be reached).

    The packages are ``AGENTENV_SANDBOX_PACKAGES`` (comma-separated top-level names), or
    :data:`DEFAULT_PACKAGES` that are installed in this interpreter when it is unset.
    """
    chosen = settings.sandbox_packages()
    names = DEFAULT_PACKAGES if chosen is None else tuple(
        n.strip() for n in chosen.split(",") if n.strip())
    out: list[tuple[str, str]] = []
    for name in names:
        if not name.isidentifier():
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        locations = list(spec.submodule_search_locations or ()) if spec is not None else []
        if not locations:
            continue  # a single-file module or a namespace package: not supported
        package = os.path.realpath(locations[0])
        out.append((package, name))
        libs = os.path.join(os.path.dirname(package), name + ".libs")
        if os.path.isdir(libs):
            out.append((os.path.realpath(libs), name + ".libs"))
    return out


def package_config(strict: bool) -> dict[str, list[str]]:
    """The worker config's ``paths`` (added to ``sys.path``) and ``preload`` (imported in the
    zygote: the exposed packages ``AGENTENV_SANDBOX_PRELOAD`` names) for :func:`package_dirs`: inside the strict sandbox they are bound under
    :data:`INSIDE_PACKAGES`; at the rlimits level (no mount namespace: the host's files are
    readable anyway) their host parent directories are used."""
    dirs = package_dirs()
    if not dirs:
        return {"paths": [], "preload": []}
    wanted = {n.strip() for n in (settings.sandbox_preload() or "").split(",") if n.strip()}
    preload = [name for _, name in dirs if name in wanted]
    if strict:
        return {"paths": [INSIDE_PACKAGES], "preload": preload}
    parents = sorted({os.path.dirname(host) for host, _ in dirs})
    return {"paths": parents, "preload": preload}


def bwrap_command(bwrap: str, config_json: str,
                  staged: dict[str, str] | None = None) -> list[str]:
    """The full command that starts one strict fork-server worker.

    ``staged`` maps host paths to where :mod:`_launch` has re-bound them (see
    :func:`strict_command`); every bind source is looked up there first.
    """
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
    for name, pyc in compiled_sandbox_files().items():
        args += ["--ro-bind", pyc, importlib.util.cache_from_source(f"{INSIDE_DIR}/{name}")]
    for host, name in package_dirs():
        args += ["--ro-bind", host, f"{INSIDE_PACKAGES}/{name}"]
    args += ["--chdir", INSIDE_WORKROOT, "--",
             *worker_argv(python, INSIDE_DIR, config_json)]
    if staged:
        args = [staged.get(arg, arg) if args[i - 1] == "--ro-bind" else arg
                for i, arg in enumerate(args)]
    return args


def strict_command(bwrap: str, config_json: str, cgroup_procs: list[str]) -> list[str]:
    """How to start a strict worker from this process: bubblewrap, or ``_launch`` then bubblewrap.

    The launcher is needed when the caller is root (to leave uid 0, see the module docstring)
    or when the worker must join cgroups before bubblewrap forks. Host paths bubblewrap binds
    that the sandbox uid could not reach (an interpreter under ``/root``) are staged by the
    launcher, as root, in a mount namespace of its own.
    """
    root = os.geteuid() == 0
    if not root and not cgroup_procs:
        return bwrap_command(bwrap, config_json)
    staged: dict[str, str] = {}
    binds: list[list[str]] = []
    if root:
        plain = bwrap_command(bwrap, config_json)
        sources = [plain[i + 1] for i, arg in enumerate(plain[:-2]) if arg == "--ro-bind"]
        for source in sources:
            if source not in staged and not reachable_by(source, SANDBOX_UID, SANDBOX_UID):
                staged[source] = f"{stage_dir()}/{len(binds)}"
                binds.append([source, staged[source]])
    config = {"cgroups": cgroup_procs, "binds": binds,
              "uid": SANDBOX_UID if root else os.getuid(),
              "gid": SANDBOX_UID if root else os.getgid()}
    return launch_command(config) + bwrap_command(bwrap, config_json, staged)


# A script run as __main__ is always compiled from source; imported, ``_worker`` uses its
# bytecode. argv is what running the script would give (its path first, then the config).
_WORKER_BOOT = ("import sys; sys.path.append(sys.argv[1].rpartition('/')[0]); import _worker; "
                "_worker.main(sys.argv[1:])")


def worker_argv(python: str, directory: str, config_json: str) -> list[str]:
    """The interpreter command that starts ``_worker`` from ``directory`` with its config."""
    return [python, "-I", "-S", "-B", "-c", _WORKER_BOOT, f"{directory}/_worker.py", config_json]


_pycs: dict[str, str] | None = None


def compiled_sandbox_files() -> dict[str, str]:
    """Each sandbox file's up-to-date bytecode on the host (name -> path), bound in next to it.

    A worker starts with ``-B`` in a read-only tree, so without these it would compile its
    modules from source on every start (about 20 ms of CPU each time). The package's own
    ``__pycache__`` copy is used when it is current; otherwise they are compiled, into the
    package's ``__pycache__`` where Python itself would write them (unless bytecode writing is
    off or the directory is read-only), else into a private directory removed at exit. The
    answer is kept, but checked again at every call (a stat and a 16-byte read per file): a
    cleaner may have removed a .pyc, or an edit made it stale, since, and bubblewrap refuses to
    start on a bind whose source is gone. A file that cannot be compiled is left out: the
    worker compiles it itself.
    """
    global _pycs
    with _lock:
        if _pycs is None or len(_pycs) != len(SANDBOX_FILES) or not all(
                _current(pyc, str(SANDBOX_DIR / name)) for name, pyc in _pycs.items()):
            _pycs = {name: pyc for name in SANDBOX_FILES
                     if (pyc := _compiled(str(SANDBOX_DIR / name))) is not None}
        return dict(_pycs)


def _compiled(source: str) -> str | None:
    """A current .pyc of ``source``: the package's own, made there if need be, else private
    (the caller holds ``_lock``)."""
    cached = importlib.util.cache_from_source(source)
    if _current(cached, source) or (not sys.dont_write_bytecode and _compile(source, cached)):
        return cached
    private = os.path.join(_private_pyc_dir(), os.path.basename(cached))
    return private if _compile(source, private) else None


_pyc_dir: str | None = None


def _private_pyc_dir() -> str:
    """This process's own directory for bytecode, made on first use (again if it was removed),
    removed at exit (the caller holds ``_lock``)."""
    global _pyc_dir
    if _pyc_dir is None or not os.path.isdir(_pyc_dir):
        _cleanup.sweep_stale(tempfile.gettempdir(), PYC_PREFIX)  # a SIGKILLed process's
        _pyc_dir = tempfile.mkdtemp(prefix=f"{PYC_PREFIX}{_cleanup.owner_tag()}-")
        os.chmod(_pyc_dir, 0o755)  # the sandbox uid reads it
        atexit.register(shutil.rmtree, _pyc_dir, True)
    return _pyc_dir


def _compile(source: str, target: str) -> bool:
    """Write ``source``'s timestamp bytecode to ``target``; True when it is there and current."""
    try:
        py_compile.compile(source, cfile=target, doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
        os.chmod(target, 0o644)
    except (OSError, py_compile.PyCompileError):
        return False
    return _current(target, source)


def _current(pyc: str, source: str) -> bool:
    """Is ``pyc`` timestamp bytecode of this interpreter for ``source`` as it is now?"""
    try:
        with open(pyc, "rb") as handle:
            header = handle.read(16)
        stat = os.stat(source)
    except OSError:
        return False
    return (len(header) == 16 and header[:4] == importlib.util.MAGIC_NUMBER
            and int.from_bytes(header[4:8], "little") == 0
            and int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF)


_stage: str | None = None


def stage_dir() -> str:
    """An empty directory of this process's where ``_launch`` mounts its staging tmpfs.

    The launcher mounts a tmpfs there in a mount namespace of its own and re-binds unreachable
    host paths inside it, so the directory must hide nothing: a fresh, empty one, made once per
    process (a tmpfs on ``/tmp`` itself would hide a checkout or an interpreter under ``/tmp``).
    On the host it stays empty and is removed at exit.
    """
    global _stage
    with _lock:
        if _stage is None or not os.path.isdir(_stage):
            _cleanup.sweep_stale(STAGE_PARENT, STAGE_PREFIX)  # a SIGKILLed process's
            _stage = tempfile.mkdtemp(prefix=f"{STAGE_PREFIX}{_cleanup.owner_tag()}-",
                                      dir=STAGE_PARENT)
            os.chmod(_stage, 0o755)
            atexit.register(_remove_stage, _stage)
        return _stage


def _remove_stage(path: str) -> None:
    with contextlib.suppress(OSError):  # still mounted in a live launcher's namespace, or gone
        os.rmdir(path)


def launch_command(config: dict[str, object]) -> list[str]:
    """The ``_launch`` prefix (join cgroups, stage binds, switch uid) for a worker command."""
    return [python_executable(), "-I", "-S", "-B", str(SANDBOX_DIR / "_launch.py"),
            json.dumps({"stage": stage_dir(), **config}), "--"]


def reachable_by(path: str, uid: int, gid: int) -> bool:
    """Could ``uid``/``gid`` (no supplementary groups) read ``path`` and every directory above it?"""
    try:
        current = os.path.abspath(path)
        parts = [current]
        while current != "/":
            current = os.path.dirname(current)
            parts.append(current)
        for index, part in enumerate(parts):
            info = os.stat(part)
            need_dir = 0o1 if index else (0o5 if os.path.isdir(part) else 0o4)
            if info.st_uid == uid:
                bits = (info.st_mode >> 6) & 0o7
            elif info.st_gid == gid:
                bits = (info.st_mode >> 3) & 0o7
            else:
                bits = info.st_mode & 0o7
            if bits & need_dir != need_dir:
                return False
    except OSError:
        return False
    return True


def plain_command(config_json: str) -> list[str]:
    """The command that starts one rlimits-level (fallback) worker."""
    return worker_argv(python_executable(), str(SANDBOX_DIR), config_json)


def fallback_uid() -> tuple[int, int] | None:
    """The uid/gid a root caller's fallback worker runs as, or None where it cannot drop to one.

    It can when :data:`SANDBOX_UID` can reach the interpreter and the sandbox files; under
    ``/root`` (a pyenv, a venv in root's home) it cannot, and the fallback then runs as root.
    """
    paths = [python_executable(), *(str(SANDBOX_DIR / name) for name in SANDBOX_FILES),
             os.path.realpath(sys.base_prefix)]
    if all(reachable_by(path, SANDBOX_UID, SANDBOX_UID) for path in paths):
        return SANDBOX_UID, SANDBOX_UID
    return None
