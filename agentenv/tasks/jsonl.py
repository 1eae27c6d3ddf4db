"""Generic loader: task records from JSON Lines / JSON / Parquet files or a Hub dataset.

Two kinds of input:

- **agentenv task records**, one per line, exactly what :meth:`Task.to_dict` writes. This is
  what ``load_tasks("some/file.jsonl")`` reads when no mapping is given.
- **any dataset with a field mapping** from Task fields to the record's fields, as a dict
  (``map={"prompt": "question", "checks": "tests"}``) or in the command-line form
  (``"prompt=question,checks=tests"``). Task fields not mapped are read from a record field of
  the same name when there is one. A source may be a dotted path (``"meta.id"``, ``"tests.0"``);
  a target ``metadata.KEY`` stores the value in ``Task.metadata`` (``metadata.release_date``
  makes ``since=`` filters work).

How mapped values become a Task: checks may be a list of Python statements, a list of
``{stdin, expected_stdout}`` (or ``{input, output}``) objects, a JSON string holding such a
list, an ``{inputs, outputs}`` object of stdin/stdout pairs, or a string of Python test code
(each top-level ``assert`` becomes one check and the other statements become ``setup_code``; a
HumanEval-style ``def check(candidate)`` becomes the one check ``check(<entry_point>)``).
``entry_point``, when not mapped, is inferred from the checks (:func:`infer_entry_point`);
programs checked only through stdin/stdout get :data:`STDIO_ENTRY_POINT`. Difficulty labels
go through :func:`agentenv.tasks.filters.normalize_difficulty`.

Benchmark files given without a mapping are recognised by their first record and handed to
their loader (:func:`sniff_layout`): ``load_tasks("mbpp.jsonl")`` is MBPP, and so on.

Hub datasets: ``load(dataset="owner/name", split="test", map=...)`` (the ``hf`` extra).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentenv.choices import StdoutRule, values
from agentenv.errors import ConfigError, DatasetUnavailable, TaskFormatError
from agentenv.tasks.filters import normalize_difficulty
from agentenv.tasks.hub import Row, load_hub_rows, local_copy_hint, read_rows
from agentenv.tasks.schema import Check, StdioCase, Task

__all__ = [
    "STDIO_ENTRY_POINT",
    "TASK_FIELDS",
    "coerce_checks",
    "infer_entry_point",
    "join_lines",
    "load",
    "parse_mapping",
    "parse_tags",
    "sniff_layout",
    "split_test_code",
    "tasks_from_rows",
]

# The entry point of a task checked only through stdin/stdout: the program itself.
STDIO_ENTRY_POINT = "__main__"
TASK_FIELDS: tuple[str, ...] = tuple(Task.__dataclass_fields__)
_RECORD_KEYS = {"name", "prompt", "entry_point", "checks"}
_ID_FIELDS = ("name", "task_id", "id", "problem_id", "question_id")
_BUILTIN_NAMES = frozenset(dir(builtins))


# ---------------------------------------------------------------- field mapping


def parse_mapping(spec: str | Mapping[str, str] | None) -> dict[str, str]:
    """Parse a field mapping (``"prompt=question,checks=tests"`` or a dict) and check its targets."""
    if spec is None:
        return {}
    if isinstance(spec, str):
        mapping: dict[str, str] = {}
        for part in spec.split(","):
            if not part.strip():
                continue
            target, sep, source = part.partition("=")
            if not sep or not target.strip() or not source.strip():
                raise ConfigError(f"bad mapping entry {part.strip()!r}; write TASK_FIELD=RECORD_FIELD "
                                  f"pairs separated by commas, e.g. 'prompt=question,checks=tests'")
            mapping[target.strip()] = source.strip()
    elif isinstance(spec, Mapping):
        mapping = {str(k): str(v) for k, v in spec.items()}
    else:
        raise ConfigError(f"map must be a dict or a 'field=source,...' string, got {type(spec).__name__}")
    for target in mapping:
        if target not in TASK_FIELDS and not (target.startswith("metadata.") and len(target) > 9):
            raise ConfigError(f"cannot map onto {target!r}: targets are the Task fields "
                              f"({', '.join(TASK_FIELDS)}) or metadata.KEY")
    return mapping


_MISSING = object()


def _lookup(record: Mapping[str, Any], source: str) -> Any:
    """The value at a dotted path (dict keys and list indices), or _MISSING."""
    if source in record:
        return record[source]
    value: Any = record
    for part in source.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, (list, tuple)) and part.lstrip("-").isdigit() \
                and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


# ---------------------------------------------------------------- checks


def split_test_code(source: str) -> tuple[list[str], str]:
    """Split Python test code into checks (its top-level asserts) and setup (everything else).

    Raises SyntaxError when the code does not parse.
    """
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    checks: list[str] = []
    setup: list[str] = []
    for node in tree.body:
        start = node.lineno - 1
        if getattr(node, "decorator_list", None):
            start = min(d.lineno for d in node.decorator_list) - 1  # type: ignore[attr-defined]
        end = node.end_lineno or node.lineno
        text = "".join(lines[start:end])
        if isinstance(node, ast.Assert):
            checks.append(ast.get_source_segment(source, node) or text.strip())
        else:
            setup.append(text if text.endswith("\n") else text + "\n")
    return checks, "".join(setup)


def _stdio_case(item: Mapping[str, Any]) -> StdioCase | None:
    for stdin_key, out_key in (("stdin", "expected_stdout"), ("input", "output")):
        if stdin_key in item and out_key in item:
            compare = item.get("compare", StdoutRule.TOKENS)
            if compare not in values(StdoutRule):
                raise TaskFormatError(f"a stdio case's compare must be one of "
                                      f"{', '.join(values(StdoutRule))}, got {compare!r:.40}")
            return StdioCase(stdin=join_lines(item[stdin_key]), expected_stdout=join_lines(item[out_key]),
                             compare=compare)
    return None


def join_lines(value: Any) -> str:
    """Stdin/stdout text; a list of lines is joined with newlines (as APPS stores some)."""
    if isinstance(value, (list, tuple)):
        return "\n".join(str(v) for v in value)
    return str(value)


def coerce_checks(value: Any, *, field_name: str = "checks") -> tuple[list[Check], str]:
    """Turn a dataset's test field into checks, plus any setup code the tests carried.

    Raises TaskFormatError (without file context; callers add it) for shapes it cannot read.
    """
    if value is None:
        return [], ""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in "[{":
            try:
                return coerce_checks(json.loads(stripped), field_name=field_name)
            except json.JSONDecodeError:
                pass  # not JSON: maybe Python (a dict/list literal in an assert, say)
        try:
            asserts, setup = split_test_code(value)
        except SyntaxError as exc:
            raise TaskFormatError(f"is a string but neither JSON nor Python ({exc.msg}, line "
                                  f"{exc.lineno})", field=field_name) from None
        if not asserts and not _defines_check(setup):
            raise TaskFormatError("holds Python code without any top-level assert or "
                                  "def check(candidate)", field=field_name)
        return list(asserts), setup  # no asserts: the caller adds check(<entry_point>)
    if isinstance(value, Mapping):
        if "inputs" in value and "outputs" in value:
            inputs, outputs = value["inputs"], value["outputs"]
            if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
                raise TaskFormatError("'inputs' and 'outputs' must be lists of the same length",
                                      field=field_name)
            if value.get("fn_name"):
                raise TaskFormatError("holds call-based tests (fn_name); load this dataset "
                                      f"as APPS: {local_copy_hint('apps')}", field=field_name)
            return [StdioCase(join_lines(i), join_lines(o)) for i, o in zip(inputs, outputs, strict=True)], ""
        case = _stdio_case(value)
        if case is not None:
            return [case], ""
        raise TaskFormatError(f"is an object with keys {sorted(value)[:8]}; expected a list of "
                              f"checks or {{inputs, outputs}}", field=field_name)
    if isinstance(value, (list, tuple)):
        checks: list[Check] = []
        for item in value:
            if isinstance(item, str):
                checks.append(item)
            elif isinstance(item, Mapping) and (case := _stdio_case(item)) is not None:
                checks.append(case)
            else:
                raise TaskFormatError(f"each check must be a string of Python or an object with "
                                      f"stdin/expected_stdout (or input/output); got {item!r:.100}",
                                      field=field_name)
        return checks, ""
    raise TaskFormatError(f"cannot read checks from a {type(value).__name__}", field=field_name)


def _defines_check(setup: str) -> bool:
    """Whether test code defines HumanEval's ``check(candidate)`` function at top level."""
    try:
        tree = ast.parse(setup)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(n, ast.FunctionDef) and n.name == "check" for n in tree.body)


