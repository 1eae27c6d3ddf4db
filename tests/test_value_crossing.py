"""Values crossing the sandbox boundary as Python means them: fidelity and integrity side by side.

Honest programs that return lazy iterables, standard-library values and builtin subclasses are
graded by plain Python and by agentenv, check by check, on both grading paths (a single
``assert`` is decomposed and judged on the trusted side; several statements run in the judge
process); every verdict must be the same, a failing one included (``gen() == [1, 2]`` is False
in Python too). Then values built to lie or to cost the judge (subclasses whose methods lie,
huge ranges and widths, infinite generators, ``send`` into a replayed generator) must earn no
more than a do-nothing stub.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import enum
import fractions
import operator
from collections.abc import Iterator

import pytest
from fidelity.harness import Program, agentenv_verdicts, plain_verdicts
from support.attacks import strict_pool

from agentenv.grading import run_tests
from agentenv.grading.values import BudgetExceeded, guarded_binop, guarded_call, guarded_format
from agentenv.sandbox import SandboxPool, _stdvalues, _wire
from agentenv.sandbox._stdvalues import Unreadable


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    p = strict_pool(2, "value crossing")
    yield p
    p.close()


def program(name: str, code: str, *checks: str) -> Program:
    return Program(style="value_crossing", name=name, code=code, checks=checks)


HONEST = [
    program("generators_and_lazy_builtins", """
import itertools
def evens(n):
    for i in range(n):
        if i % 2 == 0:
            yield i
def naturals():
    n = 0
    while True:
        yield n
        n += 1
def pairs(a, b):
    return zip(a, b)
def squares(xs):
    return map(lambda x: x * x, xs)
def window(xs):
    return itertools.pairwise(xs)
def bad(n):
    yield 1
    raise ValueError(n)
""",
        "assert list(evens(5)) == [0, 2, 4]",
        "assert evens(5) == [0, 2, 4]",  # a generator is not a list: False in Python too
        "g = evens(5)\nassert next(g) == 0\nassert next(g) == 2\nassert list(g) == [4]",
        "assert sum(evens(7)) == 12 and max(evens(7)) == 6",
        "assert 6 in evens(100)",
        "assert 7 in evens(8)",
        "import itertools\nassert list(itertools.islice(naturals(), 3, 6)) == [3, 4, 5]",
        "assert next(x for x in naturals() if x * x > 50) == 8",
        "assert dict(pairs('ab', [1, 2])) == {'a': 1, 'b': 2}",
        "assert sorted(squares([3, -1])) == [1, 9]",
        "assert list(window([1, 2, 3])) == [(1, 2), (2, 3)]",
        "g = bad(3)\nassert next(g) == 1\ntry:\n    next(g)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError",
        "assert list(bad(3)) == [1]",
        "it = iter(squares([2]))\nassert it is iter(it)",
    ),
    program("ranges_and_views", """
def span(a, b):
    return range(a, b)
def keys(d):
    return d.keys()
def values(d):
    return d.values()
def items(d):
    return d.items()
""",
        "assert span(2, 5) == range(2, 5)",
        "assert span(0, 10)[-1] == 9 and len(span(0, 10)) == 10",
        "assert span(0, 10).index(3) == 3",
        "assert keys({'a': 1, 'b': 2}) == {'a', 'b'}",
        "assert keys({'a': 1}) | {'c'} == {'a', 'c'}",
        "assert ('a', 1) in items({'a': 1})",
        "assert values({'a': 1}) == [1]",  # a values view equals nothing but itself
        "assert sorted(values({'a': 3, 'b': 1})) == [1, 3]",
        "k = keys({'x': 0})\nassert 'x' in k and len(k) == 1",
    ),
    program("numbers_and_text_values", """
from fractions import Fraction
from decimal import Decimal
def third():
    return Fraction(1, 3)
def price(s):
    return Decimal(s)
