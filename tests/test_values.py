"""Plain values across the boundary and on the trusted side: wire round trips, budgets, equality,
bounded formatting and computing, and the judge surviving any value."""

from __future__ import annotations

import collections
import math
import struct
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import plain_values

from agentenv.errors import SandboxError
from agentenv.grading import RunResult, judge, plan_checks, run_tests
from agentenv.grading.redact import REDACTED
from agentenv.grading.values import (
    COMPUTE_INT_BITS,
    BudgetExceeded,
    bounded_repr,
    guarded_binop,
    guarded_call,
    python_equal,
    strict_equal,
)
from agentenv.sandbox import SandboxPool
from agentenv.sandbox import _wire as wire

NONCE = "v" * 32


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    made = SandboxPool(size=2)
    yield made
    made.close()


def frames(*messages: dict) -> list[dict]:
    return wire.parse_frames(b"".join(wire.encode_frame(NONCE, m) for m in messages), NONCE)


def judged(check: str, *values_bytes: bytes, equality: str = "python", tolerance: float | None = None
           ) -> RunResult:
    """Judge one trusted check whose calls returned these encoded values."""
    plan = plan_checks([check])
    calls = [{"t": "call", "i": 0, "j": j, "v": v} for j, v in enumerate(values_bytes)]
    return judge(plan, frames({"t": "load", "ok": True}, *calls), timed_out=False,
                 isolation="strict", equality=equality, float_tolerance=tolerance)


# ------------------------------------------------------------------ the wire

_text = st.text(alphabet=st.characters(blacklist_categories=()), max_size=12)  # lone surrogates too
_keys = st.one_of(st.integers(), _text, st.tuples(st.integers(), _text), st.none())


def wire_values() -> st.SearchStrategy:
    """Everything the wire carries, including the collections types and typed-array lists."""
    scalars = st.one_of(plain_values(), _text, st.complex_numbers(allow_nan=False),
                        st.integers(min_value=-(2**400), max_value=2**400))
    flat = st.one_of(st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), min_size=16),
                     st.lists(st.floats(), min_size=16).map(tuple),
                     st.lists(st.integers(min_value=-(2**31), max_value=2**31 - 1), min_size=16),
                     st.lists(_text, min_size=16),
                     st.lists(st.tuples(st.integers(), _text), min_size=16),  # records
                     st.lists(st.tuples(st.tuples(st.none(), st.floats()), st.binary()), min_size=16),
                     st.lists(st.tuples(st.integers(min_value=2**64)), min_size=16))  # not records
    return st.recursive(
        st.one_of(scalars, flat),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(_keys, inner, max_size=4),
            st.dictionaries(_keys, st.integers(), max_size=4).map(collections.Counter),
            st.dictionaries(_keys, inner, max_size=4).map(collections.OrderedDict),
            st.lists(inner, max_size=4).map(collections.deque),
            st.frozensets(_keys, max_size=4),
            st.sets(st.tuples(st.integers(), _text), min_size=16, max_size=20),  # set of records
        ),
        max_leaves=10,
    )


@settings(max_examples=300, deadline=None)
@given(wire_values())
def test_every_wire_value_round_trips_with_its_exact_types_through_both_decoders(value) -> None:
    """msgpack's C path and the pure-Python decoder rebuild the same value, types included."""
    data = wire.encode_value(value)
    fast, pure = wire.decode_value(data), wire.decode_value_pure(data)
    assert strict_equal(fast, value) and strict_equal(pure, value) and strict_equal(fast, pure)


@settings(max_examples=200, deadline=None)
@given(wire_values())
def test_the_encoder_and_the_decoders_count_the_same_budget(value) -> None:
    """Whatever the child's encoder accepts, the trusted side accepts: both spend alike."""
    spent = [wire.MAX_ITEMS]
    buf = bytearray()
    wire._pack(buf, value, 0, spent)
    budget = wire.DecodeBudget()
    wire.decode_value(bytes(buf), budget)
    assert budget.items == spent[0]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=()), max_size=300), min_size=16))
def test_the_fast_path_for_lists_of_strs_writes_the_generic_bytes(items: list[str]) -> None:
    """A list of strs is packed without a call per item, into exactly the generic encoding."""
    fast, generic = bytearray(), bytearray()
    wire._pack_strs(fast, items)
    wire._pack_items(generic, items, 0, [wire.MAX_ITEMS])
    assert fast == generic


