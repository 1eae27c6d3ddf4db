"""Bridges from agentenv to the trainers people use, one module per trainer's conventions.

- :mod:`agentenv.integrations.trl`: a GRPO/RLOO reward function (``code_reward``) that scores
  completions with agentenv's sandbox, and ``to_hf_dataset``/``to_records`` that turn tasks
  into the rows TRL trains on.

Each submodule imports its trainer's libraries lazily (or not at all), so importing this package
costs nothing. The Gymnasium adapter lives in :mod:`agentenv.gym`.
"""

from __future__ import annotations

__all__: list[str] = []
