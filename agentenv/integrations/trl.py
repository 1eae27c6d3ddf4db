"""TRL integration: a sandboxed code reward for GRPO/RLOO, and the datasets it reads.

TRL's ``GRPOTrainer`` (and ``RLOOTrainer``) call a custom reward function with keyword arguments
only: ``prompts``, ``completions``, ``completion_ids``, every dataset column other than
``prompt`` as a list with one entry per completion, and, in recent versions, ``trainer_state``,
``log_extra`` and ``log_metric``. It must return one float per completion, or ``None`` where the
reward does not apply. This module follows that convention:

- :func:`to_records` turns tasks into rows: a ``prompt`` (a conversation, or plain text) plus the
  task columns the reward needs; :func:`to_hf_dataset` wraps them in a ``datasets.Dataset``
  (the ``hf`` extra);
- :func:`code_reward` (threads) and :func:`acode_reward` (asyncio; TRL awaits async reward
  functions concurrently) extract code from each completion (its text, or the code argument
  of its last tool call), run it against that row's checks
  in the sandbox and return agentenv's dense reward; :func:`make_code_reward` builds variants
  with another reward, timeout, isolation level or concurrency.
- curricula by pass rate: ``make_code_reward(curriculum=PassRateCurriculum(tasks))`` records
  every scored row's outcome (passed or not) under its ``task_name``; :class:`PassRateSampler`
  draws the rows of each batch from that running window (a sampler for the trainer's
  DataLoader, each row repeated once per generation as GRPO's groups need), and
  :func:`group_mask` marks the completions of groups whose rewards are all equal (DAPO's
  dynamic sampling drops them; a trainer's own filter, e.g. verl's ``filter_groups``, can too).

The columns (``ROW_COLUMNS``): ``task_name``, ``entry_point``, ``checks`` (a JSON list: a check
is a string of Python or ``{"stdin", "expected_stdout"}``; JSON keeps one Arrow type for assert
and stdio tasks alike), ``setup_code``, ``float_tolerance``, ``equality`` (``"python"`` or
``"strict"``), ``prelude``, ``difficulty``, ``source``, ``defines`` (a JSON list of the names
the task asks the candidate to define, :func:`agentenv.grading.names.asked_names`, or ``null``
for a program task: a check's other names never resolve to the completion's bindings; a dataset
without the column grades as plain Python resolves names). Hidden checks go in the dataset
because the reward needs them; the prompt never shows them.

One bad completion never costs a batch: whatever a completion holds or does is that row's
result (text nobody can read, tool arguments nested past any parser, is a completion without
code). An infrastructure fault while scoring one row (a ``SandboxError``: the worker lost twice,
the pool closed, the isolation level unavailable) is not the model's failure: that row's reward
is ``None``, which TRL masks (the row is left out of its group's baseline and gets no
advantage), its outcome is ``"infra_error"`` and a ``code_reward_row_infra_error`` warning is
logged; any other error while grading one row scores that row 0 with a
``code_reward_row_failed`` warning (the input may be the completion's doing, so it earns no
more than a completion without code). The other rows keep their rewards either way.

Multi-turn training (``environment_factory``, a ``submit`` tool, grading that overlaps across a
batch) lives in :mod:`agentenv.integrations.trl_env`, and :func:`device_args` (the precision and
device fields the machine supports) in :mod:`agentenv.integrations.trl_device`; both are
re-exported here.

Not here: generation, the trainer, or anything that imports torch.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentenv.errors import ConfigError, MissingDependency, SandboxError
from agentenv.extract import extract_code
from agentenv.grading.memory import ValuesBudget
from agentenv.grading.memory import values_budget as resolve_values_budget
from agentenv.grading.result import RunResult
from agentenv.grading.scoring import asked_by, empty_result
from agentenv.integrations._common import completion_text, resolve_tasks
from agentenv.integrations.trl_device import device_args
from agentenv.integrations.trl_env import CodingToolEnv, PrefetchGrading, environment_factory
from agentenv.log import get_logger
from agentenv.prompts import Prompts
from agentenv.records import classify_outcome
from agentenv.rewards import RewardFn, checked_reward, get_reward
from agentenv.rollout.curriculum import PassRateCurriculum, informative
from agentenv.tasks import schema
from agentenv.tasks.schema import (
    EQUALITIES,
    Check,
    Task,
    check_to_dict,
)

__all__ = [
    "ROW_COLUMNS",
    "CodingToolEnv",
    "PassRateCurriculum",
    "PassRateSampler",
    "PrefetchGrading",
    "acode_reward",
    "code_reward",
    "completion_text",
    "decode_checks",
    "device_args",
    "environment_factory",
    "group_mask",
    "make_code_reward",
    "to_hf_dataset",
    "to_records",
]

ROW_COLUMNS: tuple[str, ...] = (
    "task_name", "entry_point", "checks", "setup_code", "float_tolerance", "equality", "prelude",
    "difficulty", "source", "defines",
)

DEFAULT_TIMEOUT = 5.0  # seconds per completion, as CodingEnv

# Stand-in result for a completion with no code: nothing is run (see agentenv.grading.scoring).
_NO_CODE = "no code found in the completion"

log = get_logger(__name__)


# -- datasets --------------------------------------------------------------------------------

def _prompt(task: Task, prompts: Prompts, conversational: bool, system_prompt: str | None,
            max_turns: int) -> Any:
    """The prompt cell for ``task``: the env's own opening messages, or the same text as one string."""
    system = prompts.system(max_turns=max_turns) if system_prompt is None else system_prompt
    user = prompts.task(task, max_turns=max_turns)
    if not conversational:
        return f"{system}\n\n{user}" if system else user
    messages = [{"role": "system", "content": system}] if system else []
    return [*messages, {"role": "user", "content": user}]


