"""The Gymnasium adapter: registered ids, Gymnasium's own checker, seeding, spaces and episodes."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from typing import Any

import pytest

gymnasium = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import agentenv.gym  # noqa: E402
from agentenv.errors import ConfigError, MissingDependency  # noqa: E402
from agentenv.gym import ENV_IDS, UnicodeText  # noqa: E402
from agentenv.tasks.schema import StdioCase, Task  # noqa: E402
from agentenv.toy import binary_search_policy  # noqa: E402

ADD = Task(
    name="add", prompt="Write `add(a, b)` returning the sum.\nExample: add(2, 3) == 5 — ünïcode «ok».",
    entry_point="add", checks=("assert add(2, 3) == 5", "assert add(-1, 1) == 0"),
    difficulty="easy",
)
NEG = Task(
    name="negate", prompt="Write `negate(x)` returning -x.", entry_point="negate",
    checks=("assert negate(2) == -2", "assert negate(-5) == 5", "assert negate(0) == 0"),
)
SHOUT = Task(
    name="shout", prompt="Read a line from stdin and print it upper-cased.", entry_point="main",
    checks=(StdioCase(stdin="hi\n", expected_stdout="HI\n"),),
)
TASKS = [ADD, NEG, SHOUT]
SOLUTIONS = {
    "add": "```python\ndef add(a, b):\n    return a + b\n```",
    "negate": "```python\ndef negate(x):\n    return -x\n```",
    "shout": "```python\nprint(input().upper())\n```",
}
WRONG_NEG = "```python\ndef negate(x):\n    return x\n```"  # passes only negate(0) == 0


def make(env_id: str, **kwargs: Any) -> Any:
    if env_id != "agentenv/NumberGuess-v0":
        kwargs.setdefault("tasks", TASKS)
    return gymnasium.make(env_id, **kwargs)


@pytest.mark.parametrize("env_id", list(ENV_IDS))
def test_gymnasium_check_env_passes_without_warnings(env_id: str) -> None:
    """Gymnasium's own env_checker accepts every registered id and has nothing to warn about."""
    env = make(env_id)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    messages = [str(w.message) for w in caught if "gymnasium" in w.filename or "WARN" in str(w.message)]
    assert messages == []
    env.close()


