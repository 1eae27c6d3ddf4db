"""The Task record: what an environment poses and how it is checked.

A ``Task`` is plain data. Loaders map benchmarks into it; nothing downstream knows where a
task came from. A check is either a Python statement (usually an ``assert``) evaluated after
the candidate code, or a :class:`StdioCase` that feeds stdin to the candidate program and
compares what it prints.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from agentenv.choices import Difficulty, Equality, values
from agentenv.errors import ConfigError, TaskFormatError

__all__ = ["DIFFICULTIES", "EQUALITIES", "Check", "StdioCase", "Task", "check_from_dict", "check_to_dict",
           "decode_checks"]

DIFFICULTIES = values(Difficulty)
EQUALITIES = values(Equality)  # how checks compare values (see agentenv.grading.values)


@dataclass(frozen=True)
class StdioCase:
    """A program-level test: run the candidate as a script with ``stdin``, expect ``expected_stdout``."""

    stdin: str
    expected_stdout: str

    def to_dict(self) -> dict[str, str]:
        return {"stdin": self.stdin, "expected_stdout": self.expected_stdout}

    def __str__(self) -> str:  # how the case reads in feedback and failure records
        return f"stdin={_clip(self.stdin)!r} -> expected stdout {_clip(self.expected_stdout)!r}"


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


Check: TypeAlias = str | StdioCase


def check_to_dict(check: Check) -> str | dict[str, str]:
    """Encode a check as JSON-ready data: a string stays a string, a StdioCase becomes a dict."""
    return check.to_dict() if isinstance(check, StdioCase) else check


def decode_checks(value: Any) -> tuple[Check, ...] | None:
    """A row's ``checks`` value as a tuple of checks; ``None`` when the row has none.

    Accepts the JSON text :func:`agentenv.integrations.trl.to_records` writes, a list of strings /
    ``{"stdin", "expected_stdout"}`` dicts / :class:`StdioCase`, or a plain string of Python that
    is not a JSON list (taken as one check, e.g. a block of asserts).
    """
    if value is None:
        return None
    if isinstance(value, StdioCase):
        return (value,)
    if isinstance(value, str):
        stripped = value.strip()
        if not stripped:
            return None
        if stripped.startswith("["):
            try:
                decoded = json.loads(stripped)
            except ValueError:
                decoded = None
            if isinstance(decoded, list):
                value = decoded
            else:
                return (value,)
        else:
            return (value,)
    if not isinstance(value, Sequence):
        raise ConfigError(f"a row's checks must be a JSON list, a list of checks or a string of "
                          f"Python; got {type(value).__name__}")
    checks = tuple(c if isinstance(c, StdioCase) else check_from_dict(c) for c in value)
    return checks or None


def check_from_dict(data: Any, *, task: str | None = None, path: str | None = None,
                    field_name: str = "checks") -> Check:
    """Decode one check from JSON-shaped data (the inverse of :func:`check_to_dict`)."""
    if isinstance(data, str):
        return data
    if isinstance(data, Mapping) and set(data) >= {"stdin", "expected_stdout"}:
        stdin, out = data["stdin"], data["expected_stdout"]
        if isinstance(stdin, str) and isinstance(out, str):
            return StdioCase(stdin=stdin, expected_stdout=out)
    raise TaskFormatError(
        f"each check must be a string of Python or a table with string 'stdin' and "
        f"'expected_stdout'; got {data!r:.120}",
        path=path, task=task, field=field_name,
    )


@dataclass(frozen=True)
class Task:
    """One coding task.

    ``checks`` are hidden from the policy and decide the reward. ``visible_checks`` may be shown
    to the policy (as examples in the prompt and as feedback). ``setup_code`` runs after the
    candidate code and before the checks (MBPP's ``test_setup_code``). ``float_tolerance``, when
    set, lets float results match within that absolute/relative tolerance. ``equality`` is how
    checks compare values: ``"python"`` (Python's own ``==``, the default: ``1 == 1.0``, a
    Counter equals a dict with its items) or ``"strict"`` (same exact type all the way down).
    ``prelude`` runs before the candidate code in its namespace (a benchmark's implicit imports,
    as LiveCodeBench's grader prepends them). ``time_limit``, when set, is the task's own time
    limit in seconds (each stdin/stdout test's, as APPS/TACO and CodeContests state it; else the
    run's): graders use it where it is longer than the environment's timeout. ``metadata`` holds loader-specific extras
    (release date, original id, scripted attempts, ...).
    """

    name: str
    prompt: str
    entry_point: str
    checks: tuple[Check, ...]
    visible_checks: tuple[Check, ...] = ()
    reference_solution: str | None = None
    difficulty: str | None = None
    tags: tuple[str, ...] = ()
    source: str = "custom"
    setup_code: str = ""
    float_tolerance: float | None = None
    equality: str = "python"
    prelude: str = ""
    time_limit: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        # Accept lists from callers but store tuples, so a Task stays immutable.
        for name in ("checks", "visible_checks", "tags"):
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise TaskFormatError(f"must be a list, got {type(value).__name__}",
                                      task=self.name, field=name)
            object.__setattr__(self, name, tuple(value))
        self.validate()

    def validate(self, path: str | None = None) -> None:
        """Raise TaskFormatError naming the field when the task is not usable."""
        def bad(field_name: str, message: str) -> TaskFormatError:
            return TaskFormatError(message, path=path, task=self.name or None, field=field_name)

        for name in ("name", "prompt", "entry_point"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise bad(name, "must be a non-empty string")
        if not self.checks:
            raise bad("checks", "a task needs at least one hidden check")
        for name in ("checks", "visible_checks"):
            for check in getattr(self, name):
                if not isinstance(check, (str, StdioCase)):
                    raise bad(name, f"each check must be a string or StdioCase, got {check!r:.80}")
        if self.difficulty is not None and self.difficulty not in DIFFICULTIES:
            raise bad("difficulty", f"must be one of {', '.join(DIFFICULTIES)} (got {self.difficulty!r})")
        if self.reference_solution is not None and not isinstance(self.reference_solution, str):
            raise bad("reference_solution", "must be a string of Python source")
        if not isinstance(self.setup_code, str):
            raise bad("setup_code", "must be a string of Python source")
        if self.float_tolerance is not None and not (
            isinstance(self.float_tolerance, (int, float)) and self.float_tolerance >= 0
        ):
            raise bad("float_tolerance", "must be a non-negative number")
        if self.equality not in EQUALITIES:
            raise bad("equality", f"must be one of {', '.join(EQUALITIES)} (got {self.equality!r})")
        if not isinstance(self.prelude, str):
            raise bad("prelude", "must be a string of Python source")
        if self.time_limit is not None and not (
            isinstance(self.time_limit, (int, float)) and not isinstance(self.time_limit, bool)
            and 0 < self.time_limit <= 3600
        ):
            raise bad("time_limit", f"must be a number of seconds in (0, 3600] (got {self.time_limit!r:.40})")

    @property
    def is_stdio(self) -> bool:
        """True when every hidden check is a stdin/stdout case (a whole-program task)."""
        return all(isinstance(c, StdioCase) for c in self.checks)

    @property
    def prompt_hash(self) -> str:
        """A short stable hash of the prompt text, used to deduplicate tasks."""
        return hashlib.sha256(" ".join(self.prompt.split()).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """JSON-shaped form; :meth:`from_dict` inverts it."""
        return {
            "name": self.name,
            "prompt": self.prompt,
            "entry_point": self.entry_point,
            "checks": [check_to_dict(c) for c in self.checks],
            "visible_checks": [check_to_dict(c) for c in self.visible_checks],
            "reference_solution": self.reference_solution,
            "difficulty": self.difficulty,
            "tags": list(self.tags),
            "source": self.source,
            "setup_code": self.setup_code,
            "float_tolerance": self.float_tolerance,
            "equality": self.equality,
            "prelude": self.prelude,
            "time_limit": self.time_limit,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str | None = None) -> Task:
        """Build a Task from JSON-shaped data, with errors naming the file, task and field."""
        if not isinstance(data, Mapping):
            raise TaskFormatError(f"a task must be a JSON object / TOML table, got {type(data).__name__}",
                                  path=path)
        name = data.get("name")
        task_label = name if isinstance(name, str) else None
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(data) - known)
        if unknown:
            raise TaskFormatError(f"unknown field(s) {unknown}; known fields are {sorted(known)}",
                                  path=path, task=task_label, field=unknown[0])
        for required in ("name", "prompt", "entry_point", "checks"):
            if required not in data:
                raise TaskFormatError("is required", path=path, task=task_label, field=required)
        kwargs: dict[str, Any] = dict(data)
        for field_name in ("checks", "visible_checks"):
            raw = data.get(field_name, [])
            if not isinstance(raw, (list, tuple)):
                raise TaskFormatError("must be a list", path=path, task=task_label, field=field_name)
            kwargs[field_name] = tuple(
                check_from_dict(c, task=task_label, path=path, field_name=field_name) for c in raw
            )
        tags = data.get("tags", [])
        if not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) for t in tags):
            raise TaskFormatError("must be a list of strings", path=path, task=task_label, field="tags")
        kwargs["tags"] = tuple(tags)
        metadata = data.get("metadata", {})
        if not isinstance(metadata, Mapping):
            raise TaskFormatError("must be a table/object", path=path, task=task_label, field="metadata")
        kwargs["metadata"] = dict(metadata)
        for text_field in ("setup_code", "prelude"):
            if kwargs.get(text_field) is None:
                kwargs[text_field] = ""
        if kwargs.get("equality") is None:
            kwargs["equality"] = "python"
        try:
            return cls(**kwargs)
        except TaskFormatError as exc:
            if path is not None and exc.path is None:
                raise TaskFormatError(exc.detail, path=path, task=exc.task,
                                      field=exc.field) from None
            raise