# ---------------------------------------------------------------- entry point


def _defined_names(code: str | None) -> dict[str, bool]:
    """Top-level names defined in ``code``: name -> True for functions, False for classes."""
    if not code:
        return {}
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return {}
    out: dict[str, bool] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = True
        elif isinstance(node, ast.ClassDef):
            out.setdefault(node.name, False)
    return out


def _outermost_calls(check: str, allowed: Iterable[str]) -> list[str]:
    """Names called in ``check``, outermost first (breadth-first), skipping builtins not allowed."""
    try:
        tree = ast.parse(check)
    except (SyntaxError, ValueError):
        return []
    allowed_set = set(allowed)
    names: list[str] = []
    for node in ast.walk(tree):  # breadth-first: outer calls come before the calls inside them
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            if (name not in _BUILTIN_NAMES or name in allowed_set) and name not in names:
                names.append(name)
    return names


def infer_entry_point(checks: Sequence[Check], code: str | None = None,
                      setup_code: str = "") -> str | None:
    """The function the checks call, or None when they call none.

    Each check votes for the outermost non-builtin function it calls (``assert set(f(x)) ==
    ...`` votes ``f``); a builtin name counts only when ``code`` redefines it (MBPP 126 defines
    ``sum``). When a reference ``code`` is known, functions it defines win over classes (MBPP
    601 calls ``max_chain_length([Pair(...)])``) and over names it does not define. Names that
    ``setup_code`` defines are helpers, not the entry point.
    """
    defined = _defined_names(code)
    helpers = set(_defined_names(setup_code))
    votes: Counter[str] = Counter()
    order: list[str] = []
    for check in checks:
        if not isinstance(check, str):
            continue
        names = [n for n in _outermost_calls(check, defined) if n not in helpers]
        if defined:
            preferred = [n for n in names if defined.get(n)] or [n for n in names if n in defined]
            names = preferred or names
        if names:
            votes[names[0]] += 1
            if names[0] not in order:
                order.append(names[0])
    if not votes:
        return None
    best = max(votes.values())
    return next(n for n in order if votes[n] == best)


