"""A tiny local chat model for tests that need a real one: built in under a minute, no Hub.

:func:`build_tiny_chat_model` writes a directory that ``AutoTokenizer.from_pretrained`` and
``AutoModelForCausalLM.from_pretrained`` (and so TRL's ``GRPOTrainer(model=path)``) load offline:

- a byte-level BPE tokenizer trained on the spot with ``tokenizers`` on the chats it will see,
  with ChatML special tokens and a chat template that renders tools and tool calls. When TRL is
  installed the template is TRL's own copy of Qwen2.5's, which TRL recognises: it then parses
  ``<tool_call>`` blocks back into ``tool_calls`` (``environment_factory`` needs that);
  otherwise a plain ChatML template written here (enough for ``apply_chat_template``);
- a Qwen2 causal LM of about 40 k parameters (hidden size 32, two layers), trained for under a
  minute on those chats so that it answers a task with a fenced code block (a prompt without
  tools) or a ``submit`` tool call (a multi-turn prompt with the adapter's ``submit`` tool),
  right (the reference solution) or wrong (the task's scripted buggy attempts) in roughly the
  proportions of ``CORRECT_SHARE``, and after a failing call's feedback tries again: sampled at
  temperature 1, a GRPO group's rewards vary.

Deterministic for a given seed and task list. Needs torch, transformers and tokenizers (the
``trl`` extra brings all three). Nothing here is a test; test modules import it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenv.integrations.trl import to_records
from agentenv.policies.scripted import fence
from agentenv.tasks.schema import Task

__all__ = ["CORRECT_SHARE", "MULTI_TURNS", "build_tiny_chat_model", "default_tasks", "submit_tool"]

CORRECT_SHARE = 0.6      # of the training answers, the share that are the reference solution
MULTI_TURNS = 3          # the max_turns of the multi-turn prompts it is trained on
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
                  "<tool_response>", "</tool_response>")


def submit_tool() -> Any:
    """The ``submit`` tool exactly as TRL hands it to the chat template: a bound method."""
    from agentenv.integrations.trl import environment_factory

    return environment_factory(default_tasks())().submit

# ChatML with tools, for machines without TRL (whose Qwen2.5 template is preferred).
_CHATML = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' }}"
    "{%- if message.content %}{{- message.content }}{%- endif %}"
    "{%- for call in message.tool_calls or [] %}"
    "{%- set call = call.function if call.function is defined else call %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + call.name + '\", \"arguments\": ' }}"
    "{{- call.arguments | tojson }}{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def chat_template() -> str:
    """Qwen2.5's template as TRL ships it (so TRL parses tool calls), else plain ChatML."""
    try:
        from trl.chat_template_utils import qwen2_5_chat_template
    except ImportError:
        return _CHATML
    return str(qwen2_5_chat_template)


def default_tasks() -> list[Task]:
    """Short builtin tasks that have a reference solution and scripted buggy attempts."""
    from agentenv.tasks.builtin import builtin_tasks

    names = ("add",)
    by_name = {t.name: t for t in builtin_tasks()}
    return [by_name[n] for n in names]


def _answers(task: Task) -> tuple[str, list[str]]:
    if not task.reference_solution:
        raise ValueError(f"task {task.name!r} has no reference solution to train the tiny model on")
    wrong = [a for a in task.metadata.get("attempts", ()) if isinstance(a, str)]
    if not wrong:  # a plausible wrong answer: the right signature, a wrong body
        wrong = [f"def {task.entry_point}(*args):\n    return None\n"]
    return task.reference_solution.strip("\n"), [w.strip("\n") for w in wrong]


def _assistant(code: str, as_tool: bool) -> dict[str, Any]:
    if as_tool:
        call = {"type": "function", "function": {"name": "submit", "arguments": {"code": code}}}
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    return {"role": "assistant", "content": fence(code)}


def _feedback(task: Task, code: str) -> str:
    """What the multi-turn environment answers a submission of ``code`` with."""
    from agentenv.envs.multiturn import MultiTurnCodingEnv

    env = MultiTurnCodingEnv(tasks=[task], max_turns=MULTI_TURNS)
    env.reset(task_index=0)
    obs, _, _, _ = env.step(code)
    return str(obs["feedback"])


