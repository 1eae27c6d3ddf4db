"""Hackable checks: comparisons only the candidate's own ``__eq__`` can decide.

A check such as ``assert Stack() == Stack()`` or ``assert f(x) == g(y)`` compares two values the
candidate makes, with no expected value from trusted data on either side. When those values are
the candidate's own objects, plain Python decides the comparison with the candidate's
``__eq__``, and so does agentenv (fidelity: an honest program gets Python's verdict); a class
whose ``__eq__`` always returns True then passes it. No trusted side can tell an honest
``__eq__`` from a lying one there, so such a check is a property of the task, not of the
grader: :func:`hackable_checks` finds them statically for ``agentenv tasks validate`` to list.

A value is *candidate-made* when its expression reads a name the candidate defines (anything
not bound by the task's prelude or setup, not a builtin or standard-library module, and not a
name the check itself bound to trusted data), unless its outermost operation turns it into
builtin data compared by builtin ``==`` (``len(...)``, ``str(...)``, ``int(...)``...). A
comparison (``==`` or ``!=``) between two candidate-made values is flagged.

Not here: deciding verdicts (:mod:`agentenv.grading.judging`), which names a check reads at
grading time (:mod:`agentenv.grading.names`).
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable
from dataclasses import dataclass

from agentenv.grading import names
from agentenv.tasks.schema import Task

__all__ = ["HackableCheck", "hackable_checks"]

# Calls whose result is builtin data, compared by the builtin type's own ``==`` whatever went in.
_TO_PLAIN = frozenset({"len", "str", "repr", "int", "float", "bool", "bytes", "isinstance", "hash",
                       "ord", "chr", "bin", "hex", "oct", "type", "callable", "id"})
_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class HackableCheck:
    """One comparison in a task's check that only the candidate's ``__eq__`` decides."""

    task: str
    check: str
    comparison: str
    why: str


class _Scope:
    def __init__(self, task_bound: frozenset[str]) -> None:
        self.task_bound = task_bound
        self.made: set[str] = set()  # names the check bound to candidate-made values
        self.trusted: set[str] = set()  # names the check bound to trusted data

    def candidate_name(self, name: str) -> bool:
        if name in self.made:
            return True
        if name in self.trusted or name in self.task_bound:
            return False
        return name not in _BUILTINS and name not in names.STDLIB_MODULES

    def made_by_candidate(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in _TO_PLAIN and not self.candidate_name(node.func.id):
            return False
        if isinstance(node, (ast.Constant, ast.Lambda)):
            return False
        return any(isinstance(n, ast.Name) and self.candidate_name(n.id) for n in ast.walk(node))

    def bind(self, target: ast.expr, made: bool) -> None:
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                (self.made if made else self.trusted).add(n.id)
                (self.trusted if made else self.made).discard(n.id)


def _comparisons(node: ast.AST) -> Iterable[tuple[ast.expr, ast.expr]]:
    for n in ast.walk(node):
        if isinstance(n, ast.Compare):
            operands = [n.left, *n.comparators]
            for op, left, right in zip(n.ops, operands, operands[1:], strict=False):
                if isinstance(op, (ast.Eq, ast.NotEq)):
                    yield left, right


def _check_source(check: object) -> str | None:
    return check if isinstance(check, str) else None


def _bind(scope: _Scope, stmt: ast.stmt) -> None:
    """Mark every name ``stmt`` binds as candidate-made or trusted, by what it is bound to."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Assign):
            made = scope.made_by_candidate(node.value)
            for target in node.targets:
                scope.bind(target, made)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            scope.bind(node.target, scope.made_by_candidate(node.value))
        elif isinstance(node, (ast.For, ast.comprehension)):
            scope.bind(node.target, scope.made_by_candidate(node.iter))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            scope.bind(node.optional_vars, scope.made_by_candidate(node.context_expr))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):  # the check's own imports
            scope.trusted.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arguments):  # a helper the check defines: its parameters
            scope.trusted.update(a.arg for a in (*node.posonlyargs, *node.args, *node.kwonlyargs))


def hackable_checks(task: Task) -> list[HackableCheck]:
    """The comparisons of ``task``'s checks (hidden and visible) that compare two
    candidate-made values, each with the reason it is flagged."""
    bound = names.task_names(task.prelude or "", task.setup_code or "")
    found: list[HackableCheck] = []
    seen: set[tuple[str, str]] = set()
    for check in (*task.checks, *(task.visible_checks or ())):
        source = _check_source(check)
        if source is None:
            continue
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError):
            continue
        scope = _Scope(bound)
        for stmt in tree.body:
            # Twice: a walk visits an assignment before the comprehension or loop inside its
            # value that binds a name it reads.
            _bind(scope, stmt)
            _bind(scope, stmt)
            for left, right in _comparisons(stmt):
                if scope.made_by_candidate(left) and scope.made_by_candidate(right):
                    comparison = f"{ast.unparse(left)} vs {ast.unparse(right)}"
                    if (source, comparison) in seen:
                        continue
                    seen.add((source, comparison))
                    found.append(HackableCheck(
                        task.name, source, comparison,
                        "both sides are values the candidate makes and neither is trusted data: "
                        "when they are the candidate's own objects, its __eq__ decides (as in "
                        "Python), so an always-equal class passes; compare with an expected "
                        "value instead"))
    return found