# ---------------------------------------------------------------- records -> tasks


def _is_task_record(record: Mapping[str, Any]) -> bool:
    keys = set(record)
    return keys >= _RECORD_KEYS and keys <= set(TASK_FIELDS)


def parse_tags(value: Any, where: dict[str, Any]) -> tuple[str, ...]:
    """Tags from a list, a JSON/Python list literal string, or a comma-separated string."""
    if value is None:
        return ()
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                try:
                    value = ast.literal_eval(text)
                except (ValueError, SyntaxError):
                    raise TaskFormatError("is a string that is not a list of tags", field="tags",
                                          **where) from None
        else:
            return tuple(t.strip() for t in text.split(",") if t.strip())
    if isinstance(value, (list, tuple)):
        return tuple(str(t) for t in value if str(t).strip())
    raise TaskFormatError(f"must be a list of strings or a comma-separated string, got "
                          f"{type(value).__name__}", field="tags", **where)


def _located(exc: TaskFormatError, *, path: str, task: str | None = None) -> TaskFormatError:
    """The same error with the file (and task) it came from filled in."""
    return exc.located(path=path, task=exc.task or task)


def _mapped_task(row: Row, mapping: Mapping[str, str], *, index: int, source: str) -> Task:
    record = row.data
    where: dict[str, Any] = {"path": row.where}

    def get(target: str) -> Any:
        key = mapping.get(target, target)
        value = _lookup(record, key)
        if value is _MISSING:
            if target in mapping and target in ("prompt", "checks"):
                raise TaskFormatError(f"mapped to record field {key!r}, which this record lacks "
                                      f"(it has {sorted(record)[:12]})", field=target, **where)
            return None  # optional fields may be absent from some records
        return value

    ident = get("name")
    if ident is None:
        ident = next((record[k] for k in _ID_FIELDS if record.get(k) not in (None, "")), index)
        name = f"{source}/{ident}"
    else:
        name = str(ident)
    where["task"] = name
    prompt = get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise TaskFormatError("must be a non-empty string; map it with prompt=RECORD_FIELD",
                              field="prompt", **where)
    try:
        checks, setup_from_checks = coerce_checks(get("checks"), field_name="checks")
        visible, setup_from_visible = coerce_checks(get("visible_checks"), field_name="visible_checks")
    except TaskFormatError as exc:
        raise _located(exc, **where) from None
    reference = get("reference_solution")
    if reference is not None and not isinstance(reference, str):
        raise TaskFormatError("must be a string of Python source", field="reference_solution", **where)
    setup_parts = [str(get("setup_code") or ""), setup_from_checks]
    if setup_from_visible and setup_from_visible != setup_from_checks:
        setup_parts.append(setup_from_visible)
    setup_code = "".join(p if p.endswith("\n") or not p else p + "\n" for p in setup_parts)

    entry_point = get("entry_point")
    if entry_point is None:
        entry_point = infer_entry_point([*checks, *visible], reference, setup_code)
        if entry_point is None:
            if checks and all(isinstance(c, StdioCase) for c in checks):
                entry_point = STDIO_ENTRY_POINT
            else:
                raise TaskFormatError("could not be inferred from the checks; map it with "
                                      "entry_point=RECORD_FIELD", field="entry_point", **where)
    entry_point = str(entry_point)
    if not checks and _defines_check(setup_from_checks):  # HumanEval style: check(candidate)
        checks = [f"check({entry_point})"]

    raw_difficulty = get("difficulty")
    difficulty = normalize_difficulty(raw_difficulty)
    metadata: dict[str, Any] = {}
    raw_meta = get("metadata")
    if isinstance(raw_meta, Mapping):
        metadata.update(raw_meta)
    if raw_difficulty is not None and difficulty is None and str(raw_difficulty).strip():
        metadata["raw_difficulty"] = raw_difficulty
    for target, key in mapping.items():
        if target.startswith("metadata."):
            value = _lookup(record, key)
            if value is not _MISSING:
                metadata[target[len("metadata."):]] = value
    tolerance = get("float_tolerance")
    try:
        tolerance = float(tolerance) if tolerance is not None else None
    except (TypeError, ValueError):
        raise TaskFormatError(f"must be a number, got {tolerance!r:.40}", field="float_tolerance",
                              **where) from None
    limit = get("time_limit")
    try:
        limit = float(limit) if limit is not None else None
    except (TypeError, ValueError):
        raise TaskFormatError(f"must be a number of seconds, got {limit!r:.40}", field="time_limit",
                              **where) from None
    try:
        return Task(
            name=name,
            prompt=prompt,
            entry_point=entry_point,
            checks=tuple(checks),
            visible_checks=tuple(visible),
            reference_solution=reference,
            difficulty=difficulty,
            tags=parse_tags(get("tags"), where),
            source=str(get("source") or source),
            setup_code=setup_code,
            float_tolerance=tolerance,
            equality=str(get("equality") or "python"),
            prelude=str(get("prelude") or ""),
            time_limit=limit,
            metadata=metadata,
        )
    except TaskFormatError as exc:
        raise _located(exc, path=where["path"]) from None


