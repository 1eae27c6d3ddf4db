"""verl: our parquet read by verl's RLHFDataset, our compute_score called by verl's own reward
managers (loaded the way custom_reward_function loads it), and our submit tool registered from a
tool config and called through verl's ToolAgentLoop._call_tool (the tool agent loop's own code)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentenv.integrations.verl import (
    DATA_SOURCE,
    RETURN_KEY,
    compute_score,
    compute_score_batch,
    to_verl_parquet,
    to_verl_records,
)
from agentenv.tasks.schema import Task

verl = pytest.importorskip("verl")

ADD = Task(name="add", prompt="Write `add(a, b)`.", entry_point="add",
           checks=("assert add(2, 3) == 5", "assert add(-1, 1) == 0", "assert add(0, 0) == 0",
                   "assert add(10, 5) == 15"),
           visible_checks=("assert add(2, 3) == 5",))
SCALE = Task(name="scale", prompt="Write `scale(x)`.", entry_point="scale",
             checks=("assert scale(2) == 6",), setup_code="def factor():\n    return 3\n")
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"
VERL_ROOT = Path(verl.__file__).resolve().parent
MODULE = Path(__file__).resolve().parent.parent / "agentenv" / "integrations" / "verl.py"


def test_records_follow_verls_layout_and_keep_hidden_checks_out_of_the_prompt() -> None:
    """data_source, chat prompt, ability, reward_model.ground_truth and extra_info with tools_kwargs."""
    rows = to_verl_records([ADD, SCALE], multi_turn=True, max_turns=3)
    row = rows[0]
    assert row["data_source"] == DATA_SOURCE and row["ability"] == "code"
    assert row["agent_name"] == "tool_agent"
    assert row["prompt"][-1]["role"] == "user" and "add(10, 5)" not in json.dumps(row["prompt"])
    assert json.loads(row["reward_model"]["ground_truth"]) == list(ADD.checks)
    assert row["extra_info"]["entry_point"] == "add"
    assert "task" in row["extra_info"]["tools_kwargs"]["submit"]["create_kwargs"]
    assert rows[1]["extra_info"]["setup_code"] == "def factor():\n    return 3\n"
    assert "agent_name" not in to_verl_records([ADD])[0]


def test_verls_rlhf_dataset_reads_the_parquet(tmp_path: Path, tiny_chat_model: str) -> None:
    """verl.utils.dataset.RLHFDataset tokenises our prompts and keeps the reward columns."""
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    path = to_verl_parquet([ADD, SCALE], tmp_path / "train.parquet", multi_turn=True)
    tokenizer = AutoTokenizer.from_pretrained(tiny_chat_model)
    config = OmegaConf.create({"max_prompt_length": 2048, "filter_overlong_prompts": False,
                               "cache_dir": str(tmp_path / "cache"), "return_raw_chat": True})
    dataset = RLHFDataset(str(path), tokenizer, config)
    assert len(dataset) == 2
    item = dataset[0]
    assert item["data_source"] == DATA_SOURCE
    assert json.loads(item["reward_model"]["ground_truth"]) == list(ADD.checks)
    assert item["extra_info"]["tools_kwargs"]["submit"]["create_kwargs"]["task"]


def test_compute_score_grades_the_code_in_the_solution() -> None:
    """Right code 1.0 (acc 1), a partly right one its fraction, prose 0; setup_code is honoured."""
    rows = to_verl_records([ADD, SCALE])
    gt, info = rows[0]["reward_model"]["ground_truth"], rows[0]["extra_info"]
    assert compute_score(DATA_SOURCE, RIGHT, gt, info) == {"score": 1.0, "acc": 1.0}
    assert compute_score(DATA_SOURCE, WRONG, gt, info) == {"score": 0.25, "acc": 0.0}
    assert compute_score(DATA_SOURCE, "no idea", gt, info)["score"] == 0.0
    scale = "```python\ndef scale(x):\n    return x * factor()\n```"
    batch = compute_score_batch([DATA_SOURCE] * 2, [scale, RIGHT],
                                [r["reward_model"]["ground_truth"] for r in rows[::-1]],
                                [r["extra_info"] for r in rows[::-1]])
    assert [b["score"] for b in batch] == [1.0, 1.0]


def test_compute_score_grades_as_code_reward_does_with_equality_and_prelude() -> None:
    """A task's equality and prelude, carried in extra_info, decide the score as they do in TRL."""

    def score(task: Task, reply: str) -> float:
        row = to_verl_records([task])[0]
        return compute_score(DATA_SOURCE, reply, row["reward_model"]["ground_truth"],
                             row["extra_info"])["score"]

    strict = Task(name="add", prompt="Write `add(a, b)`.", entry_point="add",
                  checks=("assert add(2, 3) == 5",), equality="strict")
    as_float = "```python\ndef add(a, b):\n    return float(a + b)\n```"
    assert score(strict, as_float) == 0.0
    assert score(ADD, as_float) == 1.0
    with_prelude = Task(name="add", prompt="Write `add(a, b)`.", entry_point="add",
                        checks=("assert add(2, 3) == 5",), prelude="from operator import add as plus\n")
    assert score(with_prelude, "```python\ndef add(a, b):\n    return plus(a, b)\n```") == 1.0