def nan():
    return Decimal('NaN')
def blob(s):
    return bytearray(s.encode())
def view(b):
    return memoryview(b)
""",
        "from fractions import Fraction\nassert third() * 3 == 1 and third() == Fraction(2, 6)",
        "assert third().limit_denominator(2) == third()",
        "assert str(price('1.50')) == '1.50' and price('1.50') == 1.5",
        "assert price('0.1') + price('0.2') == price('0.3')",
        "assert price('0.1') == 0.1",  # False in Python: Decimal('0.1') is not the float 0.1
        "assert nan() != nan()",
        "assert price('2').sqrt().quantize(price('0.0001')) == price('1.4142')",
        "assert blob('ab') == b'ab' and blob('ab').upper() == b'AB'",
        "b = blob('xy')\nb.append(122)\nassert b == bytearray(b'xyz')",
        "assert view(b'hi') == b'hi' and view(b'hi').tobytes() == b'hi'",
    ),
    program("records_and_enums", """
import collections, enum
Point = collections.namedtuple('Point', 'x y')
class Color(enum.Enum):
    RED = 1
    GREEN = 2
class Level(enum.IntEnum):
    LOW = 1
    HIGH = 3
class Perm(enum.IntFlag):
    R = 4
    W = 2
def origin():
    return Point(0, 0)
def green():
    return Color.GREEN
def high():
    return Level.HIGH
def rw():
    return Perm.R | Perm.W
""",
        "assert origin() == (0, 0) and origin().x == 0",
        "assert origin()._replace(y=2) == (0, 2) and origin()._asdict() == {'x': 0, 'y': 0}",
        "p = origin()\nx, y = p\nassert (x, y) == (0, 0) and type(p).__name__ == 'Point'",
        "assert green().name == 'GREEN' and green().value == 2",
        "assert green() == 2",  # a plain Enum member is not its value: False in Python too
        "assert green() is Color.GREEN",
        "assert high() == 3 and high() > Level.LOW and high() + 1 == 4",
        "assert rw() == 6 and Perm.R in rw()",
        "assert sorted([high(), 2]) == [2, high()]",
    ),
    program("collections_and_dates", """
import collections, datetime, types, uuid, ipaddress, pathlib, array
def counts(s):
    d = collections.defaultdict(int)
    for c in s:
        d[c] += 1
    return d
def groups(xs):
    g = collections.defaultdict(list)
    for x in xs:
        g[x % 2].append(x)
    return g
def layered(a, b):
    return collections.ChainMap(b, a)
def last(xs, n):
    return collections.deque(xs, maxlen=n)
def tomorrow(d):
    return d + datetime.timedelta(days=1)
def stamp():
    return datetime.datetime(2024, 2, 29, 12, 30, tzinfo=datetime.timezone.utc)
def ns(**kw):
    return types.SimpleNamespace(**kw)
def ident(n):
    return uuid.UUID(int=n)
def net(s):
    return ipaddress.ip_network(s)
def path(*parts):
    return pathlib.PurePosixPath(*parts)
def ints(xs):
    return array.array('i', xs)
""",
        "assert counts('aab')['z'] == 0 and counts('aab') == {'a': 2, 'b': 1}",
        "d = counts('x')\nd['y'] += 2\nassert d == {'x': 1, 'y': 2}",
        "assert groups([1, 2, 3])[5] == [] and groups([])[1] == []",
        "assert layered({'a': 1}, {'a': 2})['a'] == 2 and dict(layered({'a': 1}, {'b': 2})) == {'a': 1, 'b': 2}",
        "assert last([1, 2, 3], 2) == collections.deque([2, 3]) and last([1], 4).maxlen == 4",
        "import datetime\nassert tomorrow(datetime.date(2020, 2, 28)) == datetime.date(2020, 2, 29)",
        "assert stamp().isoformat() == '2024-02-29T12:30:00+00:00' and stamp().year == 2024",
        "assert ns(a=1).a == 1 and ns(a=1) == ns(a=1)",
        "assert str(ident(5)).endswith('5') and ident(5).int == 5",
        "import ipaddress\nassert ipaddress.ip_address('10.0.0.2') in net('10.0.0.0/30')",
        "assert path('a', 'b.py').suffix == '.py' and str(path('a', 'b')) == 'a/b'",
        "assert ints([1, 2]).tolist() == [1, 2] and ints([3])[0] == 3",
    ),
    program("subclasses_of_builtins", """