def test_lone_surrogates_and_nul_cross_the_wire_and_format_without_error() -> None:
    """A str that is not valid UTF-8 (a lone surrogate) is carried as it is."""
    value = ["\ud800", "a\x00b", "\udfff\ud83d"]
    assert wire.decode_value(wire.encode_value(value)) == value
    result = judged("assert f() == 'x'", wire.encode_value("\ud800"))
    assert "\\ud800" in result.failures[0].message


def test_a_million_element_list_crosses_as_one_typed_array() -> None:
    """1M ints are a few MB on the wire and come back as exact ints (and floats as floats)."""
    ints = list(range(-500_000, 500_000))
    data = wire.encode_value(ints)
    assert len(data) < 4 * len(ints) + 64
    assert wire.decode_value(data) == ints
    floats = [i / 3 for i in range(1_000_000)]
    assert wire.decode_value(wire.encode_value(floats)) == floats
    mixed = [1, True] * 20  # a bool among ints is not an int: the generic path keeps it a bool
    assert [type(x) for x in wire.decode_value(wire.encode_value(mixed))] == [int, bool] * 20


@pytest.mark.parametrize(("value", "base"), [
    (type("MyDict", (dict,), {"__eq__": lambda self, other: True, "__hash__": None})(a=1),
     {"a": 1}),
    (type("MyCounter", (collections.Counter,), {})("ab"), collections.Counter("ab")),
    (type("MyList", (list,), {"__len__": lambda self: 99, "__iter__": lambda self: iter([5])})(
        [1] * 20), [1] * 20),
    ([type("MyFloat", (float,), {"__eq__": lambda self, other: True})(1.0)] * 20, [1.0] * 20),
    (type("MyStr", (str,), {"__str__": lambda self: "lie", "startswith": lambda *a: True})("ab"),
     "ab"),
])
def test_candidate_subclasses_cross_as_their_base_types_content(value, base) -> None:
    """A subclass of a builtin crosses as an exact copy of its base type's content, read with
    the base type's own methods: its overrides neither run nor cross."""
    decoded = wire.decode_value(wire.encode_value(value))
    assert type(decoded) is type(base)
    assert decoded == base
    assert all(type(x) is float for x in decoded) if type(base) is list and base and type(
        base[0]) is float else True


@pytest.mark.parametrize("value", [object(), type("Thing", (), {})(), lambda: 1, ValueError("x")])
def test_objects_never_pass_as_plain_data(value) -> None:
    with pytest.raises(wire.NotPlainData):
        wire.encode_value(value)


def test_encoder_budgets_name_the_limit() -> None:
    """Too wide, too deep, too many: refused in the child with the budget's name."""
    deep: list = []
    for _ in range(wire.MAX_DEPTH + 1):
        deep = [deep]
    cases = [(1 << (wire.MAX_INT_BITS + 1), "MAX_INT_BITS"), (deep, "MAX_DEPTH"),
             ([[]] * wire.MAX_ITEMS, "MAX_ITEMS")]
    for value, name in cases:
        with pytest.raises(wire.ValueTooLarge, match=name):
            wire.encode_value(value)


def _array32(n: int, item: bytes) -> bytes:
    return b"\xdd" + struct.pack(">I", n) + item * n


@pytest.mark.parametrize(("data", "name"), [
    (b"\xc9" + struct.pack(">I", 40_000) + b"\x01" + b"\x7f" * 40_000, "MAX_INT_BITS"),
    (_array32(wire.MAX_ITEMS + 1, b"\xc0"), "MAX_ITEMS"),
    (_array32(200_000, b"\xd4\x0a\x90"), "MAX_ITEMS"),  # deques are heavy
    (b"\x91" * 5_000 + b"\xc0", "nests"),
])
def test_forged_values_over_a_budget_are_refused_by_both_decoders(data: bytes, name: str) -> None:
    """The trusted side bounds what it rebuilds, whatever the child sent."""
    for decode in (wire.decode_value, wire.decode_value_pure):
        with pytest.raises(wire.ValueBudget, match=name):
            decode(data)


