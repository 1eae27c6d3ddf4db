"""How a program's end decides its grade: SystemExit ends it normally, an exception fails it.

The rule, read from the graders: APPS (hendrycks/apps eval/testing_util.py) and LiveCodeBench
(lcb_runner/evaluation/testing_util.py) run a stdin program inside ``call_method``, which catches
``SystemExit`` and grades what was printed, whatever the status; any other exception is a runtime
error (APPS -1, LiveCodeBench -4) and the test fails whatever was printed. agentenv does the same
for every layout: ``exit()``, ``quit()``, ``sys.exit(n)`` for any ``n`` and ``raise SystemExit``
end the program and its output is graded; an uncaught exception fails the test, with a message
that says so. (CodeContests' tester grades the output even of a program that crashed; we do not
copy that.) A test past its time limit fails, whatever was printed before.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agentenv.grading import run_tests
from agentenv.tasks.schema import StdioCase

ENDS = {
    # code, graded as passing?
    "sys_exit_1_after_output": ("import sys\nprint(5)\nsys.exit(1)\n", True),
    "exit_with_a_message": ("import sys\nprint(5)\nsys.exit('bye')\n", True),
    "exit_midway": ("print(5)\nexit()\nprint(6)\n", True),
    "quit_with_status": ("print(5)\nquit(4)\n", True),
    "raise_systemexit": ("print(5)\nraise SystemExit(2)\n", True),
    "flushed_then_os_exit": ("import os\nprint(5, flush=True)\nos._exit(3)\n", True),
    "unflushed_then_os_exit": ("import os\nprint(5)\nos._exit(0)\n", False),  # python3 loses it too
    "raise_after_output": ("print(5)\nraise ValueError('late')\n", False),
    "eof_after_output": ("print(5)\ninput()\n", False),
}


def _python3(code: str, tmp_path: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout buffered, as judges run it
    return subprocess.run([sys.executable, "-c", code], input="", capture_output=True, text=True,
                          timeout=30, env=env)


@pytest.mark.parametrize("name", sorted(ENDS))
def test_a_programs_end_is_graded_as_the_graders_grade_it(name: str, tmp_path: object) -> None:
    code, passes = ENDS[name]
    plain = _python3(code, tmp_path)
    crashed = "Traceback (most recent call last)" in plain.stderr
    # the reference: python3's output, graded unless it crashed
    assert (plain.stdout == "5\n" and not crashed) == passes
    result = run_tests(code, [StdioCase("", "5\n")], timeout=5.0)
    assert result.passed == int(passes), result.failures
    if crashed:
        message = result.failures[0].message
        assert "runtime error fails the test whatever it printed" in message
        assert ("ValueError: late" if "late" in code else "EOFError") in message


def test_an_exit_message_goes_to_stderr_as_python3_writes_it() -> None:
    result = run_tests("import sys\nprint(5)\nsys.exit('bye')\n", [StdioCase("", "5\n")], timeout=5.0)
    assert result.passed == 1
    assert "bye" in result.stderr


def test_output_printed_before_a_timeout_is_never_a_pass() -> None:
    code = "print(5, flush=True)\nwhile True:\n    pass\n"
    result = run_tests(code, [StdioCase("", "5\n"), StdioCase("", "5\n")], timeout=0.5)
    assert result.passed == 0
    assert {f.kind for f in result.failures} == {"timeout"}


def test_stderr_is_never_graded_as_stdout() -> None:
    code = "import sys\nprint(5, file=sys.stderr)\n"
    result = run_tests(code, [StdioCase("", "5\n")], timeout=5.0)
    assert result.passed == 0
    assert "5" in result.stderr
