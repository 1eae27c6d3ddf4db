"""The one place agentenv reads the process environment: every variable it honours, by name,
with what it means and its default.

Every read happens when the function is called (a change to ``os.environ`` is seen at once);
nothing is cached here. The rest of the package calls these functions and never touches
``os.environ`` itself (``tests/test_settings.py`` checks it; the sandbox's own reads are the
last known exception and move here next: :func:`sandbox_isolation`, :func:`sandbox_workers`,
:func:`bwrap_path` are the functions they become).

It also holds the defaults several layers share (``DEFAULT_TIMEOUT``, ``DEFAULT_MAX_TURNS``,
``DEFAULT_CONCURRENCY``, ``DEFAULT_POLICY``, and the model server's ``DEFAULT_POLICY_TIMEOUT``,
``DEFAULT_MAX_RETRIES``, ``DEFAULT_BREAKER_FAILURES``, ``DEFAULT_BREAKER_SECONDS``).

Variables:

- ``AGENTENV_OFFLINE``: anything but unset, empty or ``0`` keeps tokenizers from downloading.
- ``AGENTENV_MBPP_PATH``, ``AGENTENV_APPS_PATH``, ``AGENTENV_LIVECODEBENCH_PATH``: a local copy
  of that dataset (see :data:`DATASET_PATH_VARS`).
- ``AGENTENV_SANDBOX_ISOLATION``, ``AGENTENV_SANDBOX_WORKERS``: the default sandbox pool's
  isolation level and worker count; ``AGENTENV_BWRAP``: the bubblewrap binary to use;
  ``AGENTENV_SANDBOX_PACKAGES``, ``AGENTENV_SANDBOX_PRELOAD``: the third-party packages
  candidates may import, and those the sandbox imports once ahead of every run.
- ``AGENTENV_VALUES_BUDGET``: bytes of decoded candidate values all runs judged at once may hold.
- ``AGENTENV_REQUIRE_STRICT``, ``AGENTENV_CI``: set by CI (a missing bubblewrap or chromium
  fails the tests that need them instead of skipping them).
- Other tools' variables that agentenv follows: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``;
  ``RAY_ADDRESS`` (the cluster ``--backend ray`` joins when no address is given);
  ``HF_HUB_OFFLINE``, ``HF_DATASETS_OFFLINE``, ``HF_ENDPOINT``; ``HTTPS_PROXY`` (and the rest of
  the standard proxy variables); ``TIKTOKEN_CACHE_DIR``, ``DATA_GYM_CACHE_DIR``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping

__all__ = [
    "DATASET_PATH_VARS",
    "DEFAULT_BREAKER_FAILURES",
    "DEFAULT_BREAKER_SECONDS",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_TURNS",
    "DEFAULT_POLICY",
    "DEFAULT_POLICY_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "OFFLINE_VAR",
    "bwrap_path",
    "ci",
    "dataset_path",
    "hf_endpoint",
    "https_proxy",
    "hub_offline",
    "offline",
    "openai_api_key",
    "openai_base_url",
    "proxies",
    "ray_address",
    "require_strict",
    "sandbox_isolation",
    "sandbox_workers",
    "tiktoken_cache_dir",
    "values_budget",
]

# Defaults shared by the environments, RolloutConfig and the CLI (one number, one place).
DEFAULT_TIMEOUT = 5.0  # sandbox seconds per submission
DEFAULT_MAX_TURNS = 3  # turns per multi-turn episode
DEFAULT_CONCURRENCY = 8  # policy calls in flight in a rollout run
DEFAULT_POLICY = "scripted"  # the offline policy `agentenv run` uses without --policy
# How OpenAIPolicy (and `agentenv run --policy openai`) treats its server: seconds per request,
# retries of a transient failure, and the circuit breaker (server-down failures in a row, over
# at least so many seconds, stop the run).
DEFAULT_POLICY_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 3
DEFAULT_BREAKER_FAILURES = 8
DEFAULT_BREAKER_SECONDS = 2.0

OFFLINE_VAR = "AGENTENV_OFFLINE"
# The variables that name a local copy of a dataset, by the loader that reads them.
DATASET_PATH_VARS: Mapping[str, str] = {
    "mbpp": "AGENTENV_MBPP_PATH",
    "apps": "AGENTENV_APPS_PATH",
    "livecodebench": "AGENTENV_LIVECODEBENCH_PATH",
    "evalplus": "AGENTENV_EVALPLUS_PATH",
}
_TRUTHY = {"1", "true", "yes", "on"}


def _get(name: str) -> str | None:
    """The variable's value, None when unset or empty."""
    return os.environ.get(name) or None


def _flag(name: str) -> bool:
    return (os.environ.get(name) or "").strip().lower() in _TRUTHY


# -- agentenv's own ---------------------------------------------------------------------------

