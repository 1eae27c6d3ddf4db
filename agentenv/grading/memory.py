"""The batch-wide memory budget for decoded values: what every run judged at once may rebuild.

Each value a check compares is bounded on its own by the wire's budgets (``MAX_ITEMS``...); a
:class:`ValuesBudget` bounds them all together. Every run judged in this process at the same
time (the rows of a ``code_reward`` batch, ``arun_tests`` calls under one event loop, a
rollout's episodes) charges the values it decodes to one budget: the value's encoded bytes plus
``UNIT_BYTES`` per element and container rebuilt (what a small Python object and its slot
cost). The charge of a check is released as soon as it is judged.

The verdict never depends on what else is in flight. A check whose values alone need more than
the whole budget fails (the model's answer is too large: a failure, not an infrastructure
fault) with a message naming the budget and how to raise it; any other check passes or fails
on its values alone: when its charge does not fit beside what other checks hold, its partial
values are dropped and it is judged again alone, once the others have released theirs (checks
that hold nothing wait meanwhile). So a batch of million-element answers is judged a few at a
time instead of all at once, and none of them fails for it.

The default budget (:data:`DEFAULT_VALUES_BUDGET`, 512 MiB) admits every value the wire's own
budgets admit; ``AGENTENV_VALUES_BUDGET`` (bytes, ``k``/``M``/``G`` suffixes allowed) changes it
for the process, and ``run_tests(values_budget=...)`` / ``make_code_reward(values_budget=...)``
give a call or a reward function a budget of its own.

Not here: the per-value budgets and the decoding itself (``sandbox._wire``), judging
(:mod:`agentenv.grading.judging`).
"""

from __future__ import annotations

import threading
from typing import Any

from agentenv import settings
from agentenv.errors import ConfigError
from agentenv.sandbox.contract import ValueBudget

__all__ = [
    "DEFAULT_VALUES_BUDGET",
    "UNIT_BYTES",
    "Retry",
    "ValuesBudget",
    "default_values_budget",
    "values_budget",
]

DEFAULT_VALUES_BUDGET = 512 * 1024**2
# Bytes charged per wire budget unit (an element or container rebuilt): an int in a list is
# about 40 bytes with its slot, a short str about 60, a pair's tuple about 64 per unit.
UNIT_BYTES = 64
_HOW = ("raise it with AGENTENV_VALUES_BUDGET=<bytes>, run_tests(values_budget=...) or "
        "make_code_reward(values_budget=...)")


class Retry(BaseException):
    """A check's values did not fit beside the others in flight: drop them, judge it alone.

    A BaseException, so no ``except Exception`` on the way (the trusted expression's own
    error handling) takes it for the check's failure.
    """


def _mib(n: int) -> str:
    return f"{n / 1024**2:,.0f} MiB" if n >= 1024**2 else f"{n:,} bytes"


class ValuesBudget:
    """``capacity`` bytes of decoded values, shared by every check judged against it at once.

    A check's :class:`~agentenv.sandbox._wire.DecodeBudget` is the holder: it charges with
    :meth:`spend` (units) and :meth:`spend_bytes`, and :meth:`release` gives back all it holds.
    Judging code runs a check with :meth:`judge`, which handles :class:`Retry`.
    """

    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < UNIT_BYTES:
            raise ConfigError(f"a values budget is a number of bytes (at least {UNIT_BYTES}), "
                              f"got {capacity!r}")
        self.capacity = capacity
        self._cond = threading.Condition()
        self._in_use = 0
        self._owner: Any = None  # the holder judged alone, if any
        self._waiting = 0  # holders that want to be judged alone (the owner included)
        self._alone = threading.Lock()  # one holder judged alone at a time

    @property
    def in_use(self) -> int:
        """Bytes held by the checks being judged now."""
        return self._in_use

    # -- the holder's side (called by the decoder) --------------------------------------------

    def spend(self, holder: Any, units: int) -> None:
        self.spend_bytes(holder, units * UNIT_BYTES)

    def spend_bytes(self, holder: Any, n: int) -> None:
        with self._cond:
            if holder.charged + n > self.capacity:
                raise self._over(holder.charged + n)
            if holder is not self._owner:
                if holder.charged == 0:  # holds nothing: it may wait without blocking anyone
                    while self._waiting and holder is not self._owner:
                        self._cond.wait()
                if self._in_use + n > self.capacity:
                    raise Retry
            holder.charged += n
            self._in_use += n

    def room(self, holder: Any) -> int:
        """Units ``holder`` may still declare without passing what is left."""
        limit = self.capacity - holder.charged if holder is self._owner else (
            self.capacity - self._in_use)
        return max(0, limit) // UNIT_BYTES

    def refuse(self, holder: Any) -> None:
        """An array declared more than :meth:`room`: judged alone, the value is over the
        budget; else it is judged again alone."""
        if holder is self._owner:
            raise self._over(self.capacity + 1)
        raise Retry

    def release(self, holder: Any) -> None:
        with self._cond:
            self._in_use -= holder.charged
            holder.charged = 0
            self._cond.notify_all()

    def _over(self, need: int) -> ValueBudget:
        return ValueBudget(f"the values of this check need more than the batch budget of decoded "
                           f"values ({_mib(self.capacity)} for all the runs judged at once; "
                           f"{_mib(need)} or more for this check); {_HOW}")

    # -- the judging side ---------------------------------------------------------------------

    def judge(self, make_holder: Any, evaluate: Any) -> Any:
        """``evaluate(holder)`` with a fresh holder from ``make_holder()``; when it does not fit
        beside the checks in flight, again alone. Everything it held is released after."""
        holder = make_holder()
        try:
            return evaluate(holder)
        except Retry:
            pass
        finally:
            self.release(holder)
        with self._cond:
            self._waiting += 1
        try:
            with self._alone:
                holder = make_holder()
                with self._cond:
                    while self._in_use:
                        self._cond.wait()
                    self._owner = holder
                try:
                    return evaluate(holder)
                finally:
                    with self._cond:
                        self._owner = None
                    self.release(holder)
        finally:
            with self._cond:
                self._waiting -= 1
                self._cond.notify_all()


def _parse_bytes(text: str) -> int:
    raw = text.strip().lower().removesuffix("b").removesuffix("i")
    scale = {"k": 1024, "m": 1024**2, "g": 1024**3}.get(raw[-1:], 1)
    digits = raw[:-1] if scale != 1 else raw
    try:
        value = int(float(digits) * scale)
    except ValueError:
        raise ConfigError(f"AGENTENV_VALUES_BUDGET must be a number of bytes (e.g. 536870912 or "
                          f"512M), got {text!r}") from None
    return value


_default: ValuesBudget | None = None
_default_lock = threading.Lock()


def default_values_budget() -> ValuesBudget:
    """The process-wide budget (``AGENTENV_VALUES_BUDGET``, else :data:`DEFAULT_VALUES_BUDGET`),
    made at first use; a changed variable makes a new one for the runs that start after it."""
    global _default
    configured = settings.values_budget()
    capacity = DEFAULT_VALUES_BUDGET if configured is None else _parse_bytes(configured)
    with _default_lock:
        if _default is None or _default.capacity != capacity:
            _default = ValuesBudget(capacity)
        return _default


def values_budget(value: ValuesBudget | int | None) -> ValuesBudget:
    """A budget from what a caller passed: one, a number of bytes, or None (the default)."""
    if value is None:
        return default_values_budget()
    if isinstance(value, ValuesBudget):
        return value
    return ValuesBudget(value)