def to_records(tasks: Iterable[Task] | str, *, conversational: bool = True,
               system_prompt: str | None = None, prompts_dir: str | Path | None = None,
               max_turns: int = 1) -> list[dict[str, Any]]:
    """One row per task: ``prompt`` plus the columns :func:`code_reward` reads.

    The prompt is what ``CodingEnv``'s policies see: the packaged ``system.j2`` and ``task.j2``
    templates (or those in ``prompts_dir``), which show the task and its visible checks but never
    a hidden one. It is a list of ``{"role", "content"}`` messages (TRL's conversational format;
    TRL applies the model's chat template) or, with ``conversational=False``, one string (TRL's
    standard format, for base models). ``system_prompt`` replaces the system text ("" drops it).
    ``tasks`` may also be a task-set name or path, loaded with ``load_tasks``. ``max_turns``
    is what the templates tell the policy: pass the ``max_turns`` of a multi-turn
    :func:`environment_factory` so the prompt matches ``MultiTurnCodingEnv``'s. Needs no
    third-party package.
    """
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
        raise ConfigError(f"max_turns must be an int >= 1, got {max_turns!r}")
    prompts = Prompts(prompts_dir)
    rows = []
    for task in resolve_tasks(tasks):
        rows.append({
            "prompt": _prompt(task, prompts, conversational, system_prompt, max_turns),
            "task_name": task.name,
            "entry_point": task.entry_point,
            "checks": json.dumps([check_to_dict(c) for c in task.checks]),
            "setup_code": task.setup_code,
            "float_tolerance": None if task.float_tolerance is None else float(task.float_tolerance),
            "equality": task.equality,
            "prelude": task.prelude,
            "difficulty": task.difficulty,
            "source": task.source,
            "defines": json.dumps(_defines(task)),
        })
    return rows


def _defines(task: Task) -> list[str] | None:
    """What the task asks the candidate to define (None for a program graded on stdio)."""
    asked = asked_by(task)
    return None if asked is None else sorted(asked)


