"""Names: which of a check's names are the task's (resolved on the trusted side) and which the candidate's.

Plain Python runs a task's prelude, the candidate's code and the task's setup as one module,
then each check in that module's namespace, so a check reads names from four sources. The rule
agentenv enforces (the contract in ``ARCHITECTURE.md``):

- names the task binds (its prelude, its setup, the checks run before this one) are the task's:
  the judge process binds them itself, and the candidate's rebinding of them is never seen;
- a standard-library module or a third-party package exposed to the candidate
  (:func:`exposed_packages`), or a name the candidate bound by importing from one
  (``from re import fullmatch``, ``import numpy as np``: the check relies on that import, as in
  Python), is the judge's own fresh import, whatever the candidate did to its copy; a name the
  candidate bound to a module object some other way is the judge's import of that module's
  name, or unbound;
- what the task asks the candidate to define (:func:`asked_names`: the entry point and what
  the reference solution defines) is the candidate's. When the task says what that is, every
  other name a check reads stays unbound in the judge (a ``NameError``, as in a fresh
  interpreter running the task without the candidate's extras): a helper the candidate
  defines (``isclose``, ``np``) never gets the check's data. Without it (``run_tests`` called
  with no ``defines``) every other name is the candidate's, as in plain Python.

:func:`task_names` and :func:`candidate_imports` give the plan what it needs to send every
check that reads a task or standard-library name to the judge. :func:`setup_for_candidate`
splits the setup: the candidate's process gets only the setup's definitions (functions,
classes, imports) that its own code reads, and the statements with no data of their own
(``sys.setrecursionlimit(10**6)``); data such as ``CASES = [(input, expected), ...]`` stays
with the judge, which passes the candidate only the arguments of its calls.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import re
import symtable
import sys
from collections.abc import Sequence

from agentenv import settings
from agentenv.sandbox.contract import package_dirs

__all__ = ["STDLIB_MODULES", "asked_names", "bound_names", "candidate_imports", "exposed_packages",
           "read_names", "setup_for_candidate", "task_names", "unresolved_names"]

STDLIB_MODULES = frozenset(getattr(sys, "stdlib_module_names", ()))
# Importing these has effects beyond binding names (a browser, a window, printing): a star
# import of one in a prelude is treated as binding unknown names.
_NOISY = frozenset({"antigravity", "this", "__hello__", "__phello__", "idlelib", "tkinter",
                    "turtle", "turtledemo"})
# Calls an effect-only setup statement may not make: they could bind or reveal data.
_NOT_EFFECTS = frozenset({"exec", "eval", "compile", "globals", "locals", "vars", "setattr",
                          "delattr", "__import__", "open", "print", "input", "breakpoint"})
UNKNOWN = "*"  # in task_names: the prelude binds names that cannot be known without running it


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None


def _walk(node: ast.AST) -> list[ast.AST]:
    try:
        return list(ast.walk(node))
    except RecursionError:
        return []


@functools.lru_cache(maxsize=8192)
def read_names(source: str) -> frozenset[str]:
    """Every name a program reads (loads), wherever it appears; empty if it does not parse."""
    tree = _parse(source)
    if tree is None:
        return frozenset()
    return frozenset(n.id for n in _walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


def _module_level(tree: ast.Module) -> list[ast.stmt]:
    """The statements that run at module level: into if/try/with/for bodies, not into defs."""
    out: list[ast.stmt] = []
    stack: list[ast.stmt] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        children: list[ast.stmt] = []
        for field in ("body", "orelse", "finalbody"):
            children.extend(getattr(node, field, ()) or ())
        for handler in getattr(node, "handlers", ()) or ():
            children.extend(handler.body)
        for case in getattr(node, "cases", ()) or ():
            children.extend(case.body)
        stack.extend(reversed(children))
    return out


def _binds(node: ast.stmt) -> set[str]:
    """The module-level names one statement binds itself (not those of nested statements)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
    names: set[str] = set()
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
    elif isinstance(node, ast.Delete):
        targets = list(node.targets)
    elif isinstance(node, ast.Try):
        names.update(h.name for h in node.handlers if h.name)
    for target in targets:
        names |= _target_names(target)
    # walrus and comprehension-free expressions at module level bind too
    if not isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try)):
        names.update(n.target.id for n in _walk(node)
                     if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name))
    return names


