"""Hostile text in every report page: a task or a candidate that writes markup, attribute
breakers or terminal escapes gets plain, visible text in report.html, episodes.html and the
revise-vs-resample page, never a tag, an attribute or a raw control character."""

from __future__ import annotations

import dataclasses
from html.parser import HTMLParser
from pathlib import Path

import pytest
from report_builders import multi_turn, multi_turn_run, shown_text, single_step_run, write_run

from agentenv.grading.result import Failure
from agentenv.report import write_report, write_revise_report
from agentenv.untrusted import printable

# Markup, both quotes (an attribute breaker with a handler), an ampersand, a closing tag for
# the element the text sits in, an ANSI colour escape and a bidi override.
HOSTILE = ("<script>alert('x')</script>\" onmouseover=\"alert(1)\" x='y' &amp; </pre></td>"
           "\x1b[31mred\x1b[0m \u202egnp.exe")

# Every tag and attribute the pages themselves write.
TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "a", "div", "span",
        "table", "thead", "tbody", "tr", "th", "td", "img", "pre", "code", "details", "summary",
        "section", "label", "select", "option", "script"}
ATTRIBUTES = {"lang", "charset", "href", "id", "class", "style", "alt", "src", "value",
              "data-episode", "data-task", "data-outcome"}


class _Markup(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += attrs


def _hostile_run() -> list:
    episodes = multi_turn_run()
    episodes.append(multi_turn("task " + HOSTILE, [("wrong_answer", 0.5), ("pass", 1.0)],
                               difficulty="level " + HOSTILE, template="feedback " + HOSTILE,
                               policy="policy " + HOSTILE))
    hostile = episodes[-1]
    hostile.episode_id = "id " + HOSTILE
    hostile.model = "model " + HOSTILE
    hostile.metadata["tokenizer"] = "tokenizer " + HOSTILE
    hostile.opening = [{"role": "system", "content": "system " + HOSTILE},
                       {"role": "user", "content": "prompt " + HOSTILE}]
    hostile.turns[0] = dataclasses.replace(
        hostile.turns[0], response_text="answer " + HOSTILE, code="code " + HOSTILE,
        feedback="feedback " + HOSTILE,
        failures=(Failure(0, "check " + HOSTILE, "assertion", "message " + HOSTILE),))
    return episodes


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hostile")
    multi = write_run(root / "multi", _hostile_run())
    single = write_run(root / "single", single_step_run())
    write_report(multi, credit=False)
    result = write_revise_report(single, multi, n_boot=50)
    return {"report.html": (multi / "report" / "report.html").read_text(),
            "episodes.html": (multi / "report" / "episodes.html").read_text(),
            "revise_vs_resample.html": Path(result["files"]["html"]).read_text()}


@pytest.mark.parametrize("name", ["report.html", "episodes.html", "revise_vs_resample.html"])
def test_hostile_text_is_plain_visible_text_in_every_page(pages: dict[str, str], name: str) -> None:
    page = pages[name]
    markup = _Markup()
    markup.feed(page)
    assert set(markup.tags) <= TAGS
    assert {key for key, _ in markup.attributes} <= ATTRIBUTES
    # Only the browser has a script, its own one.
    assert markup.tags.count("script") == page.count("<script") == (name == "episodes.html")
    # No raw control character or bidi override reaches the page; they are shown as escapes.
    assert "\x1b" not in page and "\u202e" not in page
    assert "<script>alert" not in page and "</pre></td>\x1b" not in page


def test_the_pages_show_the_hostile_text_where_it_belongs(pages: dict[str, str]) -> None:
    """Escaped, yet all there: a reader sees each string as the run wrote it (control
    characters as visible backslash escapes)."""
    shown = printable(HOSTILE)
    assert "\\x1b[31mred" in shown and "\\u202e" in shown
    report = shown_text(pages["report.html"])
    for field in ("task", "level", "feedback"):
        assert f"{field} {shown}" in report, field
    browser = shown_text(pages["episodes.html"])
    for field in ("task", "level", "system", "prompt", "answer", "code", "feedback", "check",
                  "message", "model", "tokenizer", "id", "policy"):
        assert f"{field} {shown}" in browser, field
    assert f"feedback {shown}" in shown_text(pages["revise_vs_resample.html"])  # template ids


def test_the_reports_filter_link_finds_the_hostile_task_in_the_browser(pages: dict[str, str]) -> None:
    """The report links a task's filtered view by the name the browser shows (printable), so
    the browser's filter (which compares data-task) finds it, control characters and all."""
    from urllib.parse import unquote

    report, browser = _Markup(), _Markup()
    report.feed(pages["report.html"])
    browser.feed(pages["episodes.html"])
    links = [unquote(str(href).split("#task=", 1)[1]) for key, href in report.attributes
             if key == "href" and "#task=" in str(href)]
    tasks = {value for key, value in browser.attributes if key == "data-task"}
    hostile = [link for link in links if link.startswith("task ")]
    assert hostile == [f"task {printable(HOSTILE)}"] and set(links) <= tasks