def test_the_module_prefixed_id_imports_the_adapter_in_a_fresh_interpreter() -> None:
    """gymnasium.make("agentenv.gym:agentenv/Coding-v0") works without importing agentenv.gym first."""
    code = (
        "import gymnasium\n"
        "env = gymnasium.make('agentenv.gym:agentenv/Coding-v0')\n"
        "obs, info = env.reset(seed=0)\n"
        "assert obs in env.observation_space\n"
        "print(sorted(obs))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "['entry_point', 'prompt', 'task_name']"


def test_importing_twice_does_not_reregister() -> None:
    """register_envs is idempotent: a second call leaves the registry as it was."""
    before = {k: gymnasium.registry[k] for k in ENV_IDS}
    agentenv.gym.register_envs()
    assert {k: gymnasium.registry[k] for k in ENV_IDS} == before


def test_without_gymnasium_the_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Importing agentenv.gym with gymnasium missing says `pip install "agentenv-coding[gym]"`."""
    monkeypatch.setitem(sys.modules, "gymnasium", None)
    monkeypatch.delitem(sys.modules, "agentenv.gym")
    with pytest.raises(MissingDependency, match=r'pip install "agentenv-coding\[gym\]", or pip install -e "\.\[gym\]"') as err:
        importlib.import_module("agentenv.gym")
    assert isinstance(err.value, ImportError)


# -- UnicodeText -----------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_unicode_text_contains_any_valid_string_within_its_length(text: str) -> None:
    """Punctuation, whitespace, newlines and any Unicode are members; only the length limits."""
    space = UnicodeText(300)
    assert text in space
    assert text not in UnicodeText(max(0, len(text) - 1)) or len(text) == 0


def test_unicode_text_rejects_non_strings_and_lone_surrogates() -> None:
    """Bytes, ints and strings that cannot be encoded as UTF-8 are not text."""
    space = UnicodeText(10)
    assert b"abc" not in space and 3 not in space
    assert "\ud800" not in space
    assert "" not in UnicodeText(10, min_length=1)


def test_unicode_text_samples_are_members_and_reproducible_with_a_seed() -> None:
    """Samples lie in the space, include non-alphanumerics, and repeat under the same seed."""
    space = UnicodeText(1000, seed=7)
    first = [space.sample() for _ in range(50)]
    assert all(s in space for s in first)
    assert any(not s.isalnum() for s in first if s)
    space.seed(7)
    assert [space.sample() for _ in range(50)] == first
    assert len(space.sample(mask=(5, None))) == 5


# -- NumberGuess-v0 ----------------------------------------------------------------------------

def test_number_guess_binary_search_terminates_with_the_range_collapsed_on_the_secret() -> None:
    """Binary search hits within 7 guesses; the terminal observation is {secret, secret}."""
    env = gymnasium.make("agentenv/NumberGuess-v0")
    for seed in range(20):
        obs, info = env.reset(seed=seed)
        assert obs == {"low": 1, "high": 100} and info == {}
        for _ in range(7):
            obs, reward, terminated, truncated, info = env.step(binary_search_policy(obs))
            assert obs in env.observation_space
            if terminated:
                break
        assert (reward, terminated, truncated) == (1.0, True, False)
        assert obs == {"low": info["secret"], "high": info["secret"]} and info["steps"] <= 7


def test_number_guess_same_seed_same_secret_and_max_steps_truncates() -> None:
    """reset(seed=s) fixes the secret; the native max_steps shows up as truncated."""
    env = gymnasium.make("agentenv/NumberGuess-v0", low=1, high=1000, max_steps=2)

    def secret(seed: int) -> int:
        obs, _ = env.reset(seed=seed)
        while True:
            obs, _, terminated, truncated, info = env.step(binary_search_policy(obs))
            if terminated or truncated:
                return int(info["secret"])

    assert secret(5) == secret(5)
    assert len({secret(s) for s in range(10)}) > 1
    obs, _ = env.reset(seed=5)
    obs, _, terminated, truncated, _ = env.step(obs["low"])  # a secret of 1 or 2 is a 1-in-500 draw
    assert (terminated, truncated) == (False, False)
    obs, reward, terminated, truncated, info = env.step(obs["low"])
    assert (reward, terminated, truncated) == (0.0, False, True) and info["secret"] > 2


def test_number_guess_takes_numpy_ints_and_rejects_non_integers() -> None:
    """A sampled action (a numpy integer) is a valid guess; a float is refused with ConfigError."""
    env = gymnasium.make("agentenv/NumberGuess-v0")
    env.reset(seed=0)
    env.step(env.action_space.sample())
    with pytest.raises(ConfigError, match="int guess"):
        env.unwrapped.step(3.5)


# -- Coding-v0 ---------------------------------------------------------------------------------

def test_coding_episode_is_one_step_and_scores_the_hidden_checks() -> None:
    """A correct answer earns 1.0, a partial one its fraction; both terminate after one step."""
    env = make("agentenv/Coding-v0")
    obs, info = env.reset(options={"task_name": "negate"})
    assert obs == {"prompt": NEG.prompt, "entry_point": "negate", "task_name": "negate"}
    assert info["task_name"] == "negate"
    assert [m["role"] for m in info["messages"]] == ["system", "user"]
    assert NEG.prompt in info["messages"][-1]["content"]
    obs2, reward, terminated, truncated, info = env.step(SOLUTIONS["negate"])
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert obs2 == obs and obs2 in env.observation_space
    assert info["passed"] == info["total"] == 3 and "exec_seconds" not in info
    env.reset(options={"task_name": "negate"})
    _, reward, terminated, _, info = env.step(WRONG_NEG)
    assert reward == pytest.approx(1 / 3) and terminated and info["outcome"] == "wrong_answer"


def test_coding_observation_keeps_non_ascii_prompts_inside_the_space() -> None:
    """The prompt's em dash, accents and guillemets are in the observation space."""
    env = make("agentenv/Coding-v0")
    obs, _ = env.reset(options={"task_index": 0})
    assert "—" in obs["prompt"] and obs in env.observation_space


def test_coding_same_seed_poses_the_same_task_and_seeds_spread_over_tasks() -> None:
    """reset(seed=s) is reproducible, and different seeds reach every task."""
    env = make("agentenv/Coding-v0")
    names = [env.reset(seed=s)[0]["task_name"] for s in range(30)]
    assert names == [env.reset(seed=s)[0]["task_name"] for s in range(30)]
    assert set(names) == {t.name for t in TASKS}
    seeded = make("agentenv/Coding-v0", seed=4)
    assert seeded.reset()[0] == env.reset(seed=4)[0]


def test_coding_reset_options_select_tasks_and_typos_get_a_suggestion() -> None:
    """task_index and task_name pick a task; an unknown name or option is a ConfigError."""
    env = make("agentenv/Coding-v0")
    assert env.reset(options={"task_index": 2})[0]["task_name"] == "shout"
    with pytest.raises(ConfigError, match="Did you mean 'negate'"):
        env.reset(options={"task_name": "negat"})
    with pytest.raises(ConfigError, match="unknown reset option"):
        env.reset(options={"task": 1})


def test_coding_tasks_can_be_named_and_text_limits_are_enforced() -> None:
    """tasks='builtin' loads a task set; a prompt longer than max_text_length is refused up front."""
    env = gymnasium.make("agentenv/Coding-v0", tasks="builtin")
    obs, _ = env.reset(seed=0)
    assert obs in env.observation_space
    with pytest.raises(ConfigError, match="max_text_length"):
        gymnasium.make("agentenv/Coding-v0", tasks=TASKS, max_text_length=10)


def test_coding_step_after_the_episode_ended_needs_a_reset() -> None:
    """A second step in a single-step episode is an error that says to reset."""
    env = make("agentenv/Coding-v0", disable_env_checker=True).unwrapped
    env.reset(seed=0)
    env.step("pass")
    with pytest.raises(Exception, match="reset"):
        env.step("pass")


def test_coding_render_ansi_shows_the_task_and_the_result() -> None:
    """render_mode='ansi' returns the task and, after a step, the checks passed."""
    env = make("agentenv/Coding-v0", render_mode="ansi")
    env.reset(options={"task_name": "add"})
    assert "task add" in env.render()
    env.step(SOLUTIONS["add"])
    assert "passed 2/2" in env.render()


def test_coding_envs_vectorise_with_gymnasium_make_vec() -> None:
    """A sync vector env batches text observations as tuples and steps every copy."""
    envs = gymnasium.make_vec("agentenv/Coding-v0", num_envs=2, vectorization_mode="sync",
                              tasks=TASKS)
    obs, _ = envs.reset(seed=0)
    assert len(obs["task_name"]) == 2
    actions = [SOLUTIONS[name] for name in obs["task_name"]]
    _, rewards, terminated, truncated, _ = envs.step(actions)
    assert list(rewards) == [1.0, 1.0] and all(terminated) and not any(truncated)
    envs.close()


# -- MultiTurnCoding-v0 ------------------------------------------------------------------------

def test_multiturn_revises_after_feedback_and_terminates_when_solved() -> None:
    """A wrong first answer gets feedback in the observation; the fix terminates the episode."""
    env = make("agentenv/MultiTurnCoding-v0", max_turns=3)
    obs, info = env.reset(options={"task_name": "negate"})
    assert (obs["turn"], obs["turns_left"], obs["feedback"]) == (1, 3, "")
    assert [m["role"] for m in info["messages"]] == ["system", "user"]
    assert NEG.prompt.strip() in info["messages"][-1]["content"]
    obs, reward, terminated, truncated, info = env.step(WRONG_NEG)
    assert (terminated, truncated) == (False, False) and reward == pytest.approx(1 / 3)
    assert (obs["turn"], obs["turns_left"]) == (2, 2) and obs in env.observation_space
    assert "negate(2)" in obs["feedback"]
    assert info["messages"][-2] == {"role": "assistant", "content": WRONG_NEG}
    assert info["messages"][-1] == {"role": "user", "content": obs["feedback"]}
    obs, reward, terminated, truncated, info = env.step(SOLUTIONS["negate"])
    assert (reward, terminated, truncated) == (pytest.approx(2 / 3), True, False)  # the delta: 1/3 -> 1
    assert info["stop_reason"] == "solved" and (obs["turn"], obs["turns_left"]) == (2, 0)
    assert obs in env.observation_space


def test_multiturn_truncates_when_turns_run_out() -> None:
    """Wrong answers until max_turns end the episode as truncated, not terminated."""
    env = make("agentenv/MultiTurnCoding-v0", max_turns=2)
    env.reset(options={"task_name": "negate"})
    env.step(WRONG_NEG)
    obs, _, terminated, truncated, info = env.step(WRONG_NEG)
    assert (terminated, truncated) == (False, True) and info["stop_reason"] == "max_turns"
    assert obs["turn"] == 2 and obs in env.observation_space


def test_multiturn_token_budget_truncates_with_its_own_stop_reason() -> None:
    """A tight token budget ends the episode as truncated with stop_reason 'token_budget'."""
    env = make("agentenv/MultiTurnCoding-v0", max_turns=5, token_budget=140)
    _, info = env.reset(options={"task_name": "negate"})
    assert info["tokens_left"] is not None
    for _ in range(5):
        obs, _, terminated, truncated, info = env.step(WRONG_NEG)
        assert obs in env.observation_space
        if terminated or truncated:
            break
    assert (terminated, truncated, info["stop_reason"]) == (False, True, "token_budget")


def test_multiturn_infos_never_share_message_lists() -> None:
    """Each call returns its own messages list, so a caller may keep and edit it."""
    env = make("agentenv/MultiTurnCoding-v0")
    _, first = env.reset(options={"task_name": "negate"})
    _, _, _, _, second = env.step(WRONG_NEG)
    opening = len(first["messages"])
    first["messages"].append({"role": "user", "content": "edited"})
    assert len(second["messages"]) == opening + 2  # + the answer and its feedback
    assert all(m["content"] != "edited" for m in second["messages"])