def test_containers_count_against_the_budget_even_when_empty() -> None:
    """A million empty lists in 1 MB would be 64 MB of objects: each container spends budget."""
    data = _array32(600, b"\x90")
    for decode in (wire.decode_value, wire.decode_value_pure):
        budget = wire.DecodeBudget()
        budget.items = 1_000
        with pytest.raises(wire.ValueBudget, match="MAX_ITEMS"):
            decode(data, budget)
        budget.items = 1_500
        assert decode(data, budget) == [[]] * 600


def test_forged_colliding_keys_are_refused_before_a_quadratic_build() -> None:
    """Ints chosen to share one hash would make set()/dict() quadratic: refused in linear time."""
    m = 2**61 - 1  # hash(k * m) == 0 for every k: ints beyond 64 bits go as 16-byte extensions
    keys = [b"\xd8\x01" + (k * m).to_bytes(16, "big", signed=True) for k in range(1, 20_000)]
    items = b"".join(keys)
    as_set = b"\xc9" + struct.pack(">I", len(items) + 5) + b"\x03\xdd" + struct.pack(">I", len(keys)) + items
    as_dict = b"\xdf" + struct.pack(">I", len(keys)) + b"".join(k + b"\xc0" for k in keys)
    for data in (as_set, as_dict):
        for decode in (wire.decode_value, wire.decode_value_pure):
            with pytest.raises(wire.ValueBudget, match="collide"):
                decode(data)
    honest = set(range(100_000))
    assert wire.decode_value(wire.encode_value(honest)) == honest


