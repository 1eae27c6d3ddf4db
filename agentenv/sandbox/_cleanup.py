"""Emptying a directory that candidate code wrote into: iterative, descriptor-based, never raises.

Shared by the fork server (loaded by path inside the sandbox, so standard library only) and the
trusted parent. Candidate code can leave trees deeper than the recursion limit or than
``PATH_MAX``, directories without permissions, symlinks and special files. The walk below keeps
no recursion and no long paths: it holds one descriptor (the directory it is in), names
entries relative to it and climbs back through ``..``; a directory it cannot open is made
accessible and retried once.
Symlinks are removed, never followed. Whatever still cannot be removed is left in place and
reported through the return value, so a caller can decide the directory is unusable instead of
failing.

Folders the trusted side makes in ``/tmp`` (the stage, private bytecode, the fallback's work
root) are removed at exit, which a SIGKILLed process never reaches: their names carry
:func:`owner_tag` (who made them), and :func:`sweep_stale` removes, at the next start, those of
this user whose maker is dead.
"""

from __future__ import annotations

import contextlib
import os
import stat

__all__ = ["owner_tag", "remove_contents", "remove_tree", "sweep_stale"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _open_dir(parent: int, name: str) -> int | None:
    """Open the subdirectory ``name`` of ``parent`` (never through a symlink), fixing its mode once."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:
        with contextlib.suppress(OSError, NotImplementedError):
            os.chmod(name, stat.S_IRWXU, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return None
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError:
        return None


def _clear_files(fd: int) -> list[str]:
    """Unlink every non-directory in the open directory ``fd``; return its subdirectories."""
    subdirs: list[str] = []
    try:
        with os.scandir(fd) as it:
            entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
    except OSError:
        return subdirs
    for name, is_dir in entries:
        if is_dir:
            subdirs.append(name)
        else:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)
    return subdirs


def _empty(root: int) -> None:
    """Empty the open directory ``root`` depth first, holding one descriptor and no recursion.

    ``levels[k]`` lists the subdirectories still to visit ``k`` levels below ``root``;
    ``names`` is the way down from ``root`` to the current directory, which is left through
    ``..`` once it is empty. Every name is visited once, so the walk always ends.
    """
    current = os.dup(root)
    levels = [_clear_files(current)]
    names: list[str] = []
    try:
        while True:
            if levels[-1]:
                name = levels[-1].pop()
                child = _open_dir(current, name)
                if child is None:
                    continue
                os.close(current)
                current = child
                names.append(name)
                levels.append(_clear_files(current))
                continue
            if not names:
                return
            up = os.open("..", _DIR_FLAGS, dir_fd=current)
            os.close(current)
            current = up
            levels.pop()
            with contextlib.suppress(OSError):
                os.rmdir(names.pop(), dir_fd=current)
    finally:
        os.close(current)


def remove_contents(path: str) -> bool:
    """Delete everything under ``path`` (not ``path`` itself). True when it is empty after."""
    try:
        root = os.open(path, _DIR_FLAGS)
    except OSError:
        return not os.path.lexists(path)
    try:
        for _attempt in range(3):
            with contextlib.suppress(OSError, RecursionError, MemoryError):
                _empty(root)
            try:
                if not os.listdir(root):
                    return True
            except OSError:
                return False
        return False
    finally:
        os.close(root)


def remove_tree(path: str) -> bool:
    """Delete ``path`` and everything under it. True when it is gone."""
    try:
        if os.path.islink(path) or not os.path.isdir(path):
            os.unlink(path)
            return True
    except FileNotFoundError:
        return True
    except OSError:
        return False
    emptied = remove_contents(path)
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return emptied


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def owner_tag() -> str:
    """``<pid namespace>.<pid>`` of this process: put in a folder's name, it says who made it."""
    return f"{_pid_namespace()}.{os.getpid()}"


def _maker_dead(tag: str) -> bool:
    """Whether the process an :func:`owner_tag` names is gone (only in our own pid namespace:
    a pid of another namespace says nothing here)."""
    namespace, _, pid = tag.partition(".")
    if not (namespace.isdigit() and pid.isdigit()) or int(namespace) != _pid_namespace():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


def sweep_stale(parent: str, prefix: str) -> int:
    """Remove the folders ``<prefix><owner_tag>-*`` in ``parent`` that this user owns and whose
    maker is dead (a SIGKILLed caller's); return how many went. Never raises."""
    removed = 0
    try:
        with os.scandir(parent) as it:
            names = [e.name for e in it if e.name.startswith(prefix)]
    except OSError:
        return 0
    for name in names:
        tag = name[len(prefix):].partition("-")[0]
        path = os.path.join(parent, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if (stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and _maker_dead(tag)
                and remove_tree(path)):
            removed += 1
    return removed
