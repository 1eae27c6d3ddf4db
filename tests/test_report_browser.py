"""The rollout browser (episodes.html): every episode's whole conversation (opening messages,
then turn by turn), linked from the report, filterable by outcome and task; checked as markup
and in a real headless Chromium."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from report_builders import multi_turn, multi_turn_run, shown_text, single_step_run, write_run

from agentenv.envs.multiturn import MultiTurnCodingEnv
from agentenv.policies import ScriptedPolicy
from agentenv.records import Trajectory
from agentenv.report import write_report, write_revise_report
from agentenv.report.browser import browser_page, episode_anchors, ordered_episodes
from agentenv.report.runs import load_run
from agentenv.rollout import RolloutConfig, run_rollouts
from agentenv.tasks.builtin import builtin_tasks

ANSWER = "Let me try <b>this</b> & that:\n```python\ndef f():\n    return 1\n```"
FEEDBACK = "You passed 2 of 4 tests. <script>alert('x')</script> Try again."
SYSTEM = "You are a careful Python programmer."
TASK = "Write `add(a, b)` returning a + b <for ints & floats>."


def _run_with_a_conversation() -> list[Trajectory]:
    """The synthetic run, with one episode whose first turn holds markup-like text."""
    episodes = multi_turn_run()
    first = episodes[1]  # add #1: wrong .5, then pass
    first.turns[0] = dataclasses.replace(first.turns[0], response_text=ANSWER, feedback=FEEDBACK)
    first.opening = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    return episodes


def test_the_browser_holds_every_episode_turn_by_turn_with_everything_escaped() -> None:
    """One section per episode; each turn's answer, verdict and feedback; markup stays text."""
    episodes = _run_with_a_conversation()
    page = browser_page(episodes, title="run <x>")
    anchors = episode_anchors(ordered_episodes(episodes))
    assert len(set(anchors)) == len(episodes)
    for anchor in anchors:
        assert page.count(f'id="{anchor}"') == 1 and f'href="#{anchor}"' in page
    text = shown_text(page)
    assert ANSWER in text and FEEDBACK in text
    # The conversation starts where the policy started: the system prompt (folded) and the task,
    # before the first answer; episodes of a run that did not record them say so.
    assert text.index(SYSTEM) < text.index(TASK) < text.index(ANSWER)
    assert page.count("the opening messages were not recorded") == len(episodes) - 1
    assert "<b>this</b>" not in page and "<script>alert" not in page
    assert page.count('class="turn ') == sum(len(t.turns) for t in episodes)
    assert "wrong_answer" in page and "runtime_error" in page
    assert not re.search(r"https?://", page) and not re.search(r'src="', page)


def test_the_report_links_every_episode_and_each_filtered_view(tmp_path: Path) -> None:
    """report.html links each episode's section in episodes.html, and filtered views per
    task and per outcome."""
    run = write_run(tmp_path / "run", _run_with_a_conversation())
    write_report(run, credit=False)
    report = (run / "report" / "report.html").read_text()
    browser = (run / "report" / "episodes.html").read_text()
    links = re.findall(r'href="episodes\.html#(ep-[^"]+)"', report)
    assert len(links) == 6 and all(f'id="{anchor}"' in browser for anchor in links)
    assert 'href="episodes.html#task=add"' in report
    assert 'href="episodes.html#outcome=pass"' in report


def test_a_real_run_records_and_shows_each_episode_whole_conversation(tmp_path: Path) -> None:
    """Every trajectory of a run keeps the system and task messages the policy read first (the
    ones reset() returned), and the browser shows them ahead of the turns; a record read back
    from the run directory has them too."""
    tasks = builtin_tasks()[:2]
    env = MultiTurnCodingEnv(tasks=tasks, max_turns=2)
    opening = [env.reset(task_index=i)["messages"] for i in range(len(tasks))]
    run = tmp_path / "run"
    run_rollouts(tasks, ScriptedPolicy(tasks), RolloutConfig(max_turns=2), run)
    episodes = load_run(run)
    assert [t.opening for t in episodes] == opening
    assert [m["role"] for m in opening[0]] == ["system", "user"] and tasks[0].prompt in opening[0][1]["content"]
    write_report(run, credit=False)
    page = (run / "report" / "episodes.html").read_text()
    text = shown_text(page)
    for trajectory in episodes:
        task_message = trajectory.opening[1]["content"]
        first_answer = trajectory.turns[0].response_text
        assert task_message in text and text.index(task_message) < text.index(first_answer)
    assert "not recorded" not in page


def test_episode_anchors_are_unique_and_safe_for_any_episode_id() -> None:
    """Ids with '#', spaces or markup become distinct, plain HTML ids."""
    episodes = [multi_turn("t", [("pass", 1.0)], sample=0), multi_turn("t", [("pass", 1.0)], sample=1)]
    episodes[0].episode_id, episodes[1].episode_id = 'a"b <c>#0', 'a"b <c>#0'
    anchors = episode_anchors(episodes)
    assert len(set(anchors)) == 2 and all(re.fullmatch(r"[A-Za-z0-9_-]+", a) for a in anchors)


