"""`agentenv run --policy openai` against a real third-party server: `transformers serve` (FastAPI
on uvicorn, from PyPI) on CPU, serving a tiny chat model made on the spot (tests/support).

What only a real server shows: its own error bodies (FastAPI's ``detail``), its own streaming,
its own connection handling when it dies. The model's answers are noise; everything around
them is what is checked: usage and finish reasons in every turn record, an unknown model
refused before the run in one line, a server killed mid-run stopping the run quickly with every
finished episode kept, and a resume completing it. Needs the ``serve`` extra (``dev`` pulls it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

if not os.environ.get("CI"):  # in CI a missing extra is a failure, not a skip
    pytest.importorskip("transformers", reason="needs the serve extra: pip install -e '.[serve]'")
    pytest.importorskip("fastapi", reason="needs the serve extra: pip install -e '.[serve]'")


START_TIMEOUT = 180.0  # importing torch and transformers on a loaded 2-core machine (hang guard)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Served:
    """`transformers serve MODEL_DIR` in a child process on a loopback port."""

    def __init__(self, model_dir: Path, port: int, log: Path) -> None:
        self.model_dir, self.port, self.log = model_dir, port, log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Served:
        # Its own (empty) Hub cache: some versions of `serve` list the cache for /v1/models and
        # fail where the directory does not exist.
        hub = self.log.parent / "hf-hub"
        hub.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_CACHE": str(hub)}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(Path(sys.executable).parent / "transformers"), "serve", "--host", "127.0.0.1",
                 "--port", str(self.port), "--device", "cpu", "--log-level", "warning", str(self.model_dir)],
                stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"transformers serve exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        self.kill()  # never leave a server behind that the fixture does not know of
        raise AssertionError(f"transformers serve did not come up: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def model_dir(tiny_chat_model: str) -> Path:
    """The suite's tiny chat model (tests/support/tiny_model.py), built once and cached."""
    return Path(tiny_chat_model)


@pytest.fixture(scope="module")
def shared(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server of the tiny model for the module (starting one costs 10-20 s of importing
    torch and transformers). The kill test kills it and starts it again on the same port."""
    server = Served(model_dir, free_port(), tmp_path_factory.mktemp("serve") / "serve.log").start()
    try:
        yield server
    finally:
        server.kill()


def agentenv(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentenv.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def records(run_dir: Path) -> list[dict[str, object]]:
    path = run_dir / "trajectories.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run_args(server: Served, out: Path, *extra: str) -> list[str]:
    return ["run", "--policy", "openai", "--base-url", server.url, "--model", str(server.model_dir),
            "--tasks", "builtin", "--out", str(out), "--no-progress", *extra]


def test_a_multi_turn_run_and_a_streamed_run_record_the_servers_usage(shared: Served, tmp_path: Path) -> None:
    """Every turn of every episode carries the server's token counts and finish reason, on the
    plain and the streaming path; later turns send the whole conversation."""
    done = agentenv(*run_args(shared, tmp_path / "multi", "--limit", "2", "--max-turns", "2",
                              "--max-tokens", "8"))
    assert done.returncode == 0, done.stderr
    episodes = records(tmp_path / "multi")
    assert len(episodes) == 2
    turns = [t for e in episodes for t in e["turns"]]  # type: ignore[attr-defined]
    assert all(t["finish_reason"] in ("length", "stop") and t["usage"]["completion_tokens"] >= 1
               for t in turns)
    prompts = [t["usage"]["prompt_tokens"] for t in episodes[0]["turns"]]  # type: ignore[index]
    assert prompts == sorted(prompts)  # turn 2 resends turn 1 and its feedback
    streamed = agentenv(*run_args(shared, tmp_path / "stream", "--limit", "2", "--single-step",
                                  "--max-tokens", "8", "--stream"))
    assert streamed.returncode == 0, streamed.stderr
    assert all(t["finish_reason"] in ("length", "stop")
               for e in records(tmp_path / "stream") for t in e["turns"])  # type: ignore[attr-defined]


def test_an_unknown_model_is_refused_in_one_line_before_the_run(shared: Served, tmp_path: Path) -> None:
    """The server's own words (FastAPI's detail) and what to fix, with no episode attempted."""
    done = agentenv("run", "--policy", "openai", "--base-url", shared.url, "--model", "no-such-model",
                    "--limit", "2", "--out", str(tmp_path / "run"), "--no-progress")
    assert done.returncode == 2
    error = [line for line in done.stderr.splitlines() if "error" in line]
    # "fix --model" when /v1/models lists what it serves, "check --model" when that list is
    # empty (transformers 5.10 lists only its Hub cache): either way the flag to change.
    assert len(error) == 1 and "pinned to" in error[0] and "--model" in error[0], done.stderr
    assert records(tmp_path / "run") == []


def test_return_tokens_against_a_server_without_token_ids_is_refused_in_one_line(
        shared: Served, tmp_path: Path) -> None:
    """`transformers serve` validates its body: vLLM's return_token_ids is a 422 ("Unexpected
    fields in the request"), and so would be a literal "extra_body" key. The preflight sends
    --return-tokens' fields, so the run stops before its first episode, naming the flag."""
    done = agentenv(*run_args(shared, tmp_path / "run", "--limit", "2", "--return-tokens"))
    assert done.returncode == 2
    error = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(error) == 1 and "--return-tokens" in error[0] and "return_token_ids" in error[0], done.stderr
    assert records(tmp_path / "run") == []


