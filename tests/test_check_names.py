"""A check's names mean what the task means; setup data stays with the judge; the runner keeps
its own builtins.

Honest programs are graded side by side with plain Python (:func:`fidelity.harness.plain_verdicts`):
every verdict must be Python's. Hacks (a patched or rebound standard-library name, a rebound
prelude or setup name, a scan for setup data) must earn no more than a do-nothing stub. Tokens
are drawn per run, so no fixed answer wins.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from fidelity.harness import Program, plain_verdicts
from support.attacks import strict_pool

from agentenv.grading import plan_checks, run_tests
from agentenv.grading.names import (
    asked_names,
    candidate_imports,
    setup_acts_on_the_candidate,
    setup_for_candidate,
    task_names,
)
from agentenv.sandbox import SandboxPool

TOK = [secrets.token_hex(8) for _ in range(3)]


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    p = strict_pool(2, "the check-name tests")
    yield p
    p.close()


def _agentenv(program: Program, pool: SandboxPool) -> tuple[bool, ...]:
    result = run_tests(program.code, list(program.checks), program.timeout,
                       setup_code=program.setup_code, prelude=program.prelude, pool=pool)
    assert result.graded_in_child == 0
    return tuple(i in result.passed_indices for i in range(result.total))


def P(name: str, code: str, checks: tuple[str, ...], setup: str = "", prelude: str = "") -> Program:
    return Program("names", name, code, checks, setup, prelude)


HONEST = [
    P("module_imported_by_an_earlier_check",
      "def add(a, b):\n    return a + b\n",
      ("import operator\nassert operator.eq(add(2, 3), 5)", "assert operator.eq(add(10, 5), 15)",
       "assert operator.eq(add(1, 1), 3)")),
    P("alias_bound_by_an_earlier_check",
      "def slug(s):\n    return '-'.join(s.lower().split())\n",
      ("import re as rx\nassert rx.fullmatch('[a-z]+-[a-z]+', slug('Hello World'))",
       "assert rx.fullmatch('[a-z]+', slug('a b'))", "assert rx.fullmatch('[a-z-]+', slug('A B'))")),
    P("variable_bound_by_an_earlier_check",
      "def add(a, b):\n    return a + b\n",
      ("x = add(1, 2)", "assert add(x, 1) == 4", "assert add(x, x) == 7")),
    P("prelude_names_used_by_checks",
      "def area(r):\n    return pi * r * r\n",
      ("assert isclose(area(1), pi)", "assert floor(area(1)) == 3", "assert isclose(area(2), pi)"),
      prelude="from math import *\n"),
    P("candidate_functions_named_like_stdlib_modules",
      "def string(n):\n    return 'a' * n\ndef queue(xs):\n    return list(reversed(xs))\n",
      ("assert string(3) == 'aaa'", "assert queue([1, 2]) == [2, 1]",
       "for n in range(3):\n    assert len(string(n)) == n", "assert string(2) == 'b'")),
    P("check_relies_on_the_candidates_stdlib_import",
      "from re import fullmatch\nimport operator as op\nfrom math import gcd\n"
      "def year(s):\n    return s[-4:]\ndef half(n):\n    return n / 2\n",
      ("assert fullmatch('[0-9]{4}', year('in 1999'))", "assert op.eq(half(3), 1.5)",
       "assert fullmatch('[a-z]+', year('in 1999'))", "assert gcd(int(half(12)), 4) == 2")),
    P("stdlib_function_on_a_candidate_object",
      "from dataclasses import dataclass, astuple\n@dataclass\nclass Point:\n    x: int\n    y: int\n",
      ("assert astuple(Point(1, 2)) == (1, 2)", "assert astuple(Point(3, 4)) == (3, 5)")),
    P("setup_helper_called_by_the_candidate",
      "def double_poly(xs, x):\n    return 2 * poly(xs, x)\n",
      ("assert double_poly([1, 2], 3) == 14", "assert double_poly([0], 5) == 0", "assert double_poly([1], 1) == 3"),
      setup="def poly(xs, x):\n    return sum(c * x ** i for i, c in enumerate(xs))\n"),
    P("setup_import_used_by_the_candidate",
      "def root(x):\n    return math.sqrt(x)\n",
      ("assert root(16) == 4.0", "assert root(2) == 2"),
      setup="import math\nTOL = 1e-9\n"),
    P("setup_effect_the_candidate_needs",
      "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n",
      ("assert depth(3000) == 3000", "assert depth(10) == 11"),
      setup="import sys\nsys.setrecursionlimit(10000)\n"),
    P("setup_data_passed_to_the_candidate",
      "def total(xs):\n    return sum(xs)\n",
      ("assert total(DATA) == 6", "for xs, want in CASES:\n    assert total(xs) == want",
       "assert total(DATA[:1]) == 2"),
      setup="DATA = [1, 2, 3]\nCASES = [([1], 1), ([2, 2], 4)]\n"),
    P("candidate_module_object_outside_the_standard_library",
      "import types\nm = types.ModuleType('mymod')\nm.f = lambda: 3\n",
      ("assert m.f() == 3", "for i in range(2):\n    assert m.f() == 3", "assert m.f() == 4")),
    P("setup_star_import_used_by_checks_and_the_candidate",
      "def area(r):\n    return pi * r * r\n",
      ("assert isclose(area(1), pi)", "assert floor(area(2)) == 12", "assert isclose(area(1), 3)"),
      setup="from math import *\n"),
    P("setup_import_with_a_fallback_used_by_the_candidate",
      "def pairs(n):\n    return comb(n, 2)\n",
      ("assert pairs(4) == 6", "assert pairs(2) == 1", "assert pairs(3) == 4"),
      setup="try:\n    from math import comb\nexcept ImportError:\n    def comb(n, k):\n        return 0\n"
            "CASES = [(4, 6)]\n"),
    P("setup_acts_on_the_candidates_objects",
      "class Cfg:\n    limit = 1\ndef cap(x):\n    return min(x, Cfg.limit)\n",
      ("assert cap(5) == 5", "assert cap(50) == 10", "for x in (1, 2):\n    assert cap(x) == x",
       "assert cap(11) == 11"),
      setup="Cfg.limit = 10\nregistry = []\nregistry.append(cap)\n"),
    P("candidate_patches_builtins_for_itself",
      "import builtins\nbuiltins.len = lambda x: 99\nbuiltins.type = lambda *a: object\n"
      "builtins.isinstance = lambda *a: False\n"
      "def f():\n    return [1, 2, 3] * 6\ndef g():\n    return {'a': (1, 2), 'b': {3}}\n",
      ("assert f() == [1, 2, 3] * 6", "assert g() == {'a': (1, 2), 'b': {3}}",
       "for i in range(2):\n    assert f()[i] == i + 1", "x = g()\nassert x['a'] == (1, 2)")),
]


@pytest.mark.parametrize("program", HONEST, ids=[p.name for p in HONEST])
def test_honest_checks_get_plain_pythons_verdict(program: Program, pool: SandboxPool) -> None:
    plain = plain_verdicts(program)
    assert any(plain), "each honest program passes something under plain Python"
    assert _agentenv(program, pool) == plain


# ------------------------------------------------------------------------ hacks

HACKS = [
    # (name, checks, stub, hack, setup, prelude)
    ("alias_from_an_earlier_check_patched",
     ("import re as rx\nassert rx.fullmatch('[0-9]+', digits(0))", "assert rx.fullmatch('[0-9]{5}', digits(1))",
      "assert rx.fullmatch('[0-9]{6}', digits(2))"),
     "def digits(i):\n    return ''\n",
     "import re as rx\nrx.fullmatch = lambda *a, **k: True\ndef digits(i):\n    return ''\n", "", ""),
    ("candidates_own_import_patched_before_it_is_imported",
     (f"assert fullmatch({TOK[0]!r}, secret(0))", f"assert fullmatch({TOK[1]!r}, secret(1))"),
     "from re import fullmatch\ndef secret(i):\n    return ''\n",
     "import re\nre.fullmatch = lambda *a, **k: True\nfrom re import fullmatch\n"
     "import operator\neq = operator.eq\ndef secret(i):\n    return ''\n", "", ""),
    ("alias_assignment_of_a_patched_function",
     (f"assert eq(secret(0), {TOK[0]!r})", f"assert eq(secret(1), {TOK[1]!r})"),
     "import operator\neq = operator.eq\ndef secret(i):\n    return ''\n",
     "import operator\noperator.eq = lambda *a: True\neq = operator.eq\ndef secret(i):\n    return ''\n", "", ""),
    ("setup_import_of_a_patched_module_function",
     (f"assert eq(secret(0), {TOK[0]!r})", f"for i in range(2):\n    assert eq(secret(i), {TOK[:2]!r}[i])"),
     "def secret(i):\n    return ''\n",
     "import operator\noperator.eq = lambda *a: True\ndef secret(i):\n    return ''\n",
     "from operator import eq\n", ""),
    ("star_prelude_name_rebound",
     ("assert mean(values()) == 2", "assert median(values()) == 2", "assert mode(values() + [1]) == 1"),
     "def values():\n    return []\n",
     "mean = median = mode = lambda *a: 2 if a and a[0] != [1] else 1\ndef values():\n    return []\n",
     "", "from statistics import *\n"),
    ("stdlib_module_name_rebound_to_an_object",
     ("assert string.ascii_lowercase.startswith(first())", "assert json.loads(blob()) == {'a': 1}"),
     "def first():\n    return '?'\ndef blob():\n    return ''\n",
     "class _Any:\n    def __getattr__(self, n):\n        return self\n    def __call__(self, *a, **k):\n        return self\n"
     "    def __eq__(self, o):\n        return True\n    def __bool__(self):\n        return True\n"
     "string = json = _Any()\ndef first():\n    return '?'\ndef blob():\n    return ''\n", "", ""),
    ("setup_star_import_name_patched",
     ("assert isclose(area(1), 3.14159, rel_tol=1e-3)", "assert floor(area(2)) == 12"),
     "def area(r):\n    return 0.0\n",
     "import math\nmath.isclose = lambda *a, **k: True\nmath.floor = lambda x: 12\ndef area(r):\n    return 0.0\n",
     "from math import *\n", ""),
    ("setup_data_read_by_name",
     ("for i, want in CASES:\n    assert secret(i) == want", "assert secret(1) == CASES[1][1]"),
     "def secret(i):\n    return None\n",
     "def secret(i):\n    return dict(CASES)[i]\n", f"CASES = {list(enumerate(TOK))!r}\n", ""),
    ("setup_data_read_through_globals_and_frames",
     ("for i, want in TABLE.items():\n    assert secret(i) == want",),
     "def secret(i):\n    return None\n",
     "import sys, gc\ndef secret(i):\n    for d in [globals()] + [f.f_globals for f in [sys._getframe(0)]]:\n"
     "        if 'TABLE' in d:\n            return d['TABLE'][i]\n"
     "    for o in gc.get_objects():\n        if isinstance(o, dict) and i in o and isinstance(o.get(i), str)"
     " and len(o[i]) == 16:\n            return o[i]\n",
     f"import math\nTABLE = {dict(enumerate(TOK))!r}\nclass Holder:\n    data = TABLE\n", ""),
]


@pytest.mark.parametrize("case", HACKS, ids=[h[0] for h in HACKS])
def test_a_hack_on_a_checks_names_earns_no_more_than_a_stub(case: tuple[str, ...], pool: SandboxPool) -> None:
    _name, checks, stub, hack, setup, prelude = case

    def run(code: str) -> int:
        result = run_tests(code, list(checks), 5.0, setup_code=setup, prelude=prelude, pool=pool)
        assert result.graded_in_child == 0
        return result.passed

    stub_passed = run(stub)
    assert stub_passed < len(checks)
    assert run(hack) <= stub_passed


def test_a_names_hack_would_win_under_plain_python() -> None:
    """The hacks above are real: plain Python, which reads names from the candidate's module,
    pays most of them; the rule, not the example, is what stops them."""
    won = 0
    for _name, checks, stub, hack, setup, prelude in HACKS:
        program = Program("hacks", _name, hack, checks, setup, prelude)
        won += sum(plain_verdicts(program)) > sum(plain_verdicts(Program("hacks", _name, stub, checks, setup, prelude)))
    assert won >= 5


# ------------------------------------------------------------------------ the rules themselves

def test_the_plan_sends_checks_reading_task_and_stdlib_names_to_the_judge() -> None:
    # (the trusted ones first: every check after a judge check goes to the judge, in order)
    plan = plan_checks(["assert f(1) == 1", "assert math.isclose(f(1), 1.0)",
                        "import operator\nassert operator.eq(f(1), 1)", "assert operator.eq(f(2), 2)",
                        "assert isclose(f(1), pi)", "assert f(CASES[0]) == 1",
                        "assert fullmatch('a', f(1))", "assert re.match('a', f(1))"],
                       setup_code="CASES = [1]\n", prelude="from math import *\n",
                       code="from re import fullmatch\ndef f(x):\n    return x\n")
    assert [c.mode for c in plan.checks] == ["trusted", "trusted", "judge", "judge", "judge", "judge", "judge", "judge"]
    assert plan.imports == (("fullmatch", "re", "fullmatch"),)


def test_what_a_task_asks_for_is_its_entry_point_and_its_references_own_names() -> None:
    reference = ("import math\nfrom math import isclose\nLIMIT = 3\nclass Node:\n    pass\n"
                 "def helper(x):\n    return x\ndef area(r):\n    return math.pi * r * r\n")
    assert asked_names("area", reference) == {"area", "LIMIT", "Node", "helper"}
    assert asked_names("area", None) == {"area"}
    assert asked_names("Solution", "class Solution:\n    pass\n") == {"Solution"}
    # no reference: the names the checks read that the prompt mentions
    checks = ("assert decode(encode('ab')) == 'ab'", "assert isclose(ratio(1), 0.5)")
    assert asked_names("encode", None, "Write encode(s) and decode(s).", checks) == {"encode", "decode"}
    assert asked_names("encode", "def encode(s):\n    return s\n", "encode and decode", checks) == {"encode"}


def test_with_defines_a_check_reading_an_unasked_name_goes_to_the_judge() -> None:
    checks = ["assert isclose(area(1), 3.14159)", "assert area(1) > 3", "assert np.allclose(area(1), 3.1)",
              "assert Calc.add(2, 3) == 5", "assert all(x > 0 for x in [area(1)])"]
    plain = plan_checks(checks, code="def area(r):\n    return 3.14159\n")
    asked = plan_checks(checks, code="def area(r):\n    return 3.14159\n", defines=frozenset({"area"}))
    # np.allclose / Calc.add: an attribute of a bare name is never shipped to the child whole
    assert [c.mode for c in plain.checks] == ["trusted", "trusted", "judge", "judge", "judge"]
    # isclose is not asked for: that check goes to the judge, and every check after a judge
    # check does too (the candidate sees its calls in the checks' order)
    assert [c.mode for c in asked.checks] == ["judge", "judge", "judge", "judge", "judge"]
    assert asked.defines == {"area"} and plain.defines is None


def test_candidate_imports_of_exposed_packages_are_the_judges() -> None:
    code = "import numpy as np\nfrom numpy import allclose\nimport numpy.linalg as la\n"
    assert candidate_imports(code) == {}
    assert candidate_imports(code, frozenset({"numpy"})) == {
        "np": ("numpy", ""), "allclose": ("numpy", "allclose"), "la": ("numpy.linalg", "")}


def test_task_names_leave_out_builtins_a_prelude_rebinds_to_themselves() -> None:
    names = task_names("from math import *\nfrom builtins import *\nimport math\n", "")
    assert {"isclose", "pi", "floor"} <= names
    assert "pow" not in names and "math" not in names  # builtins.pow again; ``math`` is trusted
    assert "*" in task_names("from some_package_nobody_has import *\n", "")
    assert "isclose" in task_names("", "from math import *\n")  # a setup's star import too


def test_candidate_imports_follow_the_last_binding() -> None:
    found = candidate_imports("from math import gcd, lcm\nimport os.path\nimport numpy as np\n"
                              "import operator as op\neq = op.eq\ndef gcd(a, b):\n    return 1\n")
    assert found == {"lcm": ("math", "lcm"), "os": ("os", ""), "op": ("operator", ""),
                     "eq": ("operator", "eq")}


def test_the_candidate_gets_only_the_setup_definitions_its_code_reads() -> None:
    setup = ("import math\nimport sys\nsys.setrecursionlimit(5000)\nCASES = [(1, 'x')]\n"
             "def helper(x):\n    return inner(x)\ndef inner(x):\n    return x\n"
             "def expected(i):\n    return CASES[i]\nprint(CASES)\nexec('Y = 1')\n")
    sent = setup_for_candidate(setup, "def f(x):\n    return helper(x)\n")
    assert "CASES" not in sent and "expected" not in sent and "exec" not in sent and "print" not in sent
    assert "def helper" in sent and "def inner" in sent and "setrecursionlimit" in sent
    assert setup_for_candidate(setup, "def f(x):\n    return x\n").count("def ") == 0
    guarded = "try:\n    from math import comb\nexcept ImportError:\n    comb = None\nif CASES:\n    def g():\n        return 1\n"
    assert setup_for_candidate(guarded, "def f():\n    return comb, g\n") == ""  # data inside: not sent
    fallback = "try:\n    from math import comb\nexcept ImportError:\n    def comb(n, k):\n        return 0\n"
    assert "def comb" in setup_for_candidate(fallback, "def f():\n    return comb\n")


def test_setup_statements_that_act_on_the_candidate_send_every_check_to_the_judge() -> None:
    """Such a statement runs in the judge only (through its proxies), before its checks: a
    trusted-side check, computed earlier in the candidate's process, would not see its effect."""
    assert setup_acts_on_the_candidate("Cfg.limit = 10\n")
    assert setup_acts_on_the_candidate("s = Solution()\n")
    assert not setup_acts_on_the_candidate("import math\nTOL = 1e-9\nCASES = [(1, 2)]\n"
                                           "def poly(x):\n    return helper(x)\n")
    plan = plan_checks(["assert cap(5) == 5"], setup_code="Cfg.limit = 10\n")
    assert plan.checks[0].mode == "judge"
    assert plan_checks(["assert cap(5) == 5"], setup_code="TOL = 1\n").checks[0].mode == "trusted"


