"""Shared pytest setup: every test starts with structlog unconfigured (the library's default)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _unconfigured_structlog() -> Iterator[None]:
    """A test that runs the CLI configures logging; undo it so later tests see the default."""
    yield
    structlog.reset_defaults()
