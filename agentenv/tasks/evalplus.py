"""EvalPlus's augmented test suites (HumanEval+, MBPP+) from a local copy, as agentenv tasks.

Input: EvalPlus's JSON Lines (``HumanEvalPlus.jsonl``, ``MbppPlus.jsonl``, gzipped or not, or a
directory of them), from ``path=`` (``--data`` on the command line) or ``$AGENTENV_EVALPLUS_PATH``.
Nothing is downloaded. A record has ``task_id``, ``prompt``, ``entry_point``,
``canonical_solution``, ``base_input`` (the original benchmark's test inputs), ``plus_input``
(the inputs EvalPlus added) and ``atol``; MBPP+ records also carry ``test_imports``.

EvalPlus ships inputs, not outputs: it diff-tests a candidate against the canonical solution.
The loader does the same once, at load time: the canonical solution runs on every input in a
fresh ``python3`` (trusted benchmark code, never a candidate's; a few seconds per input at
most), and each input with its output becomes one check, ``assert f(<args>) == <output>``, so
the dense reward sees each input. Inputs the reference cannot answer (it raises or runs over
the limit) and values that do not read back as Python literals are left out, and counted in
``metadata["inputs_left_out"]``.

The mapping, one record to one :class:`~agentenv.tasks.schema.Task`:

- ``name`` is the task id (``HumanEval/0``, ``Mbpp/2``), ``source`` ``"humaneval+"`` or
  ``"mbpp+"``; ``prompt`` is the record's prompt, ``reference_solution`` the prompt followed by
  the canonical solution;
- ``checks`` hold the base and plus inputs (``suite="plus"``, the default) or the base ones
  alone (``suite="base"``); the first base input is the one visible check;
- ``float_tolerance`` is ``atol``, or ``1e-6`` when ``atol`` is 0 and an output is a float (as
  EvalPlus compares floats); MBPP+'s ``test_imports`` go into ``setup_code``.

Not reproduced: EvalPlus's input contracts (``contract``); the handful of special oracles it
hard-codes for single problems (e.g. HumanEval/32, any root ``find_zero`` finds), which are
compared by value like the rest; and the argument types EvalPlus restores for some MBPP+
problems whose inputs JSON cannot hold (tuples, sets, complex numbers): their arguments are
passed as the file's lists, to the reference and the candidate alike, so a candidate that
relies on getting a tuple can fail where EvalPlus passes it.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from agentenv.errors import DatasetUnavailable, TaskFormatError
from agentenv.settings import DATASET_PATH_VARS
from agentenv.tasks.hub import local_copy_hint, local_source, read_rows
from agentenv.tasks.schema import Task

__all__ = ["ENV_VAR", "SUITES", "load", "reference_outputs", "task_from_record"]

ENV_VAR = DATASET_PATH_VARS["evalplus"]
SUITES = ("plus", "base")
DEFAULT_INPUT_TIMEOUT = 5.0  # seconds the canonical solution may take on one input
_FLOAT_ATOL = 1e-6  # EvalPlus's tolerance for float outputs when the record's atol is 0
_HOW_LOCAL = (f"pass {local_copy_hint('evalplus', 'HumanEvalPlus.jsonl')}, or export "
              f"{ENV_VAR}=/path/to/HumanEvalPlus.jsonl (EvalPlus's release files, e.g. "
              "HumanEvalPlus-v0.1.10.jsonl.gz or MbppPlus-v0.2.0.jsonl.gz)")

# Runs in a fresh interpreter: for each job, define the canonical solution and call it on each
# input (deep-copied, as EvalPlus does); answer with each output's repr when it reads back.
_WORKER = r'''
import ast, copy, json, math, signal, sys

class _Late(Exception):
    pass

def _alarm(signum, frame):
    raise _Late()

def _literal(value):
    text = repr(value)
    try:
        back = ast.literal_eval(text)
    except Exception:
        return None
    if type(back) is not type(value) or back != value:
        return None
    return text

signal.signal(signal.SIGALRM, _alarm)
jobs = json.load(sys.stdin)
out = []
for job in jobs:
    namespace = {"__name__": "__evalplus_reference__"}
    answers = []
    try:
        exec(compile(job["code"], job["task_id"], "exec"), namespace)
        fn = namespace[job["entry_point"]]
    except BaseException as exc:
        out.append({"error": f"{type(exc).__name__}: {exc}"[:300]})
        continue
    for args in job["inputs"]:
        signal.setitimer(signal.ITIMER_REAL, job["timeout"])
        try:
            value = fn(*copy.deepcopy(args))
        except BaseException:
            answers.append(None)
            continue
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        text = _literal(value)
        floats = isinstance(value, float) or (isinstance(value, (list, tuple)) and any(isinstance(v, float) for v in value))
        answers.append(None if text is None else [text, floats])
    out.append({"answers": answers})
json.dump(out, sys.stdout)
'''


def _source(task_id: str) -> str:
    return "mbpp+" if task_id.lower().startswith("mbpp") else "humaneval+"


def _reference_code(prompt: str, canonical: str) -> str:
    """HumanEval+'s canonical solution is a body that continues the prompt; MBPP+'s a whole
    function after a docstring prompt. Both read as the prompt followed by it."""
    return prompt + canonical if prompt.endswith("\n") else f"{prompt}\n{canonical}"


def reference_outputs(jobs: Sequence[Mapping[str, Any]], *, timeout: float = DEFAULT_INPUT_TIMEOUT
                      ) -> list[dict[str, Any]]:
    """Run canonical solutions on their inputs in a fresh ``python3``.

    Each job has ``task_id``, ``code`` (defines the entry point), ``entry_point`` and
    ``inputs`` (lists of arguments). Returns per job ``{"answers": [[repr, is_float] | None]}``
    or ``{"error": text}`` when the code does not even define the function.
    """
    payload = json.dumps([{**job, "timeout": timeout} for job in jobs])
    budget = 60.0 + timeout * sum(len(job["inputs"]) for job in jobs)
    try:
        done = subprocess.run([sys.executable, "-I", "-c", _WORKER], input=payload, text=True,
                              capture_output=True, timeout=budget, check=False)
    except subprocess.TimeoutExpired:
        raise DatasetUnavailable(f"computing EvalPlus's expected outputs took over {budget:.0f}s; "
                                 "load fewer tasks (a smaller file)") from None
    if done.returncode != 0:
        raise DatasetUnavailable("computing EvalPlus's expected outputs failed: "
                                 f"{done.stderr.strip().splitlines()[-1:] or done.returncode}")
    answers: list[dict[str, Any]] = json.loads(done.stdout)
    return answers


def _inputs(record: Mapping[str, Any], key: str, where: str, task_id: str) -> list[list[Any]]:
    value = record.get(key) or []
    if not isinstance(value, list) or not all(isinstance(args, list) for args in value):
        raise TaskFormatError("must be a list of argument lists", path=where, task=task_id, field=key)
    return value


def _call(entry_point: str, args: Sequence[Any]) -> str | None:
    parts = []
    for arg in args:
        text = repr(arg)
        try:
            if ast.literal_eval(text) != arg:
                return None
        except Exception:
            return None
        parts.append(text)
    return f"{entry_point}({', '.join(parts)})"


def _parse(record: Mapping[str, Any], where: str) -> dict[str, Any]:
    task_id = record.get("task_id")
    if not isinstance(task_id, str) or not task_id:
        raise TaskFormatError("is missing: an EvalPlus record needs a task_id", path=where, field="task_id")
    fields: dict[str, Any] = {"task_id": task_id}
    for key in ("prompt", "entry_point", "canonical_solution"):
        value = record.get(key)
        if key == "canonical_solution" and not value:
            value = record.get("code")  # MBPP+'s older files name it code
        if not isinstance(value, str) or not value.strip():
            raise TaskFormatError(f"is missing: an EvalPlus record needs {key}", path=where,
                                  task=task_id, field=key)
        fields[key] = value
    fields["base_input"] = _inputs(record, "base_input", where, task_id)
    fields["plus_input"] = _inputs(record, "plus_input", where, task_id)
    if not fields["base_input"]:
        raise TaskFormatError("is empty: an EvalPlus record needs test inputs", path=where,
                              task=task_id, field="base_input")
    atol = record.get("atol") or 0
    if isinstance(atol, bool) or not isinstance(atol, (int, float)) or atol < 0:
        raise TaskFormatError("must be a non-negative number", path=where, task=task_id, field="atol")
    fields["atol"] = float(atol)
    imports = record.get("test_imports") or []
    if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
        raise TaskFormatError("must be a list of import lines", path=where, task=task_id, field="test_imports")
    fields["setup_code"] = "".join(line.strip() + "\n" for line in imports if line.strip())
    return fields


def task_from_record(fields: Mapping[str, Any], answers: Mapping[str, Any], *, suite: str = "plus",
                     where: str = "<record>") -> Task:
    """One parsed record (see :func:`load`) and its reference outputs as a Task."""
    task_id = fields["task_id"]
    if "error" in answers:
        raise TaskFormatError(f"the canonical solution does not load ({answers['error']})",
                              path=where, task=task_id, field="canonical_solution")
    inputs = fields["base_input"] + (fields["plus_input"] if suite == "plus" else [])
    checks: list[str] = []
    left_out = base_checks = 0
    any_float = False
    for i, args in enumerate(inputs):
        answer = answers["answers"][i]
        call = _call(fields["entry_point"], args)
        if answer is None or call is None:
            left_out += 1
            continue
        expected, is_float = answer
        any_float = any_float or bool(is_float)
        checks.append(f"assert {call} == {expected}")
        base_checks += i < len(fields["base_input"])
    if base_checks == 0:
        raise TaskFormatError("no base input has an output the canonical solution gives",
                              path=where, task=task_id, field="base_input")
    tolerance = fields["atol"] or (_FLOAT_ATOL if any_float else None)
    return Task(
        name=task_id,
        prompt=fields["prompt"],
        entry_point=fields["entry_point"],
        checks=tuple(checks),
        visible_checks=(checks[0],),
        reference_solution=_reference_code(fields["prompt"], fields["canonical_solution"]),
        source=_source(task_id),
        setup_code=fields["setup_code"],
        float_tolerance=tolerance,
        metadata={"task_id": task_id, "suite": suite, "base_checks": base_checks,
                  "inputs_left_out": left_out},
    )


def load(path: str | os.PathLike[str] | None = None, *, suite: str = "plus",
         input_timeout: float = DEFAULT_INPUT_TIMEOUT) -> list[Task]:
    """Load HumanEval+ or MBPP+ from a local copy of EvalPlus's release file.

    ``suite``: "plus" (the base and the added inputs, EvalPlus's protocol) or "base" (the
    original benchmark's inputs only). ``input_timeout``: seconds the canonical solution may
    take on one input while the expected outputs are computed.
    """
    from agentenv.errors import ConfigError

    if suite not in SUITES:
        raise ConfigError(f"unknown EvalPlus suite {suite!r}; use 'plus' or 'base'")
    if not input_timeout > 0:
        raise ConfigError(f"input_timeout must be > 0 seconds, got {input_timeout!r}")
    local = local_source(path, ENV_VAR)
    if local is None:
        raise DatasetUnavailable(f"EvalPlus is read from a local copy only: {_HOW_LOCAL}.")
    parsed = [(_parse(row.data, row.where), row.where) for row in read_rows(local)]
    if not parsed:
        raise TaskFormatError("holds no EvalPlus records", path=str(local))
    seen: set[str] = set()
    for fields, where in parsed:
        if fields["task_id"] in seen:
            raise TaskFormatError("appears twice; each task_id must be unique", path=where,
                                  task=fields["task_id"], field="task_id")
        seen.add(fields["task_id"])
    jobs = [{"task_id": f["task_id"], "entry_point": f["entry_point"],
             "code": f["setup_code"] + _reference_code(f["prompt"], f["canonical_solution"]),
             "inputs": f["base_input"] + (f["plus_input"] if suite == "plus" else [])}
            for f, _ in parsed]
    outputs = reference_outputs(jobs, timeout=input_timeout)
    return [task_from_record(fields, answers, suite=suite, where=where)
            for (fields, where), answers in zip(parsed, outputs, strict=True)]
