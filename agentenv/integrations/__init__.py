"""Bridges from agentenv to the trainers people use, one module per trainer's conventions.

- :mod:`agentenv.integrations.trl`: a GRPO/RLOO reward function (``code_reward``, which reads
  text and tool-call code) and ``to_hf_dataset``/``to_records``; multi-turn training through
  ``environment_factory`` and ``PrefetchGrading`` (:mod:`agentenv.integrations.trl_env`);
- :mod:`agentenv.integrations.verl`: ``compute_score``/``compute_score_batch`` for verl's
  custom reward function and ``to_verl_parquet``; :mod:`agentenv.integrations.verl_tool`: the
  ``submit`` tool for verl's tool agent loop;
- :mod:`agentenv.integrations.skyrl`: a SkyRL-gym ``BaseTextEnv`` registered as
  ``agentenv_coding``;
- :mod:`agentenv.integrations.verifiers`: a verifiers taskset (rubric: the sandbox) and
  multi-turn env, plugin id ``agentenv_coding`` (the top-level package of that name);
- :mod:`agentenv.integrations._common`: what they share (task lists, tasks stored in rows,
  reading a completion's submission).

Modules that subclass a trainer's classes (``verl_tool``, ``skyrl``, ``verifiers``) import it
and say which extra to install when it is missing; the others import no trainer, so importing
this package costs nothing. The Gymnasium adapter lives in :mod:`agentenv.gym`.
"""

from __future__ import annotations

__all__: list[str] = []
