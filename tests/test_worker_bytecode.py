"""Workers start from bytecode: the sandbox files' .pyc are bound in next to them, never stale."""

from __future__ import annotations

import importlib.util
import os
import py_compile
import shutil
from pathlib import Path

from support.attacks import strict_pool

from agentenv.grading import run_tests
from agentenv.sandbox import _isolation


def test_a_pyc_is_current_only_for_the_source_as_it_is_now(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text("X = 1\n")
    pyc = str(tmp_path / "mod.pyc")
    py_compile.compile(str(source), cfile=pyc, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    assert _isolation._current(pyc, str(source))
    stat = source.stat()
    source.write_text("X = 22\n")  # another size
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert not _isolation._current(pyc, str(source))
    source.write_text("X = 1\n")
    os.utime(source, (stat.st_atime + 10, stat.st_mtime + 10))  # same size, another mtime
    assert not _isolation._current(pyc, str(source))
    broken = tmp_path / "broken.pyc"
    broken.write_bytes(b"\0" * 16)
    assert not _isolation._current(str(broken), str(source))
    assert not _isolation._current(str(tmp_path / "missing.pyc"), str(source))


def test_every_sandbox_file_has_current_bytecode_bound_where_python_looks() -> None:
    pycs = _isolation.compiled_sandbox_files()
    assert sorted(pycs) == sorted(_isolation.SANDBOX_FILES)
    for name, pyc in pycs.items():
        assert _isolation._current(pyc, str(_isolation.SANDBOX_DIR / name))
    argv = _isolation.bwrap_command(shutil.which("bwrap") or "/usr/bin/bwrap", "{}")
    binds = {argv[i + 2]: argv[i + 1] for i, arg in enumerate(argv[:-2]) if arg == "--ro-bind"}
    for name, pyc in pycs.items():
        assert binds[importlib.util.cache_from_source(f"{_isolation.INSIDE_DIR}/{name}")] == pyc
    # The worker runs _worker as an imported module (a __main__ script is always compiled).
    assert "import _worker" in " ".join(argv[argv.index("--") + 1:])


def test_a_strict_worker_runs_with_its_bytecode_bound() -> None:
    with strict_pool(1, "bytecode bound into the sandbox") as pool:
        code = ("import os\n"
                "def f():\n"
                "    return sorted(os.listdir('/opt/agentenv/__pycache__'))\n")
        expected = sorted(os.path.basename(importlib.util.cache_from_source(name))
                          for name in _isolation.SANDBOX_FILES)
        result = run_tests(code, [f"assert f() == {expected!r}"], pool=pool)
        assert result.fraction == 1.0, result.failures
