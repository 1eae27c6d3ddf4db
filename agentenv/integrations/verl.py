"""verl integration: a custom reward function, the parquet layout verl trains on, and the rows
its multi-turn tool agent loop needs.

verl's conventions (0.9): a dataset row is ``{"data_source", "prompt" (chat messages),
"ability", "reward_model": {"style", "ground_truth"}, "extra_info": {...}}``, optionally with
``"agent_name"`` (``"tool_agent"`` for multi-turn rollouts with tools) and, in ``extra_info``,
``"tools_kwargs": {tool_name: {"create_kwargs": {...}}}``, which verl hands to the tool's
``create`` on every call. A custom reward function (``reward.custom_reward_function.path`` and
``.name``) is called per sample as ``compute_score(data_source=, solution_str=, ground_truth=,
extra_info=)`` by the naive reward manager, and per batch as ``compute_score(data_sources=,
solution_strs=, ground_truths=, extra_infos=)`` by the ``batch`` reward manager; either may
return a float or a dict with ``"score"``.

- :func:`to_verl_records` / :func:`to_verl_parquet`: tasks to rows (the prompt rendered from
  the same templates as the environments; the checks as ``ground_truth``; in ``extra_info``
  the columns the reward reads, the encoded task and the ``submit`` tool's ``create_kwargs``).
- :func:`compute_score` and :func:`compute_score_batch`: the sandboxed dense reward of the
  code in ``solution_str`` (its last fenced block, as for every agentenv policy), run through
  :func:`agentenv.integrations.trl.code_reward` (concurrent, identical submissions once). For a
  multi-turn rollout whose ``submit`` tool kept the episode, the episode's return (from
  ``extra_info["agentenv_return"]``, written by the tool) is the score. A row of another
  ``data_source`` is passed to verl's own ``default_compute_score``.

The multi-turn tool itself, a verl ``BaseTool``, is :mod:`agentenv.integrations.verl_tool`.
Nothing here imports verl or torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentenv.errors import ConfigError, MissingDependency
from agentenv.integrations._common import encode_task, resolve_tasks
from agentenv.integrations.trl import INFRA_ERROR, ROW_COLUMNS, code_reward, to_records
from agentenv.log import get_logger
from agentenv.tasks.schema import Task

__all__ = ["DATA_SOURCE", "INFRA_KEY", "RETURN_KEY", "TOOL_NAME", "compute_score", "compute_score_batch",
           "to_verl_parquet", "to_verl_records"]

DATA_SOURCE = "agentenv"
RETURN_KEY = "agentenv_return"   # extra_info key the submit tool writes the episode's return to
INFRA_KEY = "agentenv_infra_error"  # set by the submit tool when the sandbox failed on a call
TOOL_NAME = "submit"

log = get_logger(__name__)


def to_verl_records(tasks: Iterable[Task] | str, *, data_source: str = DATA_SOURCE,
                    max_turns: int = 1, multi_turn: bool = False,
                    prompts_dir: str | Path | None = None,
                    system_prompt: str | None = None, split: str = "train") -> list[dict[str, Any]]:
    """One verl row per task.

    ``multi_turn=True`` marks the rows for verl's tool agent loop (``agent_name="tool_agent"``)
    and renders the prompt for ``max_turns`` submissions; the ``submit`` tool's
    ``create_kwargs`` carry the task either way.
    """
    task_list = resolve_tasks(tasks)
    base = to_records(task_list, prompts_dir=prompts_dir, system_prompt=system_prompt,
                      max_turns=max_turns)
    rows = []
    for index, (task, row) in enumerate(zip(task_list, base, strict=True)):
        encoded = encode_task(task)
        extra = {k: row[k] for k in ROW_COLUMNS if k != "checks"}
        extra.update({
            "split": split, "index": index, "task": encoded,
            "tools_kwargs": {TOOL_NAME: {"create_kwargs": {"task": encoded}}},
        })
        record = {
            "data_source": data_source,
            "prompt": row["prompt"],
            "ability": "code",
            "reward_model": {"style": "rule", "ground_truth": row["checks"]},
            "extra_info": extra,
        }
        if multi_turn:
            record["agent_name"] = "tool_agent"
        rows.append(record)
    return rows


def to_verl_parquet(tasks: Iterable[Task] | str, path: str | Path, **options: Any) -> Path:
    """Write :func:`to_verl_records` to ``path`` as parquet (``data.train_files`` / ``val_files``)."""
    try:
        import datasets
    except ImportError as exc:
        raise MissingDependency.for_extra("datasets", "hf", "to_verl_parquet") from exc
    rows = to_verl_records(tasks, **options)
    if not rows:
        raise ConfigError("to_verl_parquet needs at least one task")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_list(rows).to_parquet(str(out))
    return out


def _info(extra: Any) -> Mapping[str, Any]:
    return extra if isinstance(extra, Mapping) else {}


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def compute_score_batch(data_sources: Sequence[str], solution_strs: Sequence[str],
                        ground_truths: Sequence[Any], extra_infos: Sequence[Any] | None = None,
                        **kwargs: Any) -> list[dict[str, float]]:
    """verl's batch reward function: one ``{"score", "acc"}`` per sample (``acc``: all tests passed)."""
    n = len(solution_strs)
    infos = [_info(e) for e in (extra_infos if extra_infos is not None else [None] * n)]
    if not (len(data_sources) == len(ground_truths) == len(infos) == n):
        raise ConfigError("compute_score_batch needs one data_source, ground_truth and extra_info "
                          "per solution_str")
    out: list[dict[str, float] | None] = [None] * n
    mine = []
    for i, (source, info) in enumerate(zip(data_sources, infos, strict=True)):
        if not str(source).startswith(DATA_SOURCE):
            out[i] = _foreign(source, solution_strs[i], ground_truths[i], info, **kwargs)
            continue
        if info.get(INFRA_KEY):  # verl cannot mask a row: score it, and say the sandbox failed
            log.warning("compute_score_infra_error", data_source=str(source))
        if _finite(info.get(RETURN_KEY)):  # the multi-turn episode's return
            score = float(info[RETURN_KEY])
            out[i] = {"score": score, "acc": float(bool(info.get("agentenv_solved")))}
        else:
            mine.append(i)
    if mine:
        # Every column code_reward reads, from extra_info as to_verl_records wrote it: the
        # same grading as TRL's (equality and prelude included).
        columns: dict[str, list[Any]] = {
            name: [infos[i].get(name) for i in mine] for name in ROW_COLUMNS if name != "checks"}
        columns["checks"] = [ground_truths[i] for i in mine]
        logged: dict[str, list[str]] = {}
        rewards = code_reward(completions=[solution_strs[i] for i in mine], **columns,
                              log_extra=logged.__setitem__)
        outcomes = logged.get("code_reward/outcome") or [""] * len(mine)
        for i, reward, outcome in zip(mine, rewards, outcomes, strict=True):
            score = 0.0 if reward is None else float(reward)
            out[i] = {"score": score, "acc": float(score == 1.0)}
            if outcome == INFRA_ERROR:
                # verl has no masked reward (and wants one key set per batch): the row scores 0
                # and the log says the sandbox, not the model, failed on it
                log.warning("compute_score_infra_error", data_source=str(data_sources[i]))
    return [r if r is not None else {"score": 0.0, "acc": 0.0} for r in out]


def compute_score(data_source: str, solution_str: str, ground_truth: Any,
                  extra_info: Any = None, **kwargs: Any) -> dict[str, float]:
    """verl's per-sample reward function (``reward.custom_reward_function.name=compute_score``)."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **kwargs)[0]


def _foreign(source: Any, solution: str, ground_truth: Any, info: Mapping[str, Any],
             **kwargs: Any) -> dict[str, float]:
    """A sample of another data source: verl's own default scorer decides."""
    try:
        from verl.utils.reward_score import default_compute_score
    except ImportError as exc:
        raise ConfigError(f"data_source {source!r} is not agentenv's ({DATA_SOURCE!r}) and verl is "
                          "not installed to score it") from exc
    result = default_compute_score(source, solution, ground_truth, dict(info), **kwargs)
    score = float(result.get("score", 0.0)) if isinstance(result, Mapping) else float(result)
    return {"score": score, "acc": float(score == 1.0)}