class Name(str):
    def shout(self):
        return self.upper() + '!'
class Bag(list):
    pass
class Score(int):
    pass
def name(s):
    return Name(s)
def bag(*xs):
    return Bag(xs)
def score(n):
    return Score(n)
""",
        "assert name('ab') == 'ab' and name('ab').startswith('a')",
        "assert len(bag(1, 2)) == 2 and bag(1, 2).index(2) == 1",
        "assert score(3) + 1 == 4 and score(3) == 3",
        "assert isinstance(name('x'), str) and isinstance(bag(), list)",
    ),
]


@pytest.mark.parametrize("prog", HONEST, ids=[p.name for p in HONEST])
def test_honest_values_get_pythons_verdict(prog: Program, pool: SandboxPool) -> None:
    plain = plain_verdicts(prog)
    ours, messages = agentenv_verdicts(prog, pool)
    disagree = [(prog.checks[i], m) for i, (a, b) in enumerate(zip(plain, ours, strict=True))
                if a != b for m in [next((x for x in messages if x.startswith(f"check {i}:")), "")]]
    assert not disagree


# --------------------------------------------------------------------------- integrity

STUB = "def f(*a):\n    return None\n"

LIARS = [
    # (name, checks, hack): each check passes under an honest f, and the hack does none of the work.
    ("str_subclass_methods",
     ("assert f().startswith('secret')", "assert f().isupper() and f().endswith('X')",
      "assert 'needle' in f()", "assert f().count('a') == 7", "assert f().lower() == 'abc'",
      "r = f()\nassert r.startswith('secret')", "assert (f() + '').startswith('secret')",
      "assert f'{f()}'.startswith('secret')", "assert (f() or 'x').endswith('X')"),
     "class S(str):\n    def startswith(self, *a): return True\n    def endswith(self, *a): return True\n"
     "    def __add__(self, o): return self\n    def __format__(self, spec): return self\n"
     "    def __bool__(self): return True\n"
     "    def isupper(self): return True\n    def __contains__(self, x): return True\n"
     "    def count(self, *a): return 7\n    def lower(self): return 'abc'\n"
     "def f(*a):\n    return S('-')\n"),
    ("list_subclass_methods",
     ("assert len(f()) == 5", "assert f().index(9) == 2", "assert f() == [1, 2, 9, 4, 5]",
      "assert f()[2] == 9", "assert sorted(f()) == [1, 2, 4, 5, 9]", "x = f()\nassert len(x) == 5"),
     "class L(list):\n    def __len__(self): return 5\n    def index(self, *a): return 2\n"
     "    def __eq__(self, o): return True\n    def __getitem__(self, i): return 9\n"
     "    def __iter__(self): return iter([1, 2, 4, 5, 9])\n"
     "def f(*a):\n    return L()\n"),
    ("subclass_that_cannot_cross",  # a list holding an object: its lying methods stay home
     ("assert f().index(9) == 2", "assert f().count(1) == 3", "assert len(f().copy()) == 5",
      "r = f()\nassert r.index(9) == 2"),
     "class L(list):\n    def index(self, *a): return 2\n    def count(self, *a): return 3\n"
     "    def copy(self): return [0] * 5\n"
     "def f(*a):\n    return L([object()])\n"),
    ("dict_and_set_subclasses",
     ("assert f()['k'] == 1", "assert f().get('k') == 1", "assert f().keys() == {'k'}",
      "assert f().items() >= {('k', 1)}"),
     "class D(dict):\n    def __getitem__(self, k): return 1\n    def get(self, *a): return 1\n"
     "    def keys(self): return {'k'}\n    def items(self): return {('k', 1)}\n"
     "def f(*a):\n    return D()\n"),
    ("number_subclasses",
     ("assert f() == 42", "assert f() + 1 == 43", "assert f().bit_length() == 6",
      "assert f().is_integer()", "assert abs(f() - 42) < 1e-9"),
     "class I(float):\n    def __eq__(self, o): return True\n    def __add__(self, o): return 43\n"
     "    def bit_length(self): return 6\n    def is_integer(self): return True\n"
     "    def __sub__(self, o): return 0\n    __hash__ = float.__hash__\n"
     "def f(*a):\n    return I(0.5)\n"),
    ("lying_enum_and_namedtuple",
     ("assert f() == 7", "assert f().x == 7", "assert f() == (7, 8)"),
     "import enum, collections\n"
     "class E(enum.IntEnum):\n    A = 1\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\n"
     "    @property\n    def x(self): return 7\n"
     "def f(*a):\n    return E.A\n"),
    ("fake_namedtuple_fields",
     ("assert f() == (7, 8)", "assert f().x == 7"),
     "class T(tuple):\n    _fields = ('x', 'y')\n    def __eq__(self, o): return True\n"
     "    x = 7\n    __hash__ = tuple.__hash__\n"
     "def f(*a):\n    return T((0, 0))\n"),
    ("iterator_tricks",
     ("assert list(f()) == [1, 2, 3]", "g = f()\nassert next(g) == 1 and next(g) == 2",
      "assert f() == [1, 2, 3]", "assert sum(f()) == 6"),
     "class It:\n    def __iter__(self): return self\n    def __next__(self): return 1\n"
     "    def __eq__(self, o): return True\n"
     "def f(*a):\n    return It()\n"),
]


@pytest.mark.parametrize("case", LIARS, ids=[c[0] for c in LIARS])
def test_lying_values_earn_no_more_than_a_stub(case: tuple[str, tuple[str, ...], str],
                                               pool: SandboxPool) -> None:
    _name, checks, hack = case
    stub = run_tests(STUB, list(checks), 5.0, pool=pool)
    got = run_tests(hack, list(checks), 5.0, pool=pool)
    assert got.passed <= stub.passed, got.failures


def test_infinite_iterators_end_in_a_clear_failure_even_when_caught(pool: SandboxPool) -> None:
    """Python never finishes ``list(naturals())``; here it fails, naming the budget, and a check
    that swallows the failure still fails (a hang is not a pass)."""
    code = "def naturals():\n    n = 0\n    while True:\n        yield n\n        n += 1\n"
    checks = ["assert list(naturals())",
              "try:\n    list(naturals())\nexcept BaseException:\n    pass",
              "try:\n    sum(naturals())\nexcept:\n    pass\nassert True"]
    result = run_tests(code, checks, 3.0, pool=pool)  # the swallowing checks run to the limit
    assert result.passed == 0, result.failures
    assert "MAX_PULL_BYTES" in result.failures[0].message


def test_send_into_a_returned_generator_reaches_the_candidates_generator(pool: SandboxPool) -> None:
    """A generator a judged call returns is a handle: ``send`` runs the candidate's generator,
    as in Python (it used to cross as replayed items, and ``send`` failed)."""
    code = ("def echo():\n    x = None\n    while True:\n        x = yield x\n")
    result = run_tests(code, ["g = echo(); next(g); assert g.send(5) == 5",
                              "g = echo(); next(g); assert g.send(5) == 6"], 5.0, pool=pool)
    assert result.passed_indices == (0,)


def test_huge_values_cost_the_judge_nothing(pool: SandboxPool) -> None:
    """A range over the value budget, a Decimal with a huge exponent, a format width or join
    that would build gigabytes: refused with the budget named, never built."""
    code = ("from decimal import Decimal\n"
            "def r():\n    return range(10 ** 15)\n"
            "def d():\n    return Decimal('1e999999999')\n"
            "def w():\n    return '{:>999999999}'\n"
            "def s():\n    return 'x' * 1000\n")
    checks = ["assert len(list(r())) > 0", "assert int(d()) > 0", "assert w().format(1)",
              "assert s().join([''] * 1000000)", "assert f'{1:{s()[:1] and 999999999}}'"]
    result = run_tests(code, checks, 10.0, pool=pool)
    assert result.passed == 0, result.failures
    assert all("budget" in f.message or "MAX_" in f.message for f in result.failures), result.failures


# --------------------------------------------------------------------------- the wire itself

ROUNDTRIP = [
    fractions.Fraction(-7, 3), decimal.Decimal("-0.000"), decimal.Decimal("sNaN"),
    decimal.Decimal("-Infinity"), range(-5, 20, 3), bytearray(b"\x00\xff"),
    collections.ChainMap({"a": 1}, {"b": [2]}), collections.deque([1, 2], maxlen=3),
    collections.defaultdict(set, {1: {2}}), datetime.date(1, 1, 1),
    datetime.datetime(2020, 5, 6, 7, 8, 9, 10, tzinfo=datetime.timezone(datetime.timedelta(hours=-3), "X")),
    datetime.time(23, 59, fold=1), datetime.timedelta(days=-1, microseconds=5),
    collections.namedtuple("P", "a b")(1, (2,)), enum.IntFlag("F", "A B")(3),
]


@pytest.mark.parametrize("value", ROUNDTRIP, ids=[type(v).__name__ for v in ROUNDTRIP])
def test_standard_library_values_round_trip_on_both_decoders(value: object) -> None:
    data = _wire.encode_value(value)
    for decode in (_wire.decode_value, _wire.decode_value_pure):
        back = decode(data)
        assert type(back).__name__ == type(value).__name__
        assert repr(back) == repr(value) or back == value


def test_a_replayed_iterator_ends_as_the_original_did() -> None:
    def gen():
        yield 1
        raise KeyError("k")

    back = _wire.decode_value(_wire.encode_value(gen()))
    assert next(back) == 1
    with pytest.raises(KeyError):
        next(back)
    short = _wire.decode_value(_wire.encode_value(iter(range(10 ** 9))))
    with pytest.raises(Unreadable, match="MAX_PULL_BYTES"):
        for _ in short:
            pass


def test_trusted_side_methods_on_values_are_budgeted() -> None:
    with pytest.raises(BudgetExceeded):
        guarded_call(("x" * 10_000).join, [""] * 100_000)
    with pytest.raises(BudgetExceeded):
        guarded_call("{:>{}}".format, 1, 10 ** 9)
    with pytest.raises(BudgetExceeded):
        guarded_call("{:>999999999}".format, 1)
    with pytest.raises(BudgetExceeded):
        guarded_call((5).to_bytes, 10 ** 9, "big")
    with pytest.raises(BudgetExceeded):
        guarded_format(1, -1, "999999999")
    big = fractions.Fraction(3 ** 50_000, 2 ** 70_000 + 1)
    with pytest.raises(BudgetExceeded):
        guarded_binop("*", big, big, operator.mul)  # each reduces by a quadratic gcd
    with pytest.raises(BudgetExceeded):
        guarded_binop("**", fractions.Fraction(2, 3), 10 ** 7, operator.pow)
    assert guarded_binop("+", fractions.Fraction(1, 3), fractions.Fraction(1, 6),
                         operator.add) == fractions.Fraction(1, 2)
    assert guarded_call("-".join, ["a", "b"]) == "a-b"
    assert guarded_format(3.14159, -1, ".2f") == "3.14"


# --------------------------------------------------------------------------- numpy

NUMPY = program("numpy_values", """
import numpy as np
def col_sums(rows):
    return np.array(rows).sum(axis=0)
