"""The README's trainer recipes: each README snippet is its recipe file's marked part, verbatim;
the recipes that need no model run as files and do what they say (the TRL recipes train on the
tiny model in test_trl_trainer.py)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
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


# What the README adds after a recipe's snippet (the TRL recipes' build() returns the trainer).
README_TAIL = {"trl_grpo.py": "trainer.train()\n", "trl_multiturn.py": "trainer.train()\n"}


def readme_part(path: Path) -> str:
    """The lines of a recipe between its ``# README >>>`` and ``# <<< README`` markers, dedented."""
    found = re.findall(r"\n[ \t]*# README >>>\n(.*?\n)[ \t]*# <<< README\n",
                       path.read_text(encoding="utf-8"), re.DOTALL)
    assert len(found) == 1, f"{path.name} marks no README part (or more than one)"
    return textwrap.dedent(found[0])


def test_each_readme_snippet_is_its_tested_recipe_verbatim() -> None:
    """The training section's Python blocks are exactly the recipes' marked parts, one each, so
    the code the tests run is the code the README shows."""
    start = README.index("## Train with GRPO (TRL)")
    section = README[start:README.index("\n## ", start + 1)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    expected = {p.name: readme_part(p) + README_TAIL.get(p.name, "") for p in sorted(RECIPES.glob("*.py"))}
    for name, text in expected.items():
        assert text in blocks, f"the README's snippet for {name} differs from the file"
    assert sorted(blocks) == sorted(expected.values())


def test_verl_recipe_writes_parquet_and_a_tool_config_verl_loads(tmp_path: Path) -> None:
    """The printed overrides name files that exist; verl's tool registry builds the tool."""
    verl = pytest.importorskip("verl")
    out = run("verl_grpo.py", "--out", str(tmp_path), "--multi-turn")
    assert "reward.custom_reward_function.name=compute_score" in out
    assert (tmp_path / "train.parquet").stat().st_size > 0
    from verl.tools.tool_registry import initialize_tools_from_config

    tools = initialize_tools_from_config(str(tmp_path / "agentenv_tools.yaml"))
    assert [t.name for t in tools] == ["submit"]
    # verl's own trainer config takes every override (Hydra rejects a key it does not have).
    import os

    from hydra import compose, initialize_config_dir

    overrides = [line.strip().rstrip("\\").strip() for line in out.splitlines()[1:] if "=" in line]
    assert len(overrides) == 8
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        config = compose(config_name="ppo_trainer", overrides=overrides)
    assert config.reward.custom_reward_function.name == "compute_score"
    assert config.reward.custom_reward_function.path.endswith("agentenv/integrations/verl.py")
    assert config.actor_rollout_ref.rollout.multi_turn.enable is True
    assert config.actor_rollout_ref.rollout.multi_turn.max_assistant_turns == 3


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
