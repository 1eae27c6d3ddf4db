"""LiveCodeBench code generation (the ``code_generation_lite`` layout) as agentenv tasks.

A row has ``question_title, question_content, platform, question_id, contest_id, contest_date,
starter_code, difficulty, public_test_cases, private_test_cases, metadata``. Public tests are a
JSON string; private tests are base64 → zlib → pickle → JSON (or plain JSON in early rows);
``metadata`` is a JSON string whose ``func_name`` names the method of LeetCode problems.

Decoding the pickle layer never runs dataset code: :class:`_PlainUnpickler` refuses every
global, so a pickle can only build plain strings, numbers and containers; anything else (a
``__reduce__`` that calls ``os.system``, say) raises TaskFormatError before a single call.

Mapping, one task per problem, named ``livecodebench/<question_id>``:

- functional tests (``testtype == "functional"``; input = one JSON value per line, output =
  JSON) become ``assert Solution().<func_name>(<args>) == <expected>`` (or a plain call when
  the starter code defines a function, not a class); ``entry_point`` is ``Solution`` (or the
  function). When an expected value holds a float, ``float_tolerance`` is 1e-5, the
  tolerance LeetCode states for such problems;
- stdin tests become :class:`StdioCase` and the entry point is the program itself
  (:data:`~agentenv.tasks.jsonl.STDIO_ENTRY_POINT`); their output is compared by LiveCodeBench's
  own rule (``compare="livecodebench"``: stripped lines equal as text or as ``Decimal`` tokens,
  read from its grader's ``grade_stdio``; see :mod:`agentenv.grading.stdout`), and each test
  gets LiveCodeBench's 6 s (``time_limit``, where longer than the environment's timeout);
- public tests are the ``visible_checks``; the hidden ``checks`` are the private tests and,
  as LiveCodeBench's own grader runs both, the public ones too (``hidden_includes_public``);
- ``metadata["release_date"]`` is the contest date (ISO ``YYYY-MM-DD``), so
  ``load_tasks("livecodebench", since="2024-08-01")`` keeps a contamination-free window; the
  difficulty is kept as easy/medium/hard; tags are the platform and the test type.

Every task's ``prelude`` holds the imports LiveCodeBench's own grader prepends to a solution
(:data:`PRELUDE`: ``from typing import *``, ``from collections import *``, math, heapq,
itertools, functools, ... and ``sys.setrecursionlimit(50000)``), so a solution that relies on
them (``List[int]`` without importing it, ``Counter``, ``inf``) runs here as it does there.

LiveCodeBench ships no reference solutions, so these tasks have none.

Sources: ``path=`` (one ``test*.jsonl`` file or a folder holding them), ``$AGENTENV_LIVECODEBENCH_PATH``,
or the Hub repository ``livecodebench/code_generation_lite`` (the ``hf`` extra), whose release
files are downloaded and read as they are. ``version`` picks files as the dataset's own
version tags do: ``release_v3`` (cumulative), ``v2`` (one file), ``v2_v4`` (a range),
``release_latest`` (all).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
import os
import pickle
import re
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from agentenv.choices import StdoutRule
from agentenv.errors import ConfigError, DatasetUnavailable, TaskFormatError
from agentenv.settings import DATASET_PATH_VARS
from agentenv.tasks.filters import normalize_difficulty
from agentenv.tasks.hub import Row, download_hub_files, local_copy_hint, local_source, read_rows
from agentenv.tasks.jsonl import STDIO_ENTRY_POINT
from agentenv.tasks.schema import Check, StdioCase, Task

# Seconds per test LiveCodeBench's grader gives a program (``run_test(..., timeout=6)``).
TIME_LIMIT = 6.0

# The modules LiveCodeBench's grader (lcb_runner/evaluation/testing_util.py) star-imports and
# imports by name ahead of every solution, in its order; then it raises the recursion limit.
_STAR_IMPORTS = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math",
                 "random", "statistics", "itertools", "functools", "operator", "io", "sys",
                 "json", "builtins", "typing")
PRELUDE = "".join(
    [f"from {m} import *\n" for m in _STAR_IMPORTS]
    + [f"import {m}\n" for m in _STAR_IMPORTS if m not in ("builtins", "typing")]
    + ["sys.setrecursionlimit(50000)\n"]
)

__all__ = [
    "ENV_VAR",
    "FLOAT_TOLERANCE",
    "HUB_REPO",
    "MAX_DECODED_BYTES",
    "PRELUDE",
    "TIME_LIMIT",
    "coding_prompt",
    "contains_float",
    "decode_test_cases",
    "encode_private_tests",
    "load",
    "py_literal",
    "release_files",
    "task_from_record",
]

HUB_REPO = "livecodebench/code_generation_lite"
ENV_VAR = DATASET_PATH_VARS["livecodebench"]
FLOAT_TOLERANCE = 1e-5
# Upper bound on one decompressed private-test blob (the largest real ones are far smaller).
MAX_DECODED_BYTES = 1 << 30
_HOW_LOCAL = (f"download the test*.jsonl files of {HUB_REPO} and pass "
              f"{local_copy_hint('livecodebench', 'DIR_OR_FILE')}, or export {ENV_VAR}=DIR_OR_FILE")
_FILE_RE = re.compile(r"^test(\d*)\.jsonl$")


# ---------------------------------------------------------------- release files


def _file_number(name: str) -> int | None:
    match = _FILE_RE.match(name)
    if match is None:
        return None
    return int(match.group(1) or 1)


def _file_name(number: int) -> str:
    return "test.jsonl" if number == 1 else f"test{number}.jsonl"


def release_files(version: str, available: Sequence[str]) -> list[str]:
    """The release files a version tag selects among the ``available`` file names, in order.

    ``release_vN`` = files 1..N, ``vN`` = file N, ``vA_vB`` = files A..B, ``release_latest`` =
    every ``test*.jsonl``. File 1 is ``test.jsonl``, file N is ``testN.jsonl``.
    """
    numbers = sorted(n for n in (_file_number(a) for a in available) if n is not None)
    tag = version.strip().lower()
    if tag in ("release_latest", "latest", "all"):
        wanted = numbers
    elif (m := re.fullmatch(r"release_v(\d+)", tag)) is not None:
        wanted = list(range(1, int(m.group(1)) + 1))
    elif (m := re.fullmatch(r"v(\d+)", tag)) is not None:
        wanted = [int(m.group(1))]
    elif (m := re.fullmatch(r"v(\d+)_v(\d+)", tag)) is not None:
        wanted = list(range(int(m.group(1)), int(m.group(2)) + 1))
    else:
        raise ConfigError(f"unknown LiveCodeBench version {version!r}; use release_vN, vN, vA_vB "
                          f"or release_latest")
    missing = [n for n in wanted if n not in numbers]
    if missing or not wanted:
        raise DatasetUnavailable(
            f"LiveCodeBench {version} needs {[_file_name(n) for n in missing] or 'test*.jsonl files'}, "
            f"which the copy lacks (it has {[_file_name(n) for n in numbers]}); {_HOW_LOCAL}")
    return [_file_name(n) for n in wanted]


# ---------------------------------------------------------------- decoding tests


class _PlainUnpickler(pickle.Unpickler):
    """An unpickler that builds only what pickle's own opcodes build: str, bytes, numbers,
    None/bools and containers. Every global (hence every callable) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(
            f"the pickle refers to {module}.{name}; only plain strings and containers are accepted")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("the pickle uses persistent ids; only plain data is accepted")