def test_a_multi_turn_episode_return_is_the_score() -> None:
    """When the submit tool wrote the episode's return, compute_score reports it unchanged."""
    row = to_verl_records([ADD])[0]
    info = dict(row["extra_info"], **{RETURN_KEY: 0.75, "agentenv_solved": False})
    assert compute_score(DATA_SOURCE, "whatever", row["reward_model"]["ground_truth"], info) == {
        "score": 0.75, "acc": 0.0}


def test_other_data_sources_go_to_verls_default_scorer() -> None:
    """A GSM8K row in the same batch is scored by verl's own gsm8k rule."""
    out = compute_score("openai/gsm8k", "so the answer is #### 42", "42", {})
    assert out["score"] == 1.0


def _reward_config(manager: str) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.create({"reward": {"custom_reward_function": {
        "path": str(MODULE), "name": "compute_score_batch" if manager == "batch" else "compute_score",
        "reward_kwargs": {}}}})


def _data_proto(tokenizer: Any, responses: list[str], rows: list[dict[str, Any]]) -> Any:
    """A verl DataProto as the trainer builds one: left-padded prompts, right-padded responses."""
    import numpy as np
    import torch
    from verl import DataProto

    prompt_len, response_len = 8, 64
    pad = tokenizer.pad_token_id
    prompts = torch.full((len(rows), prompt_len), pad)
    resp = torch.full((len(rows), response_len), pad)
    mask = torch.zeros((len(rows), prompt_len + response_len), dtype=torch.long)
    for i, text in enumerate(responses):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"][:response_len]
        prompts[i, -1] = 1
        resp[i, :len(ids)] = torch.tensor(ids)
        mask[i, prompt_len - 1] = 1
        mask[i, prompt_len:prompt_len + len(ids)] = 1
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": resp, "attention_mask": mask},
        non_tensors={"data_source": np.array([r["data_source"] for r in rows], dtype=object),
                     "reward_model": np.array([r["reward_model"] for r in rows], dtype=object),
                     "extra_info": np.array([dict(r["extra_info"]) for r in rows], dtype=object)})


@pytest.mark.parametrize("manager", ["naive", "batch"])
def test_verls_reward_managers_call_our_reward_loaded_as_a_custom_reward_function(
        manager: str, tiny_chat_model: str) -> None:
    """get_custom_reward_fn loads our module by path; verl's manager decodes and scores each sample."""
    from transformers import AutoTokenizer
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.workers.reward_manager.batch import BatchRewardManager
    from verl.workers.reward_manager.naive import NaiveRewardManager

    tokenizer = AutoTokenizer.from_pretrained(tiny_chat_model)
    fn = get_custom_reward_fn(_reward_config(manager))
    assert fn is not None
    rows = to_verl_records([ADD]) * 3
    data = _data_proto(tokenizer, [RIGHT, WRONG, "nothing"], rows)
    if manager == "batch":
        reward_manager: Any = BatchRewardManager(tokenizer, 0, fn)
    else:
        reward_manager = NaiveRewardManager(tokenizer, 0, fn)
    out = reward_manager(data, return_dict=True)
    scores = out["reward_tensor"].sum(dim=-1).tolist()
    assert scores == pytest.approx([1.0, 0.25, 0.0])
    assert out["reward_extra_info"]["acc"] == [1.0, 0.0, 0.0]