def tasks_from_rows(rows: Iterable[Row], mapping: Mapping[str, str] | None = None, *,
                    source: str = "jsonl", problems: list[str] | None = None) -> list[Task]:
    """Build tasks from raw rows: task records as they are, other records through ``mapping``.

    Task names must be unique; a duplicate raises TaskFormatError naming both records. With
    ``problems`` (a list), a record that does not make a task adds one line per problem to it
    and is left out, instead of raising: every broken record is reported at once.
    """
    tasks: list[Task] = []
    seen: dict[str, str] = {}
    for index, row in enumerate(rows):
        try:
            task = _row_task(row, mapping, index=index, source=source)
            where = row.where
            if task.name in seen:
                raise TaskFormatError(f"duplicate task name (also in {seen[task.name]}); names must be "
                                      "unique: take the name from a unique field (`--map name=FIELD` on the "
                                      "command line, map='name=FIELD' in Python)", path=where, task=task.name,
                                      field="name")
        except TaskFormatError as exc:
            if problems is None:
                raise
            problems += exc.lines()
            continue
        seen[task.name] = where
        tasks.append(task)
    return tasks


def _row_task(row: Row, mapping: Mapping[str, str] | None, *, index: int, source: str) -> Task:
    if not mapping and _is_task_record(row.data):
        return Task.from_dict(row.data, path=row.where)
    if not mapping and not {"prompt"} & set(row.data):
        raise TaskFormatError(
            f"{row.unit} {row.position} has fields {sorted(row.data)[:12]}, not agentenv task "
            f"fields; pass a mapping, e.g. `--map prompt=question,checks=tests` on the command "
            f"line (map='prompt=question,checks=tests' in Python)", path=row.origin)
    return _mapped_task(row, mapping or {}, index=index, source=source)


