"""Judging: the frames a run sent back, and its plan, turned into a :class:`RunResult`.

:func:`judge` decides every verdict on the trusted side, in a process where no candidate code
ran: a decomposed assertion is evaluated here on the values the child returned (rebuilt by
:func:`agentenv.sandbox._wire.decode_value` as builtin and standard-library values), with the
check's operations on each value (methods, attributes, subscripts: the plan's ``then``) applied
here from where the child stopped, restricted to trusted builtins and compared and computed on
under the budgets of :mod:`agentenv.grading.values` (a numpy array's ``==`` is numpy's array,
as in Python); a stdio case's output is
compared here with the expected output, which never left this process; a judge-process check's
verdict is read from the judge process's own frames, never from the candidate's. Frame keys and
kinds come from :mod:`agentenv.sandbox._schema`. Whatever the frames hold, :func:`judge`
returns: an error while judging one check fails that check with the error's message.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from agentenv.grading.memory import ValuesBudget
from agentenv.grading.plan import (
    _CALL,
    _COMPUTE,
    _EQ,
    _FORMAT,
    _IN,
    _NE,
    _OP,
    _PRIVATE,
    _RECV,
    _SAFE_BUILTINS,
    _V,
    CheckPlan,
    Plan,
)
from agentenv.grading.result import Failure, FailureKind, RunResult
from agentenv.grading.stdout import compare_stdout
from agentenv.grading.values import (
    BudgetExceeded,
    bounded_repr,
    contains,
    equal,
    guarded_binop,
    guarded_call,
    guarded_format,
)
from agentenv.sandbox.contract import (
    DecodeBudget,
    Unreadable,
    ValueBudget,
    decode_value,
    loaded,
    schema,
)
from agentenv.tasks.schema import StdioCase

__all__ = ["judge"]

def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _short_repr(value: Any) -> str:
    return bounded_repr(value, 120)


def _describe_error(exc: BaseException) -> str:
    """``TypeName: message`` of an error raised while judging, bounded; never raises."""
    try:
        text = str(exc)
    except Exception:
        text = ""
    name = type(exc).__name__
    return _clip(f"{name}: {text}" if text else name, 300)


class _Missing(Exception):
    """A call's value never arrived (the child died or ran out of time first)."""