def test_the_reward_loops_naive_manager_scores_one_sample(tiny_chat_model: str) -> None:
    """verl's newer async reward loop (experimental.reward_loop) calls compute_score per sample."""
    from transformers import AutoTokenizer
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
    from verl.trainer.ppo.reward import get_custom_reward_fn

    tokenizer = AutoTokenizer.from_pretrained(tiny_chat_model)
    fn = get_custom_reward_fn(_reward_config("naive"))
    manager = NaiveRewardManager(config=None, tokenizer=tokenizer, compute_score=fn)

    async def run() -> dict[str, Any]:
        manager.loop = asyncio.get_running_loop()
        return await manager.run_single(_data_proto(tokenizer, [RIGHT], to_verl_records([ADD])))

    result = asyncio.run(run())
    assert result["reward_score"] == 1.0


def _tool_loop(tmp_path: Path, **config: Any) -> Any:
    """verl's ToolAgentLoop, with just what _call_tool reads, over tools built from a tool config."""
    import yaml
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
    from verl.tools.tool_registry import initialize_tools_from_config

    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump({"tools": [{
        "class_name": "agentenv.integrations.verl_tool.SubmitTool",
        "config": {"type": "native", **config}}]}))
    tools = initialize_tools_from_config(str(path))
    loop = ToolAgentLoop.__new__(ToolAgentLoop)
    loop.tools = {tool.name: tool for tool in tools}
    loop.max_tool_response_length = 4096
    loop.tool_response_truncate_side = "middle"
    return loop


def _agent_data(request_id: str, tools_kwargs: dict[str, Any]) -> Any:
    from verl.experimental.agent_loop.tool_agent_loop import AgentData

    return AgentData(messages=[], image_data=[], video_data=[], audio_data=None,
                     mm_processor_kwargs=None, metrics={}, request_id=request_id,
                     tools_kwargs=tools_kwargs)


def test_the_submit_tool_runs_an_episode_through_verls_tool_agent_loop(tmp_path: Path) -> None:
    """Each call is a turn: feedback as the tool response, the turn's reward, the episode's return
    written to agent_data.extra_fields; two rollouts of one task keep separate episodes."""
    from verl.experimental.agent_loop.tool_parser import FunctionCall

    loop = _tool_loop(tmp_path, max_turns=3, feedback_from="visible")
    tools_kwargs = to_verl_records([ADD], multi_turn=True)[0]["extra_info"]["tools_kwargs"]
    first, second = _agent_data("r1", tools_kwargs), _agent_data("r2", tools_kwargs)

    def call(agent: Any, code: str) -> Any:
        fc = FunctionCall(name="submit", arguments=json.dumps({"code": code}))
        return asyncio.run(loop._call_tool(fc, agent.tools_kwargs, agent))

    response, reward, _ = call(first, WRONG)
    assert reward == 0.25 and "add(10, 5)" not in (response.text or "")
    assert first.extra_fields[RETURN_KEY] == 0.25
    response, reward, _ = call(second, RIGHT)
    assert reward == 1.0 and second.extra_fields["agentenv_solved"] is True
    response, reward, _ = call(first, RIGHT)
    assert first.extra_fields[RETURN_KEY] == 1.0 and first.extra_fields["agentenv_turns"] == 2
    info = dict(to_verl_records([ADD])[0]["extra_info"], **first.extra_fields)
    assert compute_score(DATA_SOURCE, "", "[]", info)["score"] == 1.0  # the episode decides
    bad, _, _ = asyncio.run(loop._call_tool(FunctionCall(name="submit", arguments="{not json"),
                                            tools_kwargs, _agent_data("r3", tools_kwargs)))
    assert "Invalid JSON" in (bad.text or "")


