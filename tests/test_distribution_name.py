"""The distribution is published as ``agentenv-coding`` (the index's ``agentenv`` is an unrelated
project), imported as ``agentenv``; every install line the library prints names it, and the
form that works in a clone."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from agentenv.errors import DISTRIBUTION, MissingDependency, install_hint

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_distribution_name_is_ours_and_the_import_name_and_command_stay() -> None:
    assert PROJECT["name"] == DISTRIBUTION == "agentenv-coding"
    assert PROJECT["scripts"] == {"agentenv": "agentenv.cli:main"}
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    assert "agentenv" in packages


def test_extras_that_include_other_extras_name_this_distribution() -> None:
    """A self-reference such as "agentenv[hf]" would pull the index's unrelated project."""
    for extra, requirements in PROJECT["optional-dependencies"].items():
        for requirement in requirements:
            name = re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0]
            assert name != "agentenv", f"extra {extra!r}: {requirement!r}"


def test_the_install_hint_works_published_and_from_a_clone() -> None:
    assert install_hint("gym") == ('pip install "agentenv-coding[gym]", or pip install -e ".[gym]" '
                                   "in a clone of the repository")
    assert install_hint().startswith('pip install "agentenv-coding", or pip install -e "."')


def test_a_missing_extra_names_the_install_line() -> None:
    error = MissingDependency.for_extra("gymnasium", "gym", "agentenv.gym")
    assert 'pip install "agentenv-coding[gym]"' in str(error) and 'pip install -e ".[gym]"' in str(error)


@pytest.mark.parametrize("path", sorted(p for p in (ROOT / "agentenv").rglob("*.py")), ids=lambda p: p.name)
def test_no_message_of_the_library_installs_someone_elses_agentenv(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"""pip install ["']?agentenv(\[|["'\s`)]|$)""", text, re.MULTILINE), path