def _row_defines(value: Any) -> tuple[str, ...] | None:
    """A row's ``defines`` cell: a JSON list of names (or a list), else None."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, (list, tuple)) and all(isinstance(n, str) for n in value):
        return tuple(value)
    return None


def to_hf_dataset(tasks: Iterable[Task] | str, *, conversational: bool = True,
                  system_prompt: str | None = None, prompts_dir: str | Path | None = None,
                  max_turns: int = 1) -> Any:
    """The rows of :func:`to_records` as a ``datasets.Dataset``, ready for ``GRPOTrainer``."""
    try:
        import datasets
    except ImportError as exc:
        raise MissingDependency.for_extra("datasets", "hf", "to_hf_dataset") from exc
    records = to_records(tasks, conversational=conversational, system_prompt=system_prompt,
                         prompts_dir=prompts_dir, max_turns=max_turns)
    if not records:
        raise ConfigError("to_hf_dataset needs at least one task")
    return datasets.Dataset.from_list(records)


# -- reading one batch -------------------------------------------------------------------------

def decode_checks(value: Any) -> tuple[Check, ...] | None:
    """A row's ``checks`` value as checks (see :func:`agentenv.tasks.schema.decode_checks`)."""
    return schema.decode_checks(value)


@dataclass(frozen=True)
class _Submission:
    """What one completion asks the sandbox to run."""

    code: str
    checks: tuple[Check, ...]
    setup_code: str
    float_tolerance: float | None
    equality: str = "python"
    prelude: str = ""
    defines: tuple[str, ...] | None = None


def _column(columns: Mapping[str, Any], name: str, n: int) -> list[Any] | None:
    values = columns.get(name)
    if values is None:
        return None
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ConfigError(f"column {name!r} must be a list with one entry per completion "
                          f"(TRL's convention), got {type(values).__name__}")
    if len(values) != n:
        raise ConfigError(f"column {name!r} has {len(values)} entries for {n} completions; TRL "
                          "passes one entry per completion")
    return list(values)


def _submissions(completions: Sequence[Any] | None,
                 columns: Mapping[str, Any]) -> list[_Submission | None]:
    if completions is None:
        raise ConfigError("code_reward needs completions=...; TRL passes them as a keyword argument")
    if isinstance(completions, str) or not isinstance(completions, Sequence):
        raise ConfigError("completions must be a list (one entry per completion)")
    n = len(completions)
    checks_column = _column(columns, "checks", n)
    if checks_column is None:
        raise ConfigError(
            "code_reward needs a 'checks' column in the training dataset (TRL passes dataset "
            "columns to reward functions); build the dataset with "
            "agentenv.integrations.trl.to_hf_dataset(tasks), and keep remove_unused_columns=False"
        )
    entry_points = _column(columns, "entry_point", n) or [None] * n
    setups = _column(columns, "setup_code", n) or [""] * n
    tolerances = _column(columns, "float_tolerance", n) or [None] * n
    equalities = _column(columns, "equality", n) or ["python"] * n
    preludes = _column(columns, "prelude", n) or [""] * n
    defines = _column(columns, "defines", n) or [None] * n
    decoded: dict[str, tuple[Check, ...] | None] = {}  # a group repeats one row G times
    out: list[_Submission | None] = []
    for i, completion in enumerate(completions):
        raw = checks_column[i]
        if isinstance(raw, str):
            if raw not in decoded:
                decoded[raw] = decode_checks(raw)
            checks = decoded[raw]
        else:
            checks = decode_checks(raw)
        if checks is None:
            out.append(None)
            continue
        entry = entry_points[i] if isinstance(entry_points[i], str) and entry_points[i] else None
        tolerance = _tolerance(tolerances[i], i)
        out.append(_Submission(
            code=_completion_code(completion, entry),
            checks=checks,
            setup_code=setups[i] if isinstance(setups[i], str) else "",
            float_tolerance=tolerance,
            equality=equalities[i] if equalities[i] in EQUALITIES else "python",
            prelude=preludes[i] if isinstance(preludes[i], str) else "",
            defines=_row_defines(defines[i]),
        ))
    return out


def _tolerance(value: Any, row: int) -> float | None:
    """A row's ``float_tolerance``: a non-negative number, or None (also a null pandas made NaN)."""
    if value is None:
        return None
    try:
        tolerance = float(value)
    except (TypeError, ValueError):
        tolerance = -1.0
    if math.isnan(tolerance):
        return None
    if not 0 <= tolerance < math.inf:
        raise ConfigError(f"row {row}: float_tolerance must be a non-negative number or null, got "
                          f"{value!r}; write rows with to_records / to_hf_dataset")
    return tolerance