# -- in a real browser ---------------------------------------------------------------------------

def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI") or os.environ.get("AGENTENV_CI"):
        pytest.fail("chromium is not installed; .ci/run installs it with apt-get")
    pytest.skip("chromium is not installed (apt-get install chromium); CI runs this test")


def _chromium_run(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--window-size=1200,1400"]
    return subprocess.run([binary, *flags, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def browsed_run(tmp_path: Path) -> Path:
    run = write_run(tmp_path / "run", _run_with_a_conversation())
    write_report(run, credit=False)
    return run / "report" / "episodes.html"


def test_chromium_renders_the_filtered_conversation_of_one_episode(browsed_run: Path, tmp_path: Path) -> None:
    """Opened at #task=add&outcome=pass, the rendered DOM shows add's conversation (escaped
    text, not markup) and hides every other task's episodes."""
    binary = _chromium()
    profile = tmp_path / "profile"
    profile.mkdir()
    url = browsed_run.as_uri() + "#task=add&outcome=pass"
    done = _chromium_run(binary, profile, "--dump-dom", url)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert "Let me try &lt;b&gt;this&lt;/b&gt; &amp; that:" in dom
    assert "returning a + b &lt;for ints &amp; floats&gt;." in dom
    assert "&lt;script&gt;alert('x')&lt;/script&gt;" in dom
    sections = re.findall(r'<section class="episode"[^>]*>', dom)
    assert len(sections) == 6
    shown = [s for s in sections if " hidden" not in s]
    assert len(shown) == 2 and all('data-task="add"' in s for s in shown)
    assert re.search(r'<span id="shown">2</span>', dom)


def test_a_screenshot_of_the_browser_is_a_real_rendering(browsed_run: Path, tmp_path: Path) -> None:
    """The page renders as a user sees it: a full-size image with text and coloured outcome
    labels, not a blank or uniform frame."""
    from PIL import Image  # pillow comes with matplotlib (the dev extra's plots)

    binary = _chromium()
    profile = tmp_path / "profile"
    profile.mkdir()
    shot = tmp_path / "episodes.png"
    done = _chromium_run(binary, profile, f"--screenshot={shot}", browsed_run.as_uri() + "#task=add")
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    with Image.open(shot) as image:
        rgb = image.convert("RGB")
        assert rgb.size == (1200, 1400)
        colours = rgb.getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 100        # text is anti-aliased: many shades
        white_share = max(colours)[0] / (rgb.width * rgb.height)
        assert white_share < 0.97                                  # something is drawn
        # The outcome labels' green (#d4f4dd) is on screen: the styles were applied.
        greens = sum(n for n, (r, g, b) in colours if g > 200 and r < 225 and b < 230 and g - r > 20)
        assert greens > 200


@pytest.mark.parametrize("page", ["report.html", "revise_vs_resample.html", "episodes.html"])
def test_no_page_runs_off_a_narrow_window(page: str, tmp_path: Path) -> None:
    """In a 640-pixel window (scrollbars hidden), nothing is drawn in the body's right padding:
    wide tables scroll inside the page and long lines wrap instead of running off it."""
    from PIL import Image  # pillow comes with matplotlib (the dev extra's plots)

    single = write_run(tmp_path / "single", single_step_run())
    multi = _run_with_a_conversation()
    long_line = "x" * 400  # one unbreakable word, wider than any window
    multi[0].turns[0] = dataclasses.replace(multi[0].turns[0], feedback=long_line, response_text=long_line)
    multi_dir = write_run(tmp_path / "multi", multi)
    write_report(multi_dir, credit=False)
    revise = write_revise_report(single, multi_dir, out_dir=multi_dir / "report", n_boot=100)
    assert Path(revise["files"]["html"]).name == "revise_vs_resample.html"
    binary = _chromium()
    profile = tmp_path / "profile"
    profile.mkdir()
    shot = tmp_path / "page.png"
    done = subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--hide-scrollbars", f"--user-data-dir={profile}", "--window-size=640,3000",
                           f"--screenshot={shot}", (multi_dir / "report" / page).as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    with Image.open(shot) as image:
        rgb = image.convert("RGB")
        width, height = rgb.size
        assert width == 640
        # The body's right padding is 1em (16 px): its outer 12 px stay white, top to bottom.
        strip = rgb.crop((width - 12, 0, width, height))
        assert {colour for _count, colour in strip.getcolors(maxcolors=1 << 16) or []} == {(255, 255, 255)}
        # ...and the page is not blank: something was drawn left of it.
        assert len(rgb.crop((0, 0, width - 12, height)).getcolors(maxcolors=1 << 20) or []) > 50
