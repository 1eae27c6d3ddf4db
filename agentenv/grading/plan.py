"""Planning: for each check, what the sandboxed child computes and where the verdict is made.

:func:`plan_checks` turns a task's checks into a :class:`Plan`: for each check its mode
(``trusted``: an ``assert`` decomposed with :mod:`ast` into the calls into the candidate it
makes, each shipped alone: what the check then does with a call's result (``f(x).strip()``,
``top(3)[0]``, ``make().attr``) is a list of operations the trusted side applies to the value
once it has crossed, and the child applies only while the result is one of the candidate's
objects, which cannot cross, and only those that carry none of the check's data (attribute
reads, calls without arguments: the job is in the candidate's memory); a call of an attribute of
a bare name (``np.allclose(...)``) is never shipped; ``stdio``; ``judge``: anything else, run by
the judge process), the job items the
candidate's process is sent (keys from :mod:`agentenv.sandbox._schema`) and the checks the
judge process runs. How the three modes are graded is told in :mod:`agentenv.grading`; the
verdicts themselves are made in :mod:`agentenv.grading.judging`, which evaluates the rewritten
assertions this module compiles.
"""

from __future__ import annotations

import ast
import builtins
import functools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from types import CodeType
from typing import Any, Literal

from agentenv.grading import names
from agentenv.sandbox.contract import schema
from agentenv.tasks.schema import Check, StdioCase

__all__ = ["TRUSTED_NAMES", "CheckPlan", "Plan", "plan_checks"]

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
_BUILTIN_NAMES = frozenset(dir(builtins))
# Standard-library module names a check may read only in the judge (``math`` is evaluated here).
_STDLIB_NAMES = names.STDLIB_MODULES - TRUSTED_NAMES

# Nodes that bind names or suspend evaluation: a call under one of them cannot be shipped alone.
_SCOPED = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.NamedExpr,
           ast.Await, ast.Yield, ast.YieldFrom)