def _completion_code(completion: Any, entry_point: str | None) -> str:
    """The code one completion submits; "" (no code) for a completion nothing can read."""
    try:
        return extract_code(completion_text(completion), entry_point)
    except Exception as exc:  # e.g. RecursionError on text nested ~1,000 deep: this row only
        log.warning("code_reward_unreadable_completion", error=f"{type(exc).__name__}: {exc}"[:300])
        return ""


def _no_code(checks: Sequence[Check]) -> RunResult:
    return empty_result(checks, _NO_CODE)


INFRA_ERROR = "infra_error"  # the outcome logged for a row the sandbox could not grade


def _finish(subs: list[_Submission | None], results: Mapping[_Submission, RunResult | None],
            reward_fn: RewardFn, name: str, columns: Mapping[str, Any],
            curriculum: PassRateCurriculum | None = None) -> list[float | None]:
    rewards: list[float | None] = []
    outcomes: list[str] = []
    for sub in subs:
        if sub is None:
            rewards.append(None)
            outcomes.append("")
            continue
        result = results[sub]
        if result is None:  # an infrastructure fault: no reward, never a 0
            rewards.append(None)
            outcomes.append(INFRA_ERROR)
            continue
        rewards.append(checked_reward(reward_fn, result, sub.code))
        outcomes.append(classify_outcome(sub.code, result))
    _log(outcomes, name, columns)
    if curriculum is not None:
        _record(curriculum, subs, outcomes, columns)
    return rewards


def _record(curriculum: PassRateCurriculum, subs: list[_Submission | None], outcomes: list[str],
            columns: Mapping[str, Any]) -> None:
    """Feed each scored row's outcome to the curriculum, under its task's name."""
    names = _column(columns, "task_name", len(subs))
    if names is None:
        raise ConfigError("a curriculum needs the 'task_name' column (to_records writes it; keep "
                          "remove_unused_columns=False)")
    for task_name, outcome in zip(names, outcomes, strict=True):
        if outcome and outcome != INFRA_ERROR:  # unscored rows and sandbox faults say nothing
            curriculum.record(str(task_name), outcome == "pass")


def group_mask(rewards: Sequence[float | None], group_size: int) -> list[bool]:
    """One flag per completion: False for the completions of a group whose rewards are all equal.

    ``rewards`` holds consecutive groups of ``group_size`` (GRPO's ``num_generations``), as TRL
    orders a batch. Such a group's advantages are all 0: DAPO's dynamic sampling drops it and
    samples more prompts instead. None rewards (a fault) are left out before comparing.
    """
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ConfigError(f"group_size must be an integer >= 1, got {group_size!r}")
    if len(rewards) % group_size:
        raise ConfigError(f"{len(rewards)} rewards do not split into groups of {group_size}")
    mask: list[bool] = []
    for start in range(0, len(rewards), group_size):
        mask += [informative(rewards[start:start + group_size])] * group_size
    return mask


class PassRateSampler:
    """Dataset row indices for a trainer's DataLoader, drawn by the curriculum's pass rates.

    Each batch draws ``prompts_per_batch`` distinct tasks from ``curriculum`` when it is reached
    (so outcomes recorded meanwhile by ``make_code_reward(curriculum=...)`` count) and yields the
    row of each ``repeat`` times in a row (``num_generations``: a GRPO group). ``task_names`` is
    the dataset's ``task_name`` column; ``batches`` bounds the iteration (``len`` is
    ``batches * prompts_per_batch * repeat``).
    """

    def __init__(self, curriculum: PassRateCurriculum, task_names: Sequence[str], *,
                 prompts_per_batch: int, repeat: int = 1, batches: int = 1000) -> None:
        rows: dict[str, int] = {}
        for i, task_name in enumerate(task_names):
            rows.setdefault(str(task_name), i)
        missing = [n for n in curriculum.names if n not in rows]
        if missing:
            raise ConfigError(f"the curriculum's tasks {missing[:3]} are not in the dataset's task_name column")
        for label, value in (("prompts_per_batch", prompts_per_batch), ("repeat", repeat), ("batches", batches)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{label} must be an integer >= 1, got {value!r}")
        self.curriculum = curriculum
        self._rows = rows
        self.prompts_per_batch = min(prompts_per_batch, len(curriculum.names))
        self.repeat = repeat
        self.batches = batches

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.batches):
            for task_name in self.curriculum.sample(self.prompts_per_batch):
                yield from [self._rows[task_name]] * self.repeat

    def __len__(self) -> int:
        return self.batches * self.prompts_per_batch * self.repeat


