"""Prompt templates: a Jinja environment over the packaged ``prompts/`` folder and a user folder.

What it owns:

- ``Prompts(prompts_dir=None)``: loads ``system.j2``, ``task.j2`` and ``feedback.j2``. A file
  of the same name in ``prompts_dir`` overrides the packaged one, template by template.
  Rendering uses ``StrictUndefined``; a template that names a variable it is not given fails
  when it is loaded (and, for attribute typos, when it is rendered) with a ``TemplateError``
  naming the template, its file and the variable.
- ``template_ids``: ``{"system": "system@<hash>", ...}``, the name plus a short hash of the
  source actually used, recorded in every trajectory so prompt experiments can be told apart.
- What each template sees (nothing else, and never a hidden check):

  - ``system.j2``: ``max_turns``;
  - ``task.j2``: ``prompt``, ``entry_point``, ``task_name``, ``difficulty``, ``is_stdio``,
    ``max_turns`` and ``examples`` (the task's *visible* checks; each has ``kind`` "python"
    with ``code``, or ``kind`` "stdio" with ``stdin``/``expected_stdout``);
  - ``feedback.j2``: ``turn``, ``turns_left``, ``passed``, ``total``, ``failures`` (each with
    ``index``, ``check``, ``kind``, ``message`` and ``count``: checks that all failed because the
    solution itself did, such as a syntax error, are one failure with ``count`` > 1), ``omitted`` (failures not shown), ``solved``,
    ``outcome``, ``source`` ("all" or "visible"), ``entry_point``, ``timed_out``. With
    ``source="visible"`` every one of them comes from the visible checks' own run ("not_shown"
    is the ``outcome`` of code a task without visible checks cannot show); ``solved`` means the
    episode's stop condition was met and every check shown passed.

- Long failure messages and check texts are cut in the middle with a visible marker, and at
  most ``max_failures`` failures are listed, before the template sees them.
- Failure messages carry candidate output, so the template gets them quoted: every line behind
  ``"  | "`` (nothing the candidate prints can pass for the environment's own words), with
  unprintable characters escaped and chat-template control tokens (``<|im_start|>``,
  ``[INST]`` ...) broken up (see :mod:`agentenv.untrusted`).

Which failures to show (all or visible only) and secret redaction are the env's decisions.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta

from agentenv._resources import data_dir
from agentenv.errors import ConfigError, TemplateError
from agentenv.grading.result import Failure
from agentenv.log import get_logger
from agentenv.tasks.schema import Check, StdioCase, Task
from agentenv.untrusted import neutralise_control_tokens, printable, quote_block

__all__ = ["TEMPLATE_NAMES", "TEMPLATE_VARIABLES", "FailureView", "Prompts", "truncate_middle"]

TEMPLATE_NAMES: tuple[str, ...] = ("system", "task", "feedback")

TEMPLATE_VARIABLES: Mapping[str, frozenset[str]] = {
    "system": frozenset({"max_turns"}),
    "task": frozenset({"prompt", "entry_point", "task_name", "difficulty", "is_stdio", "max_turns",
                       "examples"}),
    "feedback": frozenset({"turn", "turns_left", "passed", "total", "failures", "omitted", "solved",
                           "outcome", "source", "entry_point", "timed_out"}),
}


def truncate_middle(text: str, limit: int) -> str:
    """Cut ``text`` to about ``limit`` characters, keeping its head and tail around a marker.

    Tracebacks put the cause at the end and the context at the start, so both ends are kept.
    """
    if limit <= 0 or len(text) <= limit:
        return text
    cut = len(text) - limit
    marker = f" …[{cut} chars truncated]… "
    head = (limit * 2) // 3
    tail = limit - head
    return text[:head] + marker + text[len(text) - tail:] if tail else text[:head] + marker


_WHOLE_SOLUTION = "solution:"  # how a failure of the solution itself (not of one check) begins


@dataclass(frozen=True)
class FailureView:
    """One failure as ``feedback.j2`` sees it (already truncated)."""

    index: int
    check: str
    kind: str
    message: str
    count: int = 1  # > 1: that many failures of the whole solution alike, shown once


@dataclass(frozen=True)
class _Example:
    kind: str
    code: str = ""
    stdin: str = ""
    expected_stdout: str = ""


def _example(check: Check) -> _Example:
    if isinstance(check, StdioCase):
        return _Example(kind="stdio", stdin=check.stdin, expected_stdout=check.expected_stdout)
    return _Example(kind="python", code=check)


@functools.lru_cache(maxsize=64)
def _environment(search: tuple[str, ...]) -> jinja2.Environment:
    """One Jinja environment per search path (user folder first, then the packaged one)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(list(search)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        auto_reload=False,
    )


