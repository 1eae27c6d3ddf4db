"""Folders a SIGKILLed caller left in /tmp (stage, private bytecode) are swept at the next
start; a live process's, another user's and untagged ones are left alone."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentenv.sandbox import _cleanup, _isolation


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _tag(pid: int) -> str:
    return f"{_cleanup.owner_tag().partition('.')[0]}.{pid}"


def test_sweep_removes_only_a_dead_makers_folders(tmp_path: Path) -> None:
    dead = tmp_path / f"agentenv-stage-{_tag(_dead_pid())}-abc"
    (dead / "deep" / "er").mkdir(parents=True)
    (dead / "deep" / "er" / "f.pyc").write_bytes(b"x")
    alive = tmp_path / f"agentenv-stage-{_cleanup.owner_tag()}-def"
    alive.mkdir()
    untagged = tmp_path / "agentenv-stage-xyz123"  # made before folders were tagged
    untagged.mkdir()
    other_ns = tmp_path / f"agentenv-stage-1.{_dead_pid()}-ghi"  # another pid namespace's
    other_ns.mkdir()
    assert _cleanup.sweep_stale(str(tmp_path), "agentenv-stage-") == 1
    assert not dead.exists()
    assert alive.is_dir() and untagged.is_dir() and other_ns.is_dir()


def test_a_sigkilled_callers_stage_and_bytecode_folders_go_at_the_next_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child makes its stage and bytecode folders and is SIGKILLed; the next process that
    makes its own removes the child's."""
    monkeypatch.setattr(_isolation, "STAGE_PARENT", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    script = textwrap.dedent(f"""
        import os, signal, tempfile
        tempfile.tempdir = {str(tmp_path)!r}
        from agentenv.sandbox import _isolation
        _isolation.STAGE_PARENT = {str(tmp_path)!r}
        _isolation.stage_dir()
        with _isolation._lock:
            _isolation._private_pyc_dir()
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, check=False)
    assert proc.returncode == -9
    left = sorted(p.name.split("-")[1] for p in tmp_path.iterdir())
    assert left == ["pyc", "stage"]

    monkeypatch.setattr(_isolation, "_stage", None)
    monkeypatch.setattr(_isolation, "_pyc_dir", None)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    mine = [_isolation.stage_dir()]
    with _isolation._lock:
        mine.append(_isolation._private_pyc_dir())
    assert sorted(str(p) for p in tmp_path.iterdir()) == sorted(mine)
    for path in mine:
        _cleanup.remove_tree(path)
