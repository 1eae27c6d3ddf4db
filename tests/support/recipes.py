"""The README's training recipes (examples/recipes/*.py), loaded as modules by the tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

RECIPES = Path(__file__).resolve().parent.parent.parent / "examples" / "recipes"


def recipe(name: str) -> Any:
    """examples/recipes/NAME.py, executed as a module of its own."""
    spec = importlib.util.spec_from_file_location(name, RECIPES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
