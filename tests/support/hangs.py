"""The suite's one wall-clock guard, for the few tests whose whole point is that something does
not wait (an honest run right after an attack must not sit out a frozen worker's idle timeout).

No test asserts how fast anything is: these machines are shared and noisy, and pytest-timeout
(pyproject ``timeout``) already stops a test that hangs. :func:`prompt` only fails when a step
takes longer than ``STALL_SECONDS``, a bound far above any run's own limits (an honest run takes
milliseconds, the sandbox's longest give-up waits are ~10 s), so only a real stall, never a
loaded machine, crosses it. Latency itself is measured in ``benchmarks/``, not here.
:func:`honest_passes` is the red-team suites' shared control after an attack.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["HONEST", "HONEST_CHECKS", "STALL_SECONDS", "honest_passes", "prompt", "worker_waits"]

STALL_SECONDS = 30.0


@contextmanager
def prompt(what: str) -> Iterator[None]:
    """Fail if the body takes longer than ``STALL_SECONDS`` (a stall, not slowness)."""
    began = time.monotonic()
    yield
    took = time.monotonic() - began
    assert took < STALL_SECONDS, f"{what} stalled: {took:.1f} s (bound {STALL_SECONDS:.0f} s)"


@contextmanager
def worker_waits() -> Iterator[list[str]]:
    """The reasons the pool gave for every worker it found unhealthy in the body.

    This is the non-wall-clock sign that a submission waited: the pool only stalls between runs
    when a worker does not answer (it then waits ``IDLE_TIMEOUT`` and says "did not answer in
    time") or when a fallback zygote gave up its sweep (``SWEEP_BUDGET``) and the worker reports
    itself unhealthy. Either way the pool logs ``sandbox_worker_unhealthy`` and replaces the
    worker, so an empty list means no run in the body sat out either wait.
    """
    from structlog.testing import capture_logs

    reasons: list[str] = []
    with capture_logs() as events:
        yield reasons
    reasons += [str(e.get("reason")) for e in events if e.get("event") == "sandbox_worker_unhealthy"]


HONEST = "def f():\n    return 1\n"
HONEST_CHECKS = ["assert f() == 1", "for _ in (1,):\n    assert f() == 1"]  # plain and judged


def honest_passes(pool: Any, times: int = 2, replaced_for: str = "") -> None:
    """The honest control after an attack, plain and judged: exactly 1.0, not timed out, and no
    wait on the way (no worker left frozen past IDLE_TIMEOUT, no zygote that gave up its sweep:
    either makes the pool report the worker unhealthy, see :func:`worker_waits`). A worker
    replaced at once for the reason ``replaced_for`` names is no wait."""
    from agentenv.grading import run_tests

    with worker_waits() as waits:
        for _ in range(times):
            result = run_tests(HONEST, HONEST_CHECKS, timeout=1.0, pool=pool)
            assert (result.fraction, result.timed_out) == (1.0, False), result.failures
    assert [w for w in waits if not (replaced_for and replaced_for in w)] == [], waits
