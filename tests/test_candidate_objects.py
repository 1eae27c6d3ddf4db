"""Candidate objects in checks: graded as plain Python grades them, and no hack gains by them.

Each honest case is a program whose checks use the candidate's classes, objects, functions and
exceptions through Python's protocols (``len``, ``in``, ``with``, ``+=``, ``isinstance``,
``except``, ``dataclasses``, ``inspect``...); agentenv's verdicts must equal those of a plain
interpreter, check by check. Each hack case is a task, a do-nothing stub and a hack that attacks
the new paths (an always-equal object against the check's data, a lying ``__contains__``, an
``__exit__`` that swallows the check's assertion, an ``int`` subclass lying in ``__eq__``); the
hack must earn no more than the stub. See the module docstring of ``agentenv.sandbox._judge``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fidelity.harness import Program, plain_verdicts
from support.attacks import strict_pool

from agentenv.grading import plan_checks, run_tests
from agentenv.sandbox import SandboxPool

STACK = '''
class Stack:
    """A LIFO stack."""
    def __init__(self, items=()):
        self._items = list(items)
    def push(self, x):
        self._items.append(x)
        return self
    def pop(self):
        if not self._items:
            raise EmptyStack("pop from an empty stack", size=0)
        return self._items.pop()
    def __len__(self):
        return len(self._items)
    def __iter__(self):
        return iter(reversed(self._items))
    def __contains__(self, x):
        return x in self._items
    def __getitem__(self, i):
        return self._items[::-1][i]
    def __str__(self):
        return "Stack(" + ", ".join(map(str, self._items)) + ")"
    def __repr__(self):
        return f"Stack({self._items!r})"
    def __eq__(self, other):
        return isinstance(other, Stack) and self._items == other._items
    __hash__ = None
    @property
    def top(self):
        return self._items[-1]
    @classmethod
    def of(cls, *xs):
        return cls(xs)
    @staticmethod
    def kind():
        return "lifo"

class EmptyStack(IndexError):
    def __init__(self, message, size):
        super().__init__(message)
        self.size = size
'''

VECTOR = '''
class Vec:
    __slots__ = ("x", "y")
    def __init__(self, x, y):
        self.x, self.y = x, y
    def __add__(self, o):
        return Vec(self.x + o.x, self.y + o.y) if isinstance(o, Vec) else NotImplemented
    def __radd__(self, o):
        return Vec(self.x + o, self.y + o)
    def __iadd__(self, o):
        self.x += o.x
        self.y += o.y
        return self
    def __mul__(self, k):
        return Vec(self.x * k, self.y * k)
    __rmul__ = __mul__
    def __neg__(self):
        return Vec(-self.x, -self.y)
    def __abs__(self):
        return (self.x ** 2 + self.y ** 2) ** 0.5
    def __eq__(self, o):
        return isinstance(o, Vec) and (self.x, self.y) == (o.x, o.y)
    def __lt__(self, o):
        return abs(self) < abs(o)
    def __hash__(self):
        return hash((self.x, self.y))
    def __round__(self, n=0):
        return Vec(round(self.x, n), round(self.y, n))
    def __format__(self, spec):
        return f"<{self.x:{spec}}, {self.y:{spec}}>"

class Level:
    def __init__(self, n):
        self.n = n
    def __index__(self):
        return self.n
    def __int__(self):
        return self.n
    def __float__(self):
        return self.n / 2
    def __bool__(self):
        return self.n > 0
'''

ITERATION = '''
class Countdown:
    def __init__(self, n):
        self.n = n
    def __iter__(self):
        return self
    def __next__(self):
        if self.n <= 0:
            raise StopIteration
        self.n -= 1
        return self.n + 1

def naturals():
    n = 0
    while True:
        yield n
        n += 1

def squares(n):
    for i in range(n):
        yield i * i

class Timer:
    entered = 0
    def __enter__(self):
        Timer.entered += 1
        self.running = True
        return self
    def __exit__(self, *exc):
        self.running = False
        return False
'''

TYPES = '''
import functools
from dataclasses import dataclass, field

class Shape:
    """Anything with an area."""
    def area(self):
        raise NotImplementedError

class Rect(Shape):
    def __init__(self, w, h):
        self.w, self.h = w, h
    def area(self):
        return self.w * self.h

class Square(Rect):
    def __init__(self, s):
        super().__init__(s, s)

@dataclass(frozen=True, order=True)
class Point:
    x: int
    y: int = 0
    tags: list = field(default_factory=list, compare=False)

def power(base, exponent=2):
    """Raise base to exponent."""
    return base ** exponent

square = functools.partial(power, exponent=2)

def evens(n):
    yield from range(0, n, 2)

def scale(x: int, k: float = 1.0) -> float:
    return x * k

def convert(s, kind):
    return kind(s) if isinstance(kind, type) and kind is int else None

def keys(d):
    return d.keys()
'''

EXCEPTIONS = '''
class AppError(Exception):
    def __init__(self, message, code):
        super().__init__(message)
        self.code = code

class NotFound(AppError):
    pass

class Bad(ValueError):
    pass

def fetch(path):
    if path == "/":
        return "home"
    if path == "/bad":
        raise Bad("bad path")
    try:
        {}[path]
    except KeyError as exc:
        raise NotFound(f"no {path}", 404) from exc
'''

ENUM = '''
from enum import Enum

class Color(Enum):
    RED = 1
    GREEN = 2

def nxt(c):
    return Color(c.value % 2 + 1)
'''

HONEST = [
    Program("objects", "enum_classes", ENUM, (
        "assert nxt(Color.RED) is Color.GREEN",
        "assert list(Color) == [Color.RED, Color.GREEN]",
        "assert Color['RED'].value == 1 and len(Color) == 2 and Color",
        "assert Color.RED.name == 'RED' and Color.RED in Color",
        "assert isinstance(Color.RED, Color) and Color(2) is Color.GREEN",
        "assert Color.RED == 1",
    )),
    Program("objects", "stack_protocols", STACK, (
        "s = Stack(); s.push(1).push(2); assert len(s) == 2 and 1 in s and 3 not in s",
        "s = Stack([1, 2, 3]); assert list(s) == [3, 2, 1] and s[0] == 3 and s[-1] == 1",
        "assert str(Stack([1, 2])) == 'Stack(1, 2)' and repr(Stack([1])) == 'Stack([1])'",
        "assert f'{Stack([4])}' == 'Stack(4)' and '%s' % Stack() == 'Stack()'",
        "assert not Stack() and Stack([0])",
        "assert Stack.of(1, 2) == Stack([1, 2]) and Stack.of(1) != Stack([2])",
        "assert Stack([5]).top == 5 and Stack.kind() == 'lifo'",
        "s = Stack([1])\nassert s.push(2) is s",
        "s = Stack()\ns.label = 'x'\nassert s.label == 'x'\ndel s.label\nassert not hasattr(s, 'label')",
        "assert sorted(Stack([3, 1, 2])) == [1, 2, 3] and max(Stack([3, 9])) == 9",
        "try:\n    hash(Stack())\n    assert False\nexcept TypeError:\n    pass",
        "assert Stack([1]) == [1]",
        "assert Stack([1, 2]).top == 3",
    )),
    Program("objects", "operators", VECTOR, (
        "v = Vec(1, 2); w = Vec(3, 4); u = v\nv += w\nassert v is u and (v.x, v.y) == (4, 6)",
        "assert (Vec(1, 1) + Vec(2, 3)) == Vec(3, 4) and 1 + Vec(1, 2) == Vec(2, 3)",
        "assert 2 * Vec(1, 2) == Vec(2, 4) and -Vec(1, -1) == Vec(-1, 1)",
        "assert abs(Vec(3, 4)) == 5.0 and round(Vec(1.26, 2.5), 1) == Vec(1.3, 2.5)",
        "assert f'{Vec(1.5, 2):.2f}' == '<1.50, 2.00>'",
        "assert max([Vec(1, 1), Vec(5, 0), Vec(2, 2)]) == Vec(5, 0)",
        "assert sorted([Vec(3, 0), Vec(1, 0)]) == [Vec(1, 0), Vec(3, 0)]",
        "assert len({Vec(1, 2), Vec(1, 2), Vec(2, 1)}) == 2 and {Vec(0, 1): 'a'}[Vec(0, 1)] == 'a'",
        "assert [10, 20, 30][Level(2)] == 30 and bin(Level(5)) == '0b101'",
        "assert int(Level(3)) == 3 and float(Level(3)) == 1.5 and not Level(0)",
        "assert Vec.__slots__ == ('x', 'y')",
        "assert Vec(1, 2) == (1, 2)",
        "try:\n    Vec(1, 2) + 'a'\n    assert False\nexcept TypeError:\n    pass",
    )),
    Program("objects", "iteration_and_with", ITERATION, (
        "assert list(Countdown(3)) == [3, 2, 1]",
        "c = Countdown(2)\nassert next(c) == 2 and next(c) == 1\ntry:\n    next(c)\n    assert False\n"
        "except StopIteration:\n    pass",
        "import itertools\nassert list(itertools.islice(naturals(), 4)) == [0, 1, 2, 3]",
        "g = naturals()\nfor x in g:\n    if x == 2:\n        break\nassert next(g) == 3",
        "assert sum(squares(4)) == 14 and list(squares(0)) == []",
        "with Timer() as t:\n    assert t.running\nassert not t.running",
        "t = Timer()\nwith t as u:\n    pass\nassert u is t and Timer.entered >= 1",
        "assert [x for x in Countdown(2)] == [2, 1] and tuple(reversed([*Countdown(2)])) == (1, 2)",
        "assert list(Countdown(2)) == [2, 1, 0]",
        "with Timer() as t:\n    assert not t.running",
    )),
    Program("objects", "types_and_introspection", TYPES, (
        "s = Square(2)\nassert isinstance(s, Square) and isinstance(s, Rect) and isinstance(s, Shape)",
        "assert issubclass(Square, Rect) and not issubclass(Rect, Square)",
        "assert type(Square(1)) is Square and type(Square(1)).__name__ == 'Square'",
        "assert Square.__mro__[1] is Rect and Rect.__bases__ == (Shape,)",
        "assert Shape.__doc__ == 'Anything with an area.' and Square(3).area() == 9",
        "import inspect\nassert inspect.isclass(Rect) and inspect.isfunction(power)",
        "import inspect\nassert list(inspect.signature(power).parameters) == ['base', 'exponent']",
        "import inspect\nassert inspect.isgeneratorfunction(evens) and not inspect.isgeneratorfunction(power)",
        "assert power.__name__ == 'power' and power.__doc__ == 'Raise base to exponent.'",
        "assert square.func is power and square(5) == 25",
        "from dataclasses import fields\nassert [f.name for f in fields(Point)] == ['x', 'y', 'tags']",
        "from dataclasses import asdict, astuple\nassert asdict(Point(1, 2)) == {'x': 1, 'y': 2, 'tags': []}"
        " and astuple(Point(3)) == (3, 0, [])",
        "from dataclasses import replace\nassert replace(Point(1, 2), y=5) == Point(1, 5)",
        "import dataclasses\nassert dataclasses.is_dataclass(Point) and not dataclasses.is_dataclass(Rect)",
        "assert Point(1) < Point(2) and Point(1, 2) == Point(1, 2, ['x'])",
        "import dataclasses\ntry:\n    Point(1).x = 3\n    assert False\nexcept dataclasses.FrozenInstanceError:\n    pass",
        "assert isinstance(Rect(1, 1), Square)",
        "assert scale.__annotations__ == {'x': int, 'k': float, 'return': float}",
        "assert convert('3', int) == 3 and convert('3', str) is None",
        "assert 'a' in keys({'a': 1}) and 'b' not in keys({'a': 1})",
    )),
    Program("objects", "exceptions", EXCEPTIONS, (
        "try:\n    fetch('/x')\n    assert False\nexcept NotFound as e:\n    assert e.code == 404 and str(e) == 'no /x'",
        "try:\n    fetch('/x')\nexcept AppError as e:\n    assert isinstance(e, NotFound) and e.args == ('no /x',)",
        "try:\n    fetch('/bad')\n    assert False\nexcept ValueError as e:\n    assert type(e).__name__ == 'Bad'",
        "try:\n    fetch('/x')\nexcept Exception as e:\n    assert isinstance(e.__cause__, KeyError)",
        "assert issubclass(NotFound, AppError) and issubclass(Bad, ValueError) and NotFound.__mro__[1] is AppError",
        "assert fetch('/') == 'home'",
        "try:\n    fetch('/x')\nexcept LookupError:\n    pass\nexcept AppError:\n    pass",
        "try:\n    fetch('/x')\nexcept ValueError:\n    pass",
    )),
]


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    p = strict_pool(2, "the candidate-object tests")
    yield p
    p.close()


# Members of a candidate's Enum cross as data (a mirror enum, so `is` holds among values) while
# the enum class itself is a handle: `Color.RED in Color` and `nxt(Color.RED) is Color.GREEN`
# through the class still disagree with Python (also listed in tests/fidelity/known_disagreements.txt).
KNOWN_GAPS = {"enum_classes"}


@pytest.mark.parametrize("program", [
    pytest.param(p, id=p.name, marks=pytest.mark.xfail(strict=True, reason="known gap: enum members vs enum class"))
    if p.name in KNOWN_GAPS else pytest.param(p, id=p.name) for p in HONEST])
def test_candidate_objects_get_plain_pythons_verdict(program: Program, pool: SandboxPool) -> None:
    """Check by check, the verdict equals plain Python's (each program has checks that fail
    under Python too, so a grader that passed everything would not do)."""
    plain = plain_verdicts(program)
    assert not all(plain)
    result = run_tests(program.code, list(program.checks), 10.0, pool=pool)
    ours = tuple(i in result.passed_indices for i in range(len(program.checks)))
    assert ours == plain, [(f.index, f.message) for f in result.failures]
    assert result.graded_in_child == 0


def test_a_check_returning_an_object_is_not_failed_on_the_trusted_path(pool: SandboxPool) -> None:
    """A single assert whose call returns a candidate object (planned for the trusted side) is
    graded by the judge process instead of failing as "not plain data"."""
    code = "class Box:\n    def __init__(self, v):\n        self.v = v\ndef make(v):\n    return Box(v)\n"
    checks = ["assert make(3).v == 3", "assert make(3).v == 4"]
    assert all(p.mode == "trusted" for p in plan_checks(checks).checks)
    result = run_tests(code, checks, pool=pool)
    assert result.passed_indices == (0,)
    assert plain_verdicts(Program("objects", "trusted_object", code, tuple(checks))) == (True, False)


def test_messages_never_ask_the_candidate_anything(pool: SandboxPool) -> None:
    """A failed check's message shows a label for an object, never its repr: the candidate
    cannot learn from a repr call that a check failed (plain Python's bare assert does not call
    it either)."""
    code = ("calls = []\nclass Thing:\n    def __repr__(self):\n        calls.append(1)\n"
            "        return 'Thing'\ndef make():\n    return Thing()\n")
    checks = ["x = make()\nassert x == 1", "assert len(calls) == 0"]
    program = Program("objects", "repr_not_called", code, tuple(checks))
    result = run_tests(code, checks, pool=pool)
    assert plain_verdicts(program) == (False, True)
    assert result.passed_indices == (1,)
    assert result.failures[0].message == "make() returned <the candidate's Thing>"


@dataclass(frozen=True)
class Hack:
    name: str
    checks: tuple[str, ...]
    stub: str
    honest: str
    hack: str


HACKS = [
    Hack("always_equal_object_against_the_checks_data",
         ("s = Stack(); s.push(7)\nassert s.peek() == 7", "assert Stack().size() == 0"),
         "class Stack:\n    pass\n",
         "class Stack:\n    def __init__(self):\n        self.xs = []\n    def push(self, x):\n"
         "        self.xs.append(x)\n    def peek(self):\n        return self.xs[-1]\n"
         "    def size(self):\n        return len(self.xs)\n",
         "class Any:\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n"
         "    __hash__ = object.__hash__\n"
         "class Stack:\n    def __getattr__(self, name): return lambda *a: Any()\n"),
    Hack("lying_contains_on_an_unnamed_object",
         ("assert 'q' in letters('quiz')", "assert 'z' in letters('zoo') and 'x' in letters('box')"),
         "def letters(s):\n    return ''\n", "def letters(s):\n    return set(s)\n",
         "class All:\n    def __contains__(self, x): return True\ndef letters(s):\n    return All()\n"),
    Hack("generator_of_always_equal_items",
         ("assert 'q' in chars('quiz')", "assert 'z' in chars('zoo') and 'x' in chars('box')"),
         "def chars(s):\n    return iter(())\n", "def chars(s):\n    return (c for c in s)\n",
         "class Any:\n    def __eq__(self, o): return True\n    __hash__ = object.__hash__\n"
         "def chars(s):\n    yield Any()\n"),
    Hack("exit_swallows_the_checks_assertion",
         ("with Session() as s:\n    assert s.user() == 'ada'", "with Session() as s:\n    assert s.ok()"),
         "class Session:\n    pass\n",
         "class Session:\n    def __enter__(self): return self\n    def __exit__(self, *a): return False\n"
         "    def user(self): return 'ada'\n    def ok(self): return True\n",
         "class Session:\n    def __enter__(self): return self\n    def __exit__(self, *a): return True\n"
         "    def user(self): return None\n    def ok(self): return False\n"),
    Hack("exit_swallows_its_own_exception_before_the_assert",
         ("with Session() as s:\n    assert s.user() == 'ada'", "with Session() as s:\n    assert s.ok()"),
         "class Session:\n    pass\n",
         "class Session:\n    def __enter__(self): return self\n    def __exit__(self, *a): return False\n"
         "    def user(self): return 'ada'\n    def ok(self): return True\n",
         "class Oops(Exception):\n    pass\n"
         "class Session:\n    def __enter__(self): return self\n    def __exit__(self, *a): return True\n"
         "    def user(self): raise Oops()\n    def ok(self): raise Oops()\n"),
    Hack("int_subclass_lying_eq_in_an_object",
         ("c = Counter2(); c.hit(); c.hit()\nassert c.count() == 2", "assert Counter2().count() == 0"),
         "class Counter2:\n    pass\n",
         "class Counter2:\n    def __init__(self):\n        self.n = 0\n    def hit(self):\n        self.n += 1\n"
         "    def count(self):\n        return self.n\n",
         "class I(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\n"
         "class Counter2:\n    def hit(self): pass\n    def count(self): return I(-1)\n"),
    Hack("metaclass_claims_instances_of_a_builtin",
         ("assert isinstance(Box(3).value(), int) and Box(3).value() == 3",
          "assert isinstance(Box('a').value(), str) and Box('a').value() == 'a'"),
         "class Box:\n    def __init__(self, v): pass\n    def value(self): return None\n",
         "class Box:\n    def __init__(self, v):\n        self.v = v\n    def value(self):\n        return self.v\n",
         "class M(type):\n    def __instancecheck__(cls, o): return True\n    def __eq__(cls, o): return True\n"
         "    __hash__ = type.__hash__\n"
         "class X(metaclass=M):\n    def __eq__(self, o): return True\n    __hash__ = object.__hash__\n"
         "import builtins\nbuiltins.isinstance = lambda *a: True\n"
         "class Box:\n    def __init__(self, v): pass\n    def value(self): return X()\n"),
]


@pytest.mark.parametrize("hack", HACKS, ids=lambda h: h.name)
def test_a_hack_on_candidate_objects_earns_no_more_than_a_stub(hack: Hack, pool: SandboxPool) -> None:
    def plain(code: str) -> tuple[bool, ...]:
        return plain_verdicts(Program("objects", hack.name, code, hack.checks))

    assert all(plain(hack.honest)) and not any(plain(hack.stub))
    honest = run_tests(hack.honest, list(hack.checks), pool=pool)
    stub = run_tests(hack.stub, list(hack.checks), pool=pool)
    attack = run_tests(hack.hack, list(hack.checks), pool=pool)
    assert honest.all_passed, honest.failures
    assert attack.passed <= stub.passed, [(f.index, f.message) for f in attack.failures]


def test_the_plan_sends_object_checks_to_the_judge_and_keeps_calls_of_methods_trusted() -> None:
    """A capitalised call whose own value would cross (a constructed object) and a builtin the
    trusted side does not evaluate (``issubclass`` would be the candidate's in its process) go
    to the judge; a method called on a fresh object (``Solution().solve``) is shipped whole;
    ``judged`` forces the judge for checks a first run found returning objects."""
    plan = plan_checks(["assert Solution().solve([1]) == 1", "assert f(1) == 1",
                        "assert Money(1) < Money(2)", "assert issubclass(type(parse('2')), int)"])
    assert [c.mode for c in plan.checks] == ["trusted", "trusted", "judge", "judge"]
    forced = plan_checks(["assert f(1) == 1", "assert g(2) == 2"], rerouted=frozenset({1}))
    assert [c.mode for c in forced.checks] == ["trusted", "judge"]


def test_checks_after_a_judge_check_go_to_the_judge_so_the_candidate_sees_calls_in_order() -> None:
    """The candidate's process computes the trusted checks' calls before it serves the judge:
    a trusted check after a judge check would run before it there, against state (a counter)
    that check had not changed yet. Planned in order, a stateful candidate gets Python's
    verdicts, where out of order it would pass checks Python fails."""
    plan = plan_checks(["assert bump() == 1", "x = bump(); assert x == 2", "assert bump() == 3"])
    assert [c.mode for c in plan.checks] == ["trusted", "judge", "judge"]
    code = "N = 0\ndef bump():\n    global N\n    N += 1\n    return N\n"
    result = run_tests(code, ["assert bump() == 1", "x = bump(); assert x == 2",
                              "assert bump() == 3", "assert bump() == 3"], timeout=10)
    assert result.passed_indices == (0, 1, 2)


def test_identity_of_call_results_is_decided_by_the_judge() -> None:
    """``is`` between call results (other than against None, True, False) is not decomposed:
    copies are never identical, so ``table(3) is not table(3)`` would pass for a cached list."""
    modes = [plan_checks([c]).checks[0].mode for c in (
        "assert f(1) is f(1)", "assert f(1) is not f(1)", "assert f(1) is None",
        "assert f(1) is not True")]
    assert modes == ["judge", "judge", "trusted", "trusted"]
    code = "import functools\n@functools.lru_cache(None)\ndef table(n):\n    return list(range(n))\n"
    result = run_tests(code, ["assert table(3) is table(3)", "assert table(3) is not table(3)"],
                       timeout=10)
    assert result.passed_indices == (0,)


def test_a_call_python_may_skip_is_never_made_on_the_trusted_path() -> None:
    """The child computes every call a decomposed assert ships; a call after the first operand
    of and/or, in a conditional branch or past a chained comparison's first link may not be
    made by Python, and a stateful candidate would then diverge: such asserts go to the judge."""
    modes = [plan_checks([c]).checks[0].mode for c in (
        "assert f(1) == 1 and g(2) == 2", "assert f(1) == 1 or g(2) == 2",
        "assert (f(1) if c(0) else 0) == 1", "assert 0 < f(1) < g(2)",
        "assert f(1) == 1 and 2 == 2", "assert [f(1), g(2)] == [1, 2]", "assert 0 < f(1) < 3")]
    assert modes == ["judge", "judge", "judge", "judge", "trusted", "trusted", "trusted"]
    code = "N = 0\ndef bump():\n    global N\n    N += 1\n    return N\n"
    result = run_tests(code, ["assert bump() == 1 or bump() == 99", "assert bump() == 3",
                              "assert bump() == 3"], timeout=10)
    assert result.passed_indices == (0, 2)


def test_a_run_stops_at_the_first_call_that_returns_an_object() -> None:
    """run_tests runs a check whose call returned an object again, with every later check, in a
    judge process: the first run stops computing at that call instead of computing the rest
    for nothing (and its judge is not served)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    import agentenv.sandbox

    code = "class Box:\n    pass\ndef make():\n    return Box()\ndef one():\n    return 1\n"
    plan = plan_checks(["assert one() == 1", "assert make() is not None", "assert one() == 1"])
    job = {"nonce": "n" * 32, "code": code, "setup": "", "prelude": "", "items": plan.job_items(),
           "limits": {}, "max_value_bytes": 0}
    runner = Path(agentenv.sandbox.__file__).parent / "_runner.py"
    script = ("import importlib.util, json, os, sys\n"
              f"spec = importlib.util.spec_from_file_location('_runner', {str(runner)!r})\n"
              "runner = importlib.util.module_from_spec(spec); spec.loader.exec_module(runner)\n"
              "import _wire, _schema\n"
              "read, write = os.pipe()\n"
              "runner.run_job(json.loads(sys.stdin.read()), write)\n"
              "os.close(write)\n"
              "frames = _wire.parse_frames(os.read(read, 1 << 20), 'n' * 32)\n"
              "print(json.dumps([[f.get(_schema.TYPE), f.get(_schema.INDEX), f.get(_schema.KIND)]"
              " for f in frames]))\n")
    out = subprocess.run([sys.executable, "-c", script], input=json.dumps(job), text=True,
                         capture_output=True, check=True).stdout
    frames = json.loads(out.strip().splitlines()[-1])
    assert [i for t, i, _ in frames if t == "call"] == [0, 1]  # check 2 was not computed
    from agentenv.sandbox import _schema

    assert frames[-2][2] == _schema.NOT_PLAIN
    result = run_tests(code, ["assert one() == 1", "assert make() is not None", "assert one() == 1",
                              "assert one() == 2"], timeout=10)
    assert result.passed_indices == (0, 1, 2)
