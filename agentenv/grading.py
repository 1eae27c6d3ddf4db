"""Grading: what the sandboxed child computes for each check, and where and how it is judged.

This module is the sandbox's policy, kept apart from its process machinery
(:mod:`agentenv.sandbox`): :func:`plan_checks` turns a task's checks into the job items the child
executes and the checks a judge process runs, and :func:`judge` turns the frames that came back
into a :class:`~agentenv.sandbox.result.RunResult`. The child computes; it never decides.

A check is graded in one of three ways, and never in the candidate's process:

- **trusted** (``mode == "trusted"``): a single ``assert`` is decomposed with :mod:`ast` into the
  calls into the candidate it makes (``add(2, 3)`` in ``assert add(2, 3) == 5``). Only those call
  expressions, with their arguments, are sent to the child, which returns each result as plain
  data (see :mod:`agentenv.sandbox._wire`). The rest of the assertion, expected values included,
  is evaluated here with the returned values substituted, restricted to a small set of trusted
  builtins, with ``==``/``!=``/``in``/``not in`` compared under the task's ``equality``
  (:mod:`agentenv.values`: Python's own ``==`` by default, or ``"strict"``: same exact type all
  the way down; floats within ``float_tolerance`` when the task gives one), and with every
  operator and builtin call going through budgets, so no candidate value can make this process
  compute without bound. Anything that is not plain data fails the check ("returned a Foo,
  expected int"); a value over a budget, or any error while judging, fails the check with a
  message naming the limit, never an exception. Builtin names in the assertion (``abs``,
  ``sorted``, ``len``...) are the trusted side's own, so a candidate that redefines them gains
  nothing; only an assertion that calls one builtin name and nothing else (MBPP's ``assert
  sum(10, 15) == 6`` for a task *about* ``sum``) sends those calls to the child. An assertion that calls a
  name the task's setup code defines (a helper such as HumanEval's ``poly``) is not decomposed:
  in the child that helper would run after the candidate patched builtins and modules, so it
  goes to the judge process.
- **stdio** (:class:`~agentenv.tasks.schema.StdioCase`): the child runs the candidate as a
  program with the case's stdin and returns what it wrote to stdout; the expected output never
  leaves this process; the comparison ignores trailing spaces on each line and trailing newlines.
- **judge** (``mode == "judge"``): anything else (several statements, loops, helper functions,
  comprehensions, names from the setup code). The check program and the setup code run in a
  judge process (:mod:`agentenv.sandbox._judge`), sandboxed like the candidate's but forked
  apart from it, where every name the candidate defines is a proxy whose uses cross a channel
  to the candidate's process and come back as plain data. The judge reports verdicts on a pipe
  of its own; the candidate never sees these checks, their expected values or their helpers,
  and holds nothing a verdict could be written on. Only runs with such checks pay for the judge
  process. The judge compares with Python's ``==`` (floats within ``float_tolerance`` on single
  ``==``/``!=``), whatever the task's ``equality``: ``"strict"`` applies to the decomposed
  asserts only.

No verdict comes from the candidate's process, so ``RunResult.graded_in_child`` is always 0
(the field stays for records written before the judge process existed). Exit codes never
decide anything, and stdout is never parsed for verdicts.
"""

from __future__ import annotations

import ast
import builtins
import functools
import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import CodeType
from typing import TYPE_CHECKING, Any, Literal

from agentenv.tasks.schema import Check, StdioCase
from agentenv.values import (
    BudgetExceeded,
    bounded_repr,
    contains,
    equal,
    guarded_binop,
    guarded_call,
    strict_equal,
)

if TYPE_CHECKING:
    from agentenv.sandbox.result import Failure, FailureKind, RunResult

__all__ = [
    "TRUSTED_NAMES",
    "CheckPlan",
    "Plan",
    "judge",
    "normalise_stdout",
    "plan_checks",
    "strict_equal",
]

