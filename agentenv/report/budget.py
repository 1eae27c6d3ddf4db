"""What an episode cost: policy calls and tokens, the budget axes of every comparison.

Per turn (one policy call), ``generated`` tokens are the server's ``completion_tokens`` when the
policy reported usage, else the env's count of the action (``action_tokens``). ``prompt``
tokens are the server's ``prompt_tokens``, else the conversation before the action as the env
counted it (``cumulative_tokens - action_tokens - observation_tokens``): a multi-turn call
re-reads its whole history. ``processed`` is prompt plus generated summed over calls, the
tokens a model processed (what a server bills, the budget that compares strategies);
``conversation`` is the length of the final conversation, every message counted once (what
``summary.json`` calls its token total). An episode whose turns carry no token information has ``None`` token fields, so
"not recorded" never reads as "free".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentenv.records import Trajectory, TurnRecord

__all__ = ["EpisodeCost", "episode_cost"]


@dataclass(frozen=True)
class EpisodeCost:
    """Calls and tokens an episode spent (token fields None when the run did not record them)."""

    calls: int
    generated: int | None
    prompt: int | None
    processed: int | None
    conversation: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "generated": self.generated, "prompt": self.prompt,
                "processed": self.processed, "conversation": self.conversation}


def _has_tokens(record: TurnRecord) -> bool:
    return bool(record.usage) or record.action_tokens > 0 or record.cumulative_tokens > 0


def _usage(record: TurnRecord, key: str) -> int | None:
    if record.usage and isinstance(record.usage.get(key), int):
        return int(record.usage[key])
    return None


def episode_cost(trajectory: Trajectory, upto: int | None = None) -> EpisodeCost:
    """Cost of the episode's first ``upto`` turns (all turns when None)."""
    turns = trajectory.turns if upto is None else [t for t in trajectory.turns if t.turn <= upto]
    if not turns or not any(_has_tokens(t) for t in turns):
        return EpisodeCost(calls=len(turns), generated=None, prompt=None, processed=None,
                           conversation=None)
    generated = prompt = 0
    for record in turns:
        completion = _usage(record, "completion_tokens")
        generated += record.action_tokens if completion is None else completion
        sent = _usage(record, "prompt_tokens")
        if sent is None:
            sent = max(0, record.cumulative_tokens - record.action_tokens - record.observation_tokens)
        prompt += sent
    conversation = turns[-1].cumulative_tokens or None
    return EpisodeCost(calls=len(turns), generated=generated, prompt=prompt,
                       processed=generated + prompt, conversation=conversation)