class _CallFailed(Exception):
    """A call raised in the child, or returned something that is not plain data."""

    def __init__(self, kind: str, message: str, j: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.j = j


def judge(
    plan: Plan,
    frames: Sequence[Mapping[str, Any]],
    *,
    timed_out: bool,
    isolation: str,
    exec_seconds: float = 0.0,
    stdout: str = "",
    stderr: str = "",
    float_tolerance: float | None = None,
    died: str | None = None,
    equality: str = "python",
    capped: int | None = None,
    judge_frames: Sequence[Mapping[str, Any]] = (),
    judge_died: str | None = None,
    values_budget: ValuesBudget | None = None,
) -> RunResult:
    """Turn the frames that came back into a RunResult.

    ``frames`` are the candidate process's (values, stdio output, whether it loaded): every
    verdict on them is decided here. ``judge_frames`` are the judge process's verdicts on the
    ``judge`` checks, the only frames a verdict is taken from. ``died``/``judge_died`` say how
    a process ended when it did not finish (a signal, a limit), for the ``no_result`` messages;
    ``capped`` is the result channel's byte cap when the run's results reached it (checks that
    never reported then say so). ``equality`` is ``"python"`` or ``"strict"`` (see
    :mod:`agentenv.grading.values`). ``values_budget`` bounds the decoded values of every run
    judged at once (see :mod:`agentenv.grading.memory`). Exit codes are never consulted. Whatever the frames hold, this
    returns: an error while judging one check fails that check with the error's message.
    """
    load: Mapping[str, Any] | None = None
    stdio: dict[int, Mapping[str, Any]] = {}
    calls: dict[tuple[int, int], Mapping[str, Any]] = {}
    for frame in frames:
        kind, index = frame.get(schema.TYPE), frame.get(schema.INDEX)
        if kind == schema.LOAD:
            if load is None:
                load = frame
        elif type(index) is not int:
            continue
        elif kind == schema.STDIO:
            stdio.setdefault(index, frame)
        elif kind == schema.CALL and type(frame.get(schema.CALL_INDEX)) is int:
            calls.setdefault((index, frame[schema.CALL_INDEX]), frame)
    verdicts: dict[int, Mapping[str, Any]] = {}
    judge_setup: Mapping[str, Any] | None = None
    for frame in judge_frames:
        if frame.get(schema.TYPE) == schema.CHECK and type(frame.get(schema.INDEX)) is int:
            verdicts.setdefault(frame[schema.INDEX], frame)
        elif frame.get(schema.TYPE) == schema.SETUP and judge_setup is None:
            judge_setup = frame

    def missing(cp: CheckPlan) -> Failure:
        if timed_out:
            return Failure(cp.index, cp.text, "timeout",
                           "the time limit was reached before this check finished")
        if cp.mode == "judge":
            why = f" ({judge_died})" if judge_died else ""
            return Failure(cp.index, cp.text, "no_result",
                           f"the judge process ended before reporting this check{why}")
        if capped is not None:
            return Failure(cp.index, cp.text, "no_result",
                           f"this check's result did not arrive: the run's results reached "
                           f"Limits.max_result_bytes ({capped:,} bytes)")
        why = f" ({died})" if died else ""
        return Failure(cp.index, cp.text, "no_result",
                       f"the candidate's process ended before reporting this check{why}")

    failures: list[Failure] = []
    passed: list[int] = []
    for cp in plan.checks:
        failure: Failure | None
        try:
            failure = _judge_one(cp, load, verdicts, judge_setup, stdio, calls, float_tolerance,
                                 equality, missing, values_budget)
        except (Exception, Unreadable) as exc:  # a fault of the judge on this value: that
            # check fails, no more
            failure = _failure(cp, "exception", f"the judge could not evaluate this check "
                                                f"({_describe_error(exc)})")
        if failure is None:
            passed.append(cp.index)
        else:
            failures.append(failure)
    return RunResult.from_counts(
        len(passed), len(plan.checks), timed_out=timed_out, failures=tuple(failures),
        isolation=isolation, graded_in_child=0, exec_seconds=exec_seconds,
        stdout=stdout, stderr=stderr, passed_indices=tuple(passed),
    )


def _judge_one(cp: CheckPlan, load: Mapping[str, Any] | None,
               verdicts: Mapping[int, Mapping[str, Any]], judge_setup: Mapping[str, Any] | None,
               stdio: Mapping[int, Mapping[str, Any]],
               calls: Mapping[tuple[int, int], Mapping[str, Any]], float_tolerance: float | None,
               equality: str, missing: Any, gate: ValuesBudget | None = None) -> Failure | None:
    failure: Failure | None
    if cp.mode == "stdio":
        failure = _judge_stdio(cp, stdio.get(cp.index), float_tolerance, missing)
    elif load is None:
        failure = missing(cp)
    elif load.get(schema.OK) is not True:
        failure = _failure(cp, _kind(load.get(schema.KIND)), str(load.get(schema.MESSAGE, "")))
    elif cp.mode == "judge":  # the judge process's verdict, or its setup's failure
        reported = verdicts.get(cp.index, judge_setup)
        if reported is None:
            failure = missing(cp)
        elif reported.get(schema.OK) is True and reported is not judge_setup:
            failure = None
        else:
            kind = reported.get(schema.KIND)
            failure = _failure(cp, "no_result" if kind == schema.NO_RESULT else _kind(kind),
                               str(reported.get(schema.MESSAGE, "")))
    else:
        failure = _judge_trusted(cp, calls, float_tolerance, equality, missing, gate)
    return failure


def _kind(value: Any) -> FailureKind:
    return value if value in schema.RAISED else "exception"


def _failure(cp: CheckPlan, kind: FailureKind, message: str) -> Failure:
    message = message.strip()
    if kind == "assertion" and message in ("", "AssertionError"):
        message = "assertion failed"
    return Failure(cp.index, cp.text, kind, _clip(message, 500))


def _decode_value(data: Any, budget: DecodeBudget) -> Any:
    """A call's value from its frame bytes; over a wire budget it is a failed call naming it."""
    try:
        if budget.gate is not None and type(data) is bytes:
            budget.gate.spend_bytes(budget, len(data))  # its strings and bytes, about
        return decode_value(data, budget)
    except ValueBudget as exc:
        raise _CallFailed("budget", str(exc)) from None


def _array(value: Any) -> bool:
    np = loaded("numpy")
    return np is not None and isinstance(value, np.ndarray)


def _equal(mode: str, a: Any, e: Any, tolerance: float | None) -> Any:
    """``a == e`` under the equality mode; with a numpy array on either side (Python mode), the
    array of comparisons numpy gives, as in Python (``(f() == g).all()``)."""
    if mode != "strict" and (_array(a) or _array(e)):
        return a == e
    return equal(mode, a, e, tolerance)


def _not_equal(mode: str, a: Any, e: Any, tolerance: float | None) -> Any:
    if mode != "strict" and (_array(a) or _array(e)):
        return a != e
    return not equal(mode, a, e, tolerance)


def _private(name: str) -> Any:
    raise BudgetExceeded(f"the check's trusted part may not use private attributes ({name})")


def _judge_trusted(cp: CheckPlan, calls: Mapping[tuple[int, int], Mapping[str, Any]],
                   tolerance: float | None, equality: str, missing: Any,
                   gate: ValuesBudget | None = None) -> Failure | None:
    if gate is None:
        return _judge_values(cp, calls, tolerance, equality, missing, DecodeBudget())
    return gate.judge(lambda: DecodeBudget(gate),
                      lambda budget: _judge_values(cp, calls, tolerance, equality, missing, budget))


def _judge_values(cp: CheckPlan, calls: Mapping[tuple[int, int], Mapping[str, Any]],
                  tolerance: float | None, equality: str, missing: Any,
                  budget: DecodeBudget) -> Failure | None:
    # the values of one check are alive together: they share one budget
    values: dict[int, Any] = {}
    namespace: dict[str, Any] = {}
    try:
        return _evaluate(cp, calls, tolerance, equality, missing, values, namespace, budget)
    finally:
        # The namespace holds ``value``, whose closure holds the namespace: a reference cycle
        # that would keep every decoded value alive until the garbage collector next runs
        # (a batch of million-element answers then stays in the caller's memory at once).
        values.clear()
        namespace.clear()


def _evaluate(cp: CheckPlan, calls: Mapping[tuple[int, int], Mapping[str, Any]],
              tolerance: float | None, equality: str, missing: Any, values: dict[int, Any],
              namespace: dict[str, Any], budget: DecodeBudget) -> Failure | None:

    def value(j: int) -> Any:
        if j in values:
            return values[j]
        frame = calls.get((cp.index, j))
        if frame is None:
            raise _Missing
        if schema.VALUE not in frame:
            if frame.get(schema.KIND) in (schema.NOT_PLAIN, schema.OVER_BUDGET):
                raise _CallFailed(str(frame[schema.KIND]), str(frame.get(schema.MESSAGE, "object")), j)
            raise _CallFailed(_kind(frame.get(schema.KIND)), str(frame.get(schema.MESSAGE, "")), j)
        try:
            received = _decode_value(frame[schema.VALUE], budget)
        except _CallFailed as exc:
            exc.j = j
            raise
        except (ValueError, TypeError, OverflowError, RecursionError, MemoryError):
            raise _CallFailed("malformed", "its result arrived malformed", j) from None
        # What the check does to the result, from where the child stopped (it applies the
        # operations only while the result is one of the candidate's objects): here, on the value.
        steps = frame.get(schema.STEPS, 0)
        ops = cp.then_code[j] if j < len(cp.then_code) else ()
        if type(steps) is not int or not 0 <= steps <= len(ops):
            raise _CallFailed("malformed", "its result arrived malformed", j)
        for op in ops[steps:]:
            received = eval(op, namespace, {_RECV: received})
        values[j] = received
        return values[j]

    namespace.update({
        "__builtins__": _SAFE_BUILTINS, "math": math, _V: value,
        _EQ: lambda a, e: _equal(equality, a, e, tolerance),
        _NE: lambda a, e: _not_equal(equality, a, e, tolerance),
        _IN: lambda a, c: contains(equality, a, c, tolerance),
        _OP: lambda symbol, a, b: guarded_binop(symbol, a, b, _COMPUTE[symbol]),
        _CALL: guarded_call, _PRIVATE: _private, _FORMAT: guarded_format,
    })
    assert cp.program is not None
    try:
        ok = bool(eval(cp.program, namespace))
    except _Missing:
        return missing(cp)
    except _CallFailed as exc:
        j = exc.j if exc.j is not None else _failing_call(cp, calls)
        call = cp.calls[j] if j is not None else "the call"
        if exc.kind == schema.NOT_PLAIN:
            expected = _expected_type(cp, j, namespace)
            wanted = f", expected {expected}" if expected else " (only plain data is accepted)"
            return _failure(cp, "assertion", f"{_clip(call, 80)} returned a {exc}{wanted}")
        if exc.kind == schema.OVER_BUDGET:
            return _failure(cp, "assertion",
                            f"{_clip(call, 80)} returned a value over the judge's budget: {exc}")
        if exc.kind == "malformed":
            return _failure(cp, "exception", f"the result of {_clip(call, 80)} arrived malformed")
        return _failure(cp, "exception" if exc.kind == "assertion" else _kind(exc.kind),
                        f"{_clip(call, 80)} raised {exc}")
    except BudgetExceeded as exc:
        return _failure(cp, "assertion", f"over the judge's budget: {_clip(str(exc), 300)}")
    except Unreadable as exc:  # an iterator consumed past what crossed of it
        return _failure(cp, "assertion", _clip(str(exc), 300))
    except Exception as exc:  # the trusted expression failed on the returned values
        return _failure(cp, "exception", _describe_error(exc))
    if ok:
        return None
    got = "; ".join(f"{_clip(cp.calls[j], 60)} returned {_short_repr(v)}"
                    for j, v in sorted(values.items()))
    return _failure(cp, "assertion", got or "assertion failed")


def _failing_call(cp: CheckPlan, calls: Mapping[tuple[int, int], Mapping[str, Any]]) -> int | None:
    for j in range(len(cp.calls)):
        frame = calls.get((cp.index, j))
        if frame is not None and schema.VALUE not in frame:
            return j
    return None


def _expected_type(cp: CheckPlan, j: int | None, namespace: dict[str, Any]) -> str | None:
    for index, code in cp.expected_types:
        if index == j:
            try:
                return type(eval(code, namespace)).__name__
            except Exception:
                return None
    return None


def _judge_stdio(cp: CheckPlan, frame: Mapping[str, Any] | None, float_tolerance: float | None,
                 missing: Any) -> Failure | None:
    assert isinstance(cp.check, StdioCase)
    if frame is None:
        return missing(cp)
    out = frame.get(schema.OUT)
    if type(out) is not str:
        return _failure(cp, "exception", "the program's output did not arrive")
    if frame.get(schema.KIND) == schema.TIMEOUT:
        return _failure(cp, "timeout", str(frame.get(schema.MESSAGE, "")))
    if frame.get(schema.KIND) == schema.OVER_BUDGET:
        return _failure(cp, "exception", str(frame.get(schema.MESSAGE, "")))
    if frame.get(schema.KIND):
        kind, message = _kind(frame[schema.KIND]), str(frame.get(schema.MESSAGE, ""))
        if kind != "syntax":  # raised while running: a runtime error, as APPS's and LiveCodeBench's graders say
            message = (f"the program raised {message or 'an exception'}: a runtime error fails the test "
                       f"whatever it printed (exit() and sys.exit(n) end a program normally)")
        return _failure(cp, kind, message)
    why = compare_stdout(out, cp.check.expected_stdout, float_tolerance, cp.check.compare)
    if why is None:
        return None
    return _failure(cp, "assertion", f"{why}; expected stdout {_clip(cp.check.expected_stdout)!r}, "
                                     f"got {_clip(out)!r}")
