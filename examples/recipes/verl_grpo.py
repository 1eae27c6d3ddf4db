"""GRPO with verl: write agentenv's tasks as verl parquet, point verl's reward at agentenv.

    python examples/recipes/verl_grpo.py --out data/agentenv [--multi-turn]

prints the overrides that go on verl's command line (``python -m verl.trainer.main_ppo ...``):
the data files, the custom reward function (``agentenv.integrations.verl.compute_score``, or
the ``batch`` manager with ``compute_score_batch``) and, with ``--multi-turn``, the tool agent
loop with agentenv's ``submit`` tool (a tool config file written next to the data). Needs
``pip install -e ".[verl]"`` in a clone (published: ``pip install "agentenv-coding[verl]"``). The part of ``build`` between the ``README`` markers is the
README's snippet (tests/test_recipes.py checks it); the test suite runs the script and checks
what it writes against verl's own config and tool registry.
"""

from __future__ import annotations

import argparse
from pathlib import Path

TOOL_CONFIG = """\
tools:
  - class_name: agentenv.integrations.verl_tool.SubmitTool
    config: {{type: native, max_turns: {max_turns}}}
"""


def build(out: str | Path, tasks: str = "builtin", multi_turn: bool = False,
          max_turns: int = 3) -> list[str]:
    """Write the data (and tool config); return verl's command-line overrides."""
    out = Path(out)
    # README >>>
    import agentenv.integrations.verl as agentenv_verl

    train = agentenv_verl.to_verl_parquet(tasks, out / "train.parquet", multi_turn=multi_turn,
                                          max_turns=max_turns if multi_turn else 1)
    overrides = [
        f"data.train_files={train}", f"data.val_files={train}",
        f"reward.custom_reward_function.path={agentenv_verl.__file__}",
        "reward.custom_reward_function.name=compute_score",  # compute_score_batch: batch manager
    ]
    if multi_turn:  # verl's tool agent loop calls agentenv's submit tool, one turn per call
        tools = out / "agentenv_tools.yaml"
        tools.write_text(TOOL_CONFIG.format(max_turns=max_turns))
        overrides += [
            "actor_rollout_ref.rollout.multi_turn.enable=True",
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tools}",
            f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={max_turns}",
            "data.return_raw_chat=True",
        ]
    # <<< README
    return overrides


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="data/agentenv")
    parser.add_argument("--tasks", default="builtin")
    parser.add_argument("--multi-turn", action="store_true")
    parser.add_argument("--max-turns", type=int, default=3)
    args = parser.parse_args()
    print(" \\\n  ".join(["python -m verl.trainer.main_ppo",
                         *build(args.out, args.tasks, args.multi_turn, args.max_turns)]))


if __name__ == "__main__":
    main()
