"""The choice sets are defined once (agentenv.choices) and used by the checks and the CLI."""

from __future__ import annotations

import typing

import click
import pytest

from agentenv import choices
from agentenv.choices import Backend, FeedbackSource, Mode, StepReward, StopWhen, parse, values
from agentenv.cli import app
from agentenv.errors import ConfigError
from agentenv.records import OUTCOMES, STOP_REASONS, Outcome
from agentenv.rollout.plan import RolloutConfig


def test_a_member_is_its_string() -> None:
    assert Mode.SINGLE_STEP == "single_step"
    assert str(StepReward.DELTA) == f"{StepReward.DELTA}" == "delta"
    assert {FeedbackSource.ALL: 1}.get("all") == 1
    assert parse(StopWhen, "visible", "stop_when") is StopWhen.VISIBLE


def test_parse_names_the_setting_and_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"stop_when must be one of hidden, visible, got 'never'"):
        parse(StopWhen, "never", "stop_when")


def test_records_derive_from_the_enums() -> None:
    assert values(choices.Outcome) == OUTCOMES == typing.get_args(Outcome)
    assert values(choices.StopReason) == STOP_REASONS


def test_config_accepts_strings_and_members_and_stores_strings() -> None:
    a = RolloutConfig(mode="single_step", backend=Backend.LOCAL, stop_when=StopWhen.VISIBLE)
    assert type(a.backend) is str and type(a.stop_when) is str
    assert a.to_dict()["stop_when"] == "visible"
    with pytest.raises(ConfigError, match="backend must be one of local, ray"):
        RolloutConfig(backend="k8s")


def _choices(command: str, option: str) -> tuple[str, ...] | None:
    """The choices the command line offers for ``option`` of ``command``, read from its click params."""
    param = next(p for p in app.commands[command].params if option in p.opts)
    return tuple(param.type.choices) if isinstance(param.type, click.Choice) else None


@pytest.mark.parametrize(("option", "enum"), [("--backend", Backend), ("--feedback-from", FeedbackSource),
                                              ("--stop-when", StopWhen)])
def test_cli_choices_come_from_the_enums(option: str, enum: type[choices.StrEnum]) -> None:
    assert _choices("run", option) == values(enum)


def test_task_choices_derive_from_the_enums() -> None:
    from agentenv.tasks.schema import DIFFICULTIES, EQUALITIES

    assert DIFFICULTIES == values(choices.Difficulty) == ("easy", "medium", "hard")
    assert EQUALITIES == values(choices.Equality) == ("python", "strict")


def test_isolation_levels_are_one_enum_for_the_sandbox_and_the_cli() -> None:
    from agentenv.sandbox import ISOLATION_LEVELS

    assert ISOLATION_LEVELS == values(choices.IsolationLevel) == ("rlimits", "strict")
    assert _choices("check", "--isolation") == ISOLATION_LEVELS


def test_run_tests_names_the_enums_choices_for_a_bad_level_or_equality() -> None:
    from agentenv.errors import ConfigError
    from agentenv.grading import run_tests

    with pytest.raises(ConfigError, match=r"rlimits.*strict"):
        run_tests("x = 1", [], isolation="hermetic")
    with pytest.raises(ConfigError, match=r"python.*strict"):
        run_tests("x = 1", [], equality="exact")


def test_every_stop_reason_the_code_sets_is_in_the_choice_set() -> None:
    from agentenv.envs.conversation import STOP_REASON_OF
    from agentenv.errors import PolicyCallError, SandboxError
    from agentenv.rollout.partial import partial_stop_reason

    errors = {PolicyCallError("x", context_length=c).stop_reason for c in (True, False)}
    partial = {partial_stop_reason(e) for e in (PolicyCallError("x", transient=True), SandboxError("x"))}
    assert (set(STOP_REASON_OF.values()) | errors | partial | {"single_step", "infra_error"}
            == set(values(choices.StopReason)))
