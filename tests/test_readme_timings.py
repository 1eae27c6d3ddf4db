"""The README's statement of how long the tests take: figures, not a promise. The test counts it
gives for the fast loop and the slow tests stay within a fifth of what pytest collects, so the
durations measured with them keep describing the suite as it grows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _number(pattern: str) -> int:
    found = re.search(pattern, README)
    assert found, f"the README states no figure matching {pattern!r}"
    return int(found.group(1).replace(",", ""))


def test_the_readme_states_measured_durations_and_the_command() -> None:
    section = README[README.index("The fast loop while developing"):]
    section = section[:section.index("\n\n", section.index("python -m pytest -q -m"))]
    assert 'python -m pytest -q -m "not slow"' in section
    assert "under a minute" not in section
    assert len(re.findall(r"\b\d+(?: to \d+)? minutes\b", section)) >= 2  # the fast loop and the whole suite


def test_the_readme_test_counts_match_the_collected_suite() -> None:
    fast, slow = _number(r"Its ([\d,]+) tests"), _number(r"adds the ([\d,]+) slow tests")
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-m", "not slow"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    counts = re.search(r"(\d+)/(\d+) tests collected \((\d+) deselected\)", done.stdout)
    assert counts, done.stdout[-2000:]
    collected_fast, collected_slow = int(counts.group(1)), int(counts.group(3))
    assert abs(fast - collected_fast) <= collected_fast / 5, (fast, collected_fast)
    assert abs(slow - collected_slow) <= collected_slow / 5, (slow, collected_slow)
