"""Single-turn GRPO with TRL: each completion is scored by the hidden tests in the sandbox.

    python examples/recipes/trl_grpo.py --model Qwen/Qwen2.5-Coder-0.5B-Instruct --tasks mbpp

Needs ``pip install "agentenv[trl]"``. ``build`` is what the README shows; the test suite runs
it for two steps on a tiny local model.
"""

from __future__ import annotations

import argparse
from typing import Any


def build(model: Any = "Qwen/Qwen2.5-Coder-0.5B-Instruct", tasks: Any = "builtin",
          **config: Any) -> Any:
    from trl import GRPOConfig, GRPOTrainer

    from agentenv.integrations.trl import code_reward, to_hf_dataset

    args = GRPOConfig(**{
        "output_dir": "grpo-coding",
        "num_generations": 8,              # the group advantages are normalised over
        "per_device_train_batch_size": 8,
        "max_completion_length": 512,
        "learning_rate": 1e-6,
        "remove_unused_columns": False,    # keep the task columns: code_reward reads them
        "report_to": "none",
        **config,
    })
    return GRPOTrainer(model=model, reward_funcs=code_reward, args=args,
                       train_dataset=to_hf_dataset(tasks))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="Qwen/Qwen2.5-Coder-0.5B-Instruct")
    parser.add_argument("--tasks", default="builtin", help="a task-set name or a JSONL path")
    parser.add_argument("--max-steps", type=int, default=-1)
    args = parser.parse_args()
    build(args.model, args.tasks, max_steps=args.max_steps).train()


if __name__ == "__main__":
    main()
