"""Grade whole programs as each benchmark's judge grades them, and as agentenv does, side by side.

The reference side runs each program with plain ``python3 solution.py < input`` (the interpreter
running this module, so the same packages), one fresh process per test, timed alone, and
compares its stdout the way the benchmark's own grader compares it, flaws included (written here
from reading the graders; the README cites them):

- ``livecodebench`` (lcb_runner/evaluation/testing_util.py, ``grade_stdio``): stripped lines,
  equal as text or as lists of ``Decimal``; an uncaught exception is a runtime error; SystemExit
  ends the program and its output is graded;
- ``apps`` (hendrycks/apps eval/testing_util.py): its chain of comparisons, down to lines as a
  set of token sets and numbers rounded to 3 decimals; exceptions fail, SystemExit is graded;
- ``code_contests`` (google-deepmind/code_contests execution/tester_sandboxer.cc,
  ``OutputsMatch``): lowercased tokens, numbers as doubles within 1e-5; the output is graded
  whatever the exit status;
- ``jsonl``: agentenv's own documented rule (README), written again here independently.

The agentenv side writes the problems as the benchmark's own records (an agentenv JSONL task,
an APPS row, a LiveCodeBench row, a CodeContests row), loads them with ``load_tasks`` and grades
each program with :func:`agentenv.grading.scoring.score`, as the environments do.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from pathlib import Path

from fidelity.program_corpus import Problem, Program

KNOWN = Path(__file__).resolve().parent / "programs_known.txt"


# ------------------------------------------------------------------ the benchmarks' comparisons


def _decimal_line(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(x) for x in line.split()]
    except (InvalidOperation, ValueError):
        return None


def livecodebench_accepts(out: str, expected: str) -> bool:
    got = [x.strip() for x in out.strip().split("\n")]
    want = [x.strip() for x in expected.strip().split("\n")]
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        if g == w:
            continue
        a, b = _decimal_line(g), _decimal_line(w)
        try:
            if a is None or b is None or a != b:
                return False
        except InvalidOperation:
            return False
    return True


def _allclose(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        (x == y) or (math.isfinite(x) and math.isfinite(y) and abs(x - y) <= 1e-8 + 1e-5 * abs(y))
        for x, y in zip(a, b, strict=True))


def apps_accepts(out: str, expected: str) -> bool:
    """APPS's chain for a stdin program: the captured output as ``splitlines()``, the expected
    output as one string, then each fallback in turn."""
    output = out.splitlines()
    if "\n".join(output).strip() == expected.strip():
        return True
    if "\n".join(o.strip() for o in output).strip() == expected.strip():
        return True
    if output == [expected]:
        return True
    want = [x.strip() for x in expected.split("\n") if len(x)]
    if output == want:
        return True
    output = [o for o in output if len(o)]
    if output == want:
        return True
    try:
        if _allclose([float(e) for e in output], [float(e) for e in want]):
            return True
    except ValueError:
        pass
    want_sets = [set(line.split()) for line in want]
    got_sets = [set(line.split()) for line in output if line.split()]
    if {frozenset(s) for s in got_sets} == {frozenset(s) for s in want_sets}:
        return True
    try:
        return ({frozenset(round(float(t), 3) for t in s) for s in got_sets}
                == {frozenset(round(float(t), 3) for t in s) for s in want_sets})
    except (ValueError, OverflowError):
        return False


_CC_SPLIT = re.compile(r"[ \n\t\r\v]+")


def _cc_double(token: str) -> float | None:
    if "_" in token:
        return None
    try:
        return float(token)
    except ValueError:
        return None


def _cc_int(token: str) -> int | None:
    if not re.fullmatch(r"[+-]?\d+", token):
        return None
    value = int(token)
    return value if -2**31 <= value < 2**31 else None


def code_contests_accepts(out: str, expected: str) -> bool:
    got = [t.lower() for t in _CC_SPLIT.split(out) if t]
    want = [t.lower() for t in _CC_SPLIT.split(expected) if t]
    if got == want:
        return True
    if len(got) != len(want):
        return False
    for a, b in zip(got, want, strict=True):
        ad, bd = _cc_double(a), _cc_double(b)
        ai, bi = _cc_int(a), _cc_int(b)
        if (ai is None and ad is None) or (bi is None and bd is None):
            if a != b:
                return False
        elif ad is not None and bd is not None:
            if not abs(ad - bd) < 1e-5:
                return False
        elif ai != bi:
            return False
    return True


_NUMERIC = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def tokens_accepts(out: str, expected: str, tolerance: float | None) -> bool:
    """agentenv's documented rule: trailing spaces and empty lines at the end dropped, then
    lines and tokens in order; numbers equal as numbers or, unless both are integers, within
    the tolerance."""
    def lines(text: str) -> list[list[str]]:
        rows = [line.split() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
        while rows and not rows[-1]:
            rows.pop()
        return rows

    got, want = lines(out), lines(expected)
    if len(got) != len(want):
        return False
    for g_line, w_line in zip(got, want, strict=True):
        if len(g_line) != len(w_line):
            return False
        for g, w in zip(g_line, w_line, strict=True):
            if g == w:
                continue
            if not (_NUMERIC.fullmatch(g) and _NUMERIC.fullmatch(w)):
                return False
            a, b = Decimal(g), Decimal(w)
            if a == b:
                continue
            if tolerance is None or (re.fullmatch(r"[+-]?\d+", g) and re.fullmatch(r"[+-]?\d+", w)):
                return False  # no tolerance, or two integers: exactly
            t = Decimal(str(tolerance))
            if not (abs(a - b) <= t or abs(a - b) <= t * abs(b)):
                return False
    return True


# ------------------------------------------------------------------ plain python3


@dataclass(frozen=True)
class PlainRun:
    stdout: str
    crashed: bool      # an uncaught exception (a traceback) or a signal
    timed_out: bool


# A judge's environment: stdout block-buffered into its pipe (no PYTHONUNBUFFERED from a CI runner).
_PLAIN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


@lru_cache(maxsize=4096)
def plain_run(code: str, stdin: str, timeout: float) -> PlainRun:
    """``python3 solution.py < input`` in a fresh directory; the same run for every layout."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "solution.py")
        Path(path).write_text(code, encoding="utf-8")
        stdin_path = os.path.join(tmp, "input.txt")
        Path(stdin_path).write_bytes(stdin.encode("utf-8"))
        with open(stdin_path, "rb") as handle:
            try:
                proc = subprocess.run([sys.executable, path], stdin=handle, capture_output=True,
                                      cwd=tmp, timeout=timeout * 3, env=_PLAIN_ENV)
            except subprocess.TimeoutExpired:
                return PlainRun("", crashed=False, timed_out=True)
    crashed = proc.returncode < 0 or (proc.returncode != 0
                                      and b"Traceback (most recent call last)" in proc.stderr)
    return PlainRun(proc.stdout.decode("utf-8", "replace"), crashed=crashed, timed_out=False)


