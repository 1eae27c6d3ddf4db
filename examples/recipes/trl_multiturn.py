"""Multi-turn GRPO with TRL: the model submits code through a tool, reads which tests failed,
and revises, up to ``max_turns`` times; the episode's return is the reward.

    python examples/recipes/trl_multiturn.py --model Qwen/Qwen2.5-Coder-0.5B-Instruct --max-turns 3

Needs ``pip install -e ".[trl]"`` in a clone (published: ``pip install "agentenv-coding[trl]"``) and a model whose chat template renders tool calls and
that TRL can parse them back from (Qwen2.5/Qwen3, Llama 3.1/3.2, GPT-OSS, Gemma 4, ...; see the
README's multi-turn section); others are refused when the trainer is built. Runs on a GPU (bf16
where supported) and on a CPU-only machine alike (``device_args``). The part of ``build`` between the ``README`` markers is
the README's snippet, character for character (tests/test_recipes.py checks it); the test suite
runs ``build`` for two steps on a tiny local model.
"""

from __future__ import annotations

import argparse
from typing import Any

MODEL = "Qwen/Qwen2.5-Coder-0.5B-Instruct"


def build(model: str = MODEL, tasks: Any = "builtin", max_turns: int = 3,
          **overrides: Any) -> Any:
    """The trainer of the README's recipe; ``overrides`` are more ``GRPOConfig`` fields."""
    from agentenv import load_tasks

    tasks = load_tasks(tasks) if isinstance(tasks, str) else list(tasks)
    # README >>>
    from trl import GRPOConfig, GRPOTrainer

    from agentenv.integrations.trl import (
        PrefetchGrading,
        device_args,
        environment_factory,
        to_hf_dataset,
    )

    class Trainer(PrefetchGrading, GRPOTrainer):  # grades a batch's submissions at once
        pass

    trainer = Trainer(
        model=model,
        train_dataset=to_hf_dataset(tasks, max_turns=max_turns),  # prompts offer max_turns tries
        # the submit(code) tool; the reward is get_reward(), the episode's final score
        environment_factory=environment_factory(tasks, max_turns=max_turns),
        args=GRPOConfig(**{
            "output_dir": "grpo-multiturn",
            "num_generations": 8,
            "per_device_train_batch_size": 8,
            "max_completion_length": 1024,     # every turn, tool messages included
            "max_tool_calling_iterations": max_turns,
            "learning_rate": 1e-6,
            "remove_unused_columns": False,    # reset() reads the row's task_name
            **device_args(),                   # bf16 on a GPU that has it, else fp32 (CPU: use_cpu)
            **overrides,                       # e.g. {"max_steps": 100}
        }),
    )
    # <<< README
    return trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--tasks", default="builtin", help="a task-set name or a JSONL path")
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--max-steps", type=int, default=-1)
    args = parser.parse_args()
    build(args.model, args.tasks, args.max_turns, max_steps=args.max_steps, report_to="none").train()


if __name__ == "__main__":
    main()
