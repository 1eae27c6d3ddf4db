"""extract_code: turn a policy's raw text into the Python source to run.

What it handles: Markdown fences (```` ```python ````, ```` ```py ````, bare ```` ``` ````, ``~~~``),
several blocks (the one that defines the entry point wins, then one that parses, then a
Python-tagged one; ties go to the last block, since models put their final answer last), an
unclosed fence (runs to the end of the text), and prose with no fence (the text itself if it
parses as Python, else the part from the first ``def``/``class``/``import`` line if that
parses, else ""). It never raises and always returns a string. It does not fix code.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

__all__ = ["extract_code"]

_FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[^\s`]*)[^\n`]*$")
_PYTHON_TAGS = {"python", "py", "python3", "py3", "pycon", "ipython"}
# Blocks tagged with these are clearly not the solution (shell sessions, program output, data).
_OTHER_TAGS = {"bash", "sh", "shell", "console", "text", "txt", "output", "json", "yaml", "toml",
               "diff", "javascript", "js", "typescript", "ts", "java", "c", "cpp", "c++", "go",
               "rust", "ruby", "html", "xml", "sql", "markdown", "md"}
_MAX_TRAILING_PROSE = 40
_CODE_START = re.compile(r"^(?:def |async def |class |import |from \S+ import |@)", re.MULTILINE)


@dataclass(frozen=True)
class _Block:
    lang: str
    body: str


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except Exception:  # SyntaxError, ValueError (NUL bytes), RecursionError, MemoryError
        return False
    return True


def _fenced_blocks(text: str) -> list[_Block]:
    """Split Markdown fenced blocks out of text; an unclosed fence runs to the end."""
    blocks: list[_Block] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        opened = _FENCE_OPEN.match(lines[i])
        if opened is None:
            i += 1
            continue
        fence = opened.group("fence")
        lang = opened.group("lang").lower().lstrip("{.").rstrip("}")
        body: list[str] = []
        i += 1
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped and stripped[0] == fence[0] and set(stripped) == {fence[0]} \
                    and len(stripped) >= len(fence):
                break
            body.append(lines[i])
            i += 1
        i += 1  # past the closing fence (or the end of the text)
        blocks.append(_Block(lang=lang, body="\n".join(body).strip("\n") + "\n"))
    return blocks


def _defines(source: str, name_pattern: str) -> bool:
    """Does ``source`` define a function or class whose name matches ``name_pattern``?"""
    return re.search(rf"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+{name_pattern}\b", source,
                     re.MULTILINE) is not None


def _pick(blocks: list[_Block], entry_point: str | None) -> str:
    best_score, best = -1, ""
    for block in blocks:
        if not block.body.strip() or block.lang in _OTHER_TAGS:
            continue
        score = 0
        if _defines(block.body, re.escape(entry_point) if entry_point else r"\w+"):
            score += 4
        if _parses(block.body):
            score += 2
        if block.lang in _PYTHON_TAGS:
            score += 1
        if score >= best_score:  # ties go to the later block
            best_score, best = score, block.body
    return best


def _from_prose(text: str) -> str:
    if _parses(text):
        return text
    start = _CODE_START.search(text)
    if start is not None:
        tail = text[start.start():]
        if _parses(tail):
            return tail
        # Drop trailing prose line by line until the rest parses (bounded: long texts stay cheap).
        lines = tail.rstrip().split("\n")
        for end in range(len(lines) - 1, max(0, len(lines) - 1 - _MAX_TRAILING_PROSE), -1):
            candidate = "\n".join(lines[:end]) + "\n"
            if _parses(candidate):
                return candidate
    return ""


def extract_code(text: object, entry_point: str | None = None) -> str:
    """Return the Python source in a policy's raw text ("" when there is none).

    ``entry_point``, when given, is the function the task asks for; a block defining it is
    preferred over other blocks (helpers, usage examples, tests).
    """
    try:
        if not isinstance(text, str) or not text.strip():
            return ""
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        blocks = _fenced_blocks(text)
        if blocks:
            return _pick(blocks, entry_point)
        return _from_prose(text.strip("\n") + "\n") if text.strip() else ""
    except Exception:  # pragma: no cover - last line of defence: never raise on policy text
        return ""
