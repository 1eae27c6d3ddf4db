"""Partial episodes (agentenv.rollout.partial): a model server that fails or dies in the middle of
a multi-turn run loses no graded turn. The run stops, every episode in flight with a graded turn
is in the store as a partial record (in no metric), and the resume continues each from its last
graded turn: the finished trajectory, and every request the policy sent, are those of a run that
never stopped. Episodes without a graded turn are redone; nothing is written twice."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from agentenv import MultiTurnCodingEnv, mock_policy
from agentenv.cli import main
from agentenv.credit import turn_returns
from agentenv.errors import EpisodeInterrupted, PolicyCallError, SandboxError, ServerUnavailable
from agentenv.policies import OpenAIPolicy
from agentenv.records import Trajectory, TurnRecord
from agentenv.report.runs import load_run
from agentenv.rollout import RolloutConfig, make_env, read_trajectories, run_rollouts
from agentenv.rollout import execute as execute_module
from agentenv.rollout.execute import EnvPool, run_spec
from agentenv.rollout.partial import partial_record, resume_snapshot
from agentenv.rollout.plan import plan_episodes
from agentenv.tasks import Task
from agentenv.testing import ChatReply, ChatServer, ScriptedModel


def task(name: str, body: str, wrong: list[str], checks: tuple[str, ...]) -> Task:
    return Task(name=name, prompt=f"Write a Python function `{name}(a, b)`: {body}.", entry_point=name,
                checks=checks, reference_solution=f"def {name}(a, b):\n    return {wrong[-1]}\n",
                metadata={"attempts": [f"def {name}(a, b):\n    return {w}\n" for w in wrong[:-1]]})


# Three turns each when the episode is not cut: two wrong attempts, then the reference.
TASKS = [
    task("plus", "the sum", ["a - b", "a * b", "a + b"], ("assert plus(2, 3) == 5", "assert plus(0, 0) == 0")),
    task("minus", "the difference", ["a + b", "b - a", "a - b"], ("assert minus(5, 3) == 2",)),
    task("times", "the product", ["a + b", "a - b", "a * b"], ("assert times(2, 3) == 6", "assert times(1, 1) == 1")),
]
# A token budget that never binds here but is live: every request's max_tokens is what it
# leaves, so a resumed episode that lost its count would ask for something else.
CONFIG = RolloutConfig(max_turns=3, concurrency=1, token_budget=3000)


@pytest.fixture
def one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """One episode open at a time (no extra episodes to overlap the sandbox), so which request
    fails is decided by the test, not by the scheduler."""
    monkeypatch.setattr(execute_module, "_sandbox_workers", lambda: 0)


class Outage:
    """The scripted model, answering the first ``healthy`` chat requests and then 503 until
    ``heal()``. Records every request (its messages, max_tokens and seed) and whether it was
    answered."""

    def __init__(self, healthy: int | None = None) -> None:
        self.model = ScriptedModel(TASKS)
        self.healthy = healthy
        self.served: list[tuple[str, bool]] = []
        self._lock = threading.Lock()

    def heal(self) -> None:
        self.healthy = None

    def __call__(self, body: Mapping[str, Any]) -> ChatReply:
        if body.get("max_tokens") == 1:  # the preflight's one-token completion: not a turn
            return ChatReply("OK")
        with self._lock:
            ok = self.healthy is None or sum(1 for _, was in self.served if was) < self.healthy
            asked = {k: body.get(k) for k in ("messages", "max_tokens", "seed")}
            self.served.append((json.dumps(asked, sort_keys=True), ok))
        return self.model(body) if ok else ChatReply("the model worker crashed", status=503)

    def answered(self) -> list[str]:
        return [messages for messages, ok in self.served if ok]


def policy_for(url: str) -> OpenAIPolicy:
    return OpenAIPolicy("test-model", base_url=url, backoff=0.01, max_backoff=0.02, timeout=5.0,
                        max_retries=1, breaker_threshold=2, breaker_seconds=0.0)


def comparable(turn: TurnRecord) -> dict[str, Any]:
    """A turn record without its wall time (the only field two runs may differ in)."""
    record = turn.to_dict()
    record.pop("exec_seconds")
    return record


def lines(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Trajectory], list[str]]]:
    """The run as it goes when nothing fails: its trajectories by id and the requests it sent."""
    outage = Outage()
    with ChatServer(outage) as server:
        result = run_rollouts(TASKS, policy_for(server.url), CONFIG, tmp_path_factory.mktemp("baseline"))
    assert result.stopped is None and not result.errors and not result.partial
    yield {str(t.episode_id): t for t in result.trajectories}, outage.answered()


@pytest.mark.parametrize("healthy", [3, 4, 5])
def test_a_server_failing_mid_conversation_keeps_the_graded_turns_and_the_resume_continues_them(
        healthy: int, tmp_path: Path, one_at_a_time: None,
        uninterrupted: tuple[dict[str, Trajectory], list[str]]) -> None:
    """The first episode takes 3 requests and finishes; the server then answers ``healthy - 3``
    more, so the second episode is cut before its first turn (3), after one turn (4) or after
    two (5). The run stops; a cut episode with graded turns is a partial record (in no metric),
    one without is not written; the third never started. The resume runs what is left and
    continues the partial episode: each finished trajectory equals the uninterrupted run's (turn
    indices, tokens, rewards, credit) and the requests answered over both runs are exactly the
    uninterrupted run's, none sent twice."""
    baseline, baseline_requests = uninterrupted
    outage = Outage(healthy=healthy)
    kept = healthy - 3
    with ChatServer(outage) as server:
        policy = policy_for(server.url)
        first = run_rollouts(TASKS, policy, CONFIG, tmp_path)
        assert first.stopped is not None and "stopped answering" in first.stopped
        assert [t.episode_id for t in first.trajectories] == ["plus#0"]
        assert first.summary["episodes"] == 1 and first.summary["run"]["partial_turns"] == kept
        stored = lines(tmp_path)
        if kept:
            assert [r["episode_id"] for r in stored] == ["plus#0", "minus#0"]
            partial = stored[1]
            assert partial["partial"] and partial["stop_reason"] == "server_unavailable"
            assert not partial["terminated"] and not partial["truncated"]
            assert [t["turn"] for t in partial["turns"]] == list(range(1, kept + 1))
            assert first.summary["partial"][0]["episode_id"] == "minus#0"
            assert "503" in first.summary["partial"][0]["error"] or "stopped answering" in \
                first.summary["partial"][0]["error"]
        else:  # nothing graded: nothing to keep, the episode is redone
            assert [r["episode_id"] for r in stored] == ["plus#0"] and not first.partial

        outage.heal()
        policy.preflight()  # closes the breaker
        resumed = run_rollouts(TASKS, policy, CONFIG, tmp_path)
    assert resumed.stopped is None and not resumed.errors and not resumed.partial
    assert resumed.skipped == 1 and resumed.continued == (1 if kept else 0)
    assert resumed.summary["episodes"] == 3 and resumed.summary["run"]["partial"] == 0
    final = {str(t.episode_id): t for t in resumed.trajectories}
    for episode_id, expected in baseline.items():
        got = final[episode_id]
        assert [comparable(t) for t in got.turns] == [comparable(t) for t in expected.turns]
        assert (got.stop_reason, got.total_tokens, got.seed) == (expected.stop_reason, expected.total_tokens,
                                                                 expected.seed)
        assert turn_returns(got, "delta") == turn_returns(expected, "delta")
    assert final["minus#0"].metadata.get("resumed_after_turns") == ([kept] if kept else None)
    # One line per episode, in plan order; the partial line is gone.
    assert [r["episode_id"] for r in lines(tmp_path)] == ["plus#0", "minus#0", "times#0"]
    assert not any(r["partial"] for r in lines(tmp_path))
    # What the model was asked, over both runs, is what the uninterrupted run asked: the
    # continued episode's next request carried the same history, and no turn was asked twice.
    assert sorted(outage.answered()) == sorted(baseline_requests)


