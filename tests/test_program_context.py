"""Whole programs see the process ``python3 solution.py < input`` gives them, side by side with it.

Each program runs under a real ``python3`` with the case's stdin; its stdout is then the expected
output of a stdio case agentenv grades. Honest programs must pass; the same program against an
output one token off must fail.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentenv.grading import run_tests
from agentenv.tasks.schema import StdioCase

PROGRAMS = {
    "exit_at_the_end": ("n = int(input())\nprint(n * 2)\nexit(0)\n", "21\n"),
    "quit_in_a_branch": ("import sys\nn = int(sys.stdin.readline())\nif n > 0:\n    print('pos')\n    quit()\nprint('neg')\n", "5\n"),
    "sys_exit_with_status": ("import sys\nprint('done')\nsys.exit(3)\n", ""),
    "exit_repr": ("print(repr(exit)[:9])\n", ""),
    "buffered_binary_stdin": ("import sys\ninput = sys.stdin.buffer.readline\nn = int(input())\n"
                              "print(sum(int(input()) for _ in range(n)))\n",
                              "4\n1\n2\n3\n4\n"),
    "binary_stdout": ("import sys\nsys.stdout.buffer.write(b'7 8\\n')\n", ""),
    "read_all_bytes": ("import sys\ndata = sys.stdin.buffer.read().split()\nprint(len(data), data[-1].decode())\n",
                       "3\n10 20 30\n"),
    "os_read_fd0": ("import os\nprint(sum(map(int, os.read(0, 1 << 16).split())))\n", "1 2 3\n"),
    "carriage_returns_kept": ("s = input()\nprint(len(s), repr(s[-1]))\n", "abc\r\n"),
    "fast_io_template": (
        "import os, sys\nfrom io import BytesIO, IOBase\n"
        "class FastIO(IOBase):\n    newlines = 0\n"
        "    def __init__(self, file):\n        self._fd = file.fileno()\n        self.buffer = BytesIO()\n"
        "        self.writable = 'x' in file.mode or 'r' not in file.mode\n"
        "        self.write = self.buffer.write if self.writable else None\n"
        "    def read(self):\n        while True:\n            b = os.read(self._fd, 8192)\n"
        "            if not b:\n                break\n            ptr = self.buffer.tell()\n"
        "            self.buffer.seek(0, 2), self.buffer.write(b), self.buffer.seek(ptr)\n"
        "        self.newlines = 0\n        return self.buffer.read()\n"
        "    def flush(self):\n        if self.writable:\n            os.write(self._fd, self.buffer.getvalue())\n"
        "            self.buffer.truncate(0), self.buffer.seek(0)\n"
        "class IOWrapper(IOBase):\n    def __init__(self, file):\n        self.buffer = FastIO(file)\n"
        "        self.flush = self.buffer.flush\n        self.writable = self.buffer.writable\n"
        "        self.write = lambda s: self.buffer.write(s.encode('ascii'))\n"
        "        self.read = lambda: self.buffer.read().decode('ascii')\n"
        "sys.stdin, sys.stdout = IOWrapper(sys.stdin), IOWrapper(sys.stdout)\n"
        "data = sys.stdin.read().split()\nprint(int(data[0]) + int(data[1]))\n",
        "40 2\n"),
    "argv_and_file": ("import sys, os\nprint(os.path.basename(sys.argv[0]).endswith('.py'), __file__ == sys.argv[0],"
                      " len(sys.argv))\nprint(open(__file__).read().splitlines()[0][:6])\n", ""),
    "main_module_dataclass": ("from __future__ import annotations\nfrom dataclasses import dataclass\n"
                              "@dataclass\nclass Node:\n    val: int\n    nxt: Node | None = None\n"
                              "import sys\nprint(Node(1, Node(2)).nxt.val, sys.modules['__main__'].Node is Node)\n", ""),
    "name_guard": ("def main():\n    print(int(input()) ** 2)\nif __name__ == '__main__':\n    main()\n", "9\n"),
    "print_to_stderr_too": ("import sys\nprint('debug', file=sys.stderr)\nprint('answer')\n", ""),
    "threading_recursion_template": ("import sys, threading\nsys.setrecursionlimit(10000)\n"
                                     "def f(n):\n    return 0 if n == 0 else 1 + f(n - 1)\n"
                                     "def main():\n    print(f(3000))\nthreading.Thread(target=main).start()\n", ""),
}


def python3(code: str, stdin: str, tmp: Path) -> str:
    path = tmp / "solution.py"
    path.write_text(code)
    done = subprocess.run([sys.executable, str(path)], input=stdin.encode(), capture_output=True,
                          timeout=60, cwd=tmp)
    return done.stdout.decode()


def one_token_off(text: str) -> str:
    tokens = text.split()
    assert tokens, "the program prints something"
    return text.replace(tokens[-1], tokens[-1] + "0", 1) if tokens[-1] else text + "x"


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_program_passes_with_what_python3_prints_and_fails_one_token_off(name: str, tmp_path: Path) -> None:
    code, stdin = PROGRAMS[name]
    expected = python3(code, stdin, tmp_path)
    honest = run_tests(code, [StdioCase(stdin, expected)], 10)
    assert honest.passed == 1, (expected, honest.failures)
    wrong = run_tests(code, [StdioCase(stdin, one_token_off(expected))], 10)
    assert wrong.passed == 0, expected
    assert "token" in wrong.failures[0].message


# Each test burns about 0.12 s of CPU: 12 of them need more than the timeout in all, none alone.
BURN = ("import time\nn = int(input())\nt = time.process_time()\n"
        "while time.process_time() - t < n / 100:\n    pass\nprint(n)\n")


def test_each_stdio_test_is_timed_alone_so_many_short_tests_all_pass() -> None:
    cases = [StdioCase("12\n", "12\n")] * 12
    result = run_tests(BURN, cases, 0.5)
    assert (result.passed, result.timed_out) == (12, False), result.failures


def test_a_test_past_its_own_limit_fails_alone_and_says_so() -> None:
    cases = [StdioCase("5\n", "5\n"), StdioCase("300\n", "300\n"), StdioCase("6\n", "6\n")]
    result = run_tests(BURN, cases, 0.5)
    assert result.passed_indices == (0, 2), result.failures
    (failure,) = result.failures
    assert (failure.index, failure.kind) == (1, "timeout")
    assert "time limit" in failure.message and "timed alone" in failure.message


def test_a_sleeping_program_is_stopped_by_its_tests_wall_limit() -> None:
    result = run_tests("import time\ntime.sleep(60)\nprint(1)\n", [StdioCase("", "1\n")] * 2, 0.3)
    assert result.passed == 0
    assert {f.kind for f in result.failures} == {"timeout"}


def test_the_whole_run_is_bounded_however_many_tests_loop() -> None:
    from agentenv.sandbox import Limits

    limits = Limits(max_run_seconds=2.0)
    assert limits.run_seconds(1.0, 1) == 1.0
    assert limits.run_seconds(0.5, 3) > 1.5
    assert limits.run_seconds(1.0, 50) == 2.0
    result = run_tests("while True:\n    pass\n", [StdioCase("", "x")] * 50, 1.0, limits=limits)
    assert result.passed == 0 and result.timed_out
    assert {f.kind for f in result.failures} == {"timeout"}


def test_an_answer_of_ten_megabytes_is_compared_and_one_past_the_cap_is_named() -> None:
    code = "n = int(input())\nimport sys\nsys.stdout.write('7' * n + '\\n')\n"
    big = 10 * 1024 * 1024
    ok = run_tests(code, [StdioCase(f"{big}\n", "7" * big + "\n"), StdioCase("3\n", "777\n")], 10)
    assert ok.passed == 2, [f.message[:200] for f in ok.failures]
    from agentenv.sandbox import Limits

    limits = Limits(max_test_output=1024 * 1024)
    over = run_tests(code, [StdioCase(f"{2 * 1024 * 1024}\n", "7"), StdioCase("3\n", "777\n")], 10,
                     limits=limits)
    assert over.passed_indices == (1,)
    assert "more than 1,048,576 bytes" in over.failures[0].message
    assert "max_test_output" in over.failures[0].message
