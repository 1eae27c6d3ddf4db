"""The Jinja environment the report's HTML pages are rendered with.

Owns how a value becomes HTML text: every page is a template under ``report/templates/``
(shipped inside the package, loaded with :class:`jinja2.PackageLoader`), autoescaped, so a
string from a run (a task name, a candidate's answer, a model name) is always text, never
markup. Before escaping, every string passes through :func:`agentenv.untrusted.printable`:
terminal escapes, other control characters, lone surrogates and bidi overrides are shown as
visible backslash escapes. Undefined names are errors (``StrictUndefined``), never blanks.

The filters the templates share: ``cell`` (a table cell: ``None`` as a dash, booleans as
yes/no, floats to three decimals or grouped thousands) and ``b64`` (bytes as base64 text,
for inlined PNG figures).
"""

from __future__ import annotations

import base64
import functools
from typing import Any

import jinja2
from markupsafe import Markup

from agentenv.untrusted import printable

__all__ = ["render"]


def _shown(value: Any) -> Any:
    """What ``{{ value }}`` prints, before autoescape: strings made printable; markup the
    templates built themselves (macros, ``cell``'s dash) left as it is."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return printable(value)
    return value


def _cell(value: Any) -> Any:
    if value is None:
        return Markup("&ndash;")
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3f}"
    return str(value)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("agentenv.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_shown,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["cell"] = _cell
    env.filters["b64"] = _b64
    return env


def render(template: str, **context: Any) -> str:
    """The page ``templates/<template>`` rendered with ``context``."""
    return _environment().get_template(template).render(**context)