def test_a_server_killed_mid_conversation_stops_the_run_and_the_resume_continues_the_episode(
        tmp_path: Path, unused_port: int, one_at_a_time: None,
        uninterrupted: tuple[dict[str, Trajectory], list[str]]) -> None:
    """The server is stopped right after the second episode's first graded turn (connections
    refused from then on): the run stops, that turn is in the store, and with a new server on
    the port the resume finishes the run as if nothing had happened."""
    baseline, _requests = uninterrupted
    server = ChatServer(ScriptedModel(TASKS), port=unused_port).start()

    def factory(config: RolloutConfig, tasks: Any, seed: int) -> Any:
        env = make_env(config, tasks, seed)
        step = env.astep

        async def astep(action: str) -> Any:
            out = await step(action)
            if env.trajectory.task_name == "minus" and len(env.trajectory.turns) == 1:
                server.stop()  # kill: the next request finds nothing listening
            return out
        env.astep = astep
        return env

    policy = policy_for(server.url)
    try:
        first = run_rollouts(TASKS, policy, CONFIG, tmp_path, env_factory=factory)
    finally:
        server.stop()
    assert first.stopped is not None and [t.episode_id for t in first.partial] == ["minus#0"]
    assert [r["episode_id"] for r in lines(tmp_path)] == ["plus#0", "minus#0"]
    with ChatServer(ScriptedModel(TASKS), port=unused_port):
        policy.preflight()
        resumed = run_rollouts(TASKS, policy, CONFIG, tmp_path)
    assert resumed.stopped is None and resumed.continued == 1 and len(resumed.trajectories) == 3
    for t in resumed.trajectories:
        expected = baseline[str(t.episode_id)]
        assert [comparable(x) for x in t.turns] == [comparable(x) for x in expected.turns]
    assert len(lines(tmp_path)) == 3


