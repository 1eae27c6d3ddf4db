"""Resource limits and the scrubbed environment every sandboxed process gets.

``Limits`` is the value the caller tunes (address space, CPU seconds, processes, file size, open
files, memory and disk of the whole run, output caps) and which of them must be enforced for
the run as a whole (``require``); :func:`scrubbed_env` builds an environment from a short
allowlist minus anything whose name looks like a secret.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

__all__ = ["DEFAULT_LIMITS", "ENFORCEABLE", "SECRET_NAME", "Limits", "scrubbed_env"]

# What RunResult.limits_enforced reports on, and what Limits.require may name.
ENFORCEABLE = ("processes", "memory", "cpu", "cpu_time", "wall", "disk")

# Variable names that carry credentials: *KEY*, *TOKEN*, *SECRET*, *PASSWORD*, *CREDENTIAL*, ...
SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|CERT|SIGNATURE|DSN",
    re.IGNORECASE,
)

# The only variables a child may inherit at the fallback level (strict runs get none).
_ALLOWED = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH")


@dataclass(frozen=True)
class Limits:
    """Per-run resource limits. ``None`` leaves a limit as the OS has it.

    A run's ``timeout`` is judged on the CPU time all its processes used, so a verdict does not
    depend on how loaded the machine is; a run that has used less than that may still take up to
    ``wall_factor * timeout + wall_slack`` seconds of wall-clock time before it is stopped (a
    sleeping or blocked candidate is a timeout all the same). Time the run spent runnable but
    waiting for a core (other runs, other load on the machine) does not count toward that
    backstop, up to ``starved_factor`` times it in all: a sample starved by a batch of loops
    keeps its verdict, it only comes later. ``cpu_seconds`` is the per-process
    RLIMIT_CPU backstop, by default the timeout rounded up plus one second.
    ``address_space``, ``cpu_seconds``, ``file_size`` and ``open_files`` hold per process;
    ``processes`` (processes and threads), ``memory`` (resident memory of all the run's
    processes plus its files in ``/tmp`` and ``/dev/shm``) and ``disk`` (the run's tmpfs) hold
    for the run as a whole where the machine allows it (cgroups, per-run namespaces).
    A run of stdio tests times each program alone, as benchmark judges do: each gets the
    timeout (CPU, and the wall backstop above), and the whole run gets the timeout once per
    test, at most ``max_run_seconds``; each may print ``max_test_output`` bytes.
    ``require`` names limits from :data:`ENFORCEABLE` that must hold for the whole run: a run
    that cannot guarantee one raises ``IsolationUnavailable`` instead of running with less.
    """

    address_space: int | None = 2 * 1024**3
    cpu_seconds: int | None = None
    processes: int | None = 64
    file_size: int | None = 32 * 1024**2
    open_files: int | None = 256
    max_output: int = 64 * 1024  # bytes of stdout and of stderr kept in the RunResult
    max_result_bytes: int = 16 * 1024**2  # bytes read from the result channel
    memory: int | None = 1024**3
    disk: int = 256 * 1024**2
    wall_factor: float = 1.5
    wall_slack: float = 0.5
    starved_factor: float = 8.0
    max_run_seconds: float = 60.0  # a run whose stdio tests are timed alone takes at most this
    max_test_output: int = 32 * 1024**2  # bytes of stdout one stdio test may print
    require: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [name for name in self.require if name not in ENFORCEABLE]
        if unknown:
            raise ValueError(f"Limits.require names unknown limits {unknown}; choose from {ENFORCEABLE}")
        if self.disk < 1024**2:
            raise ValueError(f"Limits.disk must be at least 1 MiB, got {self.disk}")
        if not (self.wall_factor >= 1 and self.wall_slack >= 0):
            raise ValueError("Limits.wall_factor must be at least 1 and wall_slack at least 0, got "
                             f"{self.wall_factor} and {self.wall_slack}")
        if not self.starved_factor >= 1:
            raise ValueError(f"Limits.starved_factor must be at least 1 (1: waiting for a core "
                             f"counts as wall time), got {self.starved_factor}")

    def wall_seconds(self, timeout: float) -> float:
        """The wall-clock backstop of a run whose CPU-time limit is ``timeout``."""
        return timeout * self.wall_factor + self.wall_slack

    def wall_cap_seconds(self, timeout: float) -> float:
        """The latest the backstop moves to when the run waits for a core (``starved_factor``)."""
        return self.wall_seconds(timeout) * self.starved_factor

    def for_child(self, timeout: float, *, nproc: bool) -> dict[str, Any]:
        """The ``limits`` entry of a job (what the child applies before running anything)."""
        cpu = self.cpu_seconds if self.cpu_seconds is not None else math.ceil(timeout) + 1
        return {
            "as": self.address_space, "cpu": cpu, "fsize": self.file_size,
            "nofile": self.open_files, "nproc": self.processes if nproc else None, "core": 0,
        }

    def for_tests(self, timeout: float) -> dict[str, float]:
        """The ``test_limit`` entry of a job: what each stdio test may use, timed alone."""
        return {"cpu": timeout, "wall": timeout * self.wall_factor + self.wall_slack,
                "starved": self.starved_factor, "out": self.max_test_output}

    def for_stdio(self, tests: int) -> Limits:
        """These limits with a result channel wide enough for ``tests`` programs' output (each
        up to ``max_test_output``; room for eight such at most, the rest within the cap)."""
        room = min(tests, 8) * (self.max_test_output + 64 * 1024)
        return replace(self, max_result_bytes=max(self.max_result_bytes, room))

    def run_seconds(self, timeout: float, stdio_tests: int) -> float:
        """The whole run's time limit when each of ``stdio_tests`` programs gets ``timeout``."""
        if stdio_tests <= 1:
            return timeout
        # So that the run's wall backstop covers every test's: n * (t * f + s) <= T * f + s.
        per_test = timeout + self.wall_slack / self.wall_factor
        return max(timeout, min(per_test * stdio_tests, self.max_run_seconds))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


DEFAULT_LIMITS = Limits()


def scrubbed_env(workdir: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A minimal environment: an allowlist of harmless variables, never one that names a secret."""
    source = os.environ if environ is None else environ
    env = {k: source[k] for k in _ALLOWED if k in source and not SECRET_NAME.search(k)}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    env["HOME"] = workdir
    env["TMPDIR"] = workdir
    env["PYTHONIOENCODING"] = "utf-8"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env