def _log(outcomes: list[str], name: str, columns: Mapping[str, Any]) -> None:
    """Report outcome rates through TRL's ``log_metric``/``log_extra`` hooks when it passes them."""
    scored = [o for o in outcomes if o]
    log_metric = columns.get("log_metric")
    if callable(log_metric) and scored:
        for outcome in ("pass", "no_code", "syntax_error", "timeout", INFRA_ERROR):
            log_metric(f"{name}/{outcome}", sum(o == outcome for o in scored) / len(scored))
    log_extra = columns.get("log_extra")
    if callable(log_extra):
        log_extra(f"{name}/outcome", outcomes)


def _plan_batch(subs: list[_Submission | None]
                ) -> tuple[dict[_Submission, RunResult | None], list[_Submission]]:
    """Results known without running (no code), and the distinct submissions left to run."""
    unique = list(dict.fromkeys(s for s in subs if s is not None))
    results: dict[_Submission, RunResult | None] = {
        s: _no_code(s.checks) for s in unique if not s.code.strip()}
    return results, [s for s in unique if s not in results]


def _row_infra_error(sub: _Submission, exc: SandboxError) -> None:
    """A row the sandbox could not grade: no result (a ``None`` reward), the fault logged."""
    log.warning("code_reward_row_infra_error", error=f"{type(exc).__name__}: {exc}"[:300],
                checks=len(sub.checks))


def _row_failed(sub: _Submission, exc: BaseException) -> RunResult:
    """The result of a row grading failed on (not the sandbox's fault): every check fails, logged."""
    reason = f"{type(exc).__name__}: {exc}"[:300]
    log.warning("code_reward_row_failed", error=reason, checks=len(sub.checks))
    return empty_result(sub.checks, f"the sandbox could not score this completion ({reason})")


def _default_workers() -> int:
    # As many rows in flight as the sandbox pool runs at once: a looping or sleeping completion
    # holds one worker, not the batch.
    from agentenv.sandbox.contract import default_size

    return default_size()


# -- the reward functions ----------------------------------------------------------------------

