"""The import graph of agentenv: every subpackage imports on its own, no module imports
another that (directly or not) imports it back, no lazy import closes such a cycle, and arrows
point down the layers of ARCHITECTURE.md.

The graph is read with ``ast`` from the source: top-level imports are what runs at import time
(``if TYPE_CHECKING:`` blocks excluded); imports inside functions are the lazy ones. A lazy
import is fine for an optional dependency or a slow start-up, never to dodge a cycle: with the
lazy edges added, the graph must still have no cycle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentenv

PACKAGE = Path(agentenv.__file__).parent

# ARCHITECTURE.md's layers, top (what a person runs) to bottom (data, settings, errors); an
# import may only point to its own layer or one below. Modules the document does not list are
# placed by what they are: extract (text -> code) with the policies and prompts, untrusted
# (text safety) and choices (the choice sets) at the bottom, toy with the environments, testing
# (helpers for users' tests, never imported by the library) at the top.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("agentenv",),  # the public API re-exports everything
    ("cli", "report", "testing"),
    ("rollout", "integrations", "gym"),
    ("envs", "toy"),
    ("policies", "prompts", "tokens", "extract"),
    ("rewards", "credit", "records"),
    ("grading",),
    ("sandbox",),
    ("tasks", "settings", "errors", "log", "choices", "untrusted", "serial", "_resources", "_version"),
)

def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The agentenv modules an import statement loads (a ``from x import y`` names x.y when
    that is a module, else x)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = base[:len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        names = [f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source for a in node.names]
    for name in names:
        if name in MODULES and name != module:
            yield name


def _imports(module: str, path: Path) -> tuple[set[str], set[str]]:
    """(top-level imports, imports inside functions) of one module."""
    eager: set[str] = set()
    lazy: set[str] = set()

    def visit(nodes: list[ast.stmt], inside_function: bool) -> None:
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                (lazy if inside_function else eager).update(_targets(module, path, node))
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                continue
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(node.body, True)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    children = getattr(node, field, None)
                    if isinstance(children, list):
                        visit([c for c in children if isinstance(c, ast.stmt)], inside_function)
                        for handler in children:
                            if isinstance(handler, ast.ExceptHandler):
                                visit(handler.body, inside_function)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)).body, False)
    return eager, lazy - eager


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, as a path that ends where it starts; None when there is none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := walk(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := walk(node)):
            return found
    return None


def _layer(module: str) -> int:
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else parts[0]
    for rank, layer in enumerate(LAYERS):
        if name in layer:
            return rank
    raise AssertionError(f"{module} is in no layer: add it to LAYERS (and to ARCHITECTURE.md)")


def test_no_cycle_at_import_time() -> None:
    assert _cycle({m: eager for m, (eager, _lazy) in GRAPH.items()}) is None


def test_no_lazy_import_closes_a_cycle() -> None:
    edges = {m: eager | lazy for m, (eager, lazy) in GRAPH.items()}
    cycle = _cycle(edges)
    assert cycle is None, "a lazy import dodges this cycle: " + " -> ".join(cycle or [])


def test_arrows_point_down_the_layers() -> None:
    upward = [f"{m} ({_layer(m)}) -> {t} ({_layer(t)})"
              for m, (eager, lazy) in sorted(GRAPH.items())
              for t in sorted(eager | lazy) if _layer(t) < _layer(m)]
    assert upward == [], "imports that point up the layers: " + "; ".join(upward)


def test_nothing_outside_the_sandbox_imports_its_private_modules() -> None:
    """The sandbox's contract with the rest (jobs in, frames out) is
    :mod:`agentenv.sandbox.contract` and the package's own exports; its private modules
    (``agentenv.sandbox._*``) are its own."""
    crossing = sorted((module, target) for module, (eager, lazy) in GRAPH.items()
                      if not module.startswith("agentenv.sandbox")
                      for target in eager | lazy
                      if target.startswith("agentenv.sandbox._"))
    assert crossing == []


def test_every_module_is_placed_in_a_layer() -> None:
    for module in MODULES:
        _layer(module)


def test_the_checks_see_a_cycle_and_an_upward_arrow() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    assert _layer("agentenv.tasks.schema") > _layer("agentenv.rollout.runner")


PACKAGES = sorted(m for m, p in MODULES.items() if p.name == "__init__.py")


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_imports_alone_in_a_fresh_interpreter(package: str) -> None:
    done = subprocess.run([sys.executable, "-c", f"import {package}"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_library_never_imports_the_test_helpers() -> None:
    """agentenv.testing (the stand-in chat server) is for users' tests, not the library's path."""
    users = sorted(m for m, (eager, lazy) in GRAPH.items() if not m.startswith("agentenv.testing")
                   for t in eager | lazy if t.startswith("agentenv.testing"))
    assert users == []


def _bound_names(path: Path) -> Iterator[tuple[str, str | None]]:
    """The names a module binds at top level, each with the module an import took it from."""
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        if isinstance(node, ast.ImportFrom) and not node.level:
            for alias in node.names:
                yield alias.asname or alias.name, f"{node.module}.{alias.name}"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, None
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id, None


def test_no_module_is_shadowed_by_a_name_its_package_exports() -> None:
    """``import agentenv.grading.judging as m`` gives the module: no package binds one of its
    own submodules' names to something else (a re-exported function of the same name would
    replace the module as the package's attribute)."""
    shadowed = []
    for package, path in MODULES.items():
        if path.name != "__init__.py":
            continue
        for name, source in _bound_names(path):
            submodule = f"{package}.{name}"
            if submodule in MODULES and source != submodule:
                shadowed.append(f"{submodule} (bound to {source or 'a local definition'})")
    assert shadowed == []


def test_the_shadowing_check_sees_a_reexport_named_like_its_module(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text("from pkg.judge import judge\nfrom pkg.plan import plan_checks\n")
    assert list(_bound_names(init)) == [("judge", "pkg.judge.judge"), ("plan_checks", "pkg.plan.plan_checks")]