def _inflate(raw: bytes, limit: int) -> bytes:
    inflater = zlib.decompressobj()
    data = inflater.decompress(raw, limit)
    if inflater.unconsumed_tail:
        raise ValueError(f"decompresses to more than {limit} bytes")
    return data + inflater.flush()


def decode_test_cases(blob: Any, *, max_bytes: int = MAX_DECODED_BYTES) -> list[dict[str, Any]]:
    """Decode a test-case field: a JSON string, or base64 → zlib → pickle → JSON.

    Raises ValueError with the reason when the blob is neither; a pickle that refers to any
    global (a class, a function) is refused without running anything.
    """
    if isinstance(blob, list):
        value: Any = blob
    elif isinstance(blob, str):
        text = blob.strip()
        if not text:
            return []
        if text[0] in "[{":
            value = json.loads(text)
        else:
            try:
                raw = base64.b64decode(text, validate=True)
            except binascii.Error as exc:
                raise ValueError(f"is neither JSON nor base64 ({exc})") from None
            try:
                pickled = _inflate(raw, max_bytes)
            except zlib.error as exc:
                raise ValueError(f"is base64 but not zlib-compressed ({exc})") from None
            try:
                value = _PlainUnpickler(io.BytesIO(pickled)).load()
            except pickle.UnpicklingError as exc:
                raise ValueError(f"holds a pickle the loader refuses: {exc}") from None
            except Exception as exc:  # truncated or garbled pickle streams
                raise ValueError(f"holds a broken pickle ({type(exc).__name__}: {exc})") from None
            if isinstance(value, bytes):
                value = value.decode("utf-8")
            if isinstance(value, str):
                value = json.loads(value)
    else:
        raise ValueError(f"must be a string, got {type(blob).__name__}")
    if not isinstance(value, list) or not all(isinstance(t, Mapping) for t in value):
        raise ValueError("must decode to a list of test objects")
    for i, test in enumerate(value):
        if not isinstance(test.get("input"), str) or not isinstance(test.get("output"), str):
            raise ValueError(f"test {i} needs string 'input' and 'output'")
    return [dict(t) for t in value]