def test_a_transient_failure_of_one_episode_keeps_its_turns_and_the_run_goes_on(
        tmp_path: Path, one_at_a_time: None) -> None:
    """One request fails for good while the breaker stays closed: that episode is reported as
    failed and kept as partial, the others finish, and a rerun completes it from its turn."""
    state = {"failed": False}
    model = ScriptedModel(TASKS)

    def flaky(body: Mapping[str, Any]) -> ChatReply:
        turn = 1 + sum(1 for m in body["messages"] if m["role"] == "assistant")
        if "`plus(" in body["messages"][1]["content"] and turn == 2 and not state["failed"]:
            state["failed"] = True
            return ChatReply("overloaded", status=503)
        return model(body)

    with ChatServer(flaky) as server:
        policy = OpenAIPolicy("test-model", base_url=server.url, backoff=0.01, max_retries=0,
                              breaker_threshold=5)
        first = run_rollouts(TASKS, policy, CONFIG, tmp_path)
        assert first.stopped is None and [e.episode_id for e in first.errors] == ["plus#0"]
        assert [(t.episode_id, len(t.turns)) for t in first.partial] == [("plus#0", 1)]
        assert first.summary["episodes"] == 2 and first.summary["partial"][0]["turns"] == 1
        # Reports read finished episodes only; the partial one is there when asked for.
        assert [t.episode_id for t in load_run(tmp_path)] == ["minus#0", "times#0"]
        assert [t.episode_id for t in load_run(tmp_path, partial=True)] == ["plus#0", "minus#0", "times#0"]
        again = run_rollouts(TASKS, policy, CONFIG, tmp_path)
    assert again.continued == 1 and again.summary["episodes"] == 3 and not again.partial
    plus = next(t for t in again.trajectories if t.episode_id == "plus#0")
    assert [t.turn for t in plus.turns] == [1, 2, 3] and plus.stop_reason == "solved"


def test_a_cancelled_run_keeps_the_graded_turns_of_the_episodes_in_flight(tmp_path: Path) -> None:
    """Cancelling the run (Ctrl-C does) while episodes wait on the model: each with a graded
    turn is written as partial ("interrupted"); the rerun continues them."""
    gate = threading.Event()
    model = ScriptedModel(TASKS)

    def hang_on_turn_two(body: Mapping[str, Any]) -> ChatReply:
        if any(m["role"] == "assistant" for m in body["messages"]) and not gate.is_set():
            gate.wait(10)
        return model(body)

    with ChatServer(hang_on_turn_two) as server:
        policy = OpenAIPolicy("test-model", base_url=server.url, timeout=30.0)

        async def cancel_when_all_wait() -> None:
            from agentenv.rollout import arun_rollouts

            run = asyncio.ensure_future(arun_rollouts(TASKS, policy, RolloutConfig(max_turns=3), tmp_path))
            deadline = asyncio.get_running_loop().time() + 60  # hang guard
            while sum(1 for r in server.chat_requests if len(r.messages) > 2) < len(TASKS):
                assert asyncio.get_running_loop().time() < deadline and not run.done()
                await asyncio.sleep(0.02)
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
            await policy.aclose()

        asyncio.run(cancel_when_all_wait())
        gate.set()
        stored = read_trajectories(tmp_path, partial=True)
        assert sorted((t.episode_id, t.stop_reason, len(t.turns)) for t in stored) == \
            [("minus#0", "interrupted", 1), ("plus#0", "interrupted", 1), ("times#0", "interrupted", 1)]
        assert read_trajectories(tmp_path) == []  # none is finished
        again = run_rollouts(TASKS, policy, RolloutConfig(max_turns=3), tmp_path)
    assert again.continued == 3 and all(t.stop_reason == "solved" for t in again.trajectories)


