"""The sandbox's contract with the trusted side: a job in, raw bytes and frames out.

Everything outside :mod:`agentenv.sandbox` that builds a sandbox job or reads what a run sent
back goes through this module; nothing else of the package's private modules is imported from
outside it (``tests/test_import_graph.py`` holds that). It declares

- the jobs: :class:`Job`, what the candidate's process is asked to load and compute (the items
  :mod:`agentenv.grading.plan` makes), and :class:`JudgeJob`, the judge process's checks; their
  keys are the wire schema's (:data:`schema.JOB`, :data:`schema.JUDGE_JOB`);
- what comes back: a :class:`~agentenv.sandbox.RawRun` from :meth:`Pool.run`, whose result
  channels :func:`read_frames` turns into :data:`Frame` maps (keys and kinds under
  :data:`schema`), and the values in them, rebuilt by :func:`decode_value` within a
  :class:`DecodeBudget` (over it: :class:`ValueBudget`; an unreadable standard-library value:
  :class:`Unreadable`);
- the limits a run gets (:class:`Limits`), the pools that run it, and the third-party packages
  a candidate may import (:func:`package_dirs`).
"""

from __future__ import annotations

from agentenv.sandbox import _schema as schema
from agentenv.sandbox._isolation import package_dirs
from agentenv.sandbox._jobs import Frame, Job, JudgeJob
from agentenv.sandbox._limits import DEFAULT_LIMITS, SECRET_NAME, Limits
from agentenv.sandbox._pool import Pool, RawRun, default_pool, default_size
from agentenv.sandbox._stdvalues import Unreadable, loaded
from agentenv.sandbox._wire import DecodeBudget, ValueBudget, decode_value
from agentenv.sandbox._wire import parse_frames as read_frames

__all__ = [
    "DEFAULT_LIMITS",
    "SECRET_NAME",
    "DecodeBudget",
    "Frame",
    "Job",
    "JudgeJob",
    "Limits",
    "Pool",
    "RawRun",
    "Unreadable",
    "ValueBudget",
    "decode_value",
    "default_pool",
    "default_size",
    "loaded",
    "package_dirs",
    "read_frames",
    "schema",
]
