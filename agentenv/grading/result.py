"""The result records of grading: ``RunResult`` and one ``Failure`` per failed check.

These are the only things grading hands back for candidate code (:func:`agentenv.grading.run_tests`). Whatever the code does
(wrong answers, crashes, hangs, hostile tricks) ends up as data here, never as an exception.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["FAILURE_KINDS", "Failure", "FailureKind", "RunResult"]

FailureKind = Literal["assertion", "exception", "timeout", "syntax", "no_result"]
FAILURE_KINDS: tuple[str, ...] = ("assertion", "exception", "timeout", "syntax", "no_result")


@dataclass(frozen=True)
class Failure:
    """One failed check: its index in the check list, its text, what kind of failure, a short message.

    kinds: ``assertion`` (ran, wrong value or wrong output), ``exception`` (raised while
    running), ``timeout`` (the run hit its time limit before this check finished), ``syntax``
    (the candidate code or the check does not compile), ``no_result`` (the check never
    reported: the process died, exited early, or was killed).
    """

    index: int
    check: str
    kind: FailureKind
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "check": self.check, "kind": self.kind, "message": self.message}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Failure:
        return cls(index=int(data["index"]), check=str(data["check"]), kind=data["kind"],
                   message=str(data["message"]))


@dataclass(frozen=True)
class RunResult:
    """What running candidate code against a list of checks produced.

    ``passed``/``total``/``fraction`` count checks; ``fraction == passed / total`` (0.0 when
    there are no checks). ``timed_out`` is True when the wall-clock limit killed the run.
    ``isolation`` names the isolation level that ran (an :class:`agentenv.choices.IsolationLevel`
    value: "strict" or "rlimits"; "none" for a result made without a run, e.g. no code).
    ``graded_in_child`` counts checks whose verdict came from the candidate's own process: always
    0 now that checks the trusted side cannot decompose go to a judge process (kept for records
    written before that).
    ``stdout``/``stderr`` are the candidate's captured output, capped in size; they are never
    parsed for verdicts. ``limits_enforced`` pairs each run-wide limit (processes, memory,
    cpu, wall, disk) with what enforced it ("cgroup", "rlimit", "tmpfs", ...; "per-process"
    where only a per-process rlimit held); :attr:`enforced` gives it as a dict.
    """

    passed: int
    total: int
    fraction: float
    timed_out: bool
    failures: tuple[Failure, ...] = ()
    isolation: str = "none"
    graded_in_child: int = 0
    exec_seconds: float = 0.0
    stdout: str = ""
    stderr: str = ""
    passed_indices: tuple[int, ...] = field(default=())
    limits_enforced: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not (0 <= self.passed <= self.total):
            raise ValueError(f"RunResult needs 0 <= passed <= total, got {self.passed}/{self.total}")
        if not math.isfinite(self.fraction):
            raise ValueError("RunResult.fraction must be finite")

    @classmethod
    def from_counts(cls, passed: int, total: int, **kwargs: Any) -> RunResult:
        """Build a result whose fraction is computed from the counts."""
        fraction = passed / total if total else 0.0
        return cls(passed=passed, total=total, fraction=fraction, **kwargs)

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total

    @property
    def enforced(self) -> dict[str, str]:
        """``limits_enforced`` as a dict: limit name -> what enforced it."""
        return dict(self.limits_enforced)

    @property
    def failed_indices(self) -> tuple[int, ...]:
        return tuple(f.index for f in self.failures)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "total": self.total,
            "fraction": self.fraction,
            "timed_out": self.timed_out,
            "failures": [f.to_dict() for f in self.failures],
            "isolation": self.isolation,
            "graded_in_child": self.graded_in_child,
            "exec_seconds": self.exec_seconds,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "passed_indices": list(self.passed_indices),
            "limits_enforced": dict(self.limits_enforced),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResult:
        return cls(
            passed=int(data["passed"]), total=int(data["total"]), fraction=float(data["fraction"]),
            timed_out=bool(data["timed_out"]),
            failures=tuple(Failure.from_dict(f) for f in data.get("failures", ())),
            isolation=str(data.get("isolation", "none")),
            graded_in_child=int(data.get("graded_in_child", 0)),
            exec_seconds=float(data.get("exec_seconds", 0.0)),
            stdout=str(data.get("stdout", "")), stderr=str(data.get("stderr", "")),
            passed_indices=tuple(int(i) for i in data.get("passed_indices", ())),
            limits_enforced=tuple((str(k), str(v))
                                  for k, v in dict(data.get("limits_enforced", {})).items()),
        )
