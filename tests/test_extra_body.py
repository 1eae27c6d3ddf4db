"""``extra_body`` and ``--return-tokens`` on the wire: the fields go to the top level of the JSON
body on both calls (sync and async), never as a literal
``"extra_body"`` key; a server that refuses them stops the run before it starts; a run whose
episodes mostly end in ``policy_error`` says so and exits non-zero."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentenv.cli import main
from agentenv.errors import PolicyError
from agentenv.policies import OpenAIPolicy
from agentenv.tasks.builtin import builtin_tasks
from agentenv.testing import ChatReply, ChatServer, ScriptedModel

TASKS = builtin_tasks()[:2]
OBS = {"prompt": "Write add(a, b)."}


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def ask(policy: OpenAIPolicy, how: str) -> Any:
    if how == "sync":
        return policy(OBS)

    async def go() -> Any:
        try:
            return await policy.acall(OBS)
        finally:
            await policy.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("how", ["sync", "async"])
def test_extra_body_fields_reach_the_top_level_of_the_body(how: str) -> None:
    """The stand-in server refuses unknown fields as OpenAI does: a literal "extra_body" key
    (the async path once sent one) would be a 400 and a PolicyCallError here."""
    with ChatServer(["OK"], fields=("top_k",)) as server:
        policy = OpenAIPolicy("m", base_url=server.url, extra_body={"top_k": 5},
                              max_retries=0)
        completion = ask(policy, how)
        (request,) = server.chat_requests
    assert completion == "OK"
    assert request.body["top_k"] == 5 and "extra_body" not in request.body
    assert policy.request_body(OBS)["top_k"] == 5 and "extra_body" not in policy.request_body(OBS)


@pytest.mark.parametrize("how", ["sync", "async"])
def test_return_tokens_brings_token_ids_on_every_path(how: str) -> None:
    with ChatServer(["def add(a, b):\n    return a + b"]) as server:
        policy = OpenAIPolicy("m", base_url=server.url, return_tokens=True,
                              max_retries=0)
        completion = ask(policy, how)
        (request,) = server.chat_requests
    assert request.body["return_token_ids"] is True and request.body["logprobs"] is True
    assert "extra_body" not in request.body
    assert completion.token_ids and completion.prompt_token_ids
    assert completion.logprobs is not None and len(completion.logprobs) == len(completion.token_ids)


def test_the_stand_in_server_refuses_an_unknown_field() -> None:
    """What makes the tests above bite: a field the server does not know is a 400 naming it."""
    with ChatServer(["OK"]) as server:
        policy = OpenAIPolicy("m", base_url=server.url, extra_body={"extra_body": {"x": 1}}, max_retries=0)
        with pytest.raises(PolicyError, match="Unrecognized request argument supplied: extra_body"):
            policy(OBS)


def _refuses_return_token_ids(body: dict[str, Any]) -> ChatReply:
    """A server that validates its body and does not know vLLM's field (FastAPI's 422)."""
    if "return_token_ids" in body:
        return ChatReply(json.dumps({"detail": [{"type": "extra_forbidden", "loc": ["body", "return_token_ids"],
                                                 "msg": "Extra inputs are not permitted"}]}), status=422)
    return ChatReply("OK")


def test_a_server_that_refuses_return_tokens_stops_the_run_before_it_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Even when /v1/models lists the model (the preflight would otherwise ask nothing), the
    one-token request carries --return-tokens' fields, and the refusal is one line that names
    the flag; no episode runs."""
    with ChatServer(_refuses_return_token_ids, model="M") as server:
        code, _out, err = run_cli(capsys, "run", "--policy", "openai", "--base-url", server.url, "--model", "M",
                                  "--return-tokens", "--limit", "2", "--out", str(tmp_path / "run"),
                                  "--no-progress")
        assert len(server.chat_requests) == 1
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err
    assert "--return-tokens" in lines[0] and "return_token_ids" in lines[0] and "422" in lines[0]
    assert not (tmp_path / "run" / "trajectories.jsonl").exists()


def test_a_listed_model_with_return_tokens_passes_the_preflight_of_a_server_that_returns_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ChatServer(ScriptedModel(TASKS), model="M") as server:
        code, _out, err = run_cli(capsys, "run", "--policy", "openai", "--base-url", server.url, "--model", "M",
                                  "--return-tokens", "--limit", "2", "--max-turns", "2",
                                  "--out", str(tmp_path / "run"), "--no-progress")
        preflight, *turns = server.chat_requests
    assert code == 0, err
    assert preflight.body["max_tokens"] == 1 and preflight.body["return_token_ids"] is True
    assert turns and all("extra_body" not in r.body and r.body["return_token_ids"] for r in turns)


def _rejects_after_preflight(body: dict[str, Any]) -> ChatReply:
    if body.get("max_tokens") == 1:
        return ChatReply("OK")
    return ChatReply("unsupported value for 'messages'", status=400)


def test_a_run_whose_episodes_mostly_end_in_policy_error_says_so_and_exits_non_zero(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every model call rejected (a 400): the table would read pass@1 0.000; the console says
    why, in the server's words, and the exit code is 1, with no invitation to report on it."""
    with ChatServer(_rejects_after_preflight) as server:
        code, out, err = run_cli(capsys, "run", "--policy", "openai", "--base-url", server.url,
                                 "--limit", "3", "--out", str(tmp_path / "run"), "--no-progress")
    assert code == 1
    assert "error: 3 of 3 episodes ended with stop reason policy_error" in err
    assert "unsupported value for 'messages'" in err
    assert "next: agentenv report" not in out


def test_a_few_policy_errors_are_a_warning_and_the_run_succeeds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rejected = TASKS[0].prompt.strip()

    def reject_one_task(body: dict[str, Any]) -> ChatReply:
        if body.get("max_tokens") != 1 and any(rejected in str(m.get("content")) for m in body["messages"]):
            return ChatReply("this prompt is refused", status=400)
        return ScriptedModel(TASKS)(body)

    with ChatServer(reject_one_task) as server:
        code, out, err = run_cli(capsys, "run", "--policy", "openai", "--base-url", server.url,
                                 "--limit", "2", "--samples", "2", "--max-turns", "3",
                                 "--out", str(tmp_path / "run"), "--no-progress")
    assert code == 0, err
    assert "warning: 2 of 4 episodes ended with stop reason policy_error" in err
    assert "this prompt is refused" in err and "next: agentenv report" in out
