"""APPS, TACO and CodeContests-style problems as agentenv tasks.

The APPS layout (also TACO's): ``question``, ``solutions`` (a JSON list of Python programs),
``starter_code``, ``difficulty`` and ``input_output``, a JSON object with ``inputs``,
``outputs`` and an optional ``fn_name``. The native CodeContests layout (``description``,
``public_tests``/``private_tests``/``generated_tests`` as ``{input, output}`` lists,
``solutions`` as ``{language, solution}``) is read too.

Mapping, one task per problem, named ``apps/<problem_id>`` (``apps/<split>/<problem_id>`` when
the split is known) or ``code_contests/<name>``:

- without ``fn_name`` every test is a :class:`StdioCase` (inputs or outputs stored as lists of
  lines are joined with newlines) and the entry point is the program itself. Output is compared
  by APPS's rule (``compare="apps"``, from hendrycks/apps ``eval/testing_util.py``: non-empty
  lines in order, numbers within ``numpy.allclose``), CodeContests' tests by CodeContests' rule
  (``compare="code_contests"``, from ``execution/tester_sandboxer.cc``: tokens of the whole
  output, case-insensitive, numbers within 1e-5); neither grader's lenient fallbacks are
  copied (see :mod:`agentenv.grading.stdout`);
- with ``fn_name`` every test becomes ``assert <fn_name>(<args>) == <expected>`` (APPS stores
  each input as the list of arguments), or ``Solution().<fn_name>(...)`` when the starter code
  holds ``class Solution``. APPS' grader accepts the output either as stored or as the single
  element of a one-element list, and APPS stores most expected values wrapped that way; the
  loader unwraps when *every* expected value of a problem is a one-element list
  (``unwrap_outputs="auto"``; force with True/False). JSON object keys that are all integers
  become ints, as APPS' grader does;
- difficulty: introductory/interview/competition (APPS), EASY..VERY_HARD (TACO) and the
  CodeContests levels map to easy/medium/hard; the original label stays in metadata;
- the first Python solution is the ``reference_solution`` (``agentenv tasks validate`` runs it);
- the first ``visible`` tests are also the ``visible_checks`` (APPS' statement examples are
  usually its first tests); ``max_checks`` caps the hidden tests of very large problems;
- problems without any test are skipped (APPS' train split has a few hundred) and counted in
  a log event.

Sources: ``path=`` (a file, or a folder such as APPS' ``train.jsonl``/``test.jsonl``),
``$AGENTENV_APPS_PATH``, or the Hub (the ``hf`` extra): ``codeparrot/apps`` by default, read
from its raw JSON Lines files, or any other dataset id (``dataset="BAAI/TACO"``) through
``datasets.load_dataset``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agentenv.choices import StdoutRule
from agentenv.errors import ConfigError, TaskFormatError
from agentenv.log import get_logger
from agentenv.settings import DATASET_PATH_VARS
from agentenv.tasks.filters import normalize_difficulty
from agentenv.tasks.hub import (
    Row,
    download_hub_files,
    load_hub_rows,
    local_copy_hint,
    local_source,
    read_rows,
)
from agentenv.tasks.jsonl import STDIO_ENTRY_POINT, join_lines, parse_tags
from agentenv.tasks.livecodebench import FLOAT_TOLERANCE, coding_prompt, contains_float, py_literal
from agentenv.tasks.schema import Check, StdioCase, Task

__all__ = ["CODE_CONTESTS_DIFFICULTY", "ENV_VAR", "HUB_ID", "load", "task_from_record"]

log = get_logger(__name__)

HUB_ID = "codeparrot/apps"
ENV_VAR = DATASET_PATH_VARS["apps"]
_SPLIT_NAMES = ("train", "test", "valid", "validation")
_HOW_LOCAL = (f"download train.jsonl/test.jsonl of {HUB_ID} (or any APPS/TACO-style file) and pass "
              f"{local_copy_hint('apps')}, or export {ENV_VAR}=FILE_OR_DIR")
# CodeContests' difficulty enum: 1-5 are its own levels, 7+ are Codeforces problem letters A, B, ...
CODE_CONTESTS_DIFFICULTY: dict[int, str] = {1: "easy", 2: "medium", 3: "hard", 4: "hard", 5: "hard",
                                            7: "easy", 8: "easy", 9: "medium", 10: "medium"}
_PYTHON3 = 3  # CodeContests' language id for Python 3


class _Skip(Exception):
    """A row that holds no usable test (counted, not fatal)."""


def _json_field(value: Any, field: str, ctx: dict[str, Any]) -> Any:
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise TaskFormatError(f"is not valid JSON ({exc.msg})", field=field, **ctx) from None
    return value


def _int_keys(value: Any) -> Any:
    """A dict whose keys all read as integers gets int keys (JSON forced them to strings)."""
    if isinstance(value, dict) and value:
        try:
            return {int(k): v for k, v in value.items()}
        except (TypeError, ValueError):
            return value
    return value


def _call_checks(fn_name: str, starter_code: str, inputs: list[Any], outputs: list[Any],
                 unwrap: bool | str) -> tuple[list[Check], bool]:
    """Call-based tests -> asserts; also whether any expected value is a float."""
    call = f"Solution().{fn_name}" if "class Solution" in starter_code else fn_name
    if unwrap == "auto":
        unwrap = all(isinstance(o, list) and len(o) == 1 for o in outputs)
    checks: list[Check] = []
    floats = False
    for args, expected in zip(inputs, outputs, strict=True):
        arg_list = args if isinstance(args, list) else [args]
        if arg_list and isinstance(arg_list[0], dict):
            arg_list = [_int_keys(arg_list[0]), *arg_list[1:]]
        value = expected[0] if unwrap and isinstance(expected, list) and len(expected) == 1 else expected
        value = _int_keys(value)
        floats = floats or contains_float(value)
        checks.append(f"assert {call}({', '.join(py_literal(a) for a in arg_list)}) == {py_literal(value)}")
    return checks, floats


def time_limit_seconds(value: Any) -> float | None:
    """A benchmark's per-test time limit in seconds, from the forms datasets give it: a number,
    ``"2 seconds"``/``"1.5 s"`` (TACO) or ``{"seconds": 2, "nanos": 0}`` (CodeContests); None when
    absent or unreadable (the environment's timeout then applies)."""
    if isinstance(value, Mapping):
        try:
            seconds = float(value.get("seconds") or 0) + float(value.get("nanos") or 0) / 1e9
        except (TypeError, ValueError):
            return None
    elif isinstance(value, bool):
        return None
    elif isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and value.split():
        try:
            seconds = float(value.split()[0])
        except ValueError:
            return None
    else:
        return None
    return seconds if 0 < seconds <= 3600 else None


def _first_solution(solutions: Any) -> str | None:
    if isinstance(solutions, Mapping):  # CodeContests: {"language": [...], "solution": [...]}
        pairs = zip(solutions.get("language") or [], solutions.get("solution") or [], strict=False)
        return next((code for lang, code in pairs if lang == _PYTHON3 and str(code).strip()), None)
    if isinstance(solutions, list):
        return next((s for s in solutions if isinstance(s, str) and s.strip()), None)
    return None


def _pairs(tests: Any) -> list[Check]:
    if not isinstance(tests, Mapping):
        return []
    return [StdioCase(join_lines(i), join_lines(o), compare=StdoutRule.CODE_CONTESTS)
            for i, o in zip(tests.get("input") or [], tests.get("output") or [], strict=False)]


def _code_contests(record: Mapping[str, Any], ctx: dict[str, Any],
                   include_generated: bool) -> tuple[list[Check], list[Check], dict[str, Any]]:
    public = _pairs(record.get("public_tests"))
    private = _pairs(record.get("private_tests"))
    generated = _pairs(record.get("generated_tests")) if include_generated else []
    hidden = private + [c for c in public if c not in private] + generated
    return hidden, public, {"raw_difficulty": record.get("difficulty"),
                            "cf_rating": record.get("cf_rating")}


def task_from_record(record: Mapping[str, Any], *, where: str = "<record>", index: int = 0,
                     split: str | None = None, unwrap_outputs: bool | str = "auto",
                     visible: int = 1, max_checks: int | None = None,
                     include_generated: bool = False) -> Task:
    """Map one APPS/TACO/CodeContests record to a Task; raises _Skip when it has no tests."""
    ident = next((record[k] for k in ("problem_id", "id", "name") if record.get(k) not in (None, "")),
                 index)
    source = "apps" if "input_output" in record else "code_contests"
    name = f"{source}/{split}/{ident}" if split else f"{source}/{ident}"
    ctx: dict[str, Any] = {"path": where, "task": name}
    statement = record.get("question", record.get("description"))
    if not isinstance(statement, str) or not statement.strip():
        raise TaskFormatError("must be a non-empty string (the problem statement)",
                              field="question", **ctx)
    starter_code = str(record.get("starter_code") or "")
    metadata: dict[str, Any] = {"id": ident}
    floats = False
    fn_name: str | None = None
    if "input_output" in record:
        io_spec = _json_field(record.get("input_output"), "input_output", ctx)
        if not io_spec:
            raise _Skip
        if not isinstance(io_spec, Mapping):
            raise TaskFormatError("must be an object with inputs and outputs", field="input_output", **ctx)
        inputs, outputs = io_spec.get("inputs") or [], io_spec.get("outputs") or []
        if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
            raise TaskFormatError(f"inputs and outputs must be lists of the same length (got "
                                  f"{len(inputs) if isinstance(inputs, list) else type(inputs).__name__} and "
                                  f"{len(outputs) if isinstance(outputs, list) else type(outputs).__name__})",
                                  field="input_output", **ctx)
        if not inputs:
            raise _Skip
        fn_name = io_spec.get("fn_name") or None
        if fn_name:
            tests, floats = _call_checks(str(fn_name), starter_code, inputs, outputs, unwrap_outputs)
        else:
            tests = [StdioCase(join_lines(i), join_lines(o), compare=StdoutRule.APPS)
                     for i, o in zip(inputs, outputs, strict=True)]
        hidden, shown = tests, tests[:max(visible, 0)]
        raw_difficulty = record.get("difficulty")
        metadata["raw_difficulty"] = raw_difficulty
        solutions = _json_field(record.get("solutions"), "solutions", ctx)
    elif "public_tests" in record or "private_tests" in record:
        hidden, shown, extra = _code_contests(record, ctx, include_generated)
        if not hidden:
            raise _Skip
        metadata.update(extra)
        raw_difficulty = record.get("difficulty")
        solutions = record.get("solutions")
    else:
        raise TaskFormatError(f"has neither input_output (APPS/TACO) nor public_tests/private_tests "
                              f"(CodeContests); its fields are {sorted(record)[:12]}", **ctx)
    if isinstance(raw_difficulty, int):
        difficulty = CODE_CONTESTS_DIFFICULTY.get(raw_difficulty)
    else:
        difficulty = normalize_difficulty(raw_difficulty)
    if max_checks is not None:
        hidden = hidden[:max_checks]
    for key in ("url", "source", "name", "time_limit", "memory_limit", "date"):
        if record.get(key) not in (None, ""):
            metadata.setdefault(key, record[key])
    if fn_name:
        metadata["fn_name"] = fn_name
    if isinstance(record.get("date"), str) and record["date"][:4].isdigit():
        metadata["release_date"] = record["date"][:10]
    tags = parse_tags(record.get("tags", record.get("cf_tags")), {"path": where, "task": name})
    functional = fn_name is not None
    if functional:
        entry_point = "Solution" if "class Solution" in starter_code else str(fn_name)
    else:
        entry_point = STDIO_ENTRY_POINT
    return Task(
        name=name,
        prompt=coding_prompt(statement, starter_code, functional),
        entry_point=entry_point,
        checks=tuple(hidden),
        visible_checks=tuple(shown),
        reference_solution=_first_solution(solutions),
        difficulty=difficulty,
        tags=tags,
        source=source,
        float_tolerance=FLOAT_TOLERANCE if floats else None,
        time_limit=time_limit_seconds(record.get("time_limit")) if not functional else None,
        metadata=metadata,
    )


def _split_label(row: Row, hub_split: str | None) -> str | None:
    if hub_split:
        return hub_split
    stem = Path(row.origin).name.split(".")[0].lower()
    return stem if stem in _SPLIT_NAMES else None


def _rows(path: str | os.PathLike[str] | None, split: str | None,
          dataset: str) -> Iterable[tuple[Row, str | None]]:
    local = local_source(path, ENV_VAR)
    if local is not None:
        files = None
        if local.is_dir() and split is not None:
            files = [f"{split}.jsonl"]
        return ((row, _split_label(row, None)) for row in read_rows(local, files=files))
    splits = [split] if split else ["train", "test"]
    if dataset == HUB_ID:
        paths = download_hub_files(HUB_ID, [f"{s}.jsonl" for s in splits],
                                   what=f"APPS ({HUB_ID})", how_local=_HOW_LOCAL)
        return ((row, s) for s, p in zip(splits, paths, strict=True) for row in read_rows(p))
    rows = load_hub_rows(dataset, splits=splits, what=f"{dataset}", how_local=_HOW_LOCAL)
    return ((row, row.origin.rsplit("[", 1)[-1].rstrip("]")) for row in rows)


def load(path: str | os.PathLike[str] | None = None, *, split: str | None = None,
         dataset: str = HUB_ID, unwrap_outputs: bool | str = "auto", visible: int = 1,
         max_checks: int | None = None, include_generated: bool = False) -> list[Task]:
    """Load APPS-style problems from a local copy (``path`` / ``$AGENTENV_APPS_PATH``) or the Hub.

    ``split``: "train" or "test" (a folder copy reads ``<split>.jsonl``); None reads everything.
    See the module docstring for ``unwrap_outputs``, ``visible``, ``max_checks`` and
    ``include_generated`` (CodeContests' generated tests).
    """
    if unwrap_outputs not in ("auto", True, False):
        raise ConfigError(f"unwrap_outputs must be 'auto', True or False, got {unwrap_outputs!r}")
    if max_checks is not None and max_checks < 1:
        raise ConfigError(f"max_checks must be >= 1, got {max_checks}")
    tasks: list[Task] = []
    seen: dict[str, str] = {}
    skipped = 0
    for index, (row, label) in enumerate(_rows(path, split, dataset)):
        try:
            task = task_from_record(row.data, where=row.where, index=index, split=label,
                                    unwrap_outputs=unwrap_outputs, visible=visible,
                                    max_checks=max_checks, include_generated=include_generated)
        except _Skip:
            skipped += 1
            continue
        if task.name in seen:
            raise TaskFormatError(f"duplicate problem id (also in {seen[task.name]}); load one "
                                  "split at a time (`--data` a single split's file on the command "
                                  "line, split= in Python)", path=row.where, task=task.name)
        seen[task.name] = row.where
        tasks.append(task)
    if skipped:
        log.info("apps_rows_skipped", skipped=skipped, reason="no tests in the row")
    if not tasks:
        raise TaskFormatError("holds no APPS-style problems with tests", path=str(path or dataset))
    return tasks
