"""Where the packaged data folders (``prompts/``, ``tasks/``) live, installed or in a checkout.

A wheel carries them under ``agentenv/_data/``; an editable install or a source checkout
finds them at the repository root, next to the package.
"""

from __future__ import annotations

from pathlib import Path

from agentenv.errors import install_hint

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the directory of the packaged data folder ``name`` ("prompts" or "tasks")."""
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"agentenv's packaged {name!r} folder is missing (looked in {_PACKAGE_DIR / '_data'} "
        f"and {_PACKAGE_DIR.parent}); reinstall agentenv: {install_hint()}."
    )
