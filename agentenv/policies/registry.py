"""Policies by name, for the CLI and configs: ``make_policy("scripted", tasks=...)``.

Names: ``mock``, ``reference``, ``scripted``, ``reader``, ``openai``; or ``"package.module:attribute"`` for
a policy of your own (a callable is used as is; a class is instantiated with the keyword
arguments it accepts among those given).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Sequence
from typing import Any

from agentenv.choices import PolicyKind, values
from agentenv.errors import PolicyError
from agentenv.tasks.schema import Task

__all__ = ["POLICY_NAMES", "make_policy"]

POLICY_NAMES: tuple[str, ...] = values(PolicyKind)


def _accepted(fn: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


def _import_policy(spec: str, tasks: Sequence[Task] | None, kwargs: dict[str, Any]) -> Any:
    module_name, _, attr = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise PolicyError(f"cannot import policy {spec!r}: {exc}; use 'package.module:name', a module "
                          "on the Python path (the command line also looks in the current directory)") from None
    if inspect.isclass(obj):
        return obj(**_accepted(obj, {"tasks": tasks, **kwargs}))
    if not callable(obj):
        raise PolicyError(f"{spec!r} is not callable; a policy maps an observation dict to text")
    return obj


def make_policy(name: str, *, tasks: Sequence[Task] | None = None, **kwargs: Any) -> Any:
    """Build a policy by name.

    ``tasks`` are the tasks the run uses (the reference and scripted policies look answers up
    there). For ``openai``, ``kwargs`` are :class:`OpenAIPolicy`'s (``model``, ``base_url``,
    ``api_key``, ``temperature``, ``max_tokens``, ...); ``model`` defaults to gpt-4o.
    ``scripted`` accepts ``scripts``; ``reader`` (revisions that depend on what the feedback
    shows) ``per_failure`` and ``base``. Unknown options raise PolicyError.
    """
    from agentenv.policies.mock import mock_policy
    from agentenv.policies.openai_chat import OpenAIPolicy
    from agentenv.policies.reader import ReaderPolicy
    from agentenv.policies.scripted import ReferencePolicy, ScriptedPolicy

    key = name.strip()
    if ":" in key:
        return _import_policy(key, tasks, kwargs)

    def no_options(allowed: Sequence[str] = ()) -> None:
        extra = sorted(set(kwargs) - set(allowed))
        if extra:
            raise PolicyError(f"policy {key!r} takes no option(s) {extra}")

    if key == PolicyKind.MOCK:
        no_options()
        return mock_policy
    if key == PolicyKind.REFERENCE:
        no_options()
        return ReferencePolicy(tasks)
    if key == PolicyKind.SCRIPTED:
        no_options(("scripts",))
        return ScriptedPolicy(tasks, scripts=kwargs.get("scripts"))
    if key == PolicyKind.READER:
        no_options(("per_failure", "base"))
        return ReaderPolicy(tasks, **kwargs)
    if key == PolicyKind.OPENAI:
        options = dict(kwargs)
        model = options.pop("model", None) or "gpt-4o"
        try:
            return OpenAIPolicy(model, **options)
        except TypeError as exc:
            raise PolicyError(f"bad option for policy 'openai': {exc}") from None
    close = difflib.get_close_matches(key, POLICY_NAMES, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise PolicyError(f"unknown policy {key!r}; use one of {', '.join(POLICY_NAMES)} or "
                      f"'package.module:name'.{hint}")
