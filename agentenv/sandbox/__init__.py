"""The sandbox: untrusted code in, raw results out.

A pool of fork-server workers (:class:`SandboxPool`, or a Ray cluster's
:class:`~agentenv.sandbox.ray_pool.RayPool`) runs a job (candidate code and the items to compute)
at an isolation level and returns what it observed as a :class:`RawRun`: the bytes of the
result channel, the captured output, how the processes ended. It never judges and never
imports :mod:`agentenv.grading`, which plans the jobs, judges the raw results and owns
``run_tests`` and ``RunResult``. This package owns the process side, one module per
mechanism:

- inside the sandbox (standard library only, loaded by path): the fork server's worker loop
  (``_worker``), the zygote and its protocol (``_zygote``), a prepared run's own side
  (``_candidate``), the run monitor (``_monitor``), namespaces and mounts (``_namespaces``),
  the syscall policy (``_seccomp``), the kernel calls through ctypes (``_kernel``), the
  fallback's sweep of what a run left (``_strays``), the child-side runner (``_runner``) and
  judge process (``_judge``) with their channel (``_rpc``), the wire format (``_wire``, with
  ``_stdvalues``) and its schema (``_schema``), length-prefixed framing (``_framing``), and
  folder clean-up (``_cleanup``);
- on the trusted side: the pool (``_pool``), isolation levels and how a worker is launched
  (``_isolation``), resource limits (``_limits``) and cgroups (``_cgroup``).

The rest of agentenv reaches the sandbox through :mod:`agentenv.sandbox.contract` (typed jobs
in, raw runs and frames out) and this package's exports, never through a private module.
"""

from __future__ import annotations

from agentenv.sandbox._isolation import ISOLATION_LEVELS
from agentenv.sandbox._limits import DEFAULT_LIMITS, Limits
from agentenv.sandbox._pool import (
    Pool,
    RawRun,
    SandboxPool,
    default_pool,
    set_default_pool,
    shutdown_default_pool,
)

__all__ = [
    "DEFAULT_LIMITS",
    "ISOLATION_LEVELS",
    "Limits",
    "Pool",
    "RawRun",
    "SandboxPool",
    "default_pool",
    "set_default_pool",
    "shutdown_default_pool",
]
