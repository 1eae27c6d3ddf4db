"""Every closed set of choices, defined once: the CLI's ``choices=`` and the
code that checks a setting both read them from here.

Each set is a :class:`StrEnum`: a member *is* its string (``Mode.MULTI_TURN == "multi_turn"``,
``str(member)`` and ``f"{member}"`` give the value), so users keep passing plain strings and
records keep holding plain strings. :func:`parse` turns a user's value into a member, or raises
the ConfigError that lists the choices. This module is at the bottom of the layers: it imports
nothing of agentenv but the error tree.
"""

from __future__ import annotations

import enum
from typing import Any, TypeVar

from agentenv.errors import ConfigError

__all__ = [
    "Backend",
    "Baseline",
    "CreditScheme",
    "Difficulty",
    "Equality",
    "ExportFormat",
    "FeedbackSource",
    "IsolationLevel",
    "Mode",
    "Outcome",
    "PolicyKind",
    "ScaleRewards",
    "StdoutRule",
    "StepReward",
    "StopReason",
    "StopWhen",
    "StrEnum",
    "Transport",
    "parse",
    "values",
]


class StrEnum(str, enum.Enum):
    """``enum.StrEnum`` for Python 3.10 too: members are strings and print as their value."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


E = TypeVar("E", bound=StrEnum)


def values(choices: type[StrEnum]) -> tuple[str, ...]:
    """The string values of a choice set, in definition order (for ``argparse choices=``)."""
    return tuple(str(member.value) for member in choices)


def parse(choices: type[E], value: Any, name: str) -> E:
    """``value`` (a member or its string) as a member of ``choices``; ConfigError naming
    ``name`` and the allowed values otherwise."""
    try:
        return choices(value)
    except ValueError:
        raise ConfigError(f"{name} must be one of {', '.join(values(choices))}, got {value!r}") from None


class Mode(StrEnum):
    """What an episode is: a conversation of up to ``max_turns`` turns, or one turn (a bandit)."""

    MULTI_TURN = "multi_turn"
    SINGLE_STEP = "single_step"


class Difficulty(StrEnum):
    """agentenv's three difficulty levels (each benchmark's labels map onto them)."""

    EASY = "easy"
    MEDIUM = "medium"
    HARD = "hard"


class Equality(StrEnum):
    """How checks compare values: Python's ``==``, or the same exact type all the way down."""

    PYTHON = "python"
    STRICT = "strict"


class StdoutRule(StrEnum):
    """How a stdio case's output is compared (see :mod:`agentenv.grading.stdout`): agentenv's own
    rule, or the rule of the benchmark a task was loaded from."""

    TOKENS = "tokens"
    LIVECODEBENCH = "livecodebench"
    APPS = "apps"
    CODE_CONTESTS = "code_contests"


class IsolationLevel(StrEnum):
    """How the sandbox isolates a run, weakest first (see :mod:`agentenv.sandbox._isolation`).

    ``rlimits``: a plain process under resource limits (the fallback where bubblewrap cannot
    run); ``strict``: bubblewrap with new namespaces, no network, a hermetic file system.
    """

    RLIMITS = "rlimits"
    STRICT = "strict"


class Backend(StrEnum):
    """Where a rollout run's episodes run."""

    LOCAL = "local"
    RAY = "ray"


class FeedbackSource(StrEnum):
    """Which failing checks the feedback shows: every hidden one, or the visible run alone."""

    ALL = "all"
    VISIBLE = "visible"


class StopWhen(StrEnum):
    """Which checks end an episode when they pass (the reward always comes from the hidden)."""

    HIDDEN = "hidden"
    VISIBLE = "visible"


class StepReward(StrEnum):
    """How an environment pays the step reward (``delta`` sums to the final score)."""

    DELTA = "delta"
    FINAL = "final"
    ABSOLUTE = "absolute"


class CreditScheme(StrEnum):
    """How a trajectory's reward is assigned to its turns (see :mod:`agentenv.credit`)."""

    FINAL_ONLY = "final_only"
    PER_TURN = "per_turn"
    IMPROVEMENT = "improvement"
    DISCOUNTED = "discounted"


class ScaleRewards(StrEnum):
    """TRL's ``scale_rewards``: what the group-relative advantage is divided by."""

    GROUP = "group"
    BATCH = "batch"
    NONE = "none"


class Baseline(StrEnum):
    """The baseline a group-relative advantage subtracts: the group mean or leave-one-out."""

    MEAN = "mean"
    LOO = "loo"


class Outcome(StrEnum):
    """What one graded submission came to, worst to best."""

    NO_CODE = "no_code"
    SYNTAX_ERROR = "syntax_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    WRONG_ANSWER = "wrong_answer"
    PASS = "pass"


class StopReason(StrEnum):
    """Why an episode ended, or (the last two) why it stopped before its end: a partial
    episode, kept with its graded turns and continued by a resumed run."""

    SOLVED = "solved"
    MAX_TURNS = "max_turns"
    TOKEN_BUDGET = "token_budget"
    SINGLE_STEP = "single_step"
    CONTEXT_LENGTH = "context_length"
    POLICY_ERROR = "policy_error"
    SERVER_UNAVAILABLE = "server_unavailable"  # the model server stopped answering (partial)
    INTERRUPTED = "interrupted"                # a sandbox fault or a cancelled run (partial)
    INFRA_ERROR = "infra_error"  # a single-step episode the sandbox could not grade (no score)


class PolicyKind(StrEnum):
    """The policies :func:`agentenv.policies.make_policy` builds by name."""

    MOCK = "mock"
    REFERENCE = "reference"
    SCRIPTED = "scripted"
    READER = "reader"
    OPENAI = "openai"


class Transport(StrEnum):
    """How the OpenAI-compatible policy talks to its server: one HTTP path, aiohttp ("auto"
    names it too). The SDK transport ("sdk") is gone: sync and async calls share one client."""

    AUTO = "auto"
    AIOHTTP = "aiohttp"


class ExportFormat(StrEnum):
    """The file formats of the trainer export."""

    JSONL = "jsonl"
    PARQUET = "parquet"
