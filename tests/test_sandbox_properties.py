"""Property tests: whatever the code, run_tests returns a finite, consistent result (a hang is pytest-timeout's to catch)."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from strategies import arbitrary_code, candidate_programs

from agentenv.errors import IsolationUnavailable
from agentenv.grading import RunResult, run_tests
from agentenv.sandbox import SandboxPool
from agentenv.sandbox.testing import leftover_processes

TIMEOUT = 0.5
CHECKS = ["assert add(2, 3) == 5", "assert add(-1, 1) == 0",
          "for i in range(3):\n    assert add(i, i) == 2 * i"]


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    """The strict pool when bubblewrap works here, else the fallback (both must hold the properties)."""
    try:
        made = SandboxPool(size=2, isolation="strict")
    except IsolationUnavailable:  # pragma: no cover - CI installs bubblewrap
        if os.environ.get("AGENTENV_REQUIRE_STRICT"):
            raise
        made = SandboxPool(size=2, isolation="rlimits")
    yield made
    made.close()


def assert_well_formed(result: RunResult, total: int, pool: SandboxPool) -> None:
    """A consistent result and nothing left behind (a run that never ends is pytest-timeout's)."""
    assert result.total == total
    assert 0 <= result.passed <= result.total
    assert math.isfinite(result.fraction)
    assert result.fraction == (result.passed / result.total if result.total else 0.0)
    assert len(result.failures) == result.total - result.passed
    indices = [f.index for f in result.failures] + list(result.passed_indices)
    assert sorted(indices) == list(range(total))
    assert leftover_processes(pool) == []


_settings = settings(max_examples=25, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow])


@_settings
@given(code=candidate_programs())
@example(code="def add(a, b):\n    while True:\n        pass\n")
@example(code="import time\ntime.sleep(10)\n")
@example(code="def add(a, b):\n    return add(a, b)\n")
@example(code="import os\nos._exit(0)\n")
@example(code="import sys\nprint('x' * 10 ** 6)\nsys.exit(3)\n")
@example(code="def add(a, b):\n    raise MemoryError\n")
def test_generated_programs_always_give_a_finite_consistent_result(pool: SandboxPool, code: str) -> None:
    """Loops, sleeps, exceptions, exits, recursion and prints all end as bounded, valid results."""
    result = run_tests(code, CHECKS, timeout=TIMEOUT, pool=pool)
    assert_well_formed(result, len(CHECKS), pool)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(code=arbitrary_code(), checks=st.lists(arbitrary_code(), max_size=3))
def test_arbitrary_text_as_code_and_checks_never_breaks_the_sandbox(
        pool: SandboxPool, code: str, checks: list[str]) -> None:
    """Any text at all, as code or as checks, is scored (usually 0) without raising or hanging."""
    result = run_tests(code, checks, timeout=TIMEOUT, pool=pool)
    assert_well_formed(result, len(checks), pool)