def encode_private_tests(tests: Sequence[Mapping[str, Any]]) -> str:
    """Encode tests the way ``code_generation_lite`` stores private tests (for fixtures and tools)."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(list(tests))))).decode("ascii")


# ---------------------------------------------------------------- tests -> checks


def py_literal(value: Any) -> str:
    """Python source for a JSON-decoded value (``inf``/``nan`` spelled as float calls)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, list):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def contains_float(value: Any) -> bool:
    """Whether a JSON-decoded value holds a float anywhere (then a tolerance is due)."""
    if isinstance(value, float):
        return True
    if isinstance(value, list):
        return any(contains_float(v) for v in value)
    if isinstance(value, dict):
        return any(contains_float(v) for v in value.values())
    return False


def _uses_class(starter_code: str) -> bool:
    return re.search(r"^\s*class\s+Solution\b", starter_code, re.MULTILINE) is not None


class _Converter:
    """Turns one problem's tests into checks, remembering whether any expected value is a float."""

    def __init__(self, fn_name: str | None, starter_code: str, ctx: dict[str, Any]) -> None:
        self.fn_name = fn_name
        self.call = f"Solution().{fn_name}" if fn_name and _uses_class(starter_code) else fn_name
        self.ctx = ctx
        self.floats = False

    def __call__(self, tests: Iterable[Mapping[str, Any]], field: str) -> list[Check]:
        checks: list[Check] = []
        for i, test in enumerate(tests):
            kind = str(test.get("testtype", "functional" if self.fn_name else "stdin")).lower()
            if kind == "stdin":
                checks.append(StdioCase(stdin=test["input"], expected_stdout=test["output"],
                                         compare=StdoutRule.LIVECODEBENCH))
            elif kind == "functional":
                checks.append(self._functional(test, i, field))
            else:
                raise TaskFormatError(f"test {i} has testtype {kind!r}; expected 'functional' or "
                                      f"'stdin'", field=field, **self.ctx)
        return checks

    def _functional(self, test: Mapping[str, Any], i: int, field: str) -> str:
        if not self.call:
            raise TaskFormatError(f"test {i} is functional but metadata has no func_name",
                                  field=field, **self.ctx)
        try:
            args = [json.loads(line) for line in test["input"].split("\n") if line.strip()]
            expected = json.loads(test["output"])
        except json.JSONDecodeError as exc:
            raise TaskFormatError(f"test {i} is functional but its input/output is not JSON "
                                  f"({exc.msg})", field=field, **self.ctx) from None
        self.floats = self.floats or contains_float(expected)
        return f"assert {self.call}({', '.join(py_literal(a) for a in args)}) == {py_literal(expected)}"


# ---------------------------------------------------------------- records -> tasks


def coding_prompt(content: str, starter_code: str, functional: bool) -> str:
    """The prompt of a competitive-programming task: the statement, then what to write.

    Functional tasks show the starter code to complete; stdin/stdout tasks ask for a whole
    program. Shared with the APPS loader so both benchmarks read alike.
    """
    parts = [content.strip(), ""]
    if functional:
        parts += [
            "Write your solution by completing this starter code (keep its names and signature):",
            "",
            "```python",
            starter_code.rstrip(),
            "```",
            "",
            "Nothing is imported for you: import what you use (for example `from typing import List`).",
        ]
    else:
        parts.append("Write a complete Python program that reads the input from standard input "
                     "and prints the answer to standard output.")
        if starter_code.strip():
            parts += ["", "Start from this code:", "", "```python", starter_code.rstrip(), "```"]
    return "\n".join(parts) + "\n"


def _release_date(value: Any) -> str | None:
    if value is None:
        return None
    text = value.isoformat() if hasattr(value, "isoformat") else str(value)
    return text[:10] if re.match(r"^\d{4}-\d{2}-\d{2}", text) else None