def offline() -> bool:
    """``AGENTENV_OFFLINE``: True unless it is unset, empty or ``"0"`` (no downloads)."""
    return os.environ.get(OFFLINE_VAR, "") not in ("", "0")


def dataset_path(env_var: str) -> str | None:
    """The local copy named by ``env_var`` (one of :data:`DATASET_PATH_VARS`), if set."""
    return _get(env_var)


def sandbox_isolation() -> str | None:
    """``AGENTENV_SANDBOX_ISOLATION``: the default pool's isolation level (None: the best)."""
    return _get("AGENTENV_SANDBOX_ISOLATION")


def sandbox_workers() -> str | None:
    """``AGENTENV_SANDBOX_WORKERS``, as written (the pool parses and checks it)."""
    return os.environ.get("AGENTENV_SANDBOX_WORKERS")


def bwrap_path() -> str | None:
    """``AGENTENV_BWRAP``: the bubblewrap binary to use instead of the one on PATH."""
    return os.environ.get("AGENTENV_BWRAP")


def sandbox_packages() -> str | None:
    """``AGENTENV_SANDBOX_PACKAGES``: the third-party packages candidates may import, as
    comma-separated top-level names (their installed files are exposed read-only); unset means
    numpy when it is installed, empty means none."""
    return os.environ.get("AGENTENV_SANDBOX_PACKAGES")


def sandbox_preload() -> str | None:
    """``AGENTENV_SANDBOX_PRELOAD``: which of those packages the sandbox's zygote imports once,
    comma-separated, so no run pays for the import (numpy: about 0.7 s per run otherwise, while
    preloaded it makes every run's fork about 3 ms dearer); unset or empty means none."""
    return os.environ.get("AGENTENV_SANDBOX_PRELOAD")


def values_budget() -> str | None:
    """``AGENTENV_VALUES_BUDGET``: bytes of decoded candidate values that all the runs judged
    at once in this process may hold (``k``/``M``/``G`` suffixes allowed; unset: 512 MiB; see
    :mod:`agentenv.grading.memory`)."""
    return _get("AGENTENV_VALUES_BUDGET")


def sandbox_cgroups() -> bool:
    """``AGENTENV_SANDBOX_CGROUPS``: per-worker cgroups where the machine allows (default on;
    ``0``/``false``/``no``/empty turn them off)."""
    return os.environ.get("AGENTENV_SANDBOX_CGROUPS", "1").strip().lower() not in ("0", "false", "no", "")


def allow_root_fallback() -> bool:
    """``AGENTENV_SANDBOX_ALLOW_ROOT_FALLBACK``: accept the unisolated rlimits level as root."""
    return _flag("AGENTENV_SANDBOX_ALLOW_ROOT_FALLBACK")


def search_path() -> str:
    """``PATH``, as the sandbox's launcher is given it (a plain default when unset)."""
    return os.environ.get("PATH", "/usr/bin:/bin")


def require_strict() -> bool:
    """``AGENTENV_REQUIRE_STRICT``: strict isolation is required (CI), not merely preferred."""
    return _flag("AGENTENV_REQUIRE_STRICT")


def ci() -> bool:
    """``AGENTENV_CI``: running in CI (tools the tests need must be present)."""
    return _flag("AGENTENV_CI")


# -- other tools' variables that agentenv follows ---------------------------------------------

def openai_base_url() -> str | None:
    return _get("OPENAI_BASE_URL")


def openai_api_key() -> str | None:
    return _get("OPENAI_API_KEY")


def ray_address() -> str | None:
    """``RAY_ADDRESS``: the Ray cluster to join when none is given (else a local one starts)."""
    return _get("RAY_ADDRESS")


def hub_offline() -> bool:
    """True when the user asked Hugging Face libraries to stay offline (use the cache only)."""
    return any(os.environ.get(var, "").strip().lower() in _TRUTHY
               for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def https_proxy() -> str | None:
    return _get("HTTPS_PROXY") or _get("https_proxy")


def hf_endpoint() -> str | None:
    return _get("HF_ENDPOINT")


def proxies() -> dict[str, str]:
    """The standard proxy variables (``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``...) by scheme,
    as :mod:`urllib.request` reads them."""
    import urllib.request  # here, not at the top: it costs every `import agentenv` about 7 ms

    return dict(urllib.request.getproxies_environment())


def tiktoken_cache_dir() -> str:
    """Where tiktoken caches its files, as ``tiktoken.load.read_file_cached`` decides:
    ``TIKTOKEN_CACHE_DIR``, then ``DATA_GYM_CACHE_DIR``, then ``<tmp>/data-gym-cache``; an
    empty value (caching off) is returned as is."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return os.environ["TIKTOKEN_CACHE_DIR"]
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return os.environ["DATA_GYM_CACHE_DIR"]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")