def sniff_layout(path: str | os.PathLike[str]) -> str | None:
    """The benchmark loader whose layout the first record of ``path`` has, if any.

    "mbpp" (``task_id``, ``test_list``, ``text``/``prompt``), "livecodebench"
    (``question_content``, ``public_test_cases``), "apps" (``input_output`` with ``question``,
    or CodeContests' ``description`` with ``public_tests``); None for task records and other
    data. This is what lets ``load_tasks("mbpp.jsonl")`` and ``agentenv tasks validate FILE``
    read a benchmark file without naming the benchmark.
    """
    try:
        first = next(iter(read_rows(path)), None)
    except (TaskFormatError, DatasetUnavailable):
        return None  # the generic path reports the problem with its own context
    if first is None:
        return None
    keys = set(first.data)
    if _is_task_record(first.data):
        return None
    if {"task_id", "test_list"} <= keys and keys & {"text", "prompt"}:
        return "mbpp"
    if {"question_content", "public_test_cases"} <= keys:
        return "livecodebench"
    if ("input_output" in keys and "question" in keys) or {"description", "public_tests"} <= keys:
        return "apps"
    return None


def load(path: str | os.PathLike[str] | None = None, *, map: str | Mapping[str, str] | None = None,
         dataset: str | None = None, config: str | None = None, split: str | None = None,
         source: str | None = None, problems: list[str] | None = None) -> list[Task]:
    """Load tasks from a local file/directory (``path``) or a Hub dataset (``dataset``).

    ``map`` maps Task fields to record fields (see the module docstring); without it, records
    must be agentenv task records. ``source`` names the tasks' origin (default: the file stem
    or the dataset id) and prefixes generated task names. ``problems``: see
    :func:`tasks_from_rows` (records in a benchmark's own layout still raise at the first).
    """
    mapping = parse_mapping(map)
    if path is not None and dataset is not None:
        raise ConfigError("give either path= (a local file) or dataset= (a Hub dataset id), not both")
    if path is not None:
        local = Path(path).expanduser()
        if not local.exists():
            raise DatasetUnavailable(f"no such file or directory: {str(local)!r}")
        if not mapping:
            benchmark = sniff_layout(local)
            if benchmark is not None:
                module = importlib.import_module(f"agentenv.tasks.{benchmark}")
                tasks: list[Task] = module.load(path=local)
                return tasks
        label = source or local.name.split(".")[0]
        rows: Iterable[Row] = read_rows(local)
    elif dataset is not None:
        label = source or dataset.rsplit("/", 1)[-1]
        rows = load_hub_rows(dataset, config=config, splits=[split] if split else None,
                             what=f"the Hub dataset {dataset!r}",
                             how_local=f"download its files and pass {local_copy_hint('jsonl')}")
    else:
        raise ConfigError("the jsonl loader needs a local .jsonl/.json/.parquet file or folder "
                          "(`--tasks PATH` or `--data PATH` on the command line, path= in Python) "
                          "or dataset= (a Hugging Face dataset id)")
    tasks = tasks_from_rows(rows, mapping, source=label, problems=problems)
    if not tasks and not problems:
        raise TaskFormatError("holds no records", path=str(path or dataset))
    return tasks
