"""The attack census, derived from the class files: one file per attack class, each holding
every attack of its class. An attack is a test function times its parametrized cases; a test
parametrized over named cases (``Attack``/``Case``) counts its cases but its honest controls
(``control_*``). The suite names at least 60 attacks, every class at least 3, case names are
distinct across the files, and the only xfails are the attacks known to still win (``OPEN``),
never counted. Nothing here runs a sandbox: it reads the modules."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from support.attacks import ATTACK_CLASS_FILES

CLASSES = {
    "test_hermetic_runs": "hermetic runs",
    "test_run_limits": "limits for the whole run, also as root",
    "test_judge_isolation": "a judge where no candidate code ran",
    "test_judge_values": "a judge that survives any value",
    "test_equality": "Python equality",
    "test_pool_poisoning": "a pool that cannot be poisoned",
    "test_fallback_and_redaction": "safe fallback and redaction",
    "test_candidate_text": "candidate text as data",
}

# Attacks that still win, each a strict xfail in its class file: (file, test[, case]).
OPEN = {
    ("test_run_limits", "test_an_idle_run_older_than_the_rest_does_not_level_an_honest_run_with_older_loops"),
}


def _module(name: str) -> ModuleType:
    return importlib.import_module(name)


def _marks(thing: Any) -> list[Any]:
    return list(getattr(thing, "pytestmark", None) or getattr(thing, "marks", ()))


def _tests(module: ModuleType) -> dict[str, Callable[..., Any]]:
    return {name: value for name, value in vars(module).items()
            if name.startswith("test_") and callable(value)}


def _values(argvalues: Any) -> list[Any]:
    """A parametrize mark's cases, each unwrapped from ``pytest.param``."""
    return [value.values[0] if hasattr(value, "values") and len(value.values) == 1 else value
            for value in argvalues]


def _is_xfail(thing: Any) -> bool:
    return any(mark.name == "xfail" for mark in _marks(thing))


def attacks(module: ModuleType) -> int:
    """How many attacks ``module`` holds (xfails excepted)."""
    total = 0
    for function in _tests(module).values():
        if _is_xfail(function):
            continue
        count = 1
        for mark in _marks(function):
            if mark.name != "parametrize":
                continue
            cases = [value for value in mark.args[1] if not _is_xfail(value)]
            named = [value for value in _values(cases) if isinstance(getattr(value, "name", None), str)]
            if named and len(named) == len(cases):
                count *= sum(not value.name.startswith("control_") for value in named)
            else:
                count *= len(cases)
        total += count
    return total


def census() -> dict[str, int]:
    return {name: attacks(_module(name)) for name in CLASSES}


def xfails() -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for name in CLASSES:
        for test, function in _tests(_module(name)).items():
            if _is_xfail(function):
                found.add((name, test))
            for mark in _marks(function):
                if mark.name == "parametrize":
                    found |= {(name, test, str(value.id)) for value in mark.args[1] if _is_xfail(value)}
    return found


def test_every_class_file_is_censused() -> None:
    assert tuple(CLASSES) == ATTACK_CLASS_FILES


def test_at_least_60_attacks_and_at_least_3_in_every_class() -> None:
    counts = census()
    print(f"[census] by class {counts}; total {sum(counts.values())}; open (xfail) {len(OPEN)}")
    assert all(n >= 3 for n in counts.values()), counts
    assert sum(counts.values()) >= 60, counts


def test_the_only_xfails_are_the_known_open_attacks() -> None:
    assert xfails() == OPEN


def test_named_cases_are_distinct_across_the_class_files() -> None:
    names = []
    for name in CLASSES:
        for function in _tests(_module(name)).values():
            for mark in _marks(function):
                if mark.name == "parametrize":
                    names += [value.name for value in _values(mark.args[1])
                              if isinstance(getattr(value, "name", None), str)]
    assert len(names) >= 60 and len(set(names)) == len(names)
