"""Logging: structured events from the library, and the setup the CLI and examples call.

Library modules log through :func:`get_logger`, never print, and configure nothing. Until an
application configures logging, agentenv's events go to the standard-library logger
``agentenv.*``, which carries only a ``NullHandler`` (the standard library-package practice),
so a user's stdout and stderr stay clean. Once structlog is configured — by
:func:`configure_logging` (the CLI and the examples call it), by the application, or by
``structlog.testing.capture_logs`` in a test — every event goes through structlog instead, as
key-value data (``event="transition", from_state=..., to_state=...``).
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import structlog

__all__ = ["configure_logging", "get_logger"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}

logging.getLogger("agentenv").addHandler(logging.NullHandler())


class EventLogger:
    """A structlog-style logger that routes to structlog when it is configured, else to stdlib."""

    __slots__ = ("_context", "_name")

    def __init__(self, name: str, context: dict[str, Any] | None = None) -> None:
        self._name = name
        self._context = dict(context or {})

    def bind(self, **values: Any) -> EventLogger:
        """A logger whose events all carry ``values``."""
        return EventLogger(self._name, {**self._context, **values})

    def _emit(self, level: str, event: str, values: dict[str, Any]) -> None:
        fields = {**self._context, **values}
        # structlog is imported only by whoever configures it (configure_logging, the
        # application, structlog.testing): if it is not loaded, it cannot be configured, and
        # ``import agentenv`` does not pay for it.
        loaded = sys.modules.get("structlog")
        if loaded is not None and loaded.is_configured():
            getattr(loaded.get_logger(self._name), level)(event, **fields)
            return
        std = logging.getLogger(self._name)
        numeric = _LEVELS.get(level, logging.ERROR)
        if std.isEnabledFor(numeric):
            rendered = " ".join(f"{k}={v!r}" for k, v in fields.items())
            std.log(numeric, "%s %s", event, rendered)

    def debug(self, event: str, **values: Any) -> None:
        self._emit("debug", event, values)

    def info(self, event: str, **values: Any) -> None:
        self._emit("info", event, values)

    def warning(self, event: str, **values: Any) -> None:
        self._emit("warning", event, values)

    def error(self, event: str, **values: Any) -> None:
        self._emit("error", event, values)

    def exception(self, event: str, **values: Any) -> None:
        self._emit("error", event, {**values, "exc_info": True})


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time of writing (it may be swapped later,
    e.g. by a test runner's capture or a progress bar), never to a stream that was closed."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def get_logger(name: str = "agentenv") -> EventLogger:
    """The logger library modules use: ``log = get_logger(__name__)``."""
    return EventLogger(name if name.startswith("agentenv") else f"agentenv.{name}")


def configure_logging(level: str = "warning", json: bool = False) -> None:
    """Route structlog events at ``level`` or above to stderr, as key=value lines or JSON."""
    import structlog

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
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