def test_values_judged_together_share_one_budget() -> None:
    """Two calls of one check cannot each spend the whole budget."""
    half = wire.encode_value([0.5] * (wire.MAX_ITEMS // 2 + 1))
    result = judged("assert f(1) == f(2)", half, half)
    assert result.passed == 0 and "MAX_ITEMS" in result.failures[0].message
    assert judged("assert f(1) == f(1)", wire.encode_value([1] * 20), wire.encode_value([1] * 20)).passed


# ------------------------------------------------------------------ equality

@pytest.mark.parametrize(("actual", "expected", "equal"), [
    (1, 1.0, True), (True, 1, True), (0, False, True), (1 + 0j, 1, True),
    (collections.Counter("aab"), {"a": 2, "b": 1}, True),
    (collections.defaultdict(int, a=1), {"a": 1}, True),
    (collections.OrderedDict(a=1, b=2), {"b": 2, "a": 1}, True),
    (collections.OrderedDict(a=1, b=2), collections.OrderedDict(b=2, a=1), False),
    ([1, 2], (1, 2), False), (collections.deque([1]), [1], False),
    (float("nan"), float("nan"), False), ([float("nan")], [float("nan")], False),
    ({1, 2}, frozenset({1.0, 2}), True), ("a", b"a", False), (None, 0, False),
])
def test_python_equality_is_pythons_own(actual, expected, equal) -> None:
    """The default comparison is Python's ==, so benchmark references that rely on it pass."""
    assert python_equal(actual, expected) is equal


def test_python_equality_with_a_tolerance_applies_inside_containers() -> None:
    """Numbers match within the tolerance anywhere in lists, tuples and dict values; NaN never."""
    assert python_equal([1, {"x": (0.1 + 0.2,)}], [1.0, {"x": (0.3,)}], 1e-9)
    assert not python_equal([0.1 + 0.2], (0.3,), 1e-9)
    assert not python_equal([float("nan")], [float("nan")], 1e-3)
    assert python_equal(1 + 1e-12j, 1, 1e-9)


def test_strict_equality_stays_available_and_strict() -> None:
    """equality='strict': exact types all the way down, Counter is not dict, NaN equals NaN."""
    assert not strict_equal(1, 1.0)
    assert not strict_equal(collections.Counter("a"), {"a": 1})
    assert strict_equal(collections.Counter("a"), collections.Counter("a"))
    assert not strict_equal(collections.OrderedDict(a=1, b=2), collections.OrderedDict(b=2, a=1))
    assert strict_equal([float("nan")] * 20, [float("nan")] * 20)
    assert not strict_equal([1] * 20 + [True], [1] * 21)


def test_the_equality_mode_decides_the_verdict_of_a_judged_check() -> None:
    """The same returned value passes under python and fails under strict."""
    value = wire.encode_value(collections.Counter({"a": 2}))
    assert judged("assert f() == {'a': 2}", value).passed == 1
    assert judged("assert f() == {'a': 2}", value, equality="strict").passed == 0


# ------------------------------------------------------------------ formatting and computing

def test_bounded_repr_never_raises_and_stays_short_whatever_the_value() -> None:
    """Ints past Python's 4,300-digit str limit, a million items, deep nesting: all clipped."""
    deep: list = []
    for _ in range(500):
        deep = [deep]
    for value in (10**5000, list(range(1_000_000)), deep, {i: [i] * 50 for i in range(10_000)},
                  "x" * 10**7, collections.deque(range(1000)), collections.Counter(range(100))):
        text = bounded_repr(value, 120)
        assert len(text) <= 121
    assert bounded_repr(10**5000).startswith("<int of about 5,000 digits")
    assert bounded_repr((1,)) == "(1,)" and bounded_repr(set()) == "set()"


@pytest.mark.parametrize(("call", "args"), [
    (guarded_binop, ("**", 2, 10**9, pow)),
    (guarded_binop, ("*", "x", 10**9, lambda a, b: a * b)),
    (guarded_binop, ("*", 1 << COMPUTE_INT_BITS, 1 << COMPUTE_INT_BITS, lambda a, b: a * b)),
    (guarded_binop, ("<<", 1, 10**9, lambda a, b: a << b)),
    (guarded_binop, ("%", "%*d", (10**9, 1), lambda a, b: a % b)),
    (guarded_call, (range, 10**12)),
    (guarded_call, (pow, 3, 10**9)),
    (guarded_call, (pow, 3, 1 << 100_000, (1 << 100_000) + 1)),
    (guarded_call, (math.factorial, 10**7)),
    (guarded_call, (math.comb, 10**9, 5 * 10**8)),
    (guarded_call, (math.prod, [1 << 100_000] * 10)),
    (guarded_call, (sum, [[0] * 1000] * 100_000, [])),
    (guarded_call, (bytes, 10**10)),
    (guarded_call, (round, 5, -(10**8))),
    (guarded_call, (map, pow, [2], [10**9])),  # a guarded builtin passed along is guarded too
    (guarded_call, ("x".ljust, 10**9)),
    (guarded_call, (set, [i * (2**61 - 1) for i in range(10_000)])),
])
def test_operations_that_outgrow_their_operands_are_refused_before_they_run(call, args) -> None:
    """The trusted side never computes without bound on a candidate value."""
    with pytest.raises(BudgetExceeded):
        result = call(*args)
        list(result)  # a lazy map only fails when consumed


def test_honest_computations_within_budget_still_run() -> None:
    """Everyday check arithmetic is untouched by the guards."""
    assert guarded_binop("**", 2, 100, pow) == 2**100
    assert guarded_call(pow, 3, 200, 7) == pow(3, 200, 7)
    assert guarded_call(math.factorial, 1000) == math.factorial(1000)
    assert guarded_call(sorted, [3, 1, 2]) == [1, 2, 3]
    assert guarded_call(sum, [[1], [2]], []) == [1, 2]
    assert list(guarded_call(map, pow, [2, 3], [2, 2])) == [4, 9]
    assert guarded_call("{:>5}".format, 1) == "    1"


@pytest.mark.parametrize("check", [
    "assert math.isqrt(f()) ** 2 == f()",
    "assert 2 ** f() == 8",
    "assert str(f()) == '1'",
    "assert f() == 10 ** 5000",
    "assert f().__class__.__pow__(f(), f()) == 1",
    "assert {*f()} == set()",
    "assert f(1) < f(2)",
])
def test_the_judge_survives_huge_values_in_any_check(check: str) -> None:
    """A >4,300-digit int in any position: a finished check, never an exception (a hang is
    pytest-timeout's to catch)."""
    big = wire.encode_value(10**30000 + 7)
    result = judged(check, big, big)
    assert result.total == 1
    assert result.passed in (0, 1)


def test_any_error_while_judging_is_a_failed_check_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Even a fault of the judge itself fails only that check, with the fault in the message."""
    import agentenv.grading.judging as grading

    def broken(*args: object, **kwargs: object) -> bool:
        raise RuntimeError("judge fault")

    monkeypatch.setattr(grading, "equal", broken)
    plan = plan_checks(["assert f() == 1", "for i in []: pass"])
    result = judge(plan, frames({"t": "load", "ok": True}, {"t": "call", "i": 0, "j": 0,
                                                              "v": wire.encode_value(1)}),
                   judge_frames=frames({"t": "check", "i": 1, "ok": True}),
                   timed_out=False, isolation="strict")
    assert result.passed_indices == (1,)
    assert "judge fault" in result.failures[0].message


def test_forged_frame_fields_of_any_type_do_not_break_the_judge() -> None:
    """A message that is a huge int or a nested list is formatted, not trusted."""
    plan = plan_checks(["assert f() == 1", "for i in []: pass"])
    result = judge(plan, frames({"t": "load", "ok": True},
                                {"t": "call", "i": 0, "j": 0, "kind": "exception", "msg": 10**5000},
                                {"t": "stmt", "i": 1, "kind": "assertion", "msg": [[1, 2], "x"]}),
                   timed_out=False, isolation="strict")
    assert result.passed == 0 and result.total == 2


# ------------------------------------------------------------------ end to end

def test_a_million_element_answer_is_graded_correctly(pool: SandboxPool) -> None:
    """1M ints and 1M floats: right answers pass, a wrong last element fails."""
    code = ("def f():\n    return list(range(1_000_000))\n"
            "def g():\n    return [i / 2 for i in range(1_000_000)]\n")
    checks = ["assert f() == list(range(1_000_000))", "assert g() == [i / 2 for i in range(1_000_000)]",
              "assert f() == list(range(999_999)) + [0]"]
    result = run_tests(code, checks, timeout=20, pool=pool)
    assert result.passed_indices == (0, 1)


def test_a_candidate_dict_subclass_with_a_lying_eq_does_not_pass(pool: SandboxPool) -> None:
    """Its class never crosses the wire (its content does, as a dict), so its __eq__ never
    runs on the trusted side."""
    code = ("import collections\n"
            "class Liar(dict):\n    def __eq__(self, other): return True\n    __hash__ = None\n"
            "class LiarCounter(collections.Counter):\n    def __eq__(self, other): return True\n"
            "def f():\n    return Liar(a=1)\n"
            "def g():\n    return LiarCounter('x')\n")
    result = run_tests(code, ["assert f() == {'b': 2}", "assert g() == {'y': 1}"], pool=pool)
    assert result.passed == 0
    assert "returned {'a': 1}" in result.failures[0].message  # the base's content, no more


def test_benchmark_style_answers_pass_under_pythons_equality(pool: SandboxPool) -> None:
    """Counter, defaultdict, int-for-float, True-for-1 and complex pass as plain Python says."""
    code = ("from collections import Counter, defaultdict\n"
            "def count(s):\n    return Counter(s)\n"
            "def groups():\n    d = defaultdict(list)\n    d[1].append(2)\n    return d\n"
            "def half():\n    return 2\n"
            "def yes():\n    return True\n"
            "def root():\n    return complex(0, 1)\n")
    checks = ["assert count('aab') == {'a': 2, 'b': 1}", "assert groups() == {1: [2]}",
              "assert half() == 2.0", "assert yes() == 1", "assert root() ** 2 == -1"]
    assert run_tests(code, checks, pool=pool).fraction == 1.0


def test_a_huge_int_answer_fails_its_check_with_a_message_instead_of_raising(pool: SandboxPool) -> None:
    """An int past 4,300 digits (today: an exception out of run_tests) is a finished result."""
    code = "import math\ndef f():\n    return 3 ** 60_000\ndef g():\n    return 3 ** 200_000\n"
    checks = ["assert f() == 1", "assert math.isqrt(f()) ** 2 == f()", "assert g() == 3 ** 200_000"]
    result = run_tests(code, checks, pool=pool)
    assert result.passed_indices == (1,)  # 3**60000 is a perfect square: isqrt on it is cheap
    assert "<int of about 28,627 digits>" in result.failures[0].message
    assert "MAX_INT_BITS" in result.failures[1].message


def test_the_prelude_runs_before_the_candidate_in_functions_and_programs(pool: SandboxPool) -> None:
    """LiveCodeBench-style implicit imports reach the candidate's module and stdio programs."""
    from agentenv.tasks.livecodebench import PRELUDE
    from agentenv.tasks.schema import StdioCase

    code = "def f(xs: List[int]) -> int:\n    return Counter(xs).most_common(1)[0][0] + floor(0.5)\n"
    checks = ["assert f([1, 2, 2]) == 2"]
    assert run_tests(code, checks, pool=pool).passed == 0  # NameError: List
    assert run_tests(code, checks, pool=pool, prelude=PRELUDE).passed == 1
    program = "print(sqrt(16))\n"
    assert run_tests(program, [StdioCase("", "4.0\n")], pool=pool, prelude=PRELUDE).passed == 1


def test_secret_values_are_redacted_from_every_result(pool: SandboxPool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """stdout, stderr and failure messages carry [redacted] instead of a secret's value."""
    secret = "sk-values-test-0123456789abcdef"
    monkeypatch.setenv("AGENTENV_VALUES_TEST_API_KEY", secret)
    code = (f"import sys\nprint('{secret}')\nprint('{secret}', file=sys.stderr)\n"
            f"def f():\n    raise RuntimeError('{secret}')\n")
    result = run_tests(code, ["assert f() == 1"], pool=pool)
    text = result.stdout + result.stderr + result.failures[0].message
    assert secret not in text and text.count(REDACTED) == 3


def test_coding_env_never_shows_a_secret_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """CodingEnv's info and trajectory are redacted too (the sandbox redacts for everyone)."""
    import json

    from agentenv import CodingEnv
    from agentenv.tasks.schema import Task

    secret = "tok-values-coding-env-5e4d3c2b"
    monkeypatch.setenv("AGENTENV_VALUES_TEST_TOKEN", secret)
    task = Task(name="t", prompt="p", entry_point="f", checks=("assert f() == 1",))
    env = CodingEnv(tasks=[task])
    env.reset(0)
    built = f"'{secret[:8]}' + '{secret[8:]}'"  # the policy's text never holds the secret itself
    _, _, _, info = env.step(f"def f():\n    print({built})\n    raise ValueError({built})\n")
    assert secret not in json.dumps(info)
    assert secret not in json.dumps(env.trajectory.to_dict())  # type: ignore[union-attr]


def test_code_reward_scores_a_row_the_sandbox_fails_on_and_keeps_the_others(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One completion that breaks the infrastructure costs its own row only, and that row is
    not paid as 0: its reward is None (TRL masks it), as for any infrastructure fault."""
    import agentenv.grading as grading
    from agentenv.integrations.trl import make_code_reward

    real = grading.run_tests

    def flaky(code: str, *args: object, **kwargs: object) -> RunResult:
        if "BREAK" in code:
            raise SandboxError("worker died twice")
        return real(code, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(grading, "run_tests", flaky)
    reward = make_code_reward(max_workers=2)
    good = "def add(a, b):\n    return a + b\n"
    rewards = reward(completions=[good, good + "# BREAK\n", good.replace("+", "-")],
                     checks=['["assert add(1, 2) == 3"]'] * 3, entry_point=["add"] * 3)
    assert rewards == [1.0, None, 0.0]


def test_values_past_the_result_cap_fail_with_a_message_naming_it(pool: SandboxPool) -> None:
    """One value bigger than Limits.max_result_bytes, or several that fill it: the limit is named."""
    from agentenv.sandbox import Limits

    limits = Limits(max_result_bytes=4 * 1024**2)
    code = "def f(n):\n    return 'x' * n\ndef g(n):\n    return ['y' * 1_000_000] * n\n"
    one = run_tests(code, ["assert f(5_000_000) == ''", "assert f(3) == 'xxx'"], limits=limits, pool=pool)
    assert one.passed_indices == (1,)
    assert "Limits.max_result_bytes" in one.failures[0].message
    many = run_tests(code, ["assert g(3) == []", "assert g(3) == []"], limits=limits, pool=pool)
    assert many.passed == 0
    assert "Limits.max_result_bytes" in many.failures[1].message


def test_control_messages_carry_encoded_values_as_bytes() -> None:
    """pack_message/unpack_message frame small maps holding encode_value's bytes, both ways."""
    message = {"op": "call", "a": [wire.encode_value([1, 2]), wire.encode_value((3, "\ud800"))],
               "k": [["key", wire.encode_value(None)]], "n": 2, "ok": True}
    back = wire.unpack_message(wire.pack_message(message))
    assert back == message
    assert [wire.decode_value(v) for v in back["a"]] == [[1, 2], (3, "\ud800")]
    for bad in (b"\x91\x01", b"\xc1", wire.pack_message({"a": list(range(100))})):
        with pytest.raises(ValueError):
            wire.unpack_message(bad)
