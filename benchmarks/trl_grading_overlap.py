"""Batch time of TRL's tool loop over agentenv's submit tool, with and without PrefetchGrading.

    python benchmarks/trl_grading_overlap.py [--rollouts 16] [--repeats 5] [--trainer MODEL_DIR]

TRL 1.16 runs tools one rollout at a time and waits for each result, so a batch's sandbox runs
queue up. This replays that loop exactly as TRL drives it (reset every rollout, then for each
tool round call submit once per rollout, in order, appending the regenerated assistant message
to the rollout's completion) over builtin tasks, half the submissions right and half a buggy
attempt, two rounds; once plainly, once through PrefetchGrading; with the builtin tests as
they are (a few ms each) and with 50 ms added per grading. It prints the median batch time of
each and their ratio. With ``--trainer`` (a local chat model directory, e.g. the tiny
test model) it also times TRL's tool loop inside two real GRPOTrainer steps of the multi-turn recipe
(regeneration included) both ways.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from agentenv.integrations.trl import PrefetchGrading, environment_factory, to_records
from agentenv.tasks.builtin import builtin_tasks


def call(code: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "submit", "arguments": {"code": code}}}]}


class ToolLoop:
    """TRL's order of work: each round, submit per rollout in turn; then regenerated messages."""

    def __init__(self, envs: list[Any], rounds: list[list[str]]) -> None:
        self.environments = envs
        self.rounds = rounds

    def _tool_call_loop(self, prompts: Any, prompt_ids: Any, completion_ids: Any,
                        completions: list[Any]) -> list[Any]:
        for r in range(len(self.rounds)):
            for env, messages in zip(self.environments, completions, strict=True):
                code = messages[-1]["tool_calls"][0]["function"]["arguments"]["code"]
                messages.append({"role": "tool", "name": "submit", "content": env.submit(code)})
            if r + 1 < len(self.rounds):
                for messages, code in zip(completions, self.rounds[r + 1], strict=True):
                    messages.append(call(code))
        return completions


class Prefetched(PrefetchGrading, ToolLoop):
    pass


def one_batch(loop_cls: type[ToolLoop], rollouts: int, slow_ms: int = 0) -> float:
    tasks = [t for t in builtin_tasks() if t.metadata.get("attempts")][:8]
    make = environment_factory(tasks, max_turns=3)
    rows = to_records(tasks, max_turns=3)
    envs, first, second = [], [], []
    for i in range(rollouts):
        task, row = tasks[i % len(tasks)], rows[i % len(tasks)]
        env = make()
        env.reset(**row)
        envs.append(env)
        # slow_ms of wall time per grading (at import), as heavier hidden tests would take
        pause = f"import time\ntime.sleep({slow_ms / 1000})\n" if slow_ms else ""
        buggy = pause + task.metadata["attempts"][0] + f"\n# rollout {i}\n"
        first.append(buggy if i % 2 else pause + str(task.reference_solution))
        second.append(pause + str(task.reference_solution) + f"\n# rollout {i}\n")
    loop = loop_cls(envs, [first, second])
    start = time.perf_counter()
    loop._tool_call_loop(None, None, None, [[call(c)] for c in first])
    return time.perf_counter() - start


def trainer_steps(model_dir: str, prefetch: bool) -> float:
    import importlib.util
    import os
    import sys
    from pathlib import Path

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "tests"))
    from support.tiny_model import default_tasks  # type: ignore[import-not-found]

    spec = importlib.util.spec_from_file_location("recipe", root / "examples/recipes/trl_multiturn.py")
    assert spec is not None and spec.loader is not None
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    trainer = recipe.build(model_dir, default_tasks() * 16, max_turns=3, max_steps=2,
                           num_generations=8, per_device_train_batch_size=16,
                           max_completion_length=96, use_cpu=True, save_strategy="no",
                           output_dir="/tmp/agentenv-bench-trl", logging_steps=1,
                           report_to="none")
    cls = type(trainer)
    inner = cls.__mro__[1 if prefetch else 2]._tool_call_loop  # with the mixin, or GRPOTrainer's
    spent = [0.0]

    def timed(self: Any, *a: Any, **k: Any) -> Any:
        start = time.perf_counter()
        try:
            return inner(self, *a, **k)
        finally:
            spent[0] += time.perf_counter() - start

    cls._tool_call_loop = timed  # type: ignore[method-assign]
    trainer.train()
    return spent[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--trainer", metavar="MODEL_DIR")
    args = parser.parse_args()
    one_batch(ToolLoop, 2)  # warm the sandbox pool
    for slow_ms in (0, 50):
        plain = [one_batch(ToolLoop, args.rollouts, slow_ms) for _ in range(args.repeats)]
        over = [one_batch(Prefetched, args.rollouts, slow_ms) for _ in range(args.repeats)]
        p, o = statistics.median(plain), statistics.median(over)
        print(f"tool loop, {args.rollouts} rollouts x 2 rounds, +{slow_ms} ms per grading, "
              f"median of {args.repeats}:")
        print(f"  sequential (TRL as is)   {p:7.3f} s")
        print(f"  PrefetchGrading          {o:7.3f} s   ratio {p / o:5.2f}x")
    if args.trainer:
        trainer_steps(args.trainer, prefetch=True)  # warm-up: model load, pools
        seq, pre = [], []
        for _ in range(args.repeats):
            seq.append(trainer_steps(args.trainer, prefetch=False))
            pre.append(trainer_steps(args.trainer, prefetch=True))
        s_, p_ = statistics.median(seq), statistics.median(pre)
        print(f"GRPOTrainer, time inside TRL's tool loop over 2 steps of 16 rollouts "
              f"(tiny model, CPU; generation included), median of {args.repeats}:")
        print(f"  sequential   {s_:7.3f} s")
        print(f"  prefetch     {p_:7.3f} s   ratio {s_ / p_:5.2f}x")


if __name__ == "__main__":
    main()
