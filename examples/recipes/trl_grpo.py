"""Single-turn GRPO with TRL: each completion is scored by the hidden tests in the sandbox.

    python examples/recipes/trl_grpo.py --model Qwen/Qwen2.5-Coder-0.5B-Instruct --tasks mbpp

Needs ``pip install -e ".[trl]"`` in a clone (published: ``pip install "agentenv-coding[trl]"``).
Runs on a GPU (bf16 where supported) and on a CPU-only machine alike (``device_args``). The
part of ``build`` between the ``README`` markers is the README's snippet, character for
character (tests/test_recipes.py checks it); the test suite runs ``build`` for two steps on a
tiny local model.
"""

from __future__ import annotations

import argparse
from typing import Any

MODEL = "Qwen/Qwen2.5-Coder-0.5B-Instruct"


def build(model: str = MODEL, tasks: Any = "builtin", **overrides: Any) -> Any:
    """The trainer of the README's recipe; ``overrides`` are more ``GRPOConfig`` fields."""
    from agentenv import load_tasks

    tasks = load_tasks(tasks) if isinstance(tasks, str) else list(tasks)
    # README >>>
    from trl import GRPOConfig, GRPOTrainer

    from agentenv.integrations.trl import code_reward, device_args, to_hf_dataset

    trainer = GRPOTrainer(
        model=model,                           # e.g. "Qwen/Qwen2.5-Coder-0.5B-Instruct"
        reward_funcs=code_reward,              # hidden tests in the sandbox -> reward in [0, 1]
        train_dataset=to_hf_dataset(tasks),    # prompt (messages) + checks, entry_point, ...
        args=GRPOConfig(**{
            "output_dir": "grpo-coding",
            "num_generations": 8,              # the group advantages are normalised over
            "per_device_train_batch_size": 8,
            "max_completion_length": 512,
            "learning_rate": 1e-6,
            "remove_unused_columns": False,    # keep the task columns: code_reward reads them
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
    parser.add_argument("--max-steps", type=int, default=-1)
    args = parser.parse_args()
    build(args.model, args.tasks, max_steps=args.max_steps, report_to="none").train()


if __name__ == "__main__":
    main()
