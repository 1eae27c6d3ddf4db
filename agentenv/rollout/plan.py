"""What a rollout run is: its settings (``RolloutConfig``) and its episodes (``EpisodeSpec``).

Episodes are planned up front, ``samples`` per task, each with an id and a seed derived only
from the run seed, the task name and the sample number. Ids and seeds therefore do not depend
on task order, concurrency, backend or how often the run was resumed, which is what makes
resume and local-vs-Ray comparisons exact. ``make_env`` builds the environment an episode runs
in, the same way in every backend.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from agentenv.choices import Backend, FeedbackSource, Mode, StopWhen, parse, values
from agentenv.errors import ConfigError
from agentenv.prompts import Prompts
from agentenv.rollout.contract import Env
from agentenv.settings import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_TURNS,
    DEFAULT_POLICY,
    DEFAULT_TIMEOUT,
)
from agentenv.tasks.schema import Task

__all__ = ["MODES", "EpisodeSpec", "RolloutConfig", "config_record", "episode_seed", "make_env",
           "plan_episodes", "run_identity", "task_set_hash"]

MODES = values(Mode)
# Settings that change what an episode is; a resumed run must keep them.
# (The task set itself is guarded by its hash; base_url may change, e.g. a restarted server.)
_IDENTITY = ("policy", "model", "mode", "max_turns", "seed", "timeout", "token_budget",
             "prompts_dir", "feedback_from", "temperature")
# Settings added later: part of the identity only when not at their default, so that runs
# written before they existed still resume.
_IDENTITY_IF_SET: dict[str, Any] = {"stop_when": StopWhen.HIDDEN.value, "tokenizer": None}


@dataclass(frozen=True)
class RolloutConfig:
    """The settings of a rollout run, as recorded in ``config.json``.

    ``tasks``, ``policy``, ``model``, ``temperature`` and ``base_url`` describe what was run
    (the runner is handed the task list and the policy object itself). ``tokenizer`` counts the
    token budget (see :func:`agentenv.tokens.load_tokenizer`; default: ``model``'s tiktoken
    encoding). ``concurrency`` bounds
    the policy calls in flight; ``backend`` is "local" or "ray" (``address`` is the Ray cluster).
    """

    tasks: str = "builtin"
    policy: str = DEFAULT_POLICY
    model: str | None = None
    temperature: float | None = None
    base_url: str | None = None
    mode: str = "multi_turn"
    max_turns: int = DEFAULT_MAX_TURNS
    samples: int = 1
    seed: int = 0
    concurrency: int = DEFAULT_CONCURRENCY
    timeout: float = DEFAULT_TIMEOUT
    token_budget: int | None = None
    prompts_dir: str | None = None
    feedback_from: str = "all"
    stop_when: str = "hidden"
    backend: str = "local"
    address: str | None = None
    tokenizer: str | None = None

    def __post_init__(self) -> None:
        # Checked against the choice sets; stored as the plain string (config.json holds strings).
        for name, choices in (("mode", Mode), ("feedback_from", FeedbackSource),
                              ("stop_when", StopWhen), ("backend", Backend)):
            object.__setattr__(self, name, parse(choices, getattr(self, name), name).value)
        for name in ("max_turns", "samples", "concurrency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        if not self.timeout > 0:
            raise ConfigError(f"timeout must be > 0 seconds, got {self.timeout!r}")
        if self.token_budget is not None and self.token_budget < 1:
            raise ConfigError(f"token_budget must be >= 1 (or unset), got {self.token_budget!r}")
        if self.mode == Mode.SINGLE_STEP and self.max_turns != 1:
            object.__setattr__(self, "max_turns", 1)  # a bandit has exactly one turn

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RolloutConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def identity(self) -> dict[str, Any]:
        """The settings that must match for a resumed run to continue this one."""
        identity = {k: getattr(self, k) for k in _IDENTITY}
        identity.update({k: getattr(self, k) for k, default in _IDENTITY_IF_SET.items()
                         if getattr(self, k) != default})
        return identity


@dataclass(frozen=True)
class EpisodeSpec:
    """One planned episode: which task, which sample, which seed, under which id; ``resume``
    is the JSON record of its partial episode when a resumed run continues one (see
    :mod:`agentenv.rollout.partial`), None when it starts from the beginning."""

    episode_id: str
    task_index: int
    task_name: str
    sample: int
    seed: int
    resume: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeSpec:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


def episode_seed(run_seed: int, task_name: str, sample: int) -> int:
    """A 31-bit seed for one episode, stable across task order, backends and resumes."""
    digest = hashlib.sha256(f"{run_seed}\x00{task_name}\x00{sample}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def plan_episodes(tasks: Sequence[Task], samples: int, seed: int) -> list[EpisodeSpec]:
    """``samples`` episodes per task, task-major (all samples of task 0 first)."""
    seen: dict[str, int] = {}
    for i, task in enumerate(tasks):
        if task.name in seen:
            raise ConfigError(f"task names must be unique within a run: {task.name!r} is task "
                              f"#{seen[task.name]} and #{i}; rename one or dedupe the task set")
        seen[task.name] = i
    return [
        EpisodeSpec(episode_id=f"{task.name}#{s}", task_index=i, task_name=task.name, sample=s,
                    seed=episode_seed(seed, task.name, s))
        for i, task in enumerate(tasks) for s in range(samples)
    ]


def task_set_hash(tasks: Sequence[Task]) -> str:
    """A short hash of the task set (names, prompts and checks), recorded to guard resumes."""
    h = hashlib.sha256()
    for task in tasks:
        h.update(task.name.encode())
        h.update(task.prompt.encode())
        for check in task.checks:
            h.update(str(check).encode())
        h.update(b"\x00")
    return h.hexdigest()[:16]


def config_record(config: RolloutConfig, tasks: Sequence[Task], policy_name: str,
                  policy_model: str | None) -> dict[str, Any]:
    """What ``config.json`` records about a run: its settings, the policy and the task set."""
    return {**config.to_dict(), "policy_name": policy_name,
            "policy_model": policy_model or config.model, "n_tasks": len(tasks),
            "task_set_hash": task_set_hash(tasks)}


def run_identity(config: RolloutConfig, tasks: Sequence[Task]) -> dict[str, Any]:
    """The settings, task set and template versions (``template_ids``: each template's name and
    a hash of its source, packaged or from ``prompts_dir``) a resumed run must share with the one
    it continues: a template edited between a run and its resume is refused, not mixed in."""
    return {**config.identity(), "task_set_hash": task_set_hash(tasks),
            "template_ids": dict(Prompts(prompts_dir=config.prompts_dir).template_ids)}


def make_env(config: RolloutConfig, tasks: Sequence[Task], seed: int) -> Env:
    """The environment one episode runs in: CodingEnv or MultiTurnCodingEnv per ``config.mode``,
    with the same options in both (prompts, tokenizer, budget, feedback source)."""
    options: dict[str, Any] = {"token_budget": config.token_budget, "feedback_from": config.feedback_from,
                               "stop_when": config.stop_when}
    if config.prompts_dir is not None:
        options["prompts_dir"] = config.prompts_dir
    if config.tokenizer is not None:  # the tokenizer the run was given, loaded once per process
        from agentenv.tokens import load_tokenizer

        options["tokenizer"] = load_tokenizer(config.tokenizer)
    elif config.model is not None:  # count the budget with the policy model's own tokenizer
        options["tokenizer"] = config.model
    if config.mode == Mode.SINGLE_STEP:
        from agentenv.envs.coding import CodingEnv

        return CodingEnv(tasks=tasks, timeout=config.timeout, seed=seed, **options)
    from agentenv.envs.multiturn import MultiTurnCodingEnv

    return MultiTurnCodingEnv(tasks=tasks, max_turns=config.max_turns, seed=seed,
                              timeout=config.timeout, **options)