Mode = Literal["trusted", "judge", "stdio"]

# Names an assertion may use on the trusted side. Everything else is the candidate's (or the
# task setup's) and has to be computed in the child.
_TRUSTED_BUILTINS = (
    "abs", "all", "any", "bin", "bool", "bytes", "chr", "dict", "divmod", "enumerate", "filter",
    "float", "frozenset", "hex", "int", "isinstance", "len", "list", "map", "max", "min", "oct",
    "ord", "pow", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum",
    "tuple", "type", "zip",
)
TRUSTED_NAMES = frozenset((*_TRUSTED_BUILTINS, "math"))
_SAFE_BUILTINS = {name: getattr(builtins, name) for name in _TRUSTED_BUILTINS}

# Nodes that bind names or suspend evaluation: a call under one of them cannot be shipped alone.
_SCOPED = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.NamedExpr,
           ast.Await, ast.Yield, ast.YieldFrom)

_V, _EQ, _IN = "_agentenv_value", "_agentenv_equal", "_agentenv_contains"
_OP, _CALL, _PRIVATE = "_agentenv_op", "_agentenv_call", "_agentenv_private"
_OPERATORS: dict[type[ast.operator], tuple[str, Any]] = {
    ast.Add: ("+", operator.add), ast.Sub: ("-", operator.sub), ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv), ast.FloorDiv: ("//", operator.floordiv),
    ast.Mod: ("%", operator.mod), ast.Pow: ("**", operator.pow),
    ast.LShift: ("<<", operator.lshift), ast.RShift: (">>", operator.rshift),
    ast.BitOr: ("|", operator.or_), ast.BitXor: ("^", operator.xor),
    ast.BitAnd: ("&", operator.and_), ast.MatMult: ("@", operator.matmul),
}
_COMPUTE = {symbol: fn for symbol, fn in _OPERATORS.values()}


@dataclass(frozen=True)
class CheckPlan:
    """How one check is graded: where the verdict is made and what the child must compute.

    For ``trusted`` checks, ``calls`` are the call expressions the child evaluates (source
    text), ``program`` is the assertion rewritten to read those values, and ``expected_types``
    maps a call to the trusted operand it is compared against with ``==`` (for messages).
    """

    index: int
    check: Check
    mode: Mode
    calls: tuple[str, ...] = ()
    program: CodeType | None = None
    expected_types: tuple[tuple[int, CodeType], ...] = ()

    @property
    def text(self) -> str:
        return str(self.check)

    def job_item(self) -> dict[str, Any]:
        """What the child is sent for this check: never an expected value, never a judge check."""
        if isinstance(self.check, StdioCase):
            return {"i": self.index, "k": "stdio", "stdin": self.check.stdin}
        if self.mode != "trusted":
            raise ValueError(f"check {self.index} is run by the judge process, not the child")
        return {"i": self.index, "k": "calls", "calls": list(self.calls)}


@dataclass(frozen=True)
class Plan:
    """The grading plan of a check list, in order."""

    checks: tuple[CheckPlan, ...]

    @property
    def graded_in_judge(self) -> int:
        """Checks the judge process grades (loops, several statements, setup helpers...)."""
        return sum(1 for c in self.checks if c.mode == "judge")

    @property
    def needs_judge(self) -> bool:
        return any(c.mode == "judge" for c in self.checks)

    def job_items(self) -> list[dict[str, Any]]:
        """The candidate process's items: calls to evaluate and stdio cases, nothing else."""
        return [c.job_item() for c in self.checks if c.mode != "judge"]

    def judge_items(self) -> list[dict[str, Any]]:
        """The judge process's checks: index and source of each."""
        return [{"i": c.index, "src": str(c.check)} for c in self.checks if c.mode == "judge"]