def task_from_record(record: Mapping[str, Any], *, where: str = "<record>",
                     hidden_includes_public: bool = True) -> Task:
    """Map one ``code_generation_lite`` row to a Task (see the module docstring)."""
    question_id = record.get("question_id")
    name = f"livecodebench/{question_id}"
    ctx: dict[str, Any] = {"path": where, "task": name}
    content = record.get("question_content")
    if not isinstance(content, str) or not content.strip():
        raise TaskFormatError("must be a non-empty string", field="question_content", **ctx)
    raw_meta = record.get("metadata") or "{}"
    try:
        meta = json.loads(raw_meta) if isinstance(raw_meta, str) else dict(raw_meta)
    except (json.JSONDecodeError, TypeError, ValueError):
        raise TaskFormatError("must be a JSON object (string)", field="metadata", **ctx) from None
    fn_name = meta.get("func_name") or None
    starter_code = str(record.get("starter_code") or "")
    decoded: dict[str, list[dict[str, Any]]] = {}
    for field in ("public_test_cases", "private_test_cases"):
        try:
            decoded[field] = decode_test_cases(record.get(field) or "[]")
        except (ValueError, json.JSONDecodeError) as exc:
            raise TaskFormatError(f"cannot be decoded: {exc}. The dataset file may be corrupt or "
                                  f"tampered with; nothing from it was run", field=field, **ctx) from None
    convert = _Converter(fn_name, starter_code, ctx)
    public = convert(decoded["public_test_cases"], "public_test_cases")
    private = convert(decoded["private_test_cases"], "private_test_cases")
    hidden = private + [c for c in public if c not in private] if hidden_includes_public else private
    if not hidden:
        hidden = public
    if not hidden:
        raise TaskFormatError("has no tests at all (public and private are empty)",
                              field="private_test_cases", **ctx)
    functional = any(isinstance(c, str) for c in hidden)
    if functional:
        entry_point = "Solution" if convert.call and convert.call.startswith("Solution()") else str(fn_name)
    else:
        entry_point = STDIO_ENTRY_POINT
    platform = str(record.get("platform") or "").lower()
    tags = tuple(t for t in (platform, "functional" if functional else "stdin") if t)
    release_date = _release_date(record.get("contest_date"))
    metadata: dict[str, Any] = {
        "question_id": question_id,
        "question_title": record.get("question_title"),
        "platform": platform or None,
        "contest_id": record.get("contest_id"),
        "release_date": release_date,
        "public_tests": len(public),
        "private_tests": len(private),
    }
    if fn_name:
        metadata["fn_name"] = fn_name
    raw_difficulty = record.get("difficulty")
    difficulty = normalize_difficulty(raw_difficulty)
    if difficulty is None and raw_difficulty:
        metadata["raw_difficulty"] = raw_difficulty
    return Task(
        name=name,
        prompt=coding_prompt(content, starter_code, functional),
        entry_point=entry_point,
        checks=tuple(hidden),
        visible_checks=tuple(public),
        reference_solution=None,
        difficulty=difficulty,
        tags=tags,
        source="livecodebench",
        float_tolerance=FLOAT_TOLERANCE if convert.floats else None,
        prelude=PRELUDE,
        time_limit=None if functional else TIME_LIMIT,
        metadata=metadata,
    )


def _rows(path: str | os.PathLike[str] | None, version: str | None,
          revision: str | None) -> Iterable[Row]:
    local = local_source(path, ENV_VAR)
    if local is not None:
        if local.is_dir():
            available = sorted(p.name for p in local.iterdir() if _file_number(p.name) is not None)
            if not available:
                raise DatasetUnavailable(f"{local} holds no test*.jsonl files; {_HOW_LOCAL}")
            return read_rows(local, files=release_files(version or "release_latest", available))
        return read_rows(local)
    tag = version or "release_latest"
    named = release_files(tag, [_file_name(n) for n in range(1, 100)])  # rejects a bad tag early
    wanted: list[str] | Callable[[list[str]], list[str]] = named
    if tag.strip().lower() in ("release_latest", "latest", "all"):  # only the listing knows
        wanted = lambda listing: release_files(tag, listing)  # noqa: E731
    files = download_hub_files(HUB_REPO, wanted, what=f"LiveCodeBench ({HUB_REPO}, {tag})",
                               how_local=_HOW_LOCAL, revision=revision)
    return (row for file in files for row in read_rows(file))


def load(path: str | os.PathLike[str] | None = None, *, version: str | None = None,
         hidden_includes_public: bool = True, revision: str | None = None) -> list[Task]:
    """Load LiveCodeBench code generation problems from a local copy or the Hub.

    ``version``: a version tag (see :func:`release_files`); default: every release file the
    copy holds. Use the common ``since=`` / ``difficulty=`` options of ``load_tasks`` to pick
    a contamination-free window.
    """
    tasks: list[Task] = []
    seen: set[str] = set()
    for row in _rows(path, version, revision):
        task = task_from_record(row.data, where=row.where, hidden_includes_public=hidden_includes_public)
        if task.name in seen:  # a problem repeated across release files: keep the first
            continue
        seen.add(task.name)
        tasks.append(task)
    if not tasks:
        raise TaskFormatError("holds no LiveCodeBench problems", path=str(path or HUB_REPO))
    return tasks
