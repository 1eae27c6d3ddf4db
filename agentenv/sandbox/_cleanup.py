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
"""

from __future__ import annotations

import contextlib
import os
import stat

__all__ = ["remove_contents", "remove_tree"]

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