# Compiled templates by (environment, file, source): building an env per episode stays cheap,
# and an edited file (new source) is compiled afresh.
_COMPILED: dict[tuple[int, str, str], tuple[jinja2.Template, frozenset[str]]] = {}


def _compile(env: jinja2.Environment, filename: str, path: str, source: str
             ) -> tuple[jinja2.Template, frozenset[str]]:
    """The template for ``source`` and the variables it reads without defining them."""
    key = (id(env), path, source)
    cached = _COMPILED.get(key)
    if cached is None:
        code = env.compile(source, name=filename, filename=path)
        template = env.template_class.from_code(env, code, env.make_globals(None))
        declared = frozenset(jinja2.meta.find_undeclared_variables(env.parse(source)))
        cached = _COMPILED.setdefault(key, (template, declared))
    return cached


# What a Prompts() loaded, by search path, with the stat fingerprint of every candidate file:
# the next Prompts() on the same folders reuses it while no candidate was added, removed or
# changed (rollouts build one env per episode in flight; re-reading the templates each time
# sat on the event loop between model calls). File times have a coarse clock, so an edit in
# the same tick as the read could keep the fingerprint: files changed in the last seconds are
# never cached, only re-read (git's "racy clean" rule).
_Loaded = tuple[dict[str, jinja2.Template], dict[str, str], dict[str, str]]
_LOADED: dict[tuple[str, ...], tuple[tuple[Any, ...], _Loaded]] = {}
_SETTLED_NS = 2_000_000_000


def _fingerprint(search: tuple[str, ...]) -> tuple[tuple[Any, ...], bool]:
    """A stat fingerprint of every file a template could be loaded from (None: missing), and
    whether all of them are old enough for the fingerprint to be trusted."""
    out: list[Any] = []
    settled = True
    recent = time.time_ns() - _SETTLED_NS
    for path in _candidates(search):
        try:
            st = os.stat(path)
        except OSError:
            out.append(None)
        else:
            out.append((st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))
            settled = settled and max(st.st_mtime_ns, st.st_ctime_ns) < recent
    return tuple(out), settled


@functools.lru_cache(maxsize=64)
def _candidates(search: tuple[str, ...]) -> tuple[str, ...]:
    """Every path a template could be loaded from, in search order."""
    return tuple(os.path.join(folder, name + ".j2") for name in TEMPLATE_NAMES for folder in search)


@functools.cache
def _packaged_dir() -> Path:
    return data_dir("prompts")


_UNDEFINED_NAME = re.compile(r"'([^']+)' is undefined|has no attribute '([^']+)'")


