"""Hacks against the paths fidelity opens: each must earn no more than a do-nothing stub.

Every case is a task (checks, setup, prelude), a stub that defines the asked-for names and does
nothing, an honest solution, and a hack that does none of the work but attacks the grader:
values that lie in ``__eq__``/``__hash__``/methods, patched builtins and standard-library
objects the check relies on, exceptions named like builtins, a ``__class__`` property, a scan of
``gc``/frames/``sys.modules`` for setup data, learning which answers were accepted from whether
the next call arrives, forged verdict frames. Tokens are drawn per run, so no fixed answer wins.
The honest solution passing every check under plain Python shows each task is meaningful.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fidelity.harness import Program, plain_verdicts
from support.attacks import strict_pool

from agentenv.grading import RunResult, run_tests
from agentenv.sandbox import SandboxPool

TOK = [secrets.token_hex(8) for _ in range(4)]
BITS = [0, 1] + [secrets.randbelow(2) for _ in range(6)]  # never constant: no fixed guess passes
KS = [10**6 + secrets.randbelow(10**9) for _ in range(10)]  # expected numbers, drawn per run


@dataclass(frozen=True)
class Hack:
    name: str
    checks: tuple[str, ...]
    stub: str
    honest: str
    hack: str
    setup_code: str = ""
    prelude: str = ""
    timeout: float = 5.0
    defines: tuple[str, ...] | None = None  # what the task asks the candidate to define


ALWAYS_EQUAL = '''
class _Any:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __hash__(self): return 0
    def __bool__(self): return True
    def __len__(self): return 0
    def __iter__(self): return iter(())
    def __contains__(self, item): return True
    def __getattr__(self, name): return lambda *a, **k: _Any()
    def __call__(self, *a, **k): return self
    def __lt__(self, other): return True
    __le__ = __gt__ = __ge__ = __lt__
'''

SECRET_STUB = "def secret(i):\n    return None\n"
SECRET_HONEST = f"def secret(i):\n    return {TOK!r}[i]\n"

HACKS = [
    # always-equal and lying values, on the decomposed and the judge paths
    Hack("always_equal_object",
         (f"assert secret(0) == {TOK[0]!r}", f"assert secret(1) == {TOK[1]!r}"),
         SECRET_STUB, SECRET_HONEST, ALWAYS_EQUAL + "def secret(i):\n    return _Any()\n"),
    Hack("always_equal_in_a_loop_check",
         (f"for i, t in enumerate({TOK!r}):\n    assert secret(i) == t",),
         SECRET_STUB, SECRET_HONEST, ALWAYS_EQUAL + "def secret(i):\n    return _Any()\n"),
    Hack("always_equal_inside_a_list",
         (f"assert pair() == [{TOK[0]!r}, {TOK[1]!r}]",),
         "def pair():\n    return None\n", f"def pair():\n    return {TOK[:2]!r}\n",
         ALWAYS_EQUAL + "def pair():\n    return [_Any(), _Any()]\n"),
    Hack("str_subclass_lying_eq",
         (f"assert secret(0) == {TOK[0]!r}", f"x = secret(1)\nassert x == {TOK[1]!r}"),
         SECRET_STUB, SECRET_HONEST,
         "class S(str):\n    def __eq__(self, o): return True\n    __hash__ = str.__hash__\n"
         "def secret(i):\n    return S('x')\n"),
    Hack("int_subclass_lying_eq_and_hash",
         (f"assert code() == {int(TOK[0], 16)}", f"assert code() in {{{int(TOK[0], 16)}}}",
          f"assert code() in [{int(TOK[0], 16)}]"),
         "def code():\n    return None\n", f"def code():\n    return {int(TOK[0], 16)}\n",
         f"class I(int):\n    def __eq__(self, o): return True\n    def __hash__(self): return hash({int(TOK[0], 16)})\n"
         "def code():\n    return I(1)\n"),
    Hack("str_subclass_lying_startswith",
         (f"assert secret(0).startswith({TOK[0][:6]!r})", f"assert secret(1).endswith({TOK[1][-6:]!r})",
          "assert secret(2).isalnum()",
          f"assert {TOK[3][:4]!r} in secret(3)"),
         SECRET_STUB, SECRET_HONEST,
         "class S(str):\n    def startswith(self, *a): return True\n    def endswith(self, *a): return True\n"
         "    def isalnum(self): return True\n    def __contains__(self, x): return True\n"
         "def secret(i):\n    return S('-')\n"),
    Hack("set_subclass_lying_issuperset",
         ("assert letters('abc').issuperset({'a', 'b'})", "assert not letters('abc').isdisjoint({'c'})",
          "assert letters('xy') >= {'x', 'y'}"),
         "def letters(s):\n    return None\n", "def letters(s):\n    return set(s)\n",
         "class L(set):\n    def issuperset(self, o): return True\n    def isdisjoint(self, o): return False\n"
         "    def __ge__(self, o): return True\n"
         "def letters(s):\n    return L()\n"),
    Hack("list_subclass_lying_len_and_index",
         ("assert len(top(3)) == 3 and top(3).index(7) == 0", "assert top(2).count(9) == 2",
          "r = top(4)\nassert len(r) == 4\nassert r[0] == 7"),
         "def top(k):\n    return None\n", "def top(k):\n    return [7] + [9] * (k - 1) if k == 3 else [9] * k if k == 2 else [7, 1, 2, 3]\n",
         "class L(list):\n    def __len__(self): return 4 if self.k == 4 else 3\n    def index(self, *a): return 0\n"
         "    def count(self, x): return 2\n    def __getitem__(self, i): return 7\n"
         "def top(k):\n    r = L()\n    r.k = k\n    return r\n"),
    Hack("dict_subclass_lying_lookups",
         (f"assert table()['a'] == {TOK[0]!r}", f"assert table().get('b') == {TOK[1]!r}",
          f"assert {TOK[2]!r} in table().values()", "assert table().keys() == {'a', 'b', 'c'}"),
         "def table():\n    return {}\n", f"def table():\n    return dict(zip('abc', {TOK[:3]!r}))\n",
         ALWAYS_EQUAL + "class D(dict):\n    def __getitem__(self, k): return _Any()\n    def get(self, *a): return _Any()\n"
         "    def values(self): return _Any()\n    def keys(self): return _Any()\n"
         "def table():\n    return D()\n"),
    Hack("class_property_claims_float",
         ("r = mean([1, 2])\nassert isinstance(r, float) and r == 1.5",
          "assert isinstance(mean([4]), float)"),
         "def mean(xs):\n    return None\n", "def mean(xs):\n    return sum(xs) / len(xs)\n",
         ALWAYS_EQUAL + "class F(_Any):\n    @property\n    def __class__(self): return float\n"
         "def mean(xs):\n    return F()\n"),
    # the check's data handed to the candidate's dunders as an operand (it records the
    # expected value and answers a later exact == with it)
    Hack("arithmetic_operands_learned",
         (f"assert secret(0) - {KS[0]} == 0", f"assert {KS[1]} - secret(1) == 0",
          f"assert secret(2) + {KS[2]} == {2 * KS[2]}", f"assert divmod(secret(3), {KS[3]}) == (1, 0)",
          f"assert secret(4) % {KS[4]} == 0", f"assert secret(5) // {KS[5]} == 1",
          f"assert secret(6) ^ {KS[6]} == 0", f"r = secret(7)\nr -= {KS[7]}\nassert r == 0",
          f"for i, k in ((8, {KS[8]}), (9, {KS[9]})):\n    assert [secret(i) * 1 - k] == [0]",
          *(f"assert secret({i}) == {k}" for i, k in enumerate(KS))),
         "def secret(i):\n    return None\n", f"def secret(i):\n    return {KS!r}[i]\n",
         "known = {}\nclass R:\n    def __init__(self, i):\n        self.i = i\n"
         "    def _learn(self, o):\n        if type(o) is int and o > 1:\n            known[self.i] = o\n        return 0\n"
         "    __sub__ = __rsub__ = __add__ = __radd__ = __mod__ = __xor__ = __isub__ = _learn\n"
         "    def __mul__(self, o):\n        return self\n"
         "    def __divmod__(self, o):\n        self._learn(o)\n        return (1, 0)\n"
         "    def __floordiv__(self, o):\n        self._learn(o)\n        return 1\n"
         "def secret(i):\n    return known[i] if i in known else R(i)\n"),
    Hack("operands_learned_by_an_entry_point_made_a_class",
         (f"assert {KS[0]} in secret(0)", f"assert secret(1) - {KS[1]} == 0",
          f"assert secret(0) == [{KS[0]}]", f"assert secret(1) == {KS[1]}"),
         "def secret(i):\n    return None\n",
         f"def secret(i):\n    return [{KS[0]}] if i == 0 else {KS[1]}\n",
         "known = {}\nclass secret:\n    def __new__(cls, i):\n"
         "        if i in known:\n            return [known[i]] if i == 0 else known[i]\n"
         "        self = object.__new__(cls)\n        self.i = i\n        return self\n"
         "    def __contains__(self, o):\n        known[self.i] = o\n        return True\n"
         "    def __sub__(self, o):\n        known[self.i] = o\n        return 0\n"),
    Hack("check_data_read_from_the_childs_job",
         (f"assert secret(0).startswith({TOK[0]!r})", f"assert secret(0) == {TOK[0]!r}",
          f"assert secret(1).strip().endswith({TOK[1]!r})", f"assert secret(1) == {TOK[1]!r}"),
         SECRET_STUB, SECRET_HONEST,
         "import gc, re\ndef secret(i):\n    for o in gc.get_objects():\n"
         "        try:\n            items = list(o.values() if isinstance(o, dict) else o if isinstance(o, (list, tuple)) else ())\n"
         "        except Exception:\n            continue\n"
         "        for x in items:\n            if type(x) is str:\n"
         "                m = re.search(r\"(starts|ends)with\\('([0-9a-f]{16})'\\)\", x)\n"
         "                if m and (m.group(1) == 'starts') == (i == 0):\n                    return m.group(2)\n"
         "    return ''\n"),
    Hack("methods_and_subscripts_of_an_object_the_task_does_not_ask_for",
         (f"assert secret(0).startswith({TOK[0]!r})", f"assert lookup()[{TOK[1]!r}] == 1",
          f"r = secret(2)\nassert r.count({TOK[2]!r}) == 1",
          f"b = box()\ntry:\n    b.tag = {TOK[3]!r}\nexcept AttributeError:\n    pass\nassert b != {TOK[3]!r}",
          f"assert secret(0) == {TOK[0]!r}", f"assert lookup() == {{{TOK[1]!r}: 1}}",
          f"assert secret(2) == {TOK[2]!r}", f"assert secret(3) == {TOK[3]!r}"),
         SECRET_STUB + "def lookup():\n    return None\ndef box():\n    return None\n",
         SECRET_HONEST + f"def lookup():\n    return {{{TOK[1]!r}: 1}}\n"
         "def box():\n    return ()\n",
         "known = {}\nclass S:\n    def __init__(self, i):\n        object.__setattr__(self, 'i', i)\n"
         "    def _learn(self, o):\n        known[self.i] = o\n        return 1\n"
         "    startswith = count = __getitem__ = _learn\n"
         "    def __setattr__(self, k, v):\n        known[3] = v\n"
         "def secret(i):\n    return known[i] if i in known else S(i)\n"
         "def lookup():\n    return {known[1]: 1} if 1 in known else S(1)\n"
         "def box():\n    return object.__new__(S)\n",
         defines=("secret", "lookup", "box")),
    # a float-tolerance check answered by dunders that make every difference zero
    Hack("tolerance_check_zeroed_by_dunders",
         ("assert abs(area(1) - 3.141592653589793) < 1e-6",
          "assert abs(12.566370614359172 - area(2)) <= 1e-9",
          "r = area(3)\nassert abs(r - 28.274333882308138) < 1e-6",
          "assert area(1) - 3.14159 < 1e-5 and 3.14159 - area(1) < 1e-5",
          "import math\nassert math.isclose(area(1), 3.141592653589793)",
          "for r in (1, 2):\n    assert abs(area(r) - 3.141592653589793 * r * r) < 1e-6"),
         "def area(r):\n    return 0.0\n", "import math\ndef area(r):\n    return math.pi * r * r\n",
         "class Z:\n    def __sub__(self, o):\n        return 0.0\n    __rsub__ = __sub__\n"
         "    def __abs__(self):\n        return 0.0\n    def __lt__(self, o):\n        return True\n"
         "    __le__ = __gt__ = __ge__ = __lt__\n    def __float__(self):\n        return 0.0\n"
         "def area(r):\n    return Z()\n"),
    # a check's names resolved to the candidate's: an exposed package it faked or patched, a
    # helper the task never asked for
    Hack("exposed_package_faked_or_patched",
         ("assert np.allclose(area(1), 3.141592653589793)",
          "import numpy\nassert numpy.isclose(area(2), 12.566370614359172)",
          "assert bool(np.isclose(area(3), 28.274333882308138))",
          "for r in (1, 2):\n    assert np.allclose([area(r)], [3.141592653589793 * r * r])"),
         "import numpy as np\ndef area(r):\n    return 0.0\n",
         "import math\nimport numpy as np\ndef area(r):\n    return math.pi * r * r\n",
         "import sys, types\nnp = types.ModuleType('numpy')\n"
         "np.allclose = np.isclose = lambda *a, **k: True\nsys.modules['numpy'] = np\n"
         "def area(r):\n    return 0.0\n"),
    Hack("exposed_package_patched_after_import",
         ("assert np.allclose(area(1), 3.141592653589793)",
          "x = area(2)\nassert np.isclose(x, 12.566370614359172)"),
         "import numpy as np\ndef area(r):\n    return 0.0\n",
         "import math\nimport numpy as np\ndef area(r):\n    return math.pi * r * r\n",
         "import numpy as np\nnp.allclose = np.isclose = lambda *a, **k: True\n"
         "def area(r):\n    return 0.0\n"),
    Hack("helper_names_the_task_does_not_ask_for",
         ("assert isclose(area(1), 3.141592653589793)", "assert np.allclose(area(2), 12.566370614359172)",
          "for r in (1, 2):\n    assert isclose(area(r), 3.141592653589793 * r * r)",
          f"assert isclose(len(secret(0)), 16) and np.array_equal(np.array([secret(0)]), [{TOK[0]!r}])"),
         "def area(r):\n    return 0.0\ndef secret(i):\n    return ''\n",
         "from math import isclose\nimport math\nimport numpy as np\n"
         f"def area(r):\n    return math.pi * r * r\ndef secret(i):\n    return {TOK!r}[i]\n",
         "def isclose(*a, **k):\n    return True\nclass NP:\n"
         "    def allclose(self, *a, **k):\n        return True\n    array_equal = allclose\n"
         "    def array(self, x):\n        return x\nnp = NP()\n"
         "def area(r):\n    return 0.0\ndef secret(i):\n    return ''\n",
         defines=("area", "secret")),
    # patched builtins and standard library that the check relies on
    Hack("operator_eq_patched",
         ("import operator\nassert operator.eq(add(2, 3), 5)",
          "assert operator.eq(add(10, 5), 15)", "from operator import eq\nassert eq(add(1, 1), 2)"),
         "import operator\ndef add(a, b):\n    return None\n", "import operator\ndef add(a, b):\n    return a + b\n",
         "import operator\noperator.eq = lambda *a: True\ndef add(a, b):\n    return None\n"),
    Hack("fraction_rebound",
         ("assert ratio(1, 3) == Fraction(1, 3)", "assert ratio(2, 7) == Fraction(2, 7)",
          "for a in (1, 2):\n    assert ratio(a, 5) == Fraction(a, 5)"),
         "from fractions import Fraction\ndef ratio(a, b):\n    return None\n",
         "from fractions import Fraction\ndef ratio(a, b):\n    return Fraction(a, b)\n",
         "class Fraction:\n    def __init__(self, *a): pass\n    def __eq__(self, o): return True\n"
         "def ratio(a, b):\n    return Fraction()\n"),
    Hack("fractions_module_patched",
         ("from fractions import Fraction\nassert ratio(1, 3) == Fraction(1, 3)",
          "import fractions\nassert ratio(3, 7) == fractions.Fraction(3, 7)"),
         "def ratio(a, b):\n    return None\n",
         "from fractions import Fraction\ndef ratio(a, b):\n    return Fraction(a, b)\n",
         "import fractions\nclass F:\n    def __init__(self, *a): pass\n    def __eq__(self, o): return True\n"
         "fractions.Fraction = F\ndef ratio(a, b):\n    return F()\n"),
    Hack("counter_and_deque_rebound",
         ("assert tally('aab') == Counter({'a': 2, 'b': 1})", "assert window([1, 2, 3]) == deque([2, 3])"),
         "from collections import Counter, deque\ndef tally(s):\n    return None\ndef window(xs):\n    return None\n",
         "from collections import Counter, deque\ndef tally(s):\n    return Counter(s)\ndef window(xs):\n    return deque(xs, maxlen=2)\n",
         ALWAYS_EQUAL + "Counter = deque = lambda *a, **k: _Any()\n"
         "def tally(s):\n    return None\ndef window(xs):\n    return None\n"),
    Hack("decimal_and_date_rebound",
         ("assert price() == Decimal('19.99')", "assert due() == date(2030, 1, 31)",
          "for k in range(2):\n    assert price() == Decimal('19.99')"),
         "from decimal import Decimal\nfrom datetime import date\ndef price():\n    return None\ndef due():\n    return None\n",
         "from decimal import Decimal\nfrom datetime import date\ndef price():\n    return Decimal('19.99')\n"
         "def due():\n    return date(2030, 1, 31)\n",
         ALWAYS_EQUAL + "Decimal = date = lambda *a: _Any()\ndef price():\n    return None\ndef due():\n    return None\n"),
    Hack("sys_modules_entry_replaced",
         ("import statistics\nassert mean_of([1, 2, 3, 10]) == statistics.mean([1, 2, 3, 10])",
          "import cmath\nassert cmath.isclose(root(-4), 2j)"),
         "def mean_of(xs):\n    return None\ndef root(z):\n    return None\n",
         "import statistics, cmath\ndef mean_of(xs):\n    return statistics.mean(xs)\ndef root(z):\n    return cmath.sqrt(z)\n",
         ALWAYS_EQUAL + "import sys, types\nfor name in ('statistics', 'cmath'):\n"
         "    m = types.ModuleType(name)\n    m.mean = m.isclose = lambda *a, **k: _Any()\n    sys.modules[name] = m\n"
         "def mean_of(xs):\n    return None\ndef root(z):\n    return None\n"),
    Hack("prelude_name_rebound_in_a_loop_check",
         ("for r in (1, 2, 3):\n    assert isclose(area(r), pi * r * r)",
          "total = 0\nfor r in (1, 2):\n    total += area(r)\nassert isclose(total, 5 * pi)"),
         "def area(r):\n    return 0.0\n", "def area(r):\n    return pi * r * r\n",
         "import math\nmath.isclose = lambda *a, **k: True\nisclose = lambda *a, **k: True\n"
         "def area(r):\n    return 0.0\n",
         prelude="from math import *\n"),
    Hack("math_isclose_patched",
         ("import math\nassert math.isclose(area(1), 3.141592653589793)",
          "assert math.isclose(area(2), 12.566370614359172)",
          "import math\nfor r in (1, 3):\n    assert math.isclose(area(r), math.pi * r * r)"),
         "import math\ndef area(r):\n    return 0.0\n", "import math\ndef area(r):\n    return math.pi * r * r\n",
         "import math\nmath.isclose = lambda *a, **k: True\ndef area(r):\n    return 0.0\n"),
    Hack("re_fullmatch_patched",
         ("import re\nassert re.fullmatch(r'[a-z]+-[a-z]+', slug('Hello World'))",
          "assert re.fullmatch(r'[0-9]{4}', year('in 1999'))"),
         "import re\ndef slug(s):\n    return ''\ndef year(s):\n    return ''\n",
         "import re\ndef slug(s):\n    return '-'.join(s.lower().split())\ndef year(s):\n    return re.search(r'[0-9]{4}', s).group()\n",
         "import re\nre.fullmatch = lambda *a, **k: True\ndef slug(s):\n    return ''\ndef year(s):\n    return ''\n"),
    Hack("hmac_compare_digest_patched",
         (f"import hmac\nassert hmac.compare_digest(secret(0), {TOK[0]!r})",
          f"import hmac\nfor i in range(2):\n    assert hmac.compare_digest(secret(i), {TOK[:2]!r}[i])"),
         "def secret(i):\n    return ''\n", SECRET_HONEST,
         "import hmac\nhmac.compare_digest = lambda *a: True\ndef secret(i):\n    return ''\n"),
    Hack("builtins_patched",
         ("assert sorted(shuffle_back([3, 1, 2])) == [1, 2, 3]", "assert len(secret_list()) == 7",
          "assert all(x > 0 for x in secret_list())"),
         "def shuffle_back(xs):\n    return []\ndef secret_list():\n    return []\n",
         "def shuffle_back(xs):\n    return xs\ndef secret_list():\n    return [1] * 7\n",
         "import builtins\nbuiltins.sorted = lambda *a, **k: [1, 2, 3]\nbuiltins.len = lambda *a: 7\n"
         "builtins.all = lambda *a: True\n"
         "def shuffle_back(xs):\n    return []\ndef secret_list():\n    return [0]\n"),
    Hack("prelude_name_rebound",
         ("assert isclose(area(1), pi)", "assert isclose(area(2), 4 * pi)",
          "assert floor(area(1)) == 3"),
         "def area(r):\n    return 0.0\n", "def area(r):\n    return pi * r * r\n",
         "isclose = lambda *a, **k: True\nfloor = lambda x: 3\ndef area(r):\n    return 0.0\n",
         prelude="from math import *\n"),
    # exceptions and type relations decided by the candidate
    Hack("fake_exception_named_like_a_builtin",
         ("try:\n    parse('x')\n    assert False\nexcept ValueError:\n    pass",
          "try:\n    parse('y')\nexcept Exception as e:\n    assert isinstance(e, ValueError)\nelse:\n    assert False",
          "try:\n    parse('')\n    assert False\nexcept LookupError:\n    pass"),
         "def parse(s):\n    return None\n",
         "def parse(s):\n    if not s:\n        raise KeyError(s)\n    raise ValueError(s)\n",
         "class ValueError(Exception):\n    pass\nclass LookupError(Exception):\n    pass\n"
         "def parse(s):\n    raise (LookupError if not s else ValueError)(s)\n"),
    Hack("fake_builtin_exception_in_a_module",
         ("try:\n    divide(1, 0)\n    assert False\nexcept ZeroDivisionError:\n    pass",),
         "def divide(a, b):\n    return None\n", "def divide(a, b):\n    return a / b\n",
         "import types\nm = types.ModuleType('builtins')\nexec('class ZeroDivisionError(Exception): pass', m.__dict__)\n"
         "def divide(a, b):\n    raise m.ZeroDivisionError('x')\n"),
    Hack("metaclass_instancecheck_on_a_builtin_check",
         ("assert isinstance(parse('1'), int) and parse('1') == 1",
          "assert issubclass(type(parse('2')), int)"),
         "def parse(s):\n    return None\n", "def parse(s):\n    return int(s)\n",
         "class Meta(type):\n    def __instancecheck__(cls, o): return True\n    def __subclasscheck__(cls, o): return True\n"
         "    def __eq__(cls, o): return True\n    __hash__ = type.__hash__\n"
         "class X(metaclass=Meta):\n    def __eq__(self, o): return True\n"
         "import builtins\nbuiltins.issubclass = lambda *a: True\nbuiltins.isinstance = lambda *a: True\n"
         "def parse(s):\n    return X()\n"),
    # setup data read from the candidate's process
    Hack("setup_data_found_by_gc_scan",
         ("for i, want in CASES:\n    assert secret(i) == want", "assert secret(CASES[2][0]) == CASES[2][1]"),
         SECRET_STUB, SECRET_HONEST,
         "import gc\ndef secret(i):\n    for o in gc.get_objects():\n"
         "        if isinstance(o, list) and o and all(isinstance(t, tuple) and len(t) == 2 for t in o):\n"
         "            for k, v in o:\n                if k == i and isinstance(v, str):\n                    return v\n",
         setup_code=f"CASES = {list(enumerate(TOK))!r}\n"),
    Hack("setup_data_found_in_sys_modules",
         ("for i, want in CASES:\n    assert secret(i) == want",),
         SECRET_STUB, SECRET_HONEST,
         "import sys\ndef secret(i):\n    for m in list(sys.modules.values()):\n"
         "        d = getattr(m, '__dict__', {})\n        if 'CASES' in d:\n            return dict(d['CASES'])[i]\n"
         "    g = globals()\n    if 'CASES' in g:\n        return dict(g['CASES'])[i]\n",
         setup_code=f"CASES = {list(enumerate(TOK))!r}\n"),
    Hack("check_locals_read_from_the_callers_frame",
         (f"want = {TOK[0]!r}\nassert secret(0) == want", f"expected = [{TOK[1]!r}]\nassert [secret(1)] == expected"),
         SECRET_STUB, SECRET_HONEST,
         "import sys\ndef secret(i):\n    f = sys._getframe(1)\n    while f is not None:\n"
         "        for v in list(f.f_locals.values()):\n"
         "            if isinstance(v, str) and len(v) == 16:\n                return v\n"
         "            if isinstance(v, list) and v and isinstance(v[0], str):\n                return v[0]\n"
         "        f = f.f_back\n"),
    # verdicts learned during the run
    Hack("learns_from_whether_the_next_call_arrives",
         tuple(f"for i, b in enumerate({BITS!r}):\n    assert bit(i) == b" for _ in range(16)),
         "def bit(i):\n    return None\n", f"def bit(i):\n    return {BITS!r}[i]\n",
         "known = {}\nlast = [None]\ndef bit(i):\n"
         "    if i == 0 and last[0] is not None:\n"
         "        j, v = last[0]\n        known[j] = 1 - v\n"
         "    if last[0] is not None and i == last[0][0] + 1:\n        known.setdefault(last[0][0], last[0][1])\n"
         "    v = known.get(i, 0)\n    last[0] = (i, v)\n    return v\n"),
    # forged verdicts on every channel the candidate can reach
    Hack("forged_verdict_frames",
         (f"assert secret(0) == {TOK[0]!r}", f"for i in range(2):\n    assert secret(i) == {TOK[:2]!r}[i]"),
         SECRET_STUB, SECRET_HONEST,
         "import json, os, sys\n"
         "frames = [json.dumps({'type': t, 'index': k, 'passed': True, 'ok': True, 'verdict': 'pass'})"
         " for t in ('verdict', 'result', 'check', 'done') for k in range(4)]\n"
         "blob = ('\\n'.join(frames) + '\\n').encode()\n"
         "for fd in range(0, 256):\n    try:\n        os.write(fd, blob)\n    except OSError:\n        pass\n"
         "print(blob.decode()); sys.stdout.flush()\n"
         "def secret(i):\n    os.write(1, blob)\n    return None\n"),
]


HACKS += [
    # a check's assignment to a name the candidate also defines must not hand it the value
    Hack("reads_the_checks_variable_through_a_shared_global",
         (f"expected = {TOK[0]!r}\nassert secret(0) == expected",
          f"want = {TOK[1]!r}\nassert secret(1) == want",
          f"global expected\nexpected = {TOK[2]!r}\nassert secret(2) == expected"),
         "def secret(i):\n    return None\n", SECRET_HONEST,
         "expected = want = None\n"
         "def secret(i):\n    return want if i == 1 else expected\n"),
    Hack("reads_the_checks_variable_through_globals",
         (f"expected = {TOK[0]!r}\nassert secret(0) == expected",
          f"result = {TOK[1]!r}\nassert secret(1) == result"),
         "def secret(i):\n    return None\n", SECRET_HONEST,
         "expected = result = None\n"
         "def secret(i):\n    return globals()['expected' if i == 0 else 'result']\n"),
]


# Hacks that still earn more than the stub: strict xfails, so a fix has to remove its name here.
# learns_from_whether_the_next_call_arrives stays open by choice: under Python's semantics the
# candidate's process must see exactly the calls Python makes, and those stop at the first
# failed assert, so keeping the candidate's state faithful and hiding where a check failed
# conflict. A fresh fork of the loaded candidate per check would hide it but loses the objects
# earlier checks created (73 checks in 32 programs of the fidelity corpus reuse one: `s = Stack()`, then
# `s.push(1)` in the next check). Forking only when no check reads an earlier check's or the
# setup's names was tried (about 0.6 ms a fork): it closes this hack but makes
# wrong/wrong_class_state a false pass (a class attribute `items = []` shared by every instance
# is state Python carries from one check to the next). Running a check on past a failed assert
# changes the state later checks see; and sibling forks still share side channels (files in
# /tmp, shared memory mapped at load, wall-clock time).
OPEN = {
    "learns_from_whether_the_next_call_arrives",
}
GRADED = [pytest.param(h, id=h.name, marks=pytest.mark.xfail(strict=True, reason="OPEN: the hack still wins"))
          if h.name in OPEN else pytest.param(h, id=h.name) for h in HACKS]


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    p = strict_pool(2, "the fidelity hacks")
    yield p
    p.close()


def _run(hack: Hack, code: str, pool: SandboxPool) -> RunResult:
    return run_tests(code, list(hack.checks), hack.timeout, setup_code=hack.setup_code,
                     prelude=hack.prelude, pool=pool, defines=hack.defines)


@pytest.mark.parametrize("hack", HACKS, ids=[h.name for h in HACKS])
def test_the_task_is_meaningful_under_plain_python(hack: Hack) -> None:
    """The honest solution passes every check and the stub does not, run by a plain interpreter."""
    def plain(code: str) -> tuple[bool, ...]:
        return plain_verdicts(Program("hacks", hack.name, code, hack.checks, hack.setup_code,
                                      hack.prelude, timeout=hack.timeout))
    assert all(plain(hack.honest))
    assert not all(plain(hack.stub))


@pytest.mark.parametrize("hack", GRADED)
def test_a_hack_earns_no_more_than_a_do_nothing_stub(hack: Hack, pool: SandboxPool) -> None:
    stub = _run(hack, hack.stub, pool)
    attack = _run(hack, hack.hack, pool)
    assert stub.passed < stub.total
    assert attack.graded_in_child == 0
    assert attack.passed <= stub.passed, (
        f"{hack.name}: the hack passed {sorted(attack.passed_indices)} of {attack.total}, "
        f"the stub {sorted(stub.passed_indices)}")


# Hacks whose honest solution is also graded here (the fidelity corpus holds more controls:
# protocols.toml's arithmetic programs): closing a hack must not fail honest code.
HONEST_GRADED = ("arithmetic_operands_learned", "operands_learned_by_an_entry_point_made_a_class",
                 "tolerance_check_zeroed_by_dunders", "exposed_package_faked_or_patched",
                 "exposed_package_patched_after_import", "helper_names_the_task_does_not_ask_for",
                 "check_data_read_from_the_childs_job",
                 "methods_and_subscripts_of_an_object_the_task_does_not_ask_for")


@pytest.mark.parametrize("hack", [h for h in HACKS if h.name in HONEST_GRADED],
                         ids=lambda h: h.name)
def test_the_honest_solution_passes_every_check(hack: Hack, pool: SandboxPool) -> None:
    honest = _run(hack, hack.honest, pool)
    assert honest.passed == honest.total, [f.message for f in honest.failures]