def _examples(tasks: Sequence[Task], rng: random.Random, count: int) -> list[tuple[list[dict[str, Any]], bool]]:
    """(chat whose assistant turns are to be learned, rendered-with-tools) pairs.

    A prompt without tools (single-turn, as ``to_records`` writes it) is answered with a fenced
    block; one with the ``submit`` tool (multi-turn, ``max_turns=MULTI_TURNS``) with a tool
    call, and half of those revise: a wrong call, the environment's real feedback as the tool
    message, then a right call. The model need not guess the format, only whether to be right.
    """
    single = to_records(tasks)
    multi = to_records(tasks, max_turns=MULTI_TURNS)
    feedback: dict[tuple[str, str], str] = {}
    out = []
    for i in range(count):
        task = tasks[i % len(tasks)]
        right, wrong = _answers(task)
        code = right if rng.random() < CORRECT_SHARE else rng.choice(wrong)
        if i % 2:
            out.append(([*single[i % len(tasks)]["prompt"], _assistant(code, False)], False))
            continue
        chat = list(multi[i % len(tasks)]["prompt"])
        if i % 4 == 0:
            bad = rng.choice(wrong)
            if (task.name, bad) not in feedback:
                feedback[(task.name, bad)] = _feedback(task, bad)
            chat += [_assistant(bad, True),
                     {"role": "tool", "name": "submit", "content": feedback[(task.name, bad)]}]
        out.append(([*chat, _assistant(code, True)], True))
    return out


def _train_tokenizer(texts: list[str], template: str, vocab_size: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    backend.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        bos_token=None, unk_token=None, chat_template=template, padding_side="left",
        model_max_length=4096,
    )


def build_tiny_chat_model(out_dir: str | Path, tasks: Sequence[Task] | None = None, *,
                          seed: int = 0, steps: int = 200, batch_size: int = 8,
                          learning_rate: float = 2e-2, vocab_size: int = 1000) -> Path:
    """Build, train and save the tiny chat model into ``out_dir``; return the directory.

    ``tasks`` (default :func:`default_tasks`) are what it learns to answer; each needs a
    reference solution. ``steps`` minibatches of ``batch_size`` chats take 30-60 s on one busy core.
    """
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tasks = list(tasks) if tasks is not None else default_tasks()
    rng = random.Random(seed)
    torch.manual_seed(seed)
    template = chat_template()
    examples = _examples(tasks, rng, count=16 * len(tasks))

    tools = [submit_tool()]

    def render(messages: list[dict[str, Any]], with_tools: bool, **kwargs: Any) -> str:
        return str(tokenizer.apply_chat_template(messages, tools=tools if with_tools else None,
                                                 tokenize=False, **kwargs))

    # The corpus the tokenizer learns its merges from: the chats themselves, rendered plainly.
    corpus = [json.dumps(m) for m, _ in examples] + [
        f"<|im_start|>{m['role']}\n{m.get('content') or ''}<|im_end|>" for ms, _ in examples for m in ms]
    from transformers.utils import get_json_schema

    corpus += [json.dumps(get_json_schema(tools[0]))] * 4
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trained = _train_tokenizer(corpus, template, vocab_size)
    trained.save_pretrained(out)
    config = Qwen2Config(
        vocab_size=len(trained), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=trained.eos_token_id,
        pad_token_id=trained.pad_token_id, use_cache=True,
    )
    config.save_pretrained(out)
    # Train on ids from the tokenizer as the tests load it: with config.json present,
    # AutoTokenizer picks the class for the model type, whose pre-tokenizer differs.
    tokenizer = AutoTokenizer.from_pretrained(out)
    if len(tokenizer) != config.vocab_size:
        raise ValueError(f"the tokenizer loads back with {len(tokenizer)} tokens, not {config.vocab_size}")

    sequences: list[tuple[list[int], int]] = []  # ids, where the answer starts
    for messages, with_tools in examples:
        first_answer = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
        prompt = render(messages[:first_answer], with_tools, add_generation_prompt=True)
        full = render(messages, with_tools)
        if not full.startswith(prompt):
            raise ValueError("the chat template does not render a prompt as a prefix of the chat")
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer(full[len(prompt):].rstrip("\n"), add_special_tokens=False)["input_ids"]
        sequences.append((prompt_ids + answer_ids, len(prompt_ids)))

    longest = max(len(ids) for ids, _ in sequences)
    pad = tokenizer.pad_token_id
    model = Qwen2ForCausalLM(config)
    input_ids = torch.full((len(sequences), longest), pad, dtype=torch.long)
    labels = torch.full_like(input_ids, -100)
    attention = torch.zeros_like(input_ids)
    for row, (ids, start) in enumerate(sequences):  # right-padded; loss on what follows the prompt
        input_ids[row, :len(ids)] = torch.tensor(ids)
        attention[row, :len(ids)] = 1
        labels[row, start:len(ids)] = torch.tensor(ids[start:])
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    generator = torch.Generator().manual_seed(seed)
    model.train()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small runs slower on more threads of a busy machine
    try:
        for _ in range(steps):
            batch = torch.randperm(len(sequences), generator=generator)[:batch_size]
            loss = model(input_ids=input_ids[batch], attention_mask=attention[batch],
                         labels=labels[batch]).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    model.eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = pad

    model.save_pretrained(out)
    (out / "training.json").write_text(json.dumps({
        "tasks": [t.name for t in tasks], "seed": seed, "steps": steps, "final_loss": float(loss.detach()),
        "parameters": sum(p.numel() for p in model.parameters()),
    }))
    return out