_V, _EQ, _IN = "_agentenv_value", "_agentenv_equal", "_agentenv_contains"
_OP, _CALL, _PRIVATE = "_agentenv_op", "_agentenv_call", "_agentenv_private"
_RECV, _FORMAT, _NE = "_agentenv_recv", "_agentenv_format", "_agentenv_not_equal"
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
    ``then`` holds, per call, the operations the check applies to its result (attribute reads,
    method calls, subscripts: source over ``_agentenv_recv``) and ``then_code`` the same,
    compiled with the budgets: they run here on the rebuilt value, and in the child only
    while the result is one of the candidate's objects.
    """

    index: int
    check: Check
    mode: Mode
    calls: tuple[str, ...] = ()
    program: CodeType | None = None
    expected_types: tuple[tuple[int, CodeType], ...] = ()
    then: tuple[tuple[str, ...], ...] = ()
    then_code: tuple[tuple[CodeType, ...], ...] = ()

    @property
    def text(self) -> str:
        return str(self.check)

    def job_item(self) -> dict[str, Any]:
        """What the child is sent for this check: never an expected value, never a judge check."""
        if isinstance(self.check, StdioCase):
            return {schema.ITEM_INDEX: self.index, schema.ITEM_KIND: schema.ITEM_STDIO,
                    schema.STDIN: self.check.stdin}
        if self.mode != "trusted":
            raise ValueError(f"check {self.index} is run by the judge process, not the child")
        return {schema.ITEM_INDEX: self.index, schema.ITEM_KIND: schema.ITEM_CALLS,
                schema.CALL_SOURCES: list(self.calls),
                schema.CALL_THEN: [list(_without_data(ops)) for ops in self.then]}


@dataclass(frozen=True)
class Plan:
    """The grading plan of a check list, in order.

    ``imports`` are the candidate's standard-library (and exposed packages') imports that judge
    checks read (``name, module, attribute``; see :mod:`agentenv.grading.names`): the judge
    makes them itself. ``defines`` are the names the task asks the candidate to define (None:
    not said; every other name is then the candidate's).
    """

    checks: tuple[CheckPlan, ...]
    imports: tuple[tuple[str, str, str], ...] = ()
    defines: frozenset[str] | None = None

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
        return [{schema.ITEM_INDEX: c.index, schema.CHECK_SOURCE: str(c.check)}
                for c in self.checks if c.mode == "judge"]


def plan_checks(checks: Sequence[Check], *, setup_code: str = "", prelude: str = "",
                code: str = "", rerouted: frozenset[int] = frozenset(),
                defines: frozenset[str] | None = None) -> Plan:
    """Decide, for each check, what the child computes and where the verdict is made.

    A check that reads a name the task binds (its ``prelude``, its ``setup_code``, an earlier
    check), a standard-library module, or a name the candidate's ``code`` imports from the
    standard library is left to the judge process, where those names are the judge's own (the
    rule is :mod:`agentenv.grading.names`'); a trusted-side decomposition would evaluate them
    in the candidate's process. When a setup statement that only the judge runs may act on the
    candidate's objects (``Cfg.limit = 10``), every check goes to the judge, after it.
    ``rerouted`` are indices of checks to leave to the judge process whatever they look like:
    ones whose calls returned candidate objects on a first run
    (:func:`agentenv.grading.run.run_tests` re-runs them so). A check that reads an exposed
    third-party package's name, or (with ``defines``, the names the task asks the candidate to
    define) any name the task does not ask for, is the judge's too: shipped to the child, the
    call would hand the candidate's binding of that name the check's data.
    """
    helpers = _setup_names(setup_code)
    task = names.task_names(prelude or "", setup_code or "")
    packages = names.exposed_packages()
    imported = names.candidate_imports(code, packages) if code else {}
    judged = task | imported.keys() | _STDLIB_NAMES | packages
    # setup statements that act on the candidate run in the judge, before its checks: all of them
    everything = bool(setup_code) and names.setup_acts_on_the_candidate(setup_code)
    earlier: set[str] = set()
    plans = []
    read: set[str] = set()
    judging = False  # a check before this one goes to the judge
    for index, check in enumerate(checks):
        if not isinstance(check, (str, StdioCase)):
            raise TypeError(f"check {index} must be a str or StdioCase, got {type(check).__name__}")
        forced, reads = False, frozenset[str]()
        if isinstance(check, str):
            reads = names.read_names(check)
            # The candidate's process computes every trusted check's calls before it serves
            # the judge: a trusted check after a judge check would see the candidate's state
            # (a counter, a cache) before that judge check's calls changed it, as Python never
            # does. From the first judge check on, every check goes to the judge, in order.
            forced = bool(index in rerouted or everything or reads & judged or reads & earlier
                          or judging or (names.UNKNOWN in task and reads - TRUSTED_NAMES)
                          or (defines is not None and reads - defines - TRUSTED_NAMES - _BUILTIN_NAMES))
            earlier |= names.bound_names(check)
        plan = _plan_one(index, check, helpers, forced)
        if plan.mode == "judge":
            read |= reads
            judging = True
        plans.append(plan)
    imports = tuple((n, *imported[n]) for n in sorted(read & imported.keys()))
    return Plan(tuple(plans), imports, defines)


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
def _plan_one(index: int, check: Check, helpers: frozenset[str] = frozenset(),
              judge: bool = False) -> CheckPlan:
    if isinstance(check, StdioCase):
        return CheckPlan(index, check, "stdio")
    if judge:
        return CheckPlan(index, check, "judge")
    decomposed = _decompose(check, helpers)
    if decomposed is None:
        return CheckPlan(index, check, "judge")
    calls, program, expected, then = decomposed
    try:
        then_code = tuple(tuple(_compile_op(op) for op in ops) for ops in then)
    except (SyntaxError, ValueError, RecursionError):
        return CheckPlan(index, check, "judge")
    return CheckPlan(index, check, "trusted", calls, program, expected,
                     tuple(tuple(ast.unparse(op) for op in ops) for ops in then), then_code)


@functools.lru_cache(maxsize=4096)
def _without_data(ops: tuple[str, ...]) -> tuple[str, ...]:
    """The operations on a call's result the child may be sent: those before the first that
    carries any of the check's data (an argument, a subscript). The child's job is in the
    candidate's memory, so ``.startswith('abc')`` sent there would hand it ``'abc'``; the rest
    is applied on the trusted side once the value has crossed (or, for an object that cannot
    cross, in the judge process, as every such check is)."""
    kept: list[str] = []
    for op in ops:
        try:
            node = ast.parse(op, mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            break
        if isinstance(node, ast.Call) and not node.args and not node.keywords:
            node = node.func
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == _RECV):
            break
        kept.append(op)
    return tuple(kept)


def _compile_op(op: ast.expr) -> CodeType:
    """One operation on a call's result, as the trusted side runs it: budgeted, strict ``==``."""
    tree = _StrictComparisons().visit(_Budgeted().visit(ast.fix_missing_locations(
        ast.Expression(_copy(op)))))
    return compile(ast.fix_missing_locations(tree), "<check>", "eval", dont_inherit=True)


def _copy(node: ast.expr) -> ast.expr:
    return ast.parse(ast.unparse(node), mode="eval").body


