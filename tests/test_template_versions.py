"""Template versions are part of a run's identity: resuming after a template was edited is
refused (naming the template and both versions), also for runs written before the identity held
them (checked against their records), and ``report``/``compare`` warn on a run that mixes them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from report_builders import multi_turn, write_run

from agentenv.errors import ConfigError
from agentenv.policies import ScriptedPolicy
from agentenv.prompts import Prompts
from agentenv.report import compare_runs, format_comparison, format_report
from agentenv.report.metrics import run_metrics
from agentenv.rollout import RolloutConfig, run_rollouts
from agentenv.tasks.builtin import builtin_tasks

TASKS = builtin_tasks()[:2]
PACKAGED = Path(Prompts().packaged_dir)


def prompts_copy(tmp_path: Path) -> Path:
    directory = tmp_path / "prompts"
    directory.mkdir()
    shutil.copy(PACKAGED / "feedback.j2", directory / "feedback.j2")
    return directory


def run(prompts: Path, out: Path, samples: int = 1) -> list:
    config = RolloutConfig(max_turns=2, samples=samples, prompts_dir=str(prompts))
    return run_rollouts(TASKS, ScriptedPolicy(TASKS), config, out).trajectories


def test_resuming_after_a_template_edit_is_refused_naming_it(tmp_path: Path) -> None:
    prompts, out = prompts_copy(tmp_path), tmp_path / "run"
    first = run(prompts, out)
    before = first[0].template_ids["feedback"]
    (prompts / "feedback.j2").write_text((prompts / "feedback.j2").read_text() + "\nTry again.\n")
    after = Prompts(prompts_dir=prompts).template_ids["feedback"]
    with pytest.raises(ConfigError) as caught:
        run(prompts, out, samples=2)  # more samples: the resume would add episodes
    message = str(caught.value)
    assert f"feedback ({before} -> {after})" in message and "new --out" in message
    assert "system" not in message.split("templates:")[1].split(";")[0]  # only what changed
    lines = (out / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == len(TASKS)  # nothing was added with the edited template


def test_resuming_with_the_same_templates_goes_on(tmp_path: Path) -> None:
    prompts, out = prompts_copy(tmp_path), tmp_path / "run"
    run(prompts, out)
    more = run(prompts, out, samples=2)
    assert len(more) == 2 * len(TASKS)
    assert len({json.dumps(t.template_ids, sort_keys=True) for t in more}) == 1
    identity = json.loads((out / "config.json").read_text())["identity"]
    assert identity["template_ids"] == dict(Prompts(prompts_dir=prompts).template_ids)


def _as_written_before(out: Path) -> None:
    """config.json as runs wrote it before the identity held the templates' versions."""
    config = json.loads((out / "config.json").read_text())
    del config["identity"]["template_ids"]
    (out / "config.json").write_text(json.dumps(config))


def test_an_older_run_is_checked_against_the_templates_its_records_name(tmp_path: Path) -> None:
    prompts, out = prompts_copy(tmp_path), tmp_path / "run"
    run(prompts, out)
    _as_written_before(out)
    assert len(run(prompts, out, samples=2)) == 2 * len(TASKS)  # unchanged: resumes
    _as_written_before(out)
    (prompts / "feedback.j2").write_text("edited {{ passed }}/{{ total }}\n")
    with pytest.raises(ConfigError, match=r"other templates: feedback \(feedback@"):
        run(prompts, out, samples=3)


def mixed_run() -> list:
    return [multi_turn("add", [("pass", 1.0)], sample=0, template="feedback@aaaa"),
            multi_turn("add", [("pass", 1.0)], sample=1, template="feedback@aaaa"),
            multi_turn("sort", [("wrong_answer", 0.5)], sample=0, template="feedback@bbbb")]


def test_report_warns_when_a_run_mixes_template_versions(tmp_path: Path) -> None:
    text = format_report(run_metrics(mixed_run()))
    assert ("warning: the run mixes template versions: feedback (feedback@aaaa: 2 episodes, "
            "feedback@bbbb: 1 episode)") in text
    same = [t for t in mixed_run() if t.template_ids["feedback"] == "feedback@aaaa"]
    assert "mixes template versions" not in format_report(run_metrics(same))


def test_compare_warns_about_the_side_that_mixes_them(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", mixed_run())
    b = write_run(tmp_path / "b", [multi_turn(t.task_name, [("pass", 1.0)], sample=t.sample,
                                              template="feedback@cccc") for t in mixed_run()])
    comparison = compare_runs(a, b, n_boot=200, n_boot_task=50)
    mixes = [w for w in comparison["warnings"] if "mixes template versions" in w]
    assert len(mixes) == 1 and mixes[0].startswith("run A mixes template versions: feedback")
    assert "warning: run A mixes" in format_comparison(comparison)
