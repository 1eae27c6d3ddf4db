"""MBPP (Mostly Basic Python Problems, Austin et al. 2021) as agentenv tasks.

Input: the original JSON Lines (``text, code, task_id, test_setup_code, test_list,
challenge_test_list``) or the "sanitized" variant (``prompt`` instead of ``text``, plus
``test_imports``), from ``path=``, from ``$AGENTENV_MBPP_PATH``, or from the Hub
(``google-research-datasets/mbpp``, the ``hf`` extra).

Mapping, one task per problem, named ``mbpp/<task_id>``:

- ``entry_point`` is inferred from the tests (the function they call, checked against the
  functions the reference defines);
- the prompt states the task and shows the first test as the example, as is standard; that
  test is also the task's one visible check;
- the checks are the asserts of ``test_list`` (plus ``challenge_test_list`` with
  ``include_challenge=True``);
- ``test_setup_code`` (and the sanitized set's ``test_imports``) becomes ``setup_code``, which
  the sandbox runs after the candidate code and before the checks (tasks 367 and 927 build
  their inputs from a class the solution defines);
- the reference ``code`` becomes ``reference_solution`` (Windows line ends normalised).

``split=`` picks the standard split by task id (prompt 1-10, test 11-510, validation 511-600,
train 601-974) whether the data is local or downloaded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from agentenv.errors import ConfigError, TaskFormatError
from agentenv.settings import DATASET_PATH_VARS, dataset_path
from agentenv.tasks.hub import Row, load_hub_rows, local_copy_hint, local_source, read_rows
from agentenv.tasks.jsonl import infer_entry_point
from agentenv.tasks.schema import Task

__all__ = ["ENV_VAR", "HUB_ID", "SPLITS", "load", "prompt_for", "split_of", "task_from_record"]

HUB_ID = "google-research-datasets/mbpp"
ENV_VAR = DATASET_PATH_VARS["mbpp"]
# The standard split by task id (the paper's and the Hub's).
SPLITS: dict[str, range] = {
    "prompt": range(1, 11),
    "test": range(11, 511),
    "validation": range(511, 601),
    "train": range(601, 975),
}
_HOW_LOCAL = (f"pass {local_copy_hint('mbpp', 'mbpp.jsonl')}, or export {ENV_VAR}=/path/to/mbpp.jsonl "
              f"(the file is mbpp/mbpp.jsonl in the google-research repository)")


def split_of(task_id: int) -> str | None:
    """The standard split a task id belongs to (None outside 1..974)."""
    return next((name for name, ids in SPLITS.items() if task_id in ids), None)


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def prompt_for(text: str, example: str) -> str:
    """The task statement followed by one test as the example (the standard MBPP prompt shape)."""
    return f"{text.strip()}\nYour code should pass this test:\n\n{example.strip()}\n"


def _string_list(record: Mapping[str, Any], key: str, where: dict[str, Any]) -> list[str]:
    value = record.get(key) or []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise TaskFormatError("must be a list of strings (Python asserts)", field=key, **where)
    return [_lf(v).strip() for v in value if v.strip()]


def task_from_record(record: Mapping[str, Any], *, where: str = "<record>",
                     include_challenge: bool = False) -> Task:
    """Map one MBPP record (original or sanitized layout) to a Task."""
    task_id = record.get("task_id")
    label = f"mbpp/{task_id}"
    ctx: dict[str, Any] = {"path": where, "task": label}
    text = record.get("text", record.get("prompt"))
    if not isinstance(text, str) or not text.strip():
        raise TaskFormatError("is missing: an MBPP record needs 'text' (or 'prompt')", field="text", **ctx)
    tests = _string_list(record, "test_list", ctx)
    if not tests:
        raise TaskFormatError("is empty: an MBPP record needs at least one assert", field="test_list", **ctx)
    challenge = _string_list(record, "challenge_test_list", ctx)
    code = record.get("code")
    reference = _lf(code) if isinstance(code, str) and code.strip() else None
    setup_parts = [*_string_list(record, "test_imports", ctx), _lf(record.get("test_setup_code") or "")]
    setup_code = "\n".join(p.strip("\n") for p in setup_parts if p.strip())
    if setup_code:
        setup_code += "\n"
    entry_point = infer_entry_point(tests, reference, setup_code)
    if entry_point is None:
        raise TaskFormatError("no function call found in the tests, so the entry point is unknown",
                              field="test_list", **ctx)
    checks = tests + challenge if include_challenge else tests
    metadata: dict[str, Any] = {"task_id": task_id}
    if isinstance(task_id, int) and split_of(task_id):
        metadata["split"] = split_of(task_id)
    if challenge:
        metadata["challenge_tests"] = len(challenge)
    return Task(
        name=label,
        prompt=prompt_for(text, tests[0]),
        entry_point=entry_point,
        checks=tuple(checks),
        visible_checks=(tests[0],),
        reference_solution=reference,
        source="mbpp",
        setup_code=setup_code,
        metadata=metadata,
    )


def _rows(path: str | os.PathLike[str] | None, split: str | None, config: str) -> Iterable[Row]:
    local = local_source(path, ENV_VAR)
    if local is not None:
        return read_rows(local)
    return load_hub_rows(HUB_ID, config=config, splits=[split] if split else None,
                         what=f"MBPP ({HUB_ID})", how_local=_HOW_LOCAL)


def load(path: str | os.PathLike[str] | None = None, *, split: str | None = None,
         include_challenge: bool = False, config: str = "full") -> list[Task]:
    """Load MBPP from a local copy (``path`` or ``$AGENTENV_MBPP_PATH``) or from the Hub.

    ``split``: one of prompt/test/validation/train, or None for all 974 problems.
    ``config``: the Hub configuration, "full" or "sanitized" (local files are read as they are).
    """
    if split is not None and split not in SPLITS:
        raise ConfigError(f"unknown MBPP split {split!r}; use one of {', '.join(SPLITS)} (or none for all)")
    if config not in ("full", "sanitized"):
        raise ConfigError(f"unknown MBPP config {config!r}; use 'full' or 'sanitized'")
    tasks: list[Task] = []
    for row in _rows(path, split, config):
        task_id = row.data.get("task_id")
        if not isinstance(task_id, int):
            raise TaskFormatError("must be an integer", path=row.where, field="task_id")
        if split is not None and task_id not in SPLITS[split]:
            continue
        tasks.append(task_from_record(row.data, where=row.where, include_challenge=include_challenge))
    tasks.sort(key=lambda t: int(t.metadata["task_id"]))
    names = [t.name for t in tasks]
    if len(set(names)) != len(names):
        duplicate = next(n for n in names if names.count(n) > 1)
        raise TaskFormatError("appears twice; each MBPP task_id must be unique", task=duplicate,
                              field="task_id")
    if not tasks:
        raise TaskFormatError(f"holds no MBPP problems{f' in split {split!r}' if split else ''}",
                              path=str(path or dataset_path(ENV_VAR) or HUB_ID))
    return tasks
