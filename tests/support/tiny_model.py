"""A tiny chat model and tokenizer made on the spot, for tests that need a real model offline.

``build_tiny_chat_model(directory)`` trains a byte-level BPE tokenizer (a few hundred tokens)
on a small code corpus, gives it a chat template, and saves it with a randomly initialised
one-layer Llama (about 50 k parameters, seeded) in the Hugging Face layout, so anything that
loads a model directory (``transformers serve DIR``, ``AutoModelForCausalLM``) works without
the Hub. What it generates is noise; what it is for is everything around generation.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIAL = ["<unk>", "<|pad|>", "<|bos|>", "<|eos|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]


def _corpus() -> list[str]:
    from agentenv.tasks.builtin import builtin_tasks

    texts = []
    for task in builtin_tasks():
        texts.append(task.prompt)
        if task.reference_solution:
            texts.append(task.reference_solution)
    return texts * 4


def build_tiny_chat_model(directory: Path, *, vocab_size: int = 400, seed: int = 0) -> Path:
    """Write the tokenizer and model into ``directory`` (created); returns it."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(_corpus(), trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, unk_token="<unk>", pad_token="<|pad|>",
                                        bos_token="<|bos|>", eos_token="<|eos|>")
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(directory)

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=8192, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory
