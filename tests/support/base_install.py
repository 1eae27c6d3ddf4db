"""The plain ``pip install -e .`` as a subprocess sees it, inside the dev environment.

:func:`extra_modules` lists the top-level modules of every installed distribution that the base
install would not have brought (gymnasium, matplotlib, ray, datasets, torch, pytest, ...): the
distributions reachable from agentenv's own requirements without extras are kept, the rest are
hidden. :func:`base_install_python` is a command that runs Python with those modules hidden
(an import of one raises ``ModuleNotFoundError``, as after the plain install), so an example or
the CLI can be run as a user of the README's first command runs it.
"""

from __future__ import annotations

import json
import os
import sys
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

__all__ = ["VENV_DISTRIBUTIONS", "base_distributions", "base_install_python", "extra_modules"]

# What ``python -m venv`` itself puts in a new environment, before any install.
VENV_DISTRIBUTIONS = frozenset({"pip", "setuptools"})


def installed_root() -> str:
    """The distribution that installed agentenv here: its published name, or the name an
    environment made before the rename still carries."""
    from agentenv.errors import DISTRIBUTION

    for name in (DISTRIBUTION, "agentenv"):
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        return name
    return DISTRIBUTION


def base_distributions(root: str | None = None) -> set[str]:
    """Canonical names of the distributions ``pip install root`` (no extras) installs."""
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    todo: list[tuple[str, frozenset[str]]] = [(root or installed_root(), frozenset())]
    while todo:
        name, extras = todo.pop()
        key = (canonicalize_name(name), extras)
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a requirement for another platform or Python
        names.add(canonicalize_name(name))
        for spec in dist.requires or []:
            requirement = Requirement(spec)
            environments = [{"extra": extra} for extra in extras or {""}]
            if requirement.marker is None or any(requirement.marker.evaluate(env) for env in environments):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return names


def extra_modules(root: str | None = None) -> list[str]:
    """Top-level modules installed here that only an extra (or the test tooling) brought."""
    base = base_distributions(root) | VENV_DISTRIBUTIONS
    return sorted(module for module, dists in metadata.packages_distributions().items()
                  if not any(canonicalize_name(d) in base for d in dists)
                  and module not in sys.stdlib_module_names)


_HIDE = """\
import importlib.abc, sys
_hidden = frozenset({hidden})
class _BaseInstallOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _hidden:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _BaseInstallOnly())
"""


def base_install_python(*args: str) -> list[str]:
    """``python ...`` with the extras' modules hidden: ``args`` is a script and its arguments,
    or ``-m module ...``."""
    hidden = json.dumps(extra_modules())
    if args[0] == "-m":
        start = f"import runpy; sys.argv = {list(args[1:])!r}; runpy.run_module({args[1]!r}, run_name='__main__', alter_sys=True)"
    else:
        script = os.path.abspath(args[0])
        start = (f"import runpy; sys.argv = {list(args)!r}; sys.path[0] = {os.path.dirname(script)!r}; "
                 f"runpy.run_path({script!r}, run_name='__main__')")
    return [sys.executable, "-c", _HIDE.format(hidden=hidden) + start]