class _Decomposer(ast.NodeTransformer):
    """Replaces each call into untrusted code by ``_agentenv_value(j)`` and records its source.

    A call that would make the child call a setup helper (``helpers``) is refused: its value
    would come from helper code running after the candidate's.
    """

    def __init__(self, trusted: frozenset[str], helpers: frozenset[str] = frozenset()) -> None:
        self.trusted = trusted
        self.helpers = helpers
        self.calls: list[str] = []
        self.then: list[list[ast.expr]] = []
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
        if isinstance(node, (ast.Call, ast.Attribute, ast.Subscript)):
            chained = self.chain(node)
            if chained is not None:
                return chained
        if isinstance(node, ast.Call) and self.untrusted(node.func):
            if (isinstance(node.func, ast.Attribute) and not node.func.attr.startswith("__")
                    and not isinstance(node.func.value, (ast.Call, ast.Attribute, ast.Subscript,
                                                         ast.Name))):
                # ``(f(x) + y).strip()``: a method of a value computed here, from the calls'
                # values; it runs here too, never in the child on the candidate's say-so.
                return self.generic_visit(node)
            return self.ship(node, [])
        if isinstance(node, ast.Name):
            self.ok = False  # a bare untrusted name (a variable, a function object)
            return node
        return self.generic_visit(node)

    def ship(self, node: ast.Call, ops: list[ast.expr]) -> ast.expr:
        """Send the call ``node`` to the child; ``ops`` are applied to its result after it."""
        if _constructs(node) or _names_a_namespace(node) or any(
                isinstance(n, _SCOPED) or self.calls_helper(n) or _untrusted_builtin(n)
                for n in ast.walk(node)):
            self.ok = False
            return node
        self.calls.append(ast.unparse(node))
        self.then.append(ops)
        placeholder = ast.Call(func=ast.Name(_V, ast.Load()),
                               args=[ast.Constant(len(self.calls) - 1)], keywords=[])
        return ast.copy_location(placeholder, node)

    def chain(self, node: ast.expr) -> ast.expr | None:
        """``f(x).strip().upper()``, ``top(3)[0]``, ``make().attr``: the call into the candidate
        is shipped alone and what the check does to its result (public attributes, method calls
        and subscripts with trusted arguments) becomes operations on the value, applied on the
        trusted side once it has crossed. None when ``node`` is not such a chain."""
        ops: list[ast.expr] = []
        cur: ast.expr = node
        recv = ast.Name(_RECV, ast.Load())
        while True:
            if (isinstance(cur, ast.Call) and isinstance(cur.func, ast.Attribute)
                    and not cur.func.attr.startswith("__") and self.untrusted(cur.func.value)
                    and not _constructs(cur.func.value)  # Solution().solve(x): shipped whole
                    and not any(self.untrusted(a) for a in cur.args)
                    and not any(self.untrusted(k.value) for k in cur.keywords)):
                ops.append(ast.Call(ast.Attribute(recv, cur.func.attr, ast.Load()),
                                    cur.args, cur.keywords))
                cur = cur.func.value
            elif (isinstance(cur, ast.Attribute) and not cur.attr.startswith("__")
                  and self.untrusted(cur.value)):
                ops.append(ast.Attribute(recv, cur.attr, ast.Load()))
                cur = cur.value
            elif (isinstance(cur, ast.Subscript) and self.untrusted(cur.value)
                  and not self.untrusted(cur.slice)):
                ops.append(ast.Subscript(recv, cur.slice, ast.Load()))
                cur = cur.value
            else:
                break
        if not ops or not (isinstance(cur, ast.Call) and self.untrusted(cur.func)):
            return None
        if any(isinstance(n, _SCOPED) for op in ops for n in ast.walk(op)):
            return None
        ops.reverse()
        return ast.copy_location(self.ship(cur, ops), node)


def _constructs(node: ast.AST) -> bool:
    """A call of a capitalised name, shipped as a value of its own: by convention it makes an
    object of a class, which the trusted side cannot hold, so the check goes to the judge
    process (``Solution().solve(x)`` is still shipped whole: its value is the method's)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id[:1].isupper() and node.func.id not in TRUSTED_NAMES)


def _names_a_namespace(node: ast.Call) -> bool:
    """A call of an attribute of a bare name (``np.allclose(...)``, ``Calc.add(2, 3)``): the
    name is a module or a class; the judge process resolves it (a module is its own import
    there), so the call and the check's data in it never reach the candidate's binding."""
    func = node.func
    while isinstance(func, ast.Attribute):
        func = func.value
    return isinstance(func, ast.Name) and func is not node.func


def _untrusted_builtin(node: ast.AST) -> bool:
    """A call of a builtin the trusted side does not evaluate itself (``issubclass``,
    ``hasattr``): in the child it would be whatever the candidate made of it, so the check
    goes to the judge process, whose builtins are its own."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id not in TRUSTED_NAMES and hasattr(builtins, node.func.id))


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
            if isinstance(op, ast.Eq):
                part = ast.Call(ast.Name(_EQ, ast.Load()), [left, right], [])
            elif isinstance(op, ast.NotEq):  # its own call: an array's != is an array
                part = ast.Call(ast.Name(_NE, ast.Load()), [left, right], [])
            elif isinstance(op, (ast.In, ast.NotIn)):
                part = ast.Call(ast.Name(_IN, ast.Load()), [left, right], [])
            else:
                part = ast.Compare(left, [op], [right])
            if isinstance(op, ast.NotIn):
                part = ast.UnaryOp(ast.Not(), part)
            parts.append(part)
        result = parts[0] if len(parts) == 1 else ast.BoolOp(ast.And(), parts)
        return ast.copy_location(result, node)