def test_a_partial_record_round_trips_and_restores_the_same_observation() -> None:
    """What the store holds is enough: from the JSON line alone, the env is back where it was
    (same messages, counters and budget), and a record with no graded turn keeps nothing."""
    env = MultiTurnCodingEnv(tasks=TASKS, max_turns=3, token_budget=2000)
    obs = env.reset(task_index=0, seed=7)
    assert partial_record(env, mock_policy, "plus#0", 0, ServerUnavailable("down")) is None  # no turn yet
    obs = env.step("```python\ndef plus(a, b):\n    return a - b\n```")[0]
    partial = partial_record(env, mock_policy, "plus#0", 0, ServerUnavailable("down"))
    assert partial is not None and partial.partial and not partial.done
    assert partial_record(env, mock_policy, "plus#0", 0, ValueError("a bug")) is None  # not the infrastructure's
    assert partial_record(env, mock_policy, "plus#0", 0, SandboxError("x")).stop_reason == "interrupted"  # type: ignore[union-attr]
    line = json.loads(json.dumps(partial.to_dict()))
    other = MultiTurnCodingEnv(tasks=TASKS, max_turns=3, token_budget=2000)
    restored = other.restore(resume_snapshot(Trajectory.from_dict(line)), seed=7)
    assert restored == obs and other.trajectory is not None
    assert other.trajectory.stop_reason is None and other.trajectory.metadata["resumed_after_turns"] == [1]


def test_a_partial_record_that_no_longer_fits_the_env_is_redone_from_the_start(tmp_path: Path) -> None:
    """A partial record taken under other templates (its snapshot does not fit) is played
    again from turn 1, not restored into the wrong conversation."""
    env = MultiTurnCodingEnv(tasks=TASKS, max_turns=3)
    env.reset(task_index=0, seed=1)
    env.step("```python\ndef plus(a, b):\n    return a - b\n```")
    partial = partial_record(env, "scripted", "plus#0", 0, PolicyCallError("x", transient=True))
    assert partial is not None
    partial.metadata["partial"]["settings"]["template_ids"] = {"system": "other@0"}
    spec = plan_episodes(TASKS, 1, 0)[0]
    spec = type(spec)(**{**spec.to_dict(), "resume": partial.to_dict()})
    from agentenv.policies import ScriptedPolicy

    trajectory = asyncio.run(run_spec(spec, ScriptedPolicy(TASKS), EnvPool(TASKS, CONFIG), None))
    assert trajectory.turns[0].turn == 1 and trajectory.done and "resumed_after_turns" not in trajectory.metadata


def test_episode_interrupted_survives_pickling_with_its_record_and_cause() -> None:
    """The Ray backend ships it between processes."""
    import pickle

    env = MultiTurnCodingEnv(tasks=TASKS, max_turns=3)
    env.reset(task_index=0)
    env.step("```python\ndef plus(a, b):\n    return a - b\n```")
    cause = ServerUnavailable("down", status=503)
    partial = partial_record(env, mock_policy, "plus#0", 0, cause)
    copy = pickle.loads(pickle.dumps(EpisodeInterrupted(partial, cause)))
    assert isinstance(copy.cause, ServerUnavailable) and copy.cause.status == 503
    assert copy.partial.to_dict() == partial.to_dict()  # type: ignore[union-attr]


# -- the command line -----------------------------------------------------------------------------

