"""Logging setup for the CLI and the examples: structlog events rendered for a terminal or as JSON.

Importing agentenv configures nothing; library modules only call ``structlog.get_logger()``.
Entry points (``agentenv`` CLI, ``examples/*.py``) call :func:`configure_logging` once.
"""

from __future__ import annotations

import logging
import sys

import structlog

__all__ = ["configure_logging"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


def configure_logging(level: str = "warning", json: bool = False) -> None:
    """Route structlog events at ``level`` or above to stderr, as key=value lines or JSON."""
    try:
        numeric = _LEVELS[level.lower()]
    except KeyError:
        from agentenv.errors import ConfigError

        raise ConfigError(f"unknown log level {level!r}; use one of {', '.join(_LEVELS)}") from None
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
