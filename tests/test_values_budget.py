"""The batch-wide budget on decoded values (agentenv.grading.memory): bounded, deterministic.

A check whose values alone pass the budget fails alone, naming it; any other check gets the
verdict it would get alone, whatever else is judged at the same time; the bytes held at once
never pass the budget; decoded values are freed when their check is judged (not at the next
garbage collection).
"""

from __future__ import annotations

import gc
import threading
import time
import tracemalloc

import pytest

from agentenv.errors import ConfigError
from agentenv.grading import run_tests
from agentenv.grading.memory import UNIT_BYTES, ValuesBudget, default_values_budget
from agentenv.integrations.trl import make_code_reward
from agentenv.sandbox._wire import DecodeBudget, ValueBudget, decode_value, encode_value

BIG = list(range(100_000, 200_000))  # ~6.4 MB charged (100k units of 64 bytes, plus its bytes)
BIG_BYTES = encode_value(BIG)
CHARGE = len(BIG_BYTES) + (len(BIG) + 1) * UNIT_BYTES


class Recording(ValuesBudget):
    """A budget that remembers the most bytes it ever held at once."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.peak = 0

    def spend_bytes(self, holder: object, n: int) -> None:
        super().spend_bytes(holder, n)
        self.peak = max(self.peak, self.in_use)


def _judge_big(gate: ValuesBudget, calls: list[int] | None = None) -> bool:
    def evaluate(holder: DecodeBudget) -> bool:
        if calls is not None:
            calls.append(1)
        gate.spend_bytes(holder, len(BIG_BYTES))
        return decode_value(BIG_BYTES, holder) == BIG

    return bool(gate.judge(lambda: DecodeBudget(gate), evaluate))


def test_a_value_over_the_whole_budget_fails_naming_it() -> None:
    gate = ValuesBudget(CHARGE // 2)
    with pytest.raises(ValueBudget, match="AGENTENV_VALUES_BUDGET") as caught:
        _judge_big(gate)
    assert "batch budget of decoded values" in str(caught.value)
    assert gate.in_use == 0  # its partial charge was given back


def test_checks_that_do_not_fit_together_are_judged_one_after_another() -> None:
    gate = Recording(CHARGE + CHARGE // 2)  # room for one big value, not two
    results: list[bool] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(3):
            ok = _judge_big(gate)
            with lock:
                results.append(ok)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 18  # none failed for what else was in flight
    assert 0 < gate.peak <= gate.capacity
    assert gate.in_use == 0


def test_a_check_that_does_not_fit_beside_another_is_judged_again_alone() -> None:
    gate = ValuesBudget(CHARGE + CHARGE // 2)
    other = DecodeBudget(gate)
    gate.spend_bytes(other, CHARGE)  # another check holds most of the budget
    calls: list[int] = []
    outcome: list[bool] = []
    thread = threading.Thread(target=lambda: outcome.append(_judge_big(gate, calls)))
    thread.start()
    while gate._waiting == 0 and thread.is_alive():  # it gave up its first try and waits
        time.sleep(0.005)
    assert outcome == [] and calls == [1]
    gate.release(other)
    thread.join()
    assert outcome == [True] and calls == [1, 1]
    assert gate.in_use == 0


def test_budget_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTENV_VALUES_BUDGET", "64M")
    assert default_values_budget().capacity == 64 * 1024**2
    monkeypatch.setenv("AGENTENV_VALUES_BUDGET", "lots")
    with pytest.raises(ConfigError, match="AGENTENV_VALUES_BUDGET"):
        default_values_budget()
    with pytest.raises(ConfigError):
        ValuesBudget(0)


def test_decoded_values_are_freed_when_their_check_is_judged() -> None:
    code = "def f():\n    return list(range(100000, 400000))\n"
    run_tests(code, ["assert f() == list(range(100000, 400000))"], timeout=10)  # warm
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        result = run_tests(code, ["assert f() == list(range(100000, 400000))"], timeout=10)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        gc.enable()
    assert result.passed == 1
    assert held < 2_000_000  # the 300k-int value (~12 MB) did not outlive its check


def test_a_row_over_the_budget_fails_alone_in_a_batch() -> None:
    small = 2 * 1024**2  # admits a few thousand ints, not 100k
    reward = make_code_reward(values_budget=small, reward="sparse", name="budgeted")
    big = "```python\ndef f():\n    return list(range(100000))\n```"
    fine = "```python\ndef f():\n    return list(range(100))\n```"
    rewards = reward(completions=[big, fine, big],
                     checks=[["assert len(f()) >= 100"]] * 3, entry_point=["f"] * 3)
    assert rewards == [0.0, 1.0, 0.0]
    result = run_tests(big.strip("`\n").removeprefix("python\n"), ["assert len(f()) >= 100"],
                       values_budget=small)
    assert result.passed == 0
    message = result.failures[0].message
    assert "batch budget of decoded values" in message and "AGENTENV_VALUES_BUDGET" in message
    assert result.failures[0].kind != "no_result"  # the model's answer, not an infrastructure fault


def test_the_async_reward_shares_its_budget_too() -> None:
    import asyncio

    reward = make_code_reward(values_budget=2 * 1024**2, reward="sparse", name="abudgeted",
                              asynchronous=True)
    big = "```python\ndef f():\n    return list(range(100000))\n```"
    fine = "```python\ndef f():\n    return list(range(100))\n```"
    rewards = asyncio.run(reward(completions=[fine, big],
                                 checks=[["assert len(f()) >= 100"]] * 2, entry_point=["f"] * 2))
    assert rewards == [1.0, 0.0]


def test_an_array_declaring_more_than_the_budget_is_refused_before_it_is_built() -> None:
    strings = [str(i) for i in range(50_000)]  # a plain msgpack array: its length is declared
    data = encode_value(strings)
    gate = ValuesBudget(len(data) + 1000 * UNIT_BYTES)  # the bytes, and room for 1,000 items

    def evaluate(holder: DecodeBudget) -> object:
        gate.spend_bytes(holder, len(data))
        return decode_value(data, holder)

    with pytest.raises(ValueBudget, match="batch budget of decoded values"):
        gate.judge(lambda: DecodeBudget(gate), evaluate)
    assert gate.in_use == 0
    roomy = ValuesBudget(len(data) + 60_000 * UNIT_BYTES)
    assert roomy.judge(lambda: DecodeBudget(roomy), lambda h: decode_value(data, h)) == strings
