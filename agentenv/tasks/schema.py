"""The Task record: what an environment poses and how it is checked.

A ``Task`` is plain data. Loaders map benchmarks into it; nothing downstream knows where a
task came from. A check is either a Python statement (usually an ``assert``) evaluated after
the candidate code, or a :class:`StdioCase` that feeds stdin to the candidate program and
compares what it prints.

A task is validated when it is made: every field, and every check (with the setup code and
the prelude) compiled, up to 64 KB of source (longer checks are generated test data), so a check that cannot run is an error at load naming the task, the
check and the line, not a failure charged to every policy. The error lists every problem of
the task (:attr:`agentenv.errors.TaskFormatError.problems`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from agentenv.choices import Difficulty, Equality, StdoutRule, parse, values
from agentenv.errors import ConfigError, TaskFormatError

__all__ = ["DIFFICULTIES", "EQUALITIES", "Check", "StdioCase", "Task", "check_from_dict", "check_to_dict",
           "decode_checks", "syntax_problem", "task_problems"]

DIFFICULTIES = values(Difficulty)
EQUALITIES = values(Equality)  # how checks compare values (see agentenv.grading.values)


@dataclass(frozen=True)
class StdioCase:
    """A program-level test: run the candidate as a script with ``stdin``, expect ``expected_stdout``.

    ``compare`` names how the output is compared (:class:`~agentenv.choices.StdoutRule`, see
    :mod:`agentenv.grading.stdout`): agentenv's ``tokens`` unless a loader sets its benchmark's."""

    stdin: str
    expected_stdout: str
    compare: str = StdoutRule.TOKENS

    def __post_init__(self) -> None:
        object.__setattr__(self, "compare", str(parse(StdoutRule, self.compare, "compare")))

    def to_dict(self) -> dict[str, str]:
        data = {"stdin": self.stdin, "expected_stdout": self.expected_stdout}
        if self.compare != StdoutRule.TOKENS:
            data["compare"] = self.compare
        return data

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
        compare = data.get("compare", StdoutRule.TOKENS)
        if isinstance(stdin, str) and isinstance(out, str) and compare in values(StdoutRule):
            return StdioCase(stdin=stdin, expected_stdout=out, compare=compare)
    raise TaskFormatError(
        f"each check must be a string of Python or a table with string 'stdin' and "
        f"'expected_stdout' (and optionally 'compare', one of {', '.join(values(StdoutRule))}); "
        f"got {data!r:.120}",
        path=path, task=task, field=field_name,
    )


# Checks longer than this are generated test data (a benchmark's inputs as literals, which a
# loader writes from parsed values): compiling a megabyte of literals costs a second, so they
# are left to the sandbox, which reports one that does not compile at run time.
COMPILE_AT_LOAD_LIMIT = 64 * 1024


@functools.lru_cache(maxsize=8192)  # a replaced or reloaded task compiles its checks once
def syntax_problem(source: str) -> str | None:
    """Why ``source`` does not compile as Python (with the line and the offending text), or
    None when it does (or is longer than COMPILE_AT_LOAD_LIMIT characters). Compiled as the
    sandbox compiles a check."""
    if len(source) > COMPILE_AT_LOAD_LIMIT:
        return None
    try:
        with warnings.catch_warnings():  # SyntaxWarnings are the sandbox's to show, not the loader's
            warnings.simplefilter("ignore")
            compile(source, "<check>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"line {exc.lineno}" if exc.lineno else "?"
        lines = source.splitlines()
        text = lines[exc.lineno - 1].strip() if exc.lineno and 0 < exc.lineno <= len(lines) else ""
        return f"{exc.msg} ({where}" + (f": {_clip(text, 120)})" if text else ")")
    except ValueError as exc:  # a NUL byte (a SyntaxError only from Python 3.12 on)
        return str(exc)
    except (RecursionError, MemoryError):  # too deeply nested to compile here: the sandbox decides
        return None
    return None


def task_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every problem of a task's field values, as ``(field, message)`` pairs ([] when usable).

    Only the fields present in ``values`` are judged, so a loader can ask about what it read.
    """
    problems: list[tuple[str, str]] = []
    for name in ("name", "prompt", "entry_point"):
        if name in values:
            value = values[name]
            if not isinstance(value, str) or not value.strip():
                problems.append((name, "must be a non-empty string"))
    if "checks" in values and not values["checks"]:
        problems.append(("checks", "a task needs at least one hidden check"))
    for name in ("checks", "visible_checks"):
        for i, check in enumerate(values.get(name) or ()):
            if not isinstance(check, (str, StdioCase)):
                problems.append((name, f"each check must be a string or StdioCase, got {check!r:.80}"))
            elif isinstance(check, str):
                why = syntax_problem(check)
                if why is not None:
                    problems.append((name, f"{name}[{i}] does not compile: {why}"))
    difficulty = values.get("difficulty")
    if difficulty is not None and difficulty not in DIFFICULTIES:
        problems.append(("difficulty", f"must be one of {', '.join(DIFFICULTIES)} (got {difficulty!r})"))
    reference = values.get("reference_solution")
    if reference is not None and not isinstance(reference, str):
        problems.append(("reference_solution", "must be a string of Python source"))
    for name in ("setup_code", "prelude"):
        if name in values:
            code = values[name]
            if not isinstance(code, str):
                problems.append((name, "must be a string of Python source"))
            elif code.strip():
                why = syntax_problem(code)
                if why is not None:
                    problems.append((name, f"does not compile: {why}"))
    tolerance = values.get("float_tolerance")
    if tolerance is not None and not (isinstance(tolerance, (int, float)) and tolerance >= 0):
        problems.append(("float_tolerance", "must be a non-negative number"))
    if "equality" in values and values["equality"] not in EQUALITIES:
        problems.append(("equality", f"must be one of {', '.join(EQUALITIES)} (got {values['equality']!r})"))
    limit = values.get("time_limit")
    if limit is not None and not (
            isinstance(limit, (int, float)) and not isinstance(limit, bool) and 0 < limit <= 3600):
        problems.append(("time_limit", f"must be a number of seconds in (0, 3600] (got {limit!r:.40})"))
    return problems


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
    run's): graders use it where it is longer than the environment's timeout. ``metadata``
    holds loader-specific extras (release date, original id, scripted attempts, ...).
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
        """Raise TaskFormatError naming the field when the task is not usable (every problem
        found is listed in it, see :func:`task_problems`)."""
        problems = task_problems({name: getattr(self, name) for name in self.__dataclass_fields__})
        if problems:
            field_name, message = problems[0]
            raise TaskFormatError(message, path=path, task=self.name or None, field=field_name,
                                  problems=list(problems))

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
        # Every problem of the record at once: what is structurally wrong, then what the
        # values that could be read say (checks that do not compile, a bad difficulty, ...).
        problems: list[tuple[str | None, str]] = []
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(data) - known)
        if unknown:
            problems.append((unknown[0], f"unknown field(s) {unknown}; known fields are {sorted(known)}"))
        for required in ("name", "prompt", "entry_point", "checks"):
            if required not in data:
                problems.append((required, "is required"))
        kwargs: dict[str, Any] = {k: v for k, v in data.items() if k in known}
        for field_name in ("checks", "visible_checks"):
            raw = data.get(field_name, [])
            if not isinstance(raw, (list, tuple)):
                problems.append((field_name, "must be a list"))
                kwargs.pop(field_name, None)
                continue
            checks = []
            for c in raw:
                try:
                    checks.append(check_from_dict(c, task=task_label, path=path, field_name=field_name))
                except TaskFormatError as exc:
                    problems.append((field_name, exc.detail))
            kwargs[field_name] = tuple(checks)
        tags = data.get("tags", [])
        if not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) for t in tags):
            problems.append(("tags", "must be a list of strings"))
            tags = ()
        kwargs["tags"] = tuple(tags)
        metadata = data.get("metadata", {})
        if not isinstance(metadata, Mapping):
            problems.append(("metadata", "must be a table/object"))
            metadata = {}
        kwargs["metadata"] = dict(metadata)
        for text_field in ("setup_code", "prelude"):
            if kwargs.get(text_field) is None:
                kwargs[text_field] = ""
        if kwargs.get("equality") is None:
            kwargs["equality"] = "python"
        if problems:  # the object cannot be made: judge what was read too, and report it all
            if not kwargs.get("checks") and data.get("checks"):
                kwargs.pop("checks", None)  # no check could be read: said above
            problems += task_problems(kwargs)
            raise TaskFormatError(problems[0][1], path=path, task=task_label, problems=problems)
        try:
            return cls(**kwargs)
        except TaskFormatError as exc:
            if path is not None and exc.path is None:
                raise exc.located(path=path) from None
            raise