def make_code_reward(*, reward: str | RewardFn = "dense", timeout: float = DEFAULT_TIMEOUT,
                     max_workers: int | None = None, isolation: str | None = None,
                     name: str = "code_reward", asynchronous: bool = False,
                     curriculum: PassRateCurriculum | None = None,
                     values_budget: ValuesBudget | int | None = None) -> Callable[..., Any]:
    """Build a TRL reward function that scores completions in agentenv's sandbox.

    ``reward`` is "dense" (format gate, then the fraction of checks passed), "sparse" (1.0 only
    when every check passes) or any ``(result, code) -> float``. ``timeout`` is per completion.
    Up to ``max_workers`` sandbox runs go at once; identical submissions in one batch (common in
    a GRPO group) run once. ``name`` is what TRL logs the reward as (``rewards/<name>``).
    With ``asynchronous=True`` the function is ``async def``, which TRL awaits concurrently with
    other async reward functions. With a ``curriculum``, every scored row's outcome is recorded
    in it under the row's ``task_name`` (see :class:`PassRateSampler`). ``values_budget``
    (bytes) bounds the candidates' decoded values all its rows in flight hold at once (by
    default the process-wide budget, see :mod:`agentenv.grading.memory`): a row whose values
    alone need more fails its check, naming the budget; the others are judged a few at a time.
    """
    reward_fn = get_reward(reward)
    values_gate = None if values_budget is None else resolve_values_budget(values_budget)
    if not timeout > 0:
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    workers = _default_workers() if max_workers is None else max_workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"max_workers must be a positive integer, got {max_workers!r}")
    if not name or not name.isidentifier():
        raise ConfigError(f"name must be a Python identifier (TRL logs rewards/<name>), got {name!r}")

    def run_batch(subs: list[_Submission | None]) -> dict[_Submission, RunResult | None]:
        from agentenv.grading import run_tests

        results, todo = _plan_batch(subs)

        def run(sub: _Submission) -> RunResult | None:
            try:
                return run_tests(sub.code, list(sub.checks), timeout=timeout,
                                 setup_code=sub.setup_code, float_tolerance=sub.float_tolerance,
                                 isolation=isolation, equality=sub.equality, prelude=sub.prelude,
                                 values_budget=values_gate,
                                 defines=sub.defines)
            except ConfigError:
                raise  # the caller's configuration: every row would fail alike, so say so
            except SandboxError as exc:
                _row_infra_error(sub, exc)
                return None
            except Exception as exc:
                return _row_failed(sub, exc)

        if len(todo) == 1:
            results[todo[0]] = run(todo[0])
        elif todo:
            with ThreadPoolExecutor(max_workers=min(workers, len(todo)),
                                    thread_name_prefix="agentenv-reward") as pool:
                results.update(zip(todo, pool.map(run, todo), strict=True))
        return results

    async def arun_batch(subs: list[_Submission | None]) -> dict[_Submission, RunResult | None]:
        from agentenv.grading import arun_tests

        results, todo = _plan_batch(subs)
        gate = asyncio.Semaphore(workers)

        async def run(sub: _Submission) -> RunResult | None:
            async with gate:
                try:
                    return await arun_tests(sub.code, list(sub.checks), timeout=timeout,
                                            setup_code=sub.setup_code,
                                            float_tolerance=sub.float_tolerance,
                                            isolation=isolation, equality=sub.equality,
                                            prelude=sub.prelude, values_budget=values_gate,
                                            defines=sub.defines)
                except ConfigError:
                    raise
                except SandboxError as exc:
                    _row_infra_error(sub, exc)
                    return None
                except Exception as exc:
                    return _row_failed(sub, exc)

        results.update(zip(todo, await asyncio.gather(*(run(s) for s in todo)), strict=True))
        return results

    if asynchronous:
        async def async_reward(prompts: Sequence[Any] | None = None,
                               completions: Sequence[Any] | None = None,
                               **columns: Any) -> list[float | None]:
            subs = _submissions(completions, columns)
            return _finish(subs, await arun_batch(subs), reward_fn, name, columns, curriculum)

        async_reward.__name__ = async_reward.__qualname__ = name
        async_reward.__doc__ = make_code_reward.__doc__
        return async_reward

    def sync_reward(prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                    **columns: Any) -> list[float | None]:
        subs = _submissions(completions, columns)
        return _finish(subs, run_batch(subs), reward_fn, name, columns, curriculum)

    sync_reward.__name__ = sync_reward.__qualname__ = name
    sync_reward.__doc__ = make_code_reward.__doc__
    return sync_reward


_default_sync = make_code_reward()
_default_async = make_code_reward(name="acode_reward", asynchronous=True)


def code_reward(prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                **columns: Any) -> list[float | None]:
    """TRL reward function: agentenv's dense reward for each completion, scored in the sandbox.

    Called by TRL as ``code_reward(prompts=..., completions=..., completion_ids=..., **columns)``;
    ``columns`` must hold ``checks`` (and should hold ``entry_point``; ``setup_code`` and
    ``float_tolerance`` are honoured), one entry per completion, as :func:`to_records` writes
    them. Returns one reward in [0, 1] per completion, or ``None`` for a row whose checks are
    empty or that the sandbox could not grade (an infrastructure fault, logged; TRL then leaves
    this reward out for that row). Rows run concurrently in the sandbox
    pool. For another reward, timeout or isolation level use :func:`make_code_reward`.
    """
    result: list[float | None] = _default_sync(prompts=prompts, completions=completions, **columns)
    return result


async def acode_reward(prompts: Sequence[Any] | None = None,
                       completions: Sequence[Any] | None = None,
                       **columns: Any) -> list[float | None]:
    """Async twin of :func:`code_reward` (TRL awaits async reward functions concurrently)."""
    result: list[float | None] = await _default_async(prompts=prompts, completions=completions,
                                                      **columns)
    return result