def test_agentenv_run_keeps_partial_episodes_and_resume_continues_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`agentenv run` against a server that starts failing after the first turns: it stops,
    says how many partial episodes and graded turns it kept and how to resume; the same
    command then continues them and exits 0 with one line per episode."""
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in TASKS))
    state = {"down": True}
    model = ScriptedModel(TASKS)

    def down_after_turn_one(body: Mapping[str, Any]) -> ChatReply:
        if body.get("max_tokens") == 1:  # the preflight
            return ChatReply("OK")
        if state["down"] and any(m["role"] == "assistant" for m in body["messages"]):
            return ChatReply("model worker died", status=503)
        return model(body)

    out = tmp_path / "run"
    argv = ["run", "--policy", "openai", "--base-url", "", "--tasks", str(tasks_file), "--max-turns", "3",
            "--max-retries", "0", "--breaker-failures", "2", "--breaker-seconds", "0", "--out", str(out),
            "--no-progress"]
    with ChatServer(down_after_turn_one) as server:
        argv[4] = server.url
        assert main(argv) == 1
        _out, err = capsys.readouterr()
        assert "partial episode" in err and "graded turn" in err
        # Stopped by the breaker (it opens on the second failure), unless a late first-turn
        # success closed it in between: then the episodes failed one by one.
        assert ("stopped:" in err and f"--out {out}" in err) or "again to retry" in err
        stored = lines(out)
        partial = [r for r in stored if r["partial"]]
        assert partial and all(len(r["turns"]) == 1 for r in partial)
        summary = json.loads((out / "summary.json").read_text())
        assert summary["episodes"] == len(stored) - len(partial)
        assert summary["run"]["partial"] == len(partial)
        state["down"] = False
        assert main(argv) == 0
        _out, err = capsys.readouterr()
    assert f"continuing {len(partial)} partial episode" in err
    final = lines(out)
    assert len(final) == 3 and not any(r["partial"] for r in final)
    assert all([t["turn"] for t in r["turns"]] == [1, 2, 3] for r in final)
    continued = {r["episode_id"] for r in partial}
    assert all(r["metadata"].get("resumed_after_turns") == [1] for r in final if r["episode_id"] in continued)


def test_a_ray_actor_returns_the_partial_record_and_its_cause_as_data(tmp_path: Path) -> None:
    """The actor half of the Ray backend (a plain class, no cluster needed): an episode the
    server stopped comes back as its partial record and the error, which the driver raises
    again as EpisodeInterrupted."""
    from agentenv.rollout.ray_backend import EpisodeActor

    with ChatServer(Outage(healthy=1)) as server:
        actor = EpisodeActor(TASKS, policy_for(server.url), CONFIG, slots=1)
        spec = plan_episodes(TASKS, 1, 0)[0]
        data = asyncio.run(actor.run(spec.to_dict()))
    assert isinstance(data["cause"], ServerUnavailable)
    partial = Trajectory.from_dict(data["interrupted"])
    assert partial.partial and len(partial.turns) == 1 and partial.episode_id == spec.episode_id


def test_the_store_keeps_one_record_per_episode_and_a_finished_one_wins(tmp_path: Path) -> None:
    """Partial, then finished: the finished one stands; an older partial gives way to a newer
    one; a partial written after a finished one never replaces it; sorting the file leaves
    exactly those lines."""
    from agentenv.rollout.store import RunStore, latest_records

    def record(episode_id: str, stop_reason: str | None, turns: int) -> Trajectory:
        t = Trajectory(task_name="plus", episode_id=episode_id, stop_reason=stop_reason)
        t.turns.extend(TurnRecord(turn=i, response_text="", code="", code_hash="", outcome="no_code", passed=0,
                                  total=1, fraction=0.0, reward=0.0, delta=0.0) for i in range(1, turns + 1))
        return t

    written = [record("a", "server_unavailable", 1), record("b", "interrupted", 1), record("a", "max_turns", 3),
               record("b", "server_unavailable", 2), record("c", "solved", 1), record("c", "interrupted", 1)]
    kept = latest_records(written)
    assert [(t.episode_id, t.stop_reason, len(t.turns)) for t in kept] == \
        [("a", "max_turns", 3), ("b", "server_unavailable", 2), ("c", "solved", 1)]
    with RunStore(tmp_path) as store:
        store.open({}, {})
        for t in written:
            store.append(t)
    store.sort_episodes({"c": 0, "b": 1, "a": 2})
    assert [(r["episode_id"], r["stop_reason"]) for r in lines(tmp_path)] == \
        [("c", "solved"), ("b", "server_unavailable"), ("a", "max_turns")]
    assert [t.episode_id for t in read_trajectories(tmp_path)] == ["c", "a"]