def mean(xs):
    return np.mean(xs)
def eye(n):
    return np.eye(n, dtype=int)
def scaled(xs, k):
    return np.array(xs, dtype=float) * k
""",
    "assert mean([1, 2, 3]) == 2.0",
    "import numpy as np\nassert isinstance(mean([1.0]), np.floating) and isinstance(col_sums([[1]]), np.ndarray)",
    "assert col_sums([[1, 2], [3, 4]]).tolist() == [4, 6] and col_sums([[1, 2]]).shape == (2,)",
    "assert eye(2)[1][1] == 1 and eye(3).sum() == 3",
    "assert eye(2) == [[1, 0], [0, 1]]",  # an array's truth is ambiguous: raises in Python too
    "assert (scaled([1, 2], 2) == [2.0, 4.0]).all() and scaled([1], 3).dtype == 'float64'",
    "import numpy as np\nassert np.array_equal(eye(2) @ eye(2), eye(2))",
    "x = col_sums([[1, 2]])\nassert list(x + 1) == [2, 3]",
)


def test_numpy_values_get_pythons_verdict(pool: SandboxPool) -> None:
    pytest.importorskip("numpy")
    plain = plain_verdicts(NUMPY)
    ours, messages = agentenv_verdicts(NUMPY, pool)
    assert ours == plain, messages


def test_numpy_is_exposed_without_the_rest_of_site_packages(pool: SandboxPool) -> None:
    """A candidate can import numpy, but what it can read beside it is numpy's own files: not
    site-packages, where agentenv and benchmark data could be reached."""
    pytest.importorskip("numpy")
    code = ("import os, numpy\n"
            "def beside():\n"
            "    return sorted(os.listdir(os.path.dirname(os.path.dirname(numpy.__file__))))\n")
    result = run_tests(code, ["assert set(beside()) <= {'numpy', 'numpy.libs'}"], 10.0, pool=pool)
    assert result.passed == 1, result.failures


def test_numpy_arrays_cannot_make_the_trusted_side_build_huge_results(pool: SandboxPool) -> None:
    """Broadcasting a column against a row, or a matrix product of candidate-chosen shapes, is
    sized from the shapes and refused before anything is built on the trusted side."""
    pytest.importorskip("numpy")
    code = ("import numpy as np\n"
            "def col():\n    return np.zeros((100000, 1))\n"
            "def row():\n    return np.zeros((1, 100000))\n")
    checks = ["assert (col() + row()).sum() == 0", "assert (col() @ row()).sum() == 0",
              "assert col().repeat(10 ** 6).sum() == 0", "assert (col() * row().T).all() == 0"]
    result = run_tests(code, checks, 10.0, pool=pool)
    assert result.passed == 1, result.failures  # the last one is honest: 100,000 zeros
    assert all("budget" in f.message for f in result.failures), result.failures


def test_forged_values_cannot_make_decoding_dear() -> None:
    """Keys chosen to collide in a dict view, and many distinct mirror classes (an enum or a
    namedtuple class is made per kind of member): refused by the decode budget, quickly."""
    colliding = {1 + i * ((1 << 61) - 1): None for i in range(20_000)}.keys()
    enums = [enum.Enum(f"E{i}", [(f"A{j}", j) for j in range(500)]).A1 for i in range(40)]
    records = [collections.namedtuple(f"N{i}", "a b")(1, 2) for i in range(3000)]
    for value in (colliding, enums, records):
        data = _wire.encode_value(value)
        for decode in (_wire.decode_value, _wire.decode_value_pure):
            _stdvalues._CLASSES.clear()  # classes made once are cached: cheap the second time
            with pytest.raises(_wire.ValueBudget):
                decode(data)
