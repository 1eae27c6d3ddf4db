"""Shared pytest setup: no test downloads anything (AGENTENV_OFFLINE=1), structlog starts
unconfigured in every test (the library's default), ``captured_events`` records the
structured events a test triggers, and the ``slow`` marker is put on the tests listed in
``SLOW_FILES`` / ``SLOW_TESTS`` (``pytest -m "not slow"`` is the fast loop). In CI
(``AGENTENV_CI=1``) ``pytest.importorskip`` fails instead of skipping: CI installs every extra
(``.[dev]``), so a missing trainer or optional package is a broken install, never a quiet skip."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator, MutableMapping
from typing import Any

import pytest
import structlog

from agentenv import settings

# Tests reach loopback only: tiktoken must not try to download an encoding (agentenv then uses
# the bundled offline one at once). Tests of the download path clear this for their own process.
os.environ.setdefault("AGENTENV_OFFLINE", "1")
# The suite runs as root in CI and exercises the rlimits fallback on purpose; the refusal that
# applies otherwise is tested on its own (tests/attacks/test_fallback_and_redaction.py).
os.environ.setdefault("AGENTENV_SANDBOX_ALLOW_ROOT_FALLBACK", "1")


def _import_or_fail(modname: str, minversion: str | None = None, reason: str | None = None,
                    **kwargs: Any) -> Any:
    """``pytest.importorskip`` for CI: the import must succeed."""
    try:
        return _importorskip(modname, minversion, reason, **kwargs)
    except pytest.skip.Exception as exc:
        pytest.fail(f"AGENTENV_CI: {exc}. CI installs every extra (.[dev]), so no test may skip "
                    "for a missing package", pytrace=False)


_importorskip = pytest.importorskip
if settings.ci():
    pytest.importorskip = _import_or_fail  # type: ignore[assignment]


# Whole files that start real services or run big suites: a Ray cluster, a real model server,
# the sandbox attack suites, property tests over generated programs, the walk-through scripts,
# real GRPOTrainer runs.
SLOW_FILES = frozenset({
    "test_ray_backend.py", "test_ray_pool.py", "test_real_server.py", "test_sandbox_properties.py",
    "test_examples.py", "test_trl_trainer.py",
    # tests/attacks/: the classes whose attacks run loads, floods and timeouts; the equality and
    # candidate-text attacks and the census stay in the fast loop.
    "test_hermetic_runs.py", "test_run_limits.py", "test_judge_isolation.py",
    "test_judge_values.py", "test_pool_poisoning.py", "test_fallback_and_redaction.py",
})
# Single slow tests elsewhere (by name; parametrized cases included): chromium, hangs that run
# to their timeout, the widest budget sweep, a fresh-process download, concurrent sandbox rows,
# collecting the whole suite.
SLOW_TESTS = frozenset({
    "test_a_screenshot_of_the_browser_is_a_real_rendering",
    "test_no_page_runs_off_a_narrow_window",
    "test_nothing_shown_depends_on_the_hidden_input",
    "test_no_point_of_any_builtin_episode_is_over_budget",
    "test_a_hanging_download_times_out_and_falls_back_in_a_fresh_process",
    "test_identical_submissions_in_a_batch_run_once_and_rows_run_concurrently",
    "test_verifiers_recipe_scores_a_reference_with_the_rubric",
    "test_the_readme_test_counts_match_the_collected_suite",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        name = getattr(item, "originalname", None) or item.name
        if item.path.name in SLOW_FILES or name in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _unconfigured_structlog() -> Iterator[None]:
    """A test that runs the CLI configures logging; undo it so later tests see the default."""
    yield
    structlog.reset_defaults()


@pytest.fixture
def unused_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def captured_events() -> Iterator[list[MutableMapping[str, Any]]]:
    """Structlog events, captured under structlog's default configuration (restored afterwards)."""
    saved = structlog.get_config()
    structlog.reset_defaults()
    try:
        with structlog.testing.capture_logs() as events:
            yield events
    finally:
        structlog.configure(**saved)


@pytest.fixture
def unreachable_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the Hugging Face Hub at a closed loopback port and clear every local-copy setting."""
    from agentenv.tasks import apps, livecodebench, mbpp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HTTPS_PROXY", "https_proxy",
                apps.ENV_VAR, livecodebench.ENV_VAR, mbpp.ENV_VAR):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="session")
def tiny_chat_model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A directory holding the tiny local chat model (see tests/support/tiny_model.py).

    Built once per machine and code version into pytest's cache (under a minute), then
    reused. Skips where the ``trl`` extra (torch, transformers, tokenizers) is not installed.
    """
    import hashlib
    import json
    from pathlib import Path

    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    from support import tiny_model
    from transformers.utils import get_json_schema

    source = Path(tiny_model.__file__).read_bytes()
    schema = json.dumps(get_json_schema(tiny_model.submit_tool()), sort_keys=True)  # what it learns
    key = hashlib.sha256(source + f"{transformers.__version__}/{tokenizers.__version__}/{schema}".encode())
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    root = cache.mkdir("tiny-chat-model") if cache is not None else tmp_path_factory.mktemp("tiny")
    out = root / key.hexdigest()[:16]
    if not out.is_dir():  # built beside, then renamed: an interrupted build leaves no half model
        staging = out.with_name(f"{out.name}.{os.getpid()}.tmp")
        shutil.rmtree(staging, ignore_errors=True)
        tiny_model.build_tiny_chat_model(staging)
        os.replace(staging, out)
    return str(out)



class _SharedRay:
    """The Ray cluster tests/test_ray_backend.py and tests/test_ray_pool.py share: a head node
    and two worker nodes, one CPU each, as separate raylets on this machine, with this process
    connected as its driver. Starting Ray costs tens of seconds on a loaded CI box, so the files
    share one; it is stopped as soon as the last test that uses it is done (see
    ``pytest_runtest_teardown``), so no idle cluster loads the machine under later tests."""

    def __init__(self) -> None:
        self.cluster: Any = None

    def get(self) -> Any:
        ray = pytest.importorskip("ray", reason="needs the 'ray' extra")
        cluster_utils = pytest.importorskip("ray.cluster_utils")
        if self.cluster is None:
            if ray.is_initialized():
                ray.shutdown()
            self.cluster = cluster_utils.Cluster(initialize_head=True,
                                                 head_node_args={"num_cpus": 1})
            self.cluster.workers = []
            ray.init(address=self.cluster.address, include_dashboard=False, log_to_driver=False)
        while len(self.cluster.workers) < 2:  # a test may have removed one
            self.cluster.workers.append(self.cluster.add_node(num_cpus=1))
        self.cluster.wait_for_nodes()
        return self.cluster

    def stop(self) -> None:
        if self.cluster is not None:
            import ray

            ray.shutdown()
            self.cluster.shutdown()
            self.cluster = None


_SHARED_RAY = _SharedRay()


@pytest.fixture(scope="module")
def ray_cluster() -> Any:
    """The shared Ray cluster (:class:`_SharedRay`); ``workers`` lists its worker nodes."""
    return _SHARED_RAY.get()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Stop the shared Ray cluster once the tests that use it are done (after their fixtures)."""
    yield
    if "ray_cluster" in getattr(item, "fixturenames", ()) and (
            nextitem is None or "ray_cluster" not in getattr(nextitem, "fixturenames", ())):
        _SHARED_RAY.stop()
