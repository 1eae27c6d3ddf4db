"""agentenv.settings is the one module that reads the process environment."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import agentenv
from agentenv import settings
from agentenv.sandbox._isolation import SANDBOX_FILES

PACKAGE = Path(agentenv.__file__).parent
# The sandbox's own files that run inside it (standard library only, loaded by path) set up the
# candidate's environment; _limits copies an allowlist of harmless variables for the fallback's
# candidates and grading/redact scans values for secrets. None of them reads configuration.
KNOWN_EXCEPTIONS = (*(f"sandbox/{name}" for name in SANDBOX_FILES),
                    "sandbox/_launch.py", "sandbox/_limits.py", "grading/redact.py")
_READERS = {"environ", "environb", "getenv", "getenvb", "getproxies_environment", "putenv", "unsetenv"}


def _environment_reads(path: Path, label: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Attribute) and node.attr in _READERS:
            found.append(f"{label}:{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "urllib.request"):
            found += [f"{label}:{node.lineno}: from {node.module} import {a.name}"
                      for a in node.names if a.name in _READERS]
    return found


def test_only_settings_reads_the_environment() -> None:
    reads = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "settings.py" or rel.startswith(KNOWN_EXCEPTIONS):
            continue
        reads += _environment_reads(path, rel)
    assert reads == [], "read the environment through agentenv.settings: " + "; ".join(reads)


def test_the_check_sees_a_read(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("import os\nfrom os import getenv\nx = os.environ.get('A')\ny = os.getenv('B')\n")
    assert sorted(r.split(": ", 1)[1] for r in _environment_reads(sample, "m.py")) == [
        ".environ", ".getenv", "from os import getenv"]


@pytest.mark.parametrize(("value", "expected"), [(None, False), ("", False), ("0", False), ("1", True),
                                                 ("yes", True)])
def test_offline(monkeypatch: pytest.MonkeyPatch, value: str | None, expected: bool) -> None:
    if value is None:
        monkeypatch.delenv(settings.OFFLINE_VAR, raising=False)
    else:
        monkeypatch.setenv(settings.OFFLINE_VAR, value)
    assert settings.offline() is expected


def test_reads_happen_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTENV_MBPP_PATH", "/data/mbpp.jsonl")
    assert settings.dataset_path(settings.DATASET_PATH_VARS["mbpp"]) == "/data/mbpp.jsonl"
    monkeypatch.setenv("AGENTENV_MBPP_PATH", "")
    assert settings.dataset_path("AGENTENV_MBPP_PATH") is None
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "TRUE")
    assert settings.hub_offline()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    assert settings.tiktoken_cache_dir() == ""
