"""The README's statement of how long the tests take: measured figures with the command, not a
promise."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_states_measured_durations_and_the_command() -> None:
    section = README[README.index("The fast loop while developing"):]
    section = section[:section.index("\n\n", section.index("python -m pytest -q -m"))]
    assert 'python -m pytest -q -m "not slow"' in section
    assert "under a minute" not in section
    assert len(re.findall(r"\b\d+(?: to \d+)? minutes\b", section)) >= 2  # the fast loop and the whole suite