def reference_verdict(program: Program, stdin: str, expected: str) -> bool:
    run = plain_run(program.code, stdin, program.timeout)
    if run.timed_out:
        return False
    if program.layout == "code_contests":  # its tester grades the output whatever the exit status
        return code_contests_accepts(run.stdout, expected)
    if run.crashed:
        return False
    if program.layout == "livecodebench":
        return livecodebench_accepts(run.stdout, expected)
    if program.layout == "apps":
        return apps_accepts(run.stdout, expected)
    return tokens_accepts(run.stdout, expected, program.problem.float_tolerance)


# ------------------------------------------------------------------ the benchmarks' records


def record(layout: str, problem: Problem, timeout: float) -> dict[str, object]:
    """``problem`` as a row of the benchmark's own dataset."""
    statement = f"Solve {problem.name}."
    inputs = [i for i, _ in problem.tests]
    outputs = [o for _, o in problem.tests]
    if layout == "jsonl":
        return {"name": problem.name, "prompt": statement, "entry_point": "__main__",
                "checks": [{"stdin": i, "expected_stdout": o} for i, o in problem.tests],
                "float_tolerance": problem.float_tolerance}
    if layout == "apps":
        return {"problem_id": problem.name, "question": statement, "starter_code": "",
                "difficulty": "interview", "solutions": "[]",
                "input_output": json.dumps({"inputs": inputs, "outputs": outputs})}
    if layout == "livecodebench":
        cases = [{"input": i, "output": o, "testtype": "stdin"} for i, o in problem.tests]
        return {"question_id": problem.name, "question_title": problem.name, "question_content": statement,
                "platform": "atcoder", "contest_id": "abc000", "contest_date": "2024-09-01T00:00:00",
                "starter_code": "", "difficulty": "easy", "metadata": "{}",
                "public_test_cases": json.dumps(cases[:1]), "private_test_cases": json.dumps(cases[1:])}
    if layout == "code_contests":
        return {"name": problem.name, "description": statement, "difficulty": 7,
                "public_tests": {"input": inputs[:1], "output": outputs[:1]},
                "private_tests": {"input": inputs[1:], "output": outputs[1:]},
                "generated_tests": {"input": [], "output": []},
                "solutions": {"language": [], "solution": []},
                "time_limit": {"seconds": int(timeout), "nanos": 0}}
    raise ValueError(layout)


