"""``compare`` shows the cost side (turns and tokens per episode, with intervals), marks the
per-task rows whose interval excludes 0, prints its warnings before the tables, and says why
when nothing differs at all."""

from __future__ import annotations

from pathlib import Path

from report_builders import multi_turn, write_run

from agentenv.report import compare_runs, format_comparison

TASKS = ("add", "sort", "parse", "merge")


def slow_run() -> list:
    """Every episode needs three turns to solve its task."""
    return [multi_turn(task, [("wrong_answer", 0.25), ("wrong_answer", 0.5), ("pass", 1.0)],
                       sample=s, template="feedback@aaaa") for task in TASKS for s in range(3)]


def fast_run() -> list:
    """The same tasks, solved at the first turn."""
    return [multi_turn(task, [("pass", 1.0)], sample=s, template="feedback@bbbb")
            for task in TASKS for s in range(3)]


def compared(tmp_path: Path, a: list, b: list) -> dict:
    return dict(compare_runs(write_run(tmp_path / "a", a), write_run(tmp_path / "b", b),
                             n_boot=500, n_boot_task=200))


def test_turns_and_tokens_per_episode_are_compared_with_intervals(tmp_path: Path) -> None:
    comparison = compared(tmp_path, slow_run(), fast_run())
    turns = comparison["overall"]["turns"]
    assert (turns["a"], turns["b"]) == (3.0, 1.0)
    assert turns["difference"]["estimate"] == -2.0 and turns["difference"]["excludes_zero"]
    for key in ("tokens_generated", "tokens_processed"):
        diff = comparison["overall"][key]["difference"]
        assert diff["estimate"] < 0 and diff["low"] <= diff["estimate"] <= diff["high"]
    row = comparison["by_task"]["add"]["turns"]
    assert row["difference"] == -2.0 and row["low"] is not None
    text = format_comparison(comparison)  # type: ignore[arg-type]
    assert "cost per episode:" in text and "tokens_processed" in text
    assert "turns B-A" in text


def test_per_task_rows_whose_interval_excludes_zero_are_marked(tmp_path: Path) -> None:
    slow = slow_run()
    mixed_b = fast_run()[:3] + [t for t in slow if t.task_name != "add"]  # only add differs
    text = format_comparison(compared(tmp_path, slow, mixed_b))  # type: ignore[arg-type]
    rows = {line.split()[0]: line for line in text.splitlines()
            if line.split() and line.split()[0] in TASKS}
    # both arms solve add (at turn 3 against turn 1): only the turns interval excludes 0
    assert rows["add"].count("] *") == 1 and rows["add"].endswith("[-2.000, -2.000] *")
    assert "] *" not in rows["sort"]


def test_warnings_come_before_the_tables(tmp_path: Path) -> None:
    comparison = compared(tmp_path, slow_run(), fast_run()[:6])  # B lacks two tasks
    text = format_comparison(comparison)  # type: ignore[arg-type]
    assert "warning: 0 task(s) only in A and" not in text
    warning = text.index("warning: 2 task(s) only in A")
    assert warning < text.index("overall over") < text.index("per task")


def test_a_comparison_where_nothing_differs_says_why(tmp_path: Path) -> None:
    same = compared(tmp_path, slow_run(), [multi_turn(t.task_name, [(turn.outcome, turn.fraction)
                                                                      for turn in t.turns],
                                                       sample=t.sample, template="feedback@bbbb")
                                            for t in slow_run()])
    (why,) = [w for w in same["warnings"] if "exactly 0" in w]
    assert "--policy reader" in why and "policy scripted" in why
    differ = compared(tmp_path / "2", slow_run(), fast_run())
    assert not [w for w in differ["warnings"] if "exactly 0" in w]