class Prompts:
    """The three templates, ready to render; one instance per prompt configuration.

    ``max_failures`` caps how many failures feedback lists; ``max_chars`` caps each failure's
    message and check text.
    """

    def __init__(self, prompts_dir: str | Path | None = None, *, max_failures: int = 5,
                 max_chars: int = 300) -> None:
        if max_failures < 1 or max_chars < 40:
            raise ConfigError("max_failures must be >= 1 and max_chars >= 40")
        self.max_failures = max_failures
        self.max_chars = max_chars
        self.packaged_dir = _packaged_dir()
        self.prompts_dir = Path(prompts_dir).expanduser() if prompts_dir is not None else None
        search = [str(self.packaged_dir)]
        if self.prompts_dir is not None:
            if not self.prompts_dir.is_dir():
                raise ConfigError(
                    f"prompts_dir {str(self.prompts_dir)!r} is not a directory; create it with any of "
                    f"{', '.join(n + '.j2' for n in TEMPLATE_NAMES)} to override those templates"
                )
            search.insert(0, str(self.prompts_dir))
            self._warn_unknown_files()
        key = tuple(search)
        self._env = _environment(key)
        fingerprint, settled = _fingerprint(key)
        cached = _LOADED.get(key)
        if settled and cached is not None and cached[0] == fingerprint:
            templates, files, ids = cached[1]
        else:
            templates, files, ids = {}, {}, {}
            for name in TEMPLATE_NAMES:
                template, source, filename = self._load(name)
                templates[name] = template
                files[name] = filename
                ids[name] = f"{name}@{hashlib.sha256(source.encode('utf-8')).hexdigest()[:8]}"
            if settled:
                _LOADED[key] = (fingerprint, (templates, files, ids))
        self._templates: dict[str, jinja2.Template] = dict(templates)
        self._files: dict[str, str] = dict(files)
        self.template_ids: Mapping[str, str] = dict(ids)

    # -- loading ------------------------------------------------------------------------------
    def _warn_unknown_files(self) -> None:
        assert self.prompts_dir is not None
        known = [n + ".j2" for n in TEMPLATE_NAMES]
        for path in sorted(self.prompts_dir.glob("*.j2")):
            if path.name in known:
                continue
            close = difflib.get_close_matches(path.name, known, n=1)
            if close:
                get_logger(__name__).warning(
                    "prompt_template_unused", file=str(path),
                    hint=f"did you mean {close[0]}? only {', '.join(known)} are templates",
                )

    def _load(self, name: str) -> tuple[jinja2.Template, str, str]:
        filename = name + ".j2"
        assert self._env.loader is not None
        try:
            source, path, _ = self._env.loader.get_source(self._env, filename)
        except jinja2.TemplateNotFound:
            raise TemplateError(
                f"template {filename} was not found in {self.prompts_dir or self.packaged_dir}; "
                "reinstall agentenv or add the file to prompts_dir"
            ) from None
        where = path or filename
        try:
            template, declared = _compile(self._env, filename, where, source)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(
                f"template {filename} ({where}, line {exc.lineno}) has a syntax error: {exc.message}"
            ) from None
        allowed = TEMPLATE_VARIABLES[name]
        unknown = sorted(declared - allowed - set(self._env.globals))
        if unknown:
            raise TemplateError(self._undefined_message(name, where, unknown[0]))
        return template, source, where

    def _undefined_message(self, name: str, where: str, variable: str) -> str:
        allowed = sorted(TEMPLATE_VARIABLES[name])
        close = difflib.get_close_matches(variable, allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return (f"template {name}.j2 ({where}) uses undefined variable {variable!r}{hint}; "
                f"it can use: {', '.join(allowed)}")

    def _render(self, name: str, context: Mapping[str, Any]) -> str:
        try:
            text = self._templates[name].render(**context)
        except jinja2.UndefinedError as exc:
            match = _UNDEFINED_NAME.search(str(exc))
            variable = next((g for g in match.groups() if g), str(exc)) if match else str(exc)
            raise TemplateError(
                f"template {name}.j2 ({self._files[name]}) uses undefined variable or attribute "
                f"{variable!r} ({exc}); it can use: {', '.join(sorted(TEMPLATE_VARIABLES[name]))}"
            ) from None
        return text.strip()

    # -- rendering ----------------------------------------------------------------------------
    def system(self, *, max_turns: int = 1) -> str:
        """The system message."""
        return self._render("system", {"max_turns": max_turns})

    def task(self, task: Task, *, max_turns: int = 1) -> str:
        """The first user message: the task, with its visible checks as examples (never hidden ones)."""
        return self._render("task", {
            "prompt": task.prompt,
            "entry_point": task.entry_point,
            "task_name": task.name,
            "difficulty": task.difficulty,
            "is_stdio": task.is_stdio,
            "max_turns": max_turns,
            "examples": [_example(c) for c in task.visible_checks],
        })

    def messages(self, task: Task, *, max_turns: int = 1) -> list[dict[str, str]]:
        """The opening conversation (system + task) in OpenAI chat format."""
        return [
            {"role": "system", "content": self.system(max_turns=max_turns)},
            {"role": "user", "content": self.task(task, max_turns=max_turns)},
        ]

    def failure_views(self, failures: Sequence[Failure]) -> tuple[list[FailureView], int]:
        """The failures feedback lists (truncated, at most ``max_failures``) and how many were left out.

        Checks that failed alike because the solution itself failed (a syntax error, an
        import that raises: the same kind and the same ``solution: ...`` message) are one view
        with ``count`` set, not one line per check."""
        groups: list[list[Failure]] = []
        for f in failures:
            last = groups[-1][0] if groups else None
            if (last is not None and f.message.startswith(_WHOLE_SOLUTION)
                    and (last.kind, last.message) == (f.kind, f.message)):
                groups[-1].append(f)
            else:
                groups.append([f])
        shown = [
            FailureView(index=group[0].index,
                        check=neutralise_control_tokens(printable(truncate_middle(group[0].check, self.max_chars))),
                        kind=group[0].kind, message=quote_block(truncate_middle(group[0].message, self.max_chars)),
                        count=len(group))
            for group in groups[: self.max_failures]
        ]
        return shown, max(0, len(failures) - sum(view.count for view in shown))

    def feedback(self, *, turn: int, turns_left: int, passed: int, total: int,
                 failures: Sequence[Failure], solved: bool = False, outcome: str = "wrong_answer",
                 source: str = "all", entry_point: str = "", timed_out: bool = False) -> str:
        """The feedback message after a graded turn."""
        views, omitted = self.failure_views(failures)
        return self._render("feedback", {
            "turn": turn, "turns_left": turns_left, "passed": passed, "total": total,
            "failures": views, "omitted": omitted, "solved": solved, "outcome": outcome,
            "source": source, "entry_point": entry_point, "timed_out": timed_out,
        })

    def __repr__(self) -> str:
        return f"Prompts(prompts_dir={str(self.prompts_dir) if self.prompts_dir else None!r}, ids={dict(self.template_ids)})"
