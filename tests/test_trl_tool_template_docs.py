"""The README says what the multi-turn TRL recipe needs of a model (a chat template that renders
tool calls, one TRL can parse them back from), and the refusals it quotes are TRL's own words."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def multi_turn_section() -> str:
    start = README.index("### Multi-turn GRPO (TRL `environment_factory`)")
    return README[start:README.index("```python", start)]


def test_the_readme_states_the_chat_template_requirement() -> None:
    text = " ".join(multi_turn_section().split())
    assert "chat template that renders tool calls" in text
    assert "add_response_schema" in text and "clone_chat_template" in text


def test_the_refusals_the_readme_quotes_are_what_trl_raises() -> None:
    pytest.importorskip("trl")
    from trl import chat_template_utils
    from trl.trainer import grpo_trainer

    source = " ".join((inspect.getsource(grpo_trainer) + inspect.getsource(chat_template_utils)).split())
    quoted = re.findall(r'\("([^"]+)"', " ".join(multi_turn_section().split()))
    quoted += re.findall(r'or "([^"]+)"\)', " ".join(multi_turn_section().split()))
    assert len(quoted) == 2, quoted
    for phrase in quoted:
        assert phrase in source, phrase
    for name in ("add_response_schema", "clone_chat_template"):
        assert hasattr(chat_template_utils, name)