def _target_names(target: ast.AST) -> set[str]:
    """The names an assignment target binds: ``a``, ``a, *b``; not ``a.x`` or ``a[i]``."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_target_names(e) for e in target.elts)) if target.elts else set()
    return set()


@functools.lru_cache(maxsize=8192)
def bound_names(source: str) -> frozenset[str]:
    """The module-level names a program binds (assignments, imports, defs, loop targets...)."""
    tree = _parse(source)
    if tree is None:
        return frozenset()
    names: set[str] = set()
    for node in _module_level(tree):
        names |= _binds(node)
    return frozenset(names)


def _star_names(module: str) -> frozenset[str] | None:
    """The names ``from module import *`` binds, for a standard-library module; else None."""
    top = module.split(".")[0]
    if top not in STDLIB_MODULES or top in _NOISY:
        return None
    try:
        mod = importlib.import_module(module)
    except BaseException:
        return None
    public = getattr(mod, "__all__", None)
    if public is None:
        public = [n for n in vars(mod) if not n.startswith("_")]
    return frozenset(str(n) for n in public)


@functools.lru_cache(maxsize=256)
def task_names(prelude: str, setup: str) -> frozenset[str]:
    """The names the task binds before the checks: its prelude's and its setup's.

    A name a star import binds to the very builtin of that name (LiveCodeBench's
    ``from builtins import *``) is left out: it means what the builtin means. ``import math``
    is left out too (``math`` is evaluated on the trusted side as it is). The result holds
    :data:`UNKNOWN` when a star import cannot be expanded.
    """
    names: dict[str, bool] = {}  # name -> bound to something other than the same-named builtin
    for source_text in (prelude, setup):
        tree = _parse(source_text) if source_text.strip() else None
        for node in _module_level(tree) if tree is not None else ():
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                star = _star_names(node.module or "") if not node.level else None
                if star is None:
                    names[UNKNOWN] = True
                    continue
                module = sys.modules.get(node.module or "")
                for name in star:
                    value = getattr(module, name, None)
                    names[name] = getattr(builtins, name, object()) is not value
            else:
                for name in _binds(node):
                    names[name] = True
    if _binds_plain_math(prelude) and _binds_plain_math(setup) and "math" in names:
        del names["math"]
    return frozenset(n for n, rebinds in names.items() if rebinds)


def _binds_plain_math(source: str) -> bool:
    """Whether every binding of ``math`` in ``source`` is ``import math`` itself."""
    tree = _parse(source) if source.strip() else None
    if tree is None:
        return True
    for node in _module_level(tree):
        if "math" not in _binds(node):
            continue
        if not (isinstance(node, ast.Import)
                and any(a.name == "math" and a.asname in (None, "math") for a in node.names)):
            return False
    return True


def exposed_packages() -> frozenset[str]:
    """The top-level names of the third-party packages the sandbox exposes to candidates
    (``AGENTENV_SANDBOX_PACKAGES``, or the installed default ones)."""
    return _exposed(settings.sandbox_packages())


@functools.lru_cache(maxsize=16)
def _exposed(_chosen: str | None) -> frozenset[str]:
    return frozenset(name for _, name in package_dirs() if name.isidentifier())


@functools.lru_cache(maxsize=1024)
def asked_names(entry_point: str, reference: str | None = None, prompt: str = "",
                checks: tuple[str, ...] = ()) -> frozenset[str]:
    """What a task asks the candidate to define: its entry point, and the module-level names
    its reference solution defines itself (functions, classes, assignments; not imports). A
    task without a reference asks, besides its entry point, for the names its ``checks`` read
    that its ``prompt`` mentions (``Write encode(s) and decode(s)``)."""
    asked = {entry_point} if entry_point else set()
    if not (reference and reference.strip()) and prompt:
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", prompt))
        asked |= {n for check in checks for n in read_names(check) if n in words}
    tree = _parse(reference) if reference and reference.strip() else None
    for node in _module_level(tree) if tree is not None else ():
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            asked |= _binds(node)
    return frozenset(asked)


def _check_free_names(source: str) -> frozenset[str]:
    """The global names a check reads and never binds itself (in any scope); empty if it does
    not parse."""
    try:
        table = symtable.symtable(source, "<check>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    bound = {s.get_name() for s in table.get_symbols()
             if s.is_assigned() or s.is_imported() or s.is_namespace()}
    free: set[str] = set()
    stack = [(table, True)]
    while stack:
        scope, top = stack.pop()
        for symbol in scope.get_symbols():
            name = symbol.get_name()
            if name in bound or not symbol.is_referenced():
                continue
            if top or (symbol.is_global() and not symbol.is_assigned()):
                free.add(name)
        stack.extend((child, False) for child in scope.get_children())
    return frozenset(free)


def unresolved_names(checks: Sequence[str], *, prelude: str = "", setup: str = "",
                     asked: frozenset[str] | None = None,
                     reference: str | None = None) -> list[tuple[int, frozenset[str]]]:
    """For each check, the names it reads that nothing would bind in a fresh interpreter: not
    a builtin, a standard-library module or an exposed package, nor bound by the task (prelude,
    setup, earlier checks), by what it asks the candidate to define (``asked``), or by an import
    of its reference solution. ``(index, names)`` for the checks with any; none are reported
    when the prelude or setup binds names that cannot be known without running it."""
    known = task_names(prelude, setup)
    if UNKNOWN in known:
        return []
    known = known | (asked or frozenset()) | frozenset(candidate_imports(reference or "", exposed_packages()))
    known = known | STDLIB_MODULES | exposed_packages() | frozenset(dir(builtins))
    found: list[tuple[int, frozenset[str]]] = []
    earlier: set[str] = set()
    for index, check in enumerate(checks):
        missing = _check_free_names(check) - known - earlier
        if missing:
            found.append((index, frozenset(missing)))
        earlier |= bound_names(check)
    return found


@functools.lru_cache(maxsize=1024)
def candidate_imports(code: str, packages: frozenset[str] = frozenset()) -> dict[str, tuple[str, str]]:
    """The names the candidate's code binds at module level by importing from the standard
    library or from the exposed ``packages``: ``{name: (module, attribute)}``, with
    ``attribute`` empty for a module itself.

    A check that reads one of them relies on the candidate having imported it (plain Python
    semantics); the judge makes the same import itself. (Cached: callers must not mutate it.)
    """
    tree = _parse(code)
    if tree is None:
        return {}
    found: dict[str, tuple[str, str]] = {}
    for node in _module_level(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in STDLIB_MODULES | packages:
                    found.pop(alias.asname or alias.name.split(".")[0], None)
                    continue
                if alias.asname:
                    found[alias.asname] = (alias.name, "")
                else:
                    top = alias.name.split(".")[0]
                    found[top] = (top, "")
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            stdlib = node.module.split(".")[0] in STDLIB_MODULES | packages
            for alias in node.names:
                if alias.name != "*" and not stdlib:
                    found.pop(alias.asname or alias.name, None)
                elif alias.name != "*":
                    found[alias.asname or alias.name] = (node.module, alias.name)
        elif (isinstance(node, ast.Assign) and len(node.targets) == 1
              and isinstance(node.targets[0], ast.Name)):
            # ``eq = operator.eq``: an alias of something imported from the standard library
            path = _dotted(node.value)
            if path is not None and path[0] in found and found[path[0]][1] == "":
                module = ".".join([found[path[0]][0], *path[1:-1]])
                found[node.targets[0].id] = (module, path[-1]) if len(path) > 1 else found[path[0]]
            else:
                found.pop(node.targets[0].id, None)
        else:  # a later binding of the name is the candidate's own (``def gcd``)
            for name in _binds(node):
                found.pop(name, None)
    return found


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None for anything but names and attributes."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


@functools.lru_cache(maxsize=1024)
def setup_acts_on_the_candidate(setup: str) -> bool:
    """Whether a setup statement that runs in the judge only may act on the candidate's objects
    (``Cfg.limit = 10``, ``s = Solution()``): it reads a name that neither the setup binds nor a
    builtin or a standard-library module is. The judge applies such statements through its
    proxies before its checks; the plan then grades every check there, so none runs before them.
    """
    tree = _parse(setup) if setup.strip() else None
    if tree is None:
        return False
    own = bound_names(setup)
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        parts: list[ast.AST] = [*node.bases, *node.decorator_list] if isinstance(node, ast.ClassDef) else [node]
        for n in (n for part in parts for n in _walk(part)):
            if (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in own
                    and not hasattr(builtins, n.id) and n.id not in STDLIB_MODULES):
                return True
    return False


def _all_binds(node: ast.stmt) -> set[str]:
    """The module-level names a statement binds, those of the statements it holds included."""
    return set().union(*(_binds(n) for n in _module_level(ast.Module(body=[node], type_ignores=[]))))


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)


def _definitions_only(node: ast.stmt) -> bool:
    """A definition, or an ``if``/``try`` whose statements are all definitions (or ``pass``)
    and whose tests and handlers read only builtins and standard-library names."""
    if isinstance(node, _DEFINITIONS):
        return True
    if not isinstance(node, (ast.If, ast.Try)):
        return False
    inner = _module_level(ast.Module(body=[node], type_ignores=[]))[1:]
    if not all(isinstance(n, (*_DEFINITIONS, ast.Pass, ast.If, ast.Try)) for n in inner):
        return False
    heads: list[ast.AST] = [n.test for n in (node, *inner) if isinstance(n, ast.If)]
    heads += [h.type for n in (node, *inner) if isinstance(n, ast.Try) for h in n.handlers if h.type]
    reads = {x.id for head in heads for x in _walk(head) if isinstance(x, ast.Name)}
    return all(hasattr(builtins, name) or name in STDLIB_MODULES for name in reads)


@functools.lru_cache(maxsize=1024)
def setup_for_candidate(setup: str, code: str) -> str:
    """The part of the task's setup the candidate's process runs (after the candidate's code).

    Definitions (``def``, ``class``, ``import``) whose names the candidate's code reads, and
    the definitions those read in turn; plus statements that bind nothing and read only
    builtins and the imports sent (``sys.setrecursionlimit(10**6)``, ``random.seed(0)``).
    Data the setup assigns is never sent: a candidate function that reads a setup variable
    fails as if the setup had not defined it (the README's "The sandbox" says so). An ``if`` or
    ``try`` that holds only such definitions (an import with a fallback) counts as one.
    """
    if not setup.strip():
        return ""
    tree = _parse(setup)
    if tree is None:
        return setup  # the candidate's process reports the setup's syntax error, as before
    wanted = set(read_names(code))
    body = tree.body
    keep: set[int] = set()
    for i, node in enumerate(body):  # a standard-library import carries no data: always sent
        if (isinstance(node, ast.Import) and all(a.name.split(".")[0] in STDLIB_MODULES for a in node.names)) or (isinstance(node, ast.ImportFrom) and not node.level and node.module
              and node.module.split(".")[0] in STDLIB_MODULES):
            keep.add(i)
    definitions = [(i, node) for i, node in enumerate(body) if _definitions_only(node)]
    changed = True
    while changed:
        changed = False
        for i, node in definitions:
            if i in keep or not (_all_binds(node) & wanted):
                continue
            keep.add(i)
            changed = True
            wanted |= {n.id for n in _walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    imported: set[str] = set()
    for i in keep:
        if isinstance(body[i], (ast.Import, ast.ImportFrom, ast.If, ast.Try)):
            imported |= _all_binds(body[i])
    for i, node in enumerate(body):
        if i in keep or not isinstance(node, ast.Expr):
            continue
        nodes = _walk(node)
        reads = {n.id for n in nodes if isinstance(n, ast.Name)}
        if (any(isinstance(n, ast.Call) for n in nodes)
                and not any(isinstance(n, (ast.NamedExpr, ast.Lambda)) for n in nodes)
                and all(r in imported or (hasattr(builtins, r) and r not in _NOT_EFFECTS) for r in reads)):
            keep.add(i)
    try:
        return "".join(ast.unparse(body[i]) + "\n" for i in sorted(keep))
    except (RecursionError, ValueError):
        return ""