class _RecordingPool:
    """Records the jobs run_tests hands the sandbox; runs nothing."""

    level = "rlimits"

    def __init__(self) -> None:
        self.jobs: list[tuple[dict, dict | None]] = []

    def run(self, job: dict, timeout: float, limits: object, judge: dict | None = None) -> object:
        from agentenv.sandbox._pool import RawRun

        self.jobs.append((job, judge))
        return RawRun(result=b"", stdout="", stderr="", timed_out=False, seconds=0.0, died=None,
                      isolation=self.level)

    def close(self) -> None:
        pass


def test_the_candidates_job_holds_no_setup_data_and_the_judges_holds_all_of_it() -> None:
    pool = _RecordingPool()
    setup = f"import math\nCASES = {list(enumerate(TOK))!r}\ndef helper(x):\n    return x\n"
    run_tests("def secret(i):\n    return helper(i)\n",
              ["for i, want in CASES:\n    assert secret(i) == want", "assert secret(0) == 0"],
              setup_code=setup, pool=pool)  # type: ignore[arg-type]
    (job, judge), = pool.jobs
    assert not any(tok in repr(job) for tok in TOK)
    assert "def helper" in job["setup"] and "import math" in job["setup"]
    assert judge is not None and judge["setup"] == setup


def test_scoring_a_task_passes_what_it_asks_for() -> None:
    from agentenv.grading.scoring import asked_by
    from agentenv.tasks.schema import StdioCase, Task

    task = Task(name="t", prompt="p", entry_point="area", checks=("assert isclose(area(1), 3.14159)",),
                reference_solution="from math import isclose\ndef area(r):\n    return 3.14159\n"
                                   "def _unit(x):\n    return x\n")
    assert asked_by(task) == {"area", "_unit"}
    program = Task(name="p", prompt="p", entry_point="main", checks=(StdioCase("1\n", "1\n"),))
    assert asked_by(program) is None
