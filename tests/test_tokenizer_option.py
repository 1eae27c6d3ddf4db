"""Token budgets counted with the model's own tokenizer: ``--tokenizer PATH_OR_NAME`` loads a local
Hugging Face tokenizer offline, and a chat is counted through its chat template, as a server
that applies that template counts ``prompt_tokens``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentenv.cli import main
from agentenv.envs.multiturn import MultiTurnCodingEnv
from agentenv.errors import ConfigError
from agentenv.tasks.builtin import builtin_tasks
from agentenv.tokens import TokenCounter, load_tokenizer

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

# A Llama-3-like template: a BOS, a fixed header in the system turn, role headers around every
# message. Its overhead is far from OpenAI's 3 tokens a message.
TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' %}"
    "{{- '<|start|>system\\nKnowledge cutoff: December 2023\\nToday: 26 July 2024\\n\\n' + message.content + '<|end|>\\n' }}"
    "{%- else %}"
    "{{- '<|start|>' + message.role + '\\n' + message.content + '<|end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start|>assistant\\n' }}{%- endif %}"
)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small byte-level BPE tokenizer with that template, saved as a Hugging Face directory.
    Like most, it adds its BOS to a text encoded on its own; the template writes the BOS itself."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = [t.prompt for t in builtin_tasks()] + [t.reference_solution or "" for t in builtin_tasks()]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    specials = ["<s>", "<|start|>", "<|end|>"]
    backend.train_from_iterator(corpus, trainer=trainers.BpeTrainer(
        vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", backend.token_to_id("<s>"))])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="<|end|>",
                                        chat_template=TEMPLATE)
    out = tmp_path_factory.mktemp("tokenizer")
    tokenizer.save_pretrained(out)
    return out


def served(tokenizer: Any, messages: list[dict[str, str]]) -> int:
    """The prompt tokens a server applying the tokenizer's template sees for ``messages``."""
    ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return len(ids)


CHAT = [{"role": "system", "content": "You are a careful Python programmer."},
        {"role": "user", "content": "Write add(a, b) that returns the sum."},
        {"role": "assistant", "content": "```python\ndef add(a, b):\n    return a - b\n```"},
        {"role": "user", "content": "1 of 3 checks failed: add(1, 2) == 3 (got -1)."}]


def test_a_chat_is_counted_through_the_tokenizers_chat_template(tokenizer_dir: Path) -> None:
    tokenizer = load_tokenizer(str(tokenizer_dir))
    counter = TokenCounter(tokenizer)
    assert counter.templated
    for n in (2, 4):  # the opening request, and one after a reply and its feedback
        assert counter.count_chat(CHAT[:n]) == served(tokenizer, CHAT[:n])
        # the per-message costs the conversation adds up give the same total
        assert sum(counter.count_message(m["content"], m["role"]) for m in CHAT[:n]) \
            + counter.reply_priming == served(tokenizer, CHAT[:n])


def test_a_budget_below_the_served_prompt_is_refused_though_openai_counting_fits_it(
        tokenizer_dir: Path) -> None:
    """The bug: the prompt was counted OpenAI's way, so a budget the served prompt overran let it through."""
    tokenizer = load_tokenizer(str(tokenizer_dir))
    task = builtin_tasks()[0]
    env = MultiTurnCodingEnv(tasks=[task], tokenizer=tokenizer)
    env.reset(task_index=0)
    opening = env.trajectory.opening
    true_count = served(tokenizer, opening)
    openai_count = TokenCounter(tokenizer, chat_template=False).count_chat(opening)
    assert openai_count < true_count  # the template's header and role lines cost more
    with pytest.raises(ConfigError, match="leaves no room"):
        MultiTurnCodingEnv(tasks=[task], tokenizer=tokenizer, token_budget=true_count).reset(task_index=0)
    roomy = MultiTurnCodingEnv(tasks=[task], tokenizer=tokenizer, token_budget=true_count + 1)
    roomy.reset(task_index=0)


def test_names_that_cannot_be_loaded_offline_are_a_clear_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    with pytest.raises(ConfigError, match="no such directory"):
        load_tokenizer(str(tmp_path / "missing"))
    (tmp_path / "file.json").write_text("{}")
    with pytest.raises(ConfigError, match="not a directory"):
        load_tokenizer(str(tmp_path / "file.json"))
    with pytest.raises(ConfigError, match=r"cannot be loaded offline.*local-dir"):
        load_tokenizer("nobody-here/no-such-model")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="cannot be loaded offline"):
        load_tokenizer(str(tmp_path / "empty"))


def test_a_tiktoken_name_still_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTENV_OFFLINE", "1")
    assert TokenCounter(load_tokenizer("cl100k_base")).count("hello world") == 2


def test_run_counts_its_budget_with_the_tokenizer_option(
        tokenizer_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tokenizer = load_tokenizer(str(tokenizer_dir))
    out = tmp_path / "run"
    code = main(["run", "--tokenizer", str(tokenizer_dir), "--limit", "1", "--token-budget", "100000",
                 "--max-turns", "2", "--no-progress", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    record = json.loads((out / "trajectories.jsonl").read_text().splitlines()[0])
    assert record["metadata"]["tokenizer"] == tokenizer.name_or_path
    first = record["turns"][0]
    # the first turn's total: the opening request as served, then the reply's content tokens
    reply_tokens = first["action_tokens"]
    assert first["cumulative_tokens"] - reply_tokens - first["observation_tokens"] == served(tokenizer, record["opening"])
    assert json.loads((out / "config.json").read_text())["tokenizer"] == str(tokenizer_dir)


def test_run_with_a_tokenizer_that_cannot_load_exits_2_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--tokenizer", str(tmp_path / "nowhere"), "--limit", "1", "--no-progress",
                 "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "--tokenizer" in err and "no such directory" in err
    assert not (tmp_path / "run" / "trajectories.jsonl").exists()
