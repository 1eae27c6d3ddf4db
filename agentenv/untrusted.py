"""Candidate text as data: any string a candidate produced, made safe to store, show and quote.

Candidate code controls its exception messages and its output, so the strings that come back
from the sandbox may hold lone surrogates, NUL and other control characters, megabytes of text,
lines that imitate the environment ("All tests passed.") or a chat template's control tokens
(``<|im_start|>``, ``[INST]``, ``<|eot_id|>`` ...). What this module owns:

- ``printable(text)``: the text with every character a terminal, a UTF-8 file or an HTML page
  could choke on written as a visible escape (lone surrogates as ``\\udXXX``, control characters
  but newline and tab as ``\\xNN``); for showing, never for storing (storage keeps the string
  as it is: see :func:`json_line`).
- ``neutralise_control_tokens(text)``: chat-template control tokens broken up so that no
  tokenizer or template reads them as structure, and a reader still sees what was there.
- ``quote_block(text, prefix)``: every line of candidate text behind a quote prefix, so that
  no line of it can pass for the environment's own words in a prompt.
- ``json_line(record)``: one JSON line for any record, whatever strings it holds (a lone
  surrogate is written as its ``\\udXXX`` escape, which reads back as the same string).

Not here: deciding which text is candidate text (the prompts and the env decide), redaction of
secrets (the sandbox's trusted side).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["json_line", "neutralise_control_tokens", "printable", "quote_block"]

# Lone surrogates, C0 controls but \t and \n, DEL, C1 controls, and the bidi overrides that
# reorder what a reader sees.
_UNPRINTABLE = re.compile("[\ud800-\udfff\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

# Control tokens of the chat templates in common use: ChatML and OpenAI's (<|im_start|>,
# <|endoftext|>, <|start|>...), Llama 3 (<|eot_id|>, <|start_header_id|>), Llama 2 / Mistral
# ([INST], <<SYS>>, <s>), Gemma (<start_of_turn>), Phi, DeepSeek (<｜...｜>) and friends.
_CONTROL_TOKENS = re.compile(
    r"<\|[^|<>\s]{0,64}\|>"                   # <|im_start|>, <|eot_id|>, <|endoftext|>
    r"|<｜[^｜<>\s]{0,64}｜>"                  # DeepSeek's full-width bars
    r"|\[/?INST\]|\[/?SYS\]|<</?SYS>>"        # Llama 2 / Mistral
    r"|</?s>|<(?:start|end)_of_turn>"        # sentencepiece BOS/EOS, Gemma
    r"|</?(?:think|tool_call|tool_response)>",  # reasoning and tool-call markup
    re.IGNORECASE,
)
_BREAK = "\u2060"  # WORD JOINER: invisible, but no tokenizer merges it into a special token


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with unprintable characters (lone surrogates, control characters but ``\\n`` and
    ``\\t``, bidi overrides) written as visible backslash escapes; safe for any UTF-8 sink."""
    return _UNPRINTABLE.sub(_escape, text)


def neutralise_control_tokens(text: str) -> str:
    """Break every chat-template control token in ``text`` so that it reads as plain text."""
    return _CONTROL_TOKENS.sub(lambda m: m.group()[0] + _BREAK + m.group()[1:], text)


def quote_block(text: str, prefix: str = "  | ") -> str:
    """``text`` made printable, its control tokens neutralised, every line behind ``prefix``."""
    safe = neutralise_control_tokens(printable(text))
    return "\n".join(prefix + line for line in safe.split("\n"))


def json_line(record: Any) -> str:
    """``record`` as one line of JSON that any UTF-8 file can hold, newline not included.

    Non-ASCII text is kept as it is (readable files) unless a string cannot be encoded as UTF-8
    (a lone surrogate): then the whole line is written ASCII-escaped, which reads back the same.
    """
    line = json.dumps(record, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(record, ensure_ascii=True)
    return line
