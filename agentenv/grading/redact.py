"""Secret redaction on the trusted side: what a RunResult carries never holds a secret's value.

One implementation for every caller (``run_tests`` and so every environment, ``code_reward``
and the CLI): values of environment variables whose names look secret
(:data:`agentenv.sandbox._limits.SECRET_NAME`) are replaced by ``[redacted]`` in the candidate's
stdout and stderr and in every failure message and check text, after judging, before the
result leaves the grading package. The candidate never sees these variables (its environment
is scrubbed or empty); this catches the values that reach output anyway, e.g. a secret pasted
into the code itself, or a fallback run that could read a file holding one.

The scan of the process environment is cached against a snapshot of ``os.environ``'s own
dict: comparing two dicts in C costs far less than rescanning, and a change is seen at once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from agentenv.grading.result import RunResult
from agentenv.sandbox.contract import SECRET_NAME

__all__ = ["MIN_SECRET_LENGTH", "REDACTED", "redact_result", "redact_secrets", "secret_values"]

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 8  # shorter values ("1", "true") would redact ordinary text


def _scan(environ: Mapping[str, str]) -> tuple[str, ...]:
    found = {v for k, v in environ.items() if SECRET_NAME.search(k) and len(v) >= MIN_SECRET_LENGTH}
    return tuple(sorted(found, key=len, reverse=True))  # longest first: no partial leftovers


# The process environment as last scanned (os.environ's raw dict) and what the scan found.
_scanned: tuple[dict[Any, Any] | None, tuple[str, ...]] = (None, ())


def secret_values(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Values of environment variables whose names look secret (API keys, tokens, passwords).

    Without ``environ``, the process environment as it is now (a change is seen at once).
    """
    global _scanned
    if environ is not None:
        return _scan(environ)
    raw = getattr(os.environ, "_data", None)  # os.environ's backing dict, where there is one
    if not isinstance(raw, dict):
        return _scan(os.environ)
    snapshot, secrets = _scanned
    if snapshot != raw:
        snapshot = dict(raw)  # taken before the scan: a change in between only forces a rescan
        secrets = _scan(os.environ)
        _scanned = (snapshot, secrets)
    return secrets


def redact_secrets(text: str, secrets: Sequence[str]) -> str:
    """Replace every occurrence of each secret value in ``text`` with ``[redacted]``."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact_result(result: RunResult, secrets: Sequence[str] | None = None) -> RunResult:
    """``result`` with every secret value removed from its output and failure records."""
    secrets = secret_values() if secrets is None else secrets
    if not secrets:
        return result
    texts = [result.stdout, result.stderr, *(f.message for f in result.failures),
             *(f.check for f in result.failures)]
    if not any(secret in text for text in texts for secret in secrets):
        return result
    failures = tuple(replace(f, check=redact_secrets(f.check, secrets),
                             message=redact_secrets(f.message, secrets)) for f in result.failures)
    return replace(result, stdout=redact_secrets(result.stdout, secrets),
                   stderr=redact_secrets(result.stderr, secrets), failures=failures)