def plan_checks(checks: Sequence[Check], *, setup_code: str = "") -> Plan:
    """Decide, for each check, what the child computes and where the verdict is made.

    ``setup_code`` is the task's setup: an assertion that calls a name it defines is left to the
    judge process (see the module docstring).
    """
    helpers = _setup_names(setup_code)
    plans = []
    for index, check in enumerate(checks):
        if not isinstance(check, (str, StdioCase)):
            raise TypeError(f"check {index} must be a str or StdioCase, got {type(check).__name__}")
        plans.append(_plan_one(index, check, helpers))
    return Plan(tuple(plans))


@functools.lru_cache(maxsize=256)
def _setup_names(setup_code: str) -> frozenset[str]:
    """The names the setup code binds at module level (functions, classes, imports, variables)."""
    if not setup_code.strip():
        return frozenset()
    try:
        tree = ast.parse(setup_code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()  # the child reports the setup's syntax error for every check
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return  # a body's own names are not the module's
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    try:
        visit(tree)
    except RecursionError:
        return frozenset()
    return frozenset(names)


@functools.lru_cache(maxsize=8192)
def _plan_one(index: int, check: Check, helpers: frozenset[str] = frozenset()) -> CheckPlan:
    if isinstance(check, StdioCase):
        return CheckPlan(index, check, "stdio")
    decomposed = _decompose(check, helpers)
    if decomposed is None:
        return CheckPlan(index, check, "judge")
    calls, program, expected = decomposed
    return CheckPlan(index, check, "trusted", calls, program, expected)


class _Decomposer(ast.NodeTransformer):
    """Replaces each call into untrusted code by ``_agentenv_value(j)`` and records its source.

    A call that would make the child call a setup helper (``helpers``) is refused: its value
    would come from helper code running after the candidate's.
    """

    def __init__(self, trusted: frozenset[str], helpers: frozenset[str] = frozenset()) -> None:
        self.trusted = trusted
        self.helpers = helpers
        self.calls: list[str] = []
        self.ok = True
        self.result: ast.expr | None = None

    def untrusted(self, node: ast.AST) -> bool:
        return _untrusted_names(node, self.trusted)

    def calls_helper(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and any(
            isinstance(n, ast.Name) and n.id in self.helpers for n in ast.walk(node.func))

    def visit(self, node: ast.AST) -> Any:
        if not self.ok:
            return node
        if isinstance(node, _SCOPED):
            self.ok = False
            return node
        if isinstance(node, ast.expr) and not self.untrusted(node):
            return node  # wholly trusted: evaluated here as written
        if isinstance(node, ast.Call) and self.untrusted(node.func):
            if any(isinstance(n, _SCOPED) or self.calls_helper(n) for n in ast.walk(node)):
                self.ok = False
                return node
            self.calls.append(ast.unparse(node))
            placeholder = ast.Call(func=ast.Name(_V, ast.Load()),
                                   args=[ast.Constant(len(self.calls) - 1)], keywords=[])
            return ast.copy_location(placeholder, node)
        if isinstance(node, ast.Name):
            self.ok = False  # a bare untrusted name (a variable, a function object)
            return node
        return self.generic_visit(node)


def _untrusted_names(node: ast.AST, trusted: frozenset[str] = TRUSTED_NAMES) -> bool:
    return any(isinstance(n, ast.Name) and n.id not in trusted and n.id != _V
               for n in ast.walk(node))


class _StrictComparisons(ast.NodeTransformer):
    """Rewrites ``==``, ``!=``, ``in``, ``not in`` into calls of the strict comparison."""

    def visit_Compare(self, node: ast.Compare) -> Any:
        self.generic_visit(node)
        operands = [node.left, *node.comparators]
        parts: list[ast.expr] = []
        for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
            part: ast.expr
            if isinstance(op, (ast.Eq, ast.NotEq)):
                part = ast.Call(ast.Name(_EQ, ast.Load()), [left, right], [])
            elif isinstance(op, (ast.In, ast.NotIn)):
                part = ast.Call(ast.Name(_IN, ast.Load()), [left, right], [])
            else:
                part = ast.Compare(left, [op], [right])
            if isinstance(op, (ast.NotEq, ast.NotIn)):
                part = ast.UnaryOp(ast.Not(), part)
            parts.append(part)
        result = parts[0] if len(parts) == 1 else ast.BoolOp(ast.And(), parts)
        return ast.copy_location(result, node)


class _Budgeted(ast.NodeTransformer):
    """Routes every operator and call of the trusted expression through the budgets.

    ``a ** b`` becomes ``_agentenv_op("**", a, b)``, ``f(x)`` becomes ``_agentenv_call(f, x)``
    (see :func:`agentenv.values.guarded_binop` / :func:`~agentenv.values.guarded_call`), a
    ``{*xs}`` display builds its set through ``set()``, and private attributes (``x.__pow__``)
    are refused: they are a way around the operators' budgets and no honest check needs them.
    """

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        self.generic_visit(node)
        symbol = _OPERATORS[type(node.op)][0]
        call = ast.Call(ast.Name(_OP, ast.Load()), [ast.Constant(symbol), node.left, node.right], [])
        return ast.copy_location(call, node)

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in (_V, _EQ, _IN):
            return node
        call = ast.Call(ast.Name(_CALL, ast.Load()), [node.func, *node.args], node.keywords)
        return ast.copy_location(call, node)

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        self.generic_visit(node)
        if not node.attr.startswith("_"):
            return node
        call = ast.Call(ast.Name(_PRIVATE, ast.Load()), [ast.Constant(node.attr)], [])
        return ast.copy_location(call, node)

    def visit_Set(self, node: ast.Set) -> Any:
        self.generic_visit(node)
        if not any(isinstance(e, ast.Starred) for e in node.elts):
            return node
        call = ast.Call(ast.Name(_CALL, ast.Load()),
                        [ast.Name("set", ast.Load()), ast.List(node.elts, ast.Load())], [])
        return ast.copy_location(call, node)


def _private(name: str) -> Any:
    raise BudgetExceeded(f"the check's trusted part may not use private attributes ({name})")


def _decompose(source: str, helpers: frozenset[str] = frozenset(),
               ) -> tuple[tuple[str, ...], CodeType, tuple[tuple[int, CodeType], ...]] | None:
    try:
        tree = ast.parse(source, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        return None
    original = tree.body[0].test
    decomposer = _decomposer_for(original, TRUSTED_NAMES, helpers)
    if decomposer is not None and not decomposer.calls:
        # An assertion that, as written, never calls into the candidate can only be about a
        # builtin name the candidate rebinds (MBPP 126 defines its own ``sum``): ask the child
        # for those calls, when the assertion calls that one name and nothing else. With two
        # (``all([sum(2, 3) == 6])``) nothing says which one the task is about, and a candidate
        # that redefined ``all`` would decide the verdict: every builtin stays trusted. Checks
        # that do call the candidate keep builtins trusted, so a candidate-defined ``abs`` or
        # ``sorted`` cannot rewrite the verdict.
        called = frozenset(n.func.id for n in ast.walk(original)
                           if isinstance(n, ast.Call) and isinstance(n.func, ast.Name))
        if len(called) == 1 and called <= TRUSTED_NAMES:
            decomposer = _decomposer_for(ast.parse(source).body[0].test,  # type: ignore[attr-defined]
                                         TRUSTED_NAMES - called, helpers)
    if decomposer is None:
        return None
    test = decomposer.result
    assert test is not None
    test = ast.fix_missing_locations(_Budgeted().visit(test))  # the expected side is budgeted too
    expected: list[tuple[int, CodeType]] = []
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            pair = (node.left, node.comparators[0])
            for this, other in (pair, pair[::-1]):
                if _is_placeholder(this) and not any(_is_placeholder(n) for n in ast.walk(other)):
                    index = this.args[0].value  # type: ignore[attr-defined]
                    expected.append((index, compile(ast.Expression(other), "<expected>", "eval")))
    rewritten = _StrictComparisons().visit(test)
    module = ast.fix_missing_locations(ast.Expression(rewritten))
    try:
        program = compile(module, f"<check: {source[:60]}>", "eval", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError):
        return None
    return tuple(decomposer.calls), program, tuple(expected)


def _decomposer_for(test: ast.expr, trusted: frozenset[str],
                    helpers: frozenset[str] = frozenset()) -> _Decomposer | None:
    """Run the decomposition; None when the assertion cannot be graded on the trusted side."""
    decomposer = _Decomposer(trusted, helpers)
    try:
        decomposer.result = decomposer.visit(test)
    except RecursionError:
        return None
    if not decomposer.ok or _untrusted_names(decomposer.result, trusted):
        return None
    return decomposer


def _is_placeholder(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == _V)


# --------------------------------------------------------------------------- judging

def normalise_stdout(text: str) -> str:
    """Output as a judge compares it: line endings unified, trailing spaces and final newlines gone."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).rstrip("\n")


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _short_repr(value: Any) -> str:
    return bounded_repr(value, 120)


def _describe_error(exc: BaseException) -> str:
    """``TypeName: message`` of an error raised while judging, bounded; never raises."""
    try:
        text = str(exc)
    except Exception:
        text = ""
    name = type(exc).__name__
    return _clip(f"{name}: {text}" if text else name, 300)


class _Missing(Exception):
    """A call's value never arrived (the child died or ran out of time first)."""


class _CallFailed(Exception):
    """A call raised in the child, or returned something that is not plain data."""

    def __init__(self, kind: str, message: str, j: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.j = j


def judge(
    plan: Plan,
    frames: Sequence[Mapping[str, Any]],
    *,
    timed_out: bool,
    isolation: str,
    exec_seconds: float = 0.0,
    stdout: str = "",
    stderr: str = "",
    float_tolerance: float | None = None,
    died: str | None = None,
    equality: str = "python",
    capped: int | None = None,
    judge_frames: Sequence[Mapping[str, Any]] = (),
    judge_died: str | None = None,
) -> RunResult:
    """Turn the frames that came back into a RunResult.

    ``frames`` are the candidate process's (values, stdio output, whether it loaded): every
    verdict on them is decided here. ``judge_frames`` are the judge process's verdicts on the
    ``judge`` checks, the only frames a verdict is taken from. ``died``/``judge_died`` say how
    a process ended when it did not finish (a signal, a limit), for the ``no_result`` messages;
    ``capped`` is the result channel's byte cap when the run's results reached it (checks that
    never reported then say so). ``equality`` is ``"python"`` or ``"strict"`` (see
    :mod:`agentenv.values`). Exit codes are never consulted. Whatever the frames hold, this
    returns: an error while judging one check fails that check with the error's message.
    """
    from agentenv.sandbox.result import RunResult

    load: Mapping[str, Any] | None = None
    stdio: dict[int, Mapping[str, Any]] = {}
    calls: dict[tuple[int, int], Mapping[str, Any]] = {}
    for frame in frames:
        kind, index = frame.get("t"), frame.get("i")
        if kind == "load":
            if load is None:
                load = frame
        elif type(index) is not int:
            continue
        elif kind == "stdio":
            stdio.setdefault(index, frame)
        elif kind == "call" and type(frame.get("j")) is int:
            calls.setdefault((index, frame["j"]), frame)
    verdicts: dict[int, Mapping[str, Any]] = {}
    judge_setup: Mapping[str, Any] | None = None
    for frame in judge_frames:
        if frame.get("t") == "check" and type(frame.get("i")) is int:
            verdicts.setdefault(frame["i"], frame)
        elif frame.get("t") == "setup" and judge_setup is None:
            judge_setup = frame

    def missing(cp: CheckPlan) -> Failure:
        from agentenv.sandbox.result import Failure

        if timed_out:
            return Failure(cp.index, cp.text, "timeout",
                           "the time limit was reached before this check finished")
        if cp.mode == "judge":
            why = f" ({judge_died})" if judge_died else ""
            return Failure(cp.index, cp.text, "no_result",
                           f"the judge process ended before reporting this check{why}")
        if capped is not None:
            return Failure(cp.index, cp.text, "no_result",
                           f"this check's result did not arrive: the run's results reached "
                           f"Limits.max_result_bytes ({capped:,} bytes)")
        why = f" ({died})" if died else ""
        return Failure(cp.index, cp.text, "no_result",
                       f"the candidate's process ended before reporting this check{why}")

    failures: list[Failure] = []
    passed: list[int] = []
    for cp in plan.checks:
        failure: Failure | None
        try:
            failure = _judge_one(cp, load, verdicts, judge_setup, stdio, calls, float_tolerance,
                                 equality, missing)
        except Exception as exc:  # a fault of the judge on this value: that check fails, no more
            failure = _failure(cp, "exception", f"the judge could not evaluate this check "
                                                f"({_describe_error(exc)})")
        if failure is None:
            passed.append(cp.index)
        else:
            failures.append(failure)
    return RunResult.from_counts(
        len(passed), len(plan.checks), timed_out=timed_out, failures=tuple(failures),
        isolation=isolation, graded_in_child=0, exec_seconds=exec_seconds,
        stdout=stdout, stderr=stderr, passed_indices=tuple(passed),
    )


def _judge_one(cp: CheckPlan, load: Mapping[str, Any] | None,
               verdicts: Mapping[int, Mapping[str, Any]], judge_setup: Mapping[str, Any] | None,
               stdio: Mapping[int, Mapping[str, Any]],
               calls: Mapping[tuple[int, int], Mapping[str, Any]], float_tolerance: float | None,
               equality: str, missing: Any) -> Failure | None:
    failure: Failure | None
    if cp.mode == "stdio":
        failure = _judge_stdio(cp, stdio.get(cp.index), missing)
    elif load is None:
        failure = missing(cp)
    elif load.get("ok") is not True:
        failure = _failure(cp, _kind(load.get("kind")), str(load.get("msg", "")))
    elif cp.mode == "judge":  # the judge process's verdict, or its setup's failure
        reported = verdicts.get(cp.index, judge_setup)
        if reported is None:
            failure = missing(cp)
        elif reported.get("ok") is True and reported is not judge_setup:
            failure = None
        else:
            kind = reported.get("kind")
            failure = _failure(cp, "no_result" if kind == "no_result" else _kind(kind),
                               str(reported.get("msg", "")))
    else:
        failure = _judge_trusted(cp, calls, float_tolerance, equality, missing)
    return failure


def _kind(value: Any) -> FailureKind:
    return value if value in ("assertion", "exception", "syntax") else "exception"


def _failure(cp: CheckPlan, kind: FailureKind, message: str) -> Failure:
    from agentenv.sandbox.result import Failure

    message = message.strip()
    if kind == "assertion" and message in ("", "AssertionError"):
        message = "assertion failed"
    return Failure(cp.index, cp.text, kind, _clip(message, 500))


def _decode_value(data: Any, budget: Any) -> Any:
    """A call's value from its frame bytes; over a wire budget it is a failed call naming it."""
    # Imported here, not at the top: agentenv.sandbox imports this module.
    from agentenv.sandbox._wire import ValueBudget, decode_value

    try:
        return decode_value(data, budget)
    except ValueBudget as exc:
        raise _CallFailed("budget", str(exc)) from None


def _judge_trusted(cp: CheckPlan, calls: Mapping[tuple[int, int], Mapping[str, Any]],
                   tolerance: float | None, equality: str, missing: Any) -> Failure | None:
    from agentenv.sandbox._wire import DecodeBudget

    values: dict[int, Any] = {}
    budget = DecodeBudget()  # the values of one check are alive together: they share one budget

    def value(j: int) -> Any:
        if j in values:
            return values[j]
        frame = calls.get((cp.index, j))
        if frame is None:
            raise _Missing
        if "v" not in frame:
            if frame.get("kind") in ("type", "budget"):
                raise _CallFailed(str(frame["kind"]), str(frame.get("msg", "object")), j)
            raise _CallFailed(_kind(frame.get("kind")), str(frame.get("msg", "")), j)
        try:
            values[j] = _decode_value(frame["v"], budget)
        except _CallFailed as exc:
            exc.j = j
            raise
        except (ValueError, TypeError, OverflowError, RecursionError, MemoryError):
            raise _CallFailed("malformed", "its result arrived malformed", j) from None
        return values[j]

    namespace = {
        "__builtins__": _SAFE_BUILTINS, "math": math, _V: value,
        _EQ: lambda a, e: equal(equality, a, e, tolerance),
        _IN: lambda a, c: contains(equality, a, c, tolerance),
        _OP: lambda symbol, a, b: guarded_binop(symbol, a, b, _COMPUTE[symbol]),
        _CALL: guarded_call, _PRIVATE: _private,
    }
    assert cp.program is not None
    try:
        ok = bool(eval(cp.program, namespace))
    except _Missing:
        return missing(cp)
    except _CallFailed as exc:
        j = exc.j if exc.j is not None else _failing_call(cp, calls)
        call = cp.calls[j] if j is not None else "the call"
        if exc.kind == "type":
            expected = _expected_type(cp, j, namespace)
            wanted = f", expected {expected}" if expected else " (only plain data is accepted)"
            return _failure(cp, "assertion", f"{_clip(call, 80)} returned a {exc}{wanted}")
        if exc.kind == "budget":
            return _failure(cp, "assertion",
                            f"{_clip(call, 80)} returned a value over the judge's budget: {exc}")
        if exc.kind == "malformed":
            return _failure(cp, "exception", f"the result of {_clip(call, 80)} arrived malformed")
        return _failure(cp, "exception" if exc.kind == "assertion" else _kind(exc.kind),
                        f"{_clip(call, 80)} raised {exc}")
    except BudgetExceeded as exc:
        return _failure(cp, "assertion", f"over the judge's budget: {_clip(str(exc), 300)}")
    except Exception as exc:  # the trusted expression failed on the returned values
        return _failure(cp, "exception", _describe_error(exc))
    if ok:
        return None
    got = "; ".join(f"{_clip(cp.calls[j], 60)} returned {_short_repr(v)}"
                    for j, v in sorted(values.items()))
    return _failure(cp, "assertion", got or "assertion failed")


def _failing_call(cp: CheckPlan, calls: Mapping[tuple[int, int], Mapping[str, Any]]) -> int | None:
    for j in range(len(cp.calls)):
        frame = calls.get((cp.index, j))
        if frame is not None and "v" not in frame:
            return j
    return None


def _expected_type(cp: CheckPlan, j: int | None, namespace: dict[str, Any]) -> str | None:
    for index, code in cp.expected_types:
        if index == j:
            try:
                return type(eval(code, namespace)).__name__
            except Exception:
                return None
    return None


def _judge_stdio(cp: CheckPlan, frame: Mapping[str, Any] | None, missing: Any) -> Failure | None:
    assert isinstance(cp.check, StdioCase)
    if frame is None:
        return missing(cp)
    out = frame.get("out")
    if type(out) is not str:
        return _failure(cp, "exception", "the program's output did not arrive")
    if frame.get("kind"):
        return _failure(cp, _kind(frame["kind"]), str(frame.get("msg", "")))
    if normalise_stdout(out) == normalise_stdout(cp.check.expected_stdout):
        return None
    return _failure(cp, "assertion",
                    f"expected stdout {_clip(cp.check.expected_stdout)!r}, got {_clip(out)!r}")
