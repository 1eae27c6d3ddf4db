"""The TRL recipes build as written on this CPU machine (TRL's default bf16 would be refused
there), and device_args picks bf16 only on a GPU that supports it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.recipes import recipe

pytest.importorskip("trl")
torch = pytest.importorskip("torch")



class Captured:
    """Stands in for GRPOTrainer: keeps the arguments the recipe built (the real GRPOConfig)."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


@pytest.mark.parametrize("name", ["trl_grpo", "trl_multiturn"])
def test_recipe_config_builds_on_a_machine_without_a_gpu(
        name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No use_cpu or bf16 passed by the caller: the recipe's own GRPOConfig is accepted here."""
    import trl

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(trl, "GRPOTrainer", Captured)
    from agentenv.tasks.builtin import builtin_tasks

    built = recipe(name).build("unused-model", builtin_tasks()[:2], output_dir=str(tmp_path),
                               report_to="none")
    args = built.kwargs["args"]
    assert isinstance(args, trl.GRPOConfig)
    assert args.use_cpu is True and args.bf16 is False
    assert args.output_dir == str(tmp_path)


def test_overrides_still_win_over_the_device_fields(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    import trl

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    monkeypatch.setattr(trl, "GRPOTrainer", Captured)
    from agentenv.tasks.builtin import builtin_tasks

    built = recipe("trl_grpo").build("unused-model", builtin_tasks()[:1], output_dir=str(tmp_path),
                                     report_to="none", use_cpu=True, bf16=True)
    assert built.kwargs["args"].bf16 is True


@pytest.mark.parametrize(("cuda", "bf16", "expected"), [
    (False, False, {"use_cpu": True, "bf16": False}),
    (True, True, {"bf16": True}),
    (True, False, {"bf16": False}),
])
def test_device_args_follows_the_hardware(cuda: bool, bf16: bool, expected: dict[str, Any],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from agentenv.integrations.trl import device_args

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    assert device_args() == expected