def test_the_submit_tool_without_a_task_says_how_to_build_the_dataset(tmp_path: Path) -> None:
    """A row without create_kwargs gets verl's tool-error response naming to_verl_parquet."""
    from verl.experimental.agent_loop.tool_parser import FunctionCall

    loop = _tool_loop(tmp_path)
    response, reward, _ = asyncio.run(loop._call_tool(
        FunctionCall(name="submit", arguments=json.dumps({"code": RIGHT})), {}, _agent_data("x", {})))
    assert reward == 0.0 and "to_verl_parquet" in (response.text or "")
    assert VERL_ROOT.is_dir()


class ScriptedServer:
    """verl's LLM server client, answering each rollout's turns from a script (token ids)."""

    def __init__(self, tokenizer: Any, replies: list[str]) -> None:
        self.tokenizer = tokenizer
        self.replies = replies
        self.turns: dict[str, int] = {}

    async def generate(self, request_id: str, prompt_ids: list[int], sampling_params: Any,
                       **kwargs: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        turn = self.turns.get(request_id, 0)
        self.turns[request_id] = turn + 1
        text = self.replies[min(turn, len(self.replies) - 1)]
        ids = [*self.tokenizer(text, add_special_tokens=False)["input_ids"], self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed")


def submit_call(code: str) -> str:
    """A hermes-format tool call, as Qwen-style models write one."""
    return "<tool_call>\n" + json.dumps({"name": "submit", "arguments": {"code": code}}) + "\n</tool_call>"


def test_verls_tool_agent_loop_runs_a_revision_episode_and_compute_score_reads_its_return(
        tiny_chat_model: str) -> None:
    """ToolAgentLoop.run (verl's multi-turn rollout): hermes tool calls reach our submit tool,
    feedback comes back as tool turns, and the episode's return reaches compute_score."""
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from agentenv.integrations.verl_tool import SubmitTool

    tokenizer = AutoTokenizer.from_pretrained(tiny_chat_model)
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {
        "multi_turn": {"max_user_turns": 3, "max_assistant_turns": 3, "max_parallel_calls": 1,
                       "max_tool_response_length": 2048, "tool_response_truncate_side": "middle",
                       "format": "hermes", "tool_config_path": None, "function_tool_path": None},
        "prompt_length": 2048, "response_length": 1024, "full_determinism": False,
        "trace": {"backend": None, "token2text": False, "project_name": None, "experiment_name": None},
        "agent": {"num_workers": 1, "agent_loop_config_path": None}}}, "data": {}})
    server = ScriptedServer(tokenizer, [submit_call("def add(a, b):\n    return a - b"),
                                        submit_call("def add(a, b):\n    return a + b"), "Done."])
    row = to_verl_records([ADD], multi_turn=True, max_turns=3)[0]

    async def rollout() -> Any:
        loop = ToolAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server,
                             tokenizer=tokenizer, processor=None, dataset_cls=RLHFDataset,
                             data_config=DictConfigWrap(OmegaConf.create({})),
                             tools=ToolListWrap([SubmitTool({"type": "native", "max_turns": 3})]))
        return await loop.run({"temperature": 1.0}, raw_prompt=row["prompt"],
                              tools_kwargs=row["extra_info"]["tools_kwargs"],
                              extra_info=row["extra_info"])

    out = asyncio.run(rollout())
    # Each tool reward is the turn's change in score (the env's default): they sum to the return.
    assert out.extra_fields["tool_rewards"] == [0.25, 0.75]
    assert out.extra_fields[RETURN_KEY] == 1.0 and out.extra_fields["agentenv_turns"] == 2
    assert 0 in out.response_mask and 1 in out.response_mask  # tool turns masked out of the loss
    response = tokenizer.decode(out.response_ids)
    assert "<tool_response>" in response and "passed" in response.lower()
    info = dict(row["extra_info"], **out.extra_fields)
    assert compute_score(DATA_SOURCE, response, row["reward_model"]["ground_truth"], info) == {
        "score": 1.0, "acc": 1.0}