def load_layout(layout: str, problems: Iterable[Problem], timeout: float = 4.0) -> dict[str, object]:
    """The problems written as ``layout``'s file and read back by ``load_tasks``, by problem."""
    from agentenv.tasks import load_tasks

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{layout}.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for problem in problems:
                handle.write(json.dumps(record(layout, problem, timeout)) + "\n")
        tasks = load_tasks(str(path))
    return {task.name.rsplit("/", 1)[-1]: task for task in tasks}


# ------------------------------------------------------------------ side by side


@dataclass(frozen=True)
class Outcome:
    program: Program
    plain: tuple[bool, ...]
    agentenv: tuple[bool, ...]
    messages: tuple[str, ...] = field(default=())

    @property
    def disagreements(self) -> list[int]:
        return [i for i, (a, b) in enumerate(zip(self.plain, self.agentenv, strict=True)) if a != b]

    @property
    def false_passes(self) -> list[int]:
        return [i for i in self.disagreements if self.agentenv[i]]


def agentenv_verdicts(program: Program, task: object) -> tuple[tuple[bool, ...], tuple[str, ...]]:
    from agentenv.grading.scoring import score
    from agentenv.tasks.schema import StdioCase, Task

    assert isinstance(task, Task)
    hidden = score(task, program.code, timeout=program.timeout).hidden
    passed = set(hidden.passed_indices)
    index = {}
    for i, check in enumerate(task.checks):
        assert isinstance(check, StdioCase)
        index.setdefault((check.stdin, check.expected_stdout), i)
    positions = [index[test] for test in program.problem.tests]
    messages = tuple(f"test {positions.index(f.index)}: {f.kind}: {f.message[:300]}"
                     for f in hidden.failures if f.index in positions)
    return tuple(p in passed for p in positions), messages


def grade(program: Program, task: object) -> Outcome:
    plain = tuple(reference_verdict(program, i, o) for i, o in program.problem.tests)
    ours, messages = agentenv_verdicts(program, task)
    return Outcome(program, plain, ours, messages)


def grade_all(programs: Sequence[Program], workers: int = 3) -> list[Outcome]:
    runnable = [p for p in programs if all(_importable(m) for m in p.requires)]
    tasks: dict[tuple[str, str], object] = {}
    for layout in sorted({p.layout for p in runnable}):
        problems = {p.problem.name: p.problem for p in runnable if p.layout == layout}
        for name, task in load_layout(layout, problems.values()).items():
            tasks[(layout, name)] = task
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda p: grade(p, tasks[(p.layout, p.problem.name)]), runnable))


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def disagreement_keys(outcome: Outcome) -> set[str]:
    return {f"{outcome.program.ident} {i}" for i in outcome.disagreements}


def known_disagreements(path: Path = KNOWN) -> dict[str, str]:
    """``layout/program test`` -> why (the grader's flaw we do not copy)."""
    known: dict[str, str] = {}
    for line in path.read_text().splitlines():
        body, _, why = line.partition("#")
        if body.strip():
            known[body.strip()] = why.strip()
    return known


# Why a judge passes what agentenv fails, by layout and program: the graders' flaws we do not
# copy. Only wrong programs may be listed (tests/test_programs_fidelity.py checks it).
FLAWS = {
    "apps": ("APPS's last fallback compares lines as a set of token sets (and numbers rounded to "
             "3 decimals): not copied, lines and tokens keep their order and numbers allclose"),
    "apps/integer": ("APPS's numpy.allclose takes an integer within 1e-5 relative (1000001 for "
                     "1000000): not copied, integers compare exactly"),
    "code_contests/crash": ("CodeContests' tester grades the output of a program that raised; here a "
                            "runtime error fails the test, as in APPS and LiveCodeBench"),
    "code_contests/double": ("CodeContests' tester compares integers as doubles (2**53 + 1 passes for "
                             "2**53): not copied, integers compare exactly"),
}


def flaw(outcome: Outcome) -> str:
    program = outcome.program
    if program.layout == "code_contests":
        return FLAWS["code_contests/double" if "double" in program.name else "code_contests/crash"]
    if program.layout == "apps" and program.name in ("squares_plus_one", "huge_double_plus_one"):
        return FLAWS["apps/integer"]
    return FLAWS.get(program.layout, "unexplained")


def write_known(outcomes: Sequence[Outcome], path: Path = KNOWN) -> int:
    lines = ["# Tests where a benchmark's own judge passes a program that agentenv fails: the judge's",
             "# flaws that agentenv does not copy. Written by `python benchmarks/programs_fidelity.py",
             "# --slow --write-known`; tests/test_programs_fidelity.py asserts the disagreements are",
             "# exactly these, all on wrong programs, and that agentenv never passes what a judge fails."]
    keys = sorted((f"{o.program.ident} {i}", flaw(o)) for o in outcomes for i in o.disagreements)
    lines += [f"{key}  # {why}" for key, why in keys]
    path.write_text("\n".join(lines) + "\n")
    return len(keys)
