"""The README's trainer recipes that need no model run as files and do what they say (the TRL
recipes train on the tiny model in test_trl_trainer.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECIPES = ROOT / "examples" / "recipes"
README = (ROOT / "README.md").read_text(encoding="utf-8")


def run(name: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(RECIPES / name), *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_every_recipe_is_named_in_the_readme() -> None:
    """Each examples/recipes/*.py appears in the README's training section."""
    for path in sorted(RECIPES.glob("*.py")):
        assert f"examples/recipes/{path.name}" in README, path.name


def test_verl_recipe_writes_parquet_and_a_tool_config_verl_loads(tmp_path: Path) -> None:
    """The printed overrides name files that exist; verl's tool registry builds the tool."""
    pytest.importorskip("verl")
    out = run("verl_grpo.py", "--out", str(tmp_path), "--multi-turn")
    assert "reward.custom_reward_function.name=compute_score" in out
    assert (tmp_path / "train.parquet").stat().st_size > 0
    from verl.tools.tool_registry import initialize_tools_from_config

    tools = initialize_tools_from_config(str(tmp_path / "agentenv_tools.yaml"))
    assert [t.name for t in tools] == ["submit"]


def test_skyrl_recipe_revises_and_solves() -> None:
    """The scripted policy fails once, reads the feedback, and the env reports it solved."""
    pytest.importorskip("skyrl_gym")
    out = run("skyrl_env.py")
    assert "done True outcome pass" in out and "'solved': 1.0" in out


def test_verifiers_recipe_scores_a_reference_with_the_rubric() -> None:
    """verifiers builds the env by id and the rubric gives the reference 1.00."""
    pytest.importorskip("verifiers.v1")
    out = run("verifiers_eval.py")
    assert "CodingVerifiersEnv over" in out and "tests_passed 1.00" in out