def test_a_server_killed_mid_run_stops_the_run_and_a_resume_completes_it(
        shared: Served, tmp_path: Path) -> None:
    """kill -9 after the first finished episode: the run stops (without waiting out its
    retries), says how to resume, keeps what finished; with the server back (the module's
    server, started again) the same command completes."""
    served = shared
    out = tmp_path / "run"
    args = run_args(served, out, "--limit", "3", "--samples", "3", "--max-turns", "3",
                    "--max-tokens", "16", "--concurrency", "4")
    run = subprocess.Popen([sys.executable, "-m", "agentenv.cli", *args], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not records(out) and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert run.poll() is None, f"the run ended before the kill: {run.communicate()}"
        served.kill()
        killed = time.monotonic()
        _stdout, stderr = run.communicate(timeout=120)  # hang guard, not a speed assertion
        stopped_after = time.monotonic() - killed
    finally:
        if run.poll() is None:
            run.kill()
    kept = records(out)
    finished = [e for e in kept if not e["partial"]]
    partial = [e for e in kept if e["partial"]]
    print(f"\nstopped {stopped_after:.2f} s after kill -9; kept {len(finished)} finished episodes "
          f"and {len(partial)} partial ones ({sum(len(e['turns']) for e in partial)} graded turns) of 9")
    assert run.returncode == 1, stderr
    assert "stopped:" in stderr and f"--out {out}" in stderr
    assert 1 <= len(finished) < 9 and all(e["turns"] for e in kept)
    assert all(e["stop_reason"] == "server_unavailable" for e in partial)
    served.start()
    resumed = agentenv(*args)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming: {len(finished)} of 9" in resumed.stderr
    final = {e["episode_id"]: e for e in records(out)}
    assert len(final) == 9 and len(records(out)) == 9 and not any(e["partial"] for e in final.values())
    # A partial episode went on from its last graded turn: those turns are the very records the
    # first run graded (the model's answers are sampled: a redone turn would differ).
    for e in partial:
        done = final[e["episode_id"]]
        assert done["turns"][:len(e["turns"])] == e["turns"]
        assert done["metadata"]["resumed_after_turns"] == [len(e["turns"])]
        assert [t["turn"] for t in done["turns"]] == list(range(1, len(done["turns"]) + 1))


# Positions of the small-context copy of the tiny model: turn 1's prompt (about 150 of its
# tokens) and reply fit; turn 2 resends it with the reply and the feedback, and does not.
CONTEXT = 180


@pytest.fixture
def small_context(model_dir: Path, tmp_path: Path) -> Iterator[Served]:
    """The tiny model with ``max_position_embeddings`` cut to CONTEXT, served."""
    copy = tmp_path / "small-context"
    shutil.copytree(model_dir, copy)
    config = json.loads((copy / "config.json").read_text())
    config["max_position_embeddings"] = CONTEXT
    (copy / "config.json").write_text(json.dumps(config))
    server = Served(copy, free_port(), tmp_path / "serve.log").start()
    try:
        yield server
    finally:
        server.kill()


def test_a_conversation_past_the_models_context_is_served_not_refused_so_the_budget_must_cap_it(
        small_context: Served, tmp_path: Path) -> None:
    """What `transformers serve` does when a conversation outgrows its model's context
    (max_position_embeddings): turn 1 fits, turn 2's prompt does not. This server (5.x) has no
    context check: it answers 200 and only logs "exceeded the model's predefined maximum
    length", so no error reaches agentenv and the episode is not cut: the records show the
    overflow in the server's own usage numbers. A server that refuses the request instead (a
    400 naming the context length, as vLLM sends) ends the episode with stop_reason
    context_length, the graded turn kept and a message naming --token-budget (the stand-in
    server's test covers that path; this test takes it too if `serve` ever starts refusing)."""
    out = tmp_path / "run"
    done = agentenv(*run_args(small_context, out, "--limit", "1", "--max-turns", "3", "--max-tokens", "16"))
    assert done.returncode == 0, done.stderr
    (episode,) = records(out)
    turns = episode["turns"]
    assert turns and turns[0]["usage"]["prompt_tokens"] + 16 <= CONTEXT  # turn 1 fit (graded)
    if episode["stop_reason"] == "context_length":  # a server that refuses: the turn is kept
        assert len(turns) == 1 and "--token-budget" in episode["metadata"]["policy_error"]
        assert "--token-budget" in done.stderr
    else:  # transformers serve: served past the context, no error to detect
        assert len(turns) == 3 and episode["stop_reason"] == "max_turns"
        assert all(t["usage"]["prompt_tokens"] > CONTEXT for t in turns[1:])