class _Budgeted(ast.NodeTransformer):
    """Routes every operator and call of the trusted expression through the budgets.

    ``a ** b`` becomes ``_agentenv_op("**", a, b)``, ``f(x)`` becomes ``_agentenv_call(f, x)``
    (see :func:`agentenv.grading.values.guarded_binop` / :func:`~agentenv.grading.values.guarded_call`), a
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
        if isinstance(node.func, ast.Name) and node.func.id in (_V, _EQ, _NE, _IN):
            return node
        call = ast.Call(ast.Name(_CALL, ast.Load()), [node.func, *node.args], node.keywords)
        return ast.copy_location(call, node)

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        self.generic_visit(node)
        if not node.attr.startswith("__"):
            return node
        call = ast.Call(ast.Name(_PRIVATE, ast.Load()), [ast.Constant(node.attr)], [])
        return ast.copy_location(call, node)

    def visit_FormattedValue(self, node: ast.FormattedValue) -> Any:
        self.generic_visit(node)
        if node.format_spec is None or all(isinstance(v, ast.Constant)
                                           for v in getattr(node.format_spec, "values", ())):
            return node  # a spec written in the check: the task's own width
        # A spec computed from values (``f"{x:{w}}"``): its widths go through the budget.
        call = ast.Call(ast.Name(_FORMAT, ast.Load()),
                        [node.value, ast.Constant(node.conversion), node.format_spec], [])
        return ast.copy_location(ast.FormattedValue(call, -1, None), node)

    def visit_Set(self, node: ast.Set) -> Any:
        self.generic_visit(node)
        if not any(isinstance(e, ast.Starred) for e in node.elts):
            return node
        call = ast.Call(ast.Name(_CALL, ast.Load()),
                        [ast.Name("set", ast.Load()), ast.List(node.elts, ast.Load())], [])
        return ast.copy_location(call, node)


def _decompose(source: str, helpers: frozenset[str] = frozenset(),
               ) -> tuple[tuple[str, ...], CodeType, tuple[tuple[int, CodeType], ...],
                          tuple[list[ast.expr], ...]] | None:
    try:
        tree = ast.parse(source, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        return None
    original = tree.body[0].test
    if _asks_identity(original):
        return None
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
    if _calls_lazily(test):
        return None
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
    return tuple(decomposer.calls), program, tuple(expected), tuple(decomposer.then)


_SINGLETONS = (None, True, False, Ellipsis)


def _asks_identity(test: ast.expr) -> bool:
    """Whether the assertion uses ``is`` / ``is not`` other than against ``None``, ``True``,
    ``False`` or ``...``: the identity of what a call returns (``table(3) is table(3)``, a
    cached list) is lost when each result crosses as a copy, so the judge, which keeps one
    object per candidate object, decides it."""
    try:
        nodes = list(ast.walk(test))
    except RecursionError:
        return True
    for node in nodes:
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
            if isinstance(op, (ast.Is, ast.IsNot)) and not any(
                    isinstance(side, ast.Constant) and any(side.value is s for s in _SINGLETONS)
                    for side in (left, right)):
                return True
    return False


def _calls_lazily(test: ast.expr) -> bool:
    """Whether a call into the candidate sits where Python may skip it: after the first operand
    of ``and``/``or``, in a branch of ``x if c else y``, past the first link of a chained
    comparison. The child computes every shipped call, so a stateful candidate (a counter)
    would see calls Python never makes and later checks would run against another state;
    such an assertion goes to the judge, which evaluates it as Python does."""
    for node in ast.walk(test):
        if isinstance(node, ast.BoolOp):
            lazy: list[ast.AST] = list(node.values[1:])
        elif isinstance(node, ast.IfExp):
            lazy = [node.body, node.orelse]
        elif isinstance(node, ast.Compare) and len(node.ops) > 1:
            lazy = list(node.comparators[1:])
        else:
            continue
        if any(_is_placeholder(n) for part in lazy for n in ast.walk(part)):
            return True
    return False


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
