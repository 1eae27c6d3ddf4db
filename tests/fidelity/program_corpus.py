"""Whole programs with their tests, in the styles competitive programmers and models write them.

Each :class:`Problem` has tests (stdin and the expected stdout as the benchmark stores it); each
:class:`Program` solves one problem in one style and is graded in one benchmark layout
(``jsonl``, ``apps``, ``livecodebench``, ``code_contests``). ``wrong`` programs are wrong on
purpose (off by one, wrong precision, extra output, stderr only, a timeout, a crash after the
output...): they are there so that a false pass shows. Expected outputs are computed here by
plain reference functions, never by the programs under test.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

LAYOUTS = ("jsonl", "apps", "livecodebench", "code_contests")


@dataclass(frozen=True)
class Problem:
    name: str
    tests: tuple[tuple[str, str], ...]
    float_tolerance: float | None = None  # what an agentenv JSONL task states (other layouts: their rule)


@dataclass(frozen=True)
class Program:
    layout: str
    name: str
    problem: Problem
    code: str
    wrong: str = ""              # why the program is wrong ("" for an honest one)
    timeout: float = 4.0         # seconds per test (APPS gives 4, LiveCodeBench 6)
    requires: tuple[str, ...] = ()

    @property
    def ident(self) -> str:
        return f"{self.layout}/{self.name}"


def _problem(name: str, make: Callable[[random.Random], str], solve: Callable[[str], str],
             count: int, fixed: tuple[str, ...] = (), float_tolerance: float | None = None) -> Problem:
    rng = random.Random(name)
    inputs = list(fixed) + [make(rng) for _ in range(count)]
    return Problem(name, tuple((i, solve(i)) for i in inputs), float_tolerance)


# ------------------------------------------------------------------ problems


def _sums_input(rng: random.Random) -> str:
    cases = [[rng.randint(-10**9, 10**9) for _ in range(rng.randint(1, 8))] for _ in range(rng.randint(1, 5))]
    return f"{len(cases)}\n" + "".join(f"{len(c)}\n{' '.join(map(str, c))}\n" for c in cases)


def _sums_solve(text: str) -> str:
    data = text.split()
    t, pos, out = int(data[0]), 1, []
    for _ in range(t):
        n = int(data[pos])
        out.append(str(sum(map(int, data[pos + 1:pos + 1 + n]))))
        pos += 1 + n
    return "\n".join(out) + "\n"


SUMS = _problem("sums", _sums_input, _sums_solve, 4, fixed=("1\n1\n5\n",))

CIRCLE = _problem("circle", lambda r: f"{r.randint(1, 10**4)}\n",
                  lambda t: f"{math.pi * int(t) ** 2:.10f}\n", 4, fixed=("1\n",), float_tolerance=1e-6)

MEAN = _problem("mean", lambda r: f"{r.randint(1, 100) * 2} {r.randint(1, 100) * 2}\n",
                lambda t: f"{sum(map(int, t.split())) // 2}\n", 3, fixed=("3 5\n",))

SORTED = _problem("sorted", lambda r: (lambda xs: f"{len(xs)}\n{' '.join(map(str, xs))}\n")(
    [r.randint(-100, 100) for _ in range(r.randint(1, 12))]),
    lambda t: " ".join(map(str, sorted(map(int, t.split()[1:])))) + "\n", 4)

PARITY = _problem("parity", lambda r: "{}\n{}\n".format(5, "\n".join(str(r.randint(0, 99)) for _ in range(5))),
                  lambda t: "\n".join("YES" if int(x) % 2 == 0 else "NO" for x in t.split()[1:]) + "\n", 3)

# many tests per task, each cheap (APPS and CodeContests problems have dozens)
SQUARES = _problem("squares", lambda r: f"{r.randint(0, 10**6)}\n", lambda t: f"{int(t) ** 2}\n", 25)

BIG = _problem("count_up", lambda r: f"{r.randint(100_000, 200_000)}\n",
               lambda t: "".join(f"{i}\n" for i in range(1, int(t) + 1)), 1, fixed=("3\n",))


def _path_input(rng: random.Random) -> str:
    n = rng.randint(50_000, 100_000)
    return f"{n}\n" + "".join(f"{i} {i + 1}\n" for i in range(1, n))


PATH_DEPTH = _problem("path_depth", _path_input, lambda t: f"{int(t.split()[0]) - 1}\n", 1, fixed=("1\n", "3\n1 2\n2 3\n"))

LINES = _problem("line_lengths", lambda r: "".join(r.choice(["abc", "x y", "hello world"]) + "\r\n" for _ in range(3)),
                 lambda t: "\n".join(str(len(line.rstrip("\r"))) for line in t.split("\n")[:-1]) + "\n", 2,
                 fixed=("ab\r\n",))

GUARD = _problem("exit_early", lambda r: f"{r.choice([0, 0, 3, 7])}\n",
                 lambda t: "0\n" if int(t) == 0 else f"{int(t) * (int(t) + 1) // 2}\n", 5, fixed=("0\n", "4\n"))

HUGE = Problem("huge_double", (("9007199254740992\n", "9007199254740992\n"), ("5\n", "5\n")))

def _pairs_input(rng: random.Random) -> str:
    n = rng.randint(1, 6)
    text = f"{n}\n" + "".join(f"{rng.randint(-99, 99)} {rng.randint(-99, 99)}\n" for _ in range(n))
    return text if rng.random() < 0.5 else text.rstrip("\n")  # datasets often lack the final newline


PAIRS = _problem("pairs", _pairs_input,
                 lambda t: "".join(f"{int(a) + int(b)}\n" for a, b in (line.split() for line in t.split("\n")[1:] if line)),
                 5, fixed=("1\n2 3", "2\n-1 1\n5 5\n"))


def _fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % 1_000_000_007
    return a


def _fib_input(rng: random.Random) -> str:
    return f"{rng.randint(1000, 3000)}\n"


FIB_MOD = _problem("fib_mod", _fib_input, lambda t: f"{_fib(int(t))}\n", 3, fixed=("1\n",))


# ------------------------------------------------------------------ styles

FASTIO = r'''
import os, sys
from io import BytesIO, IOBase

BUFSIZE = 8192


class FastIO(IOBase):
    newlines = 0

    def __init__(self, file):
        self._fd = file.fileno()
        self.buffer = BytesIO()
        self.writable = "x" in file.mode or "r" not in file.mode
        self.write = self.buffer.write if self.writable else None

    def read(self):
        while True:
            b = os.read(self._fd, max(os.fstat(self._fd).st_size, BUFSIZE))
            if not b:
                break
            ptr = self.buffer.tell()
            self.buffer.seek(0, 2), self.buffer.write(b), self.buffer.seek(ptr)
        self.newlines = 0
        return self.buffer.read()

    def readline(self):
        while self.newlines == 0:
            b = os.read(self._fd, max(os.fstat(self._fd).st_size, BUFSIZE))
            self.newlines = b.count(b"\n") + (not b)
            ptr = self.buffer.tell()
            self.buffer.seek(0, 2), self.buffer.write(b), self.buffer.seek(ptr)
        self.newlines -= 1
        return self.buffer.readline()

    def flush(self):
        if self.writable:
            os.write(self._fd, self.buffer.getvalue())
            self.buffer.truncate(0), self.buffer.seek(0)


class IOWrapper(IOBase):
    def __init__(self, file):
        self.buffer = FastIO(file)
        self.flush = self.buffer.flush
        self.writable = self.buffer.writable
        self.write = lambda s: self.buffer.write(s.encode("ascii"))
        self.read = lambda: self.buffer.read().decode("ascii")
        self.readline = lambda: self.buffer.readline().decode("ascii")


sys.stdin, sys.stdout = IOWrapper(sys.stdin), IOWrapper(sys.stdout)
input = lambda: sys.stdin.readline().rstrip("\r\n")
'''

SUMS_STYLES = {
    "sums_input_loop": """
t = int(input())
for _ in range(t):
    n = int(input())
    print(sum(map(int, input().split())))
""",
    "sums_buffer_readline": """
import sys
input = sys.stdin.buffer.readline
t = int(input())
out = []
for _ in range(t):
    int(input())
    out.append(sum(map(int, input().split())))
sys.stdout.write("\\n".join(map(str, out)) + "\\n")
""",
    "sums_read_split": """
import sys
data = sys.stdin.read().split()
t = int(data[0]); p = 1
for _ in range(t):
    n = int(data[p]); print(sum(int(x) for x in data[p + 1:p + 1 + n])); p += 1 + n
""",
    "sums_os_read": """
import os, sys
data = os.read(0, 1 << 25).split()
t = int(data[0]); p = 1; res = []
for _ in range(t):
    n = int(data[p]); res.append(str(sum(map(int, data[p + 1:p + 1 + n])))); p += 1 + n
os.write(1, ("\\n".join(res) + "\\n").encode())
""",
    "sums_fastio": FASTIO + """
def main():
    t = int(input())
    for _ in range(t):
        input()
        print(sum(map(int, input().split())))

main()
""",
    "sums_main_guard": """
import sys

def solve(tokens):
    t = next(tokens)
    return [sum(next(tokens) for _ in range(next(tokens))) for _ in range(t)]

def main():
    tokens = iter(map(int, sys.stdin.buffer.read().split()))
    print(*solve(tokens), sep="\\n")

if __name__ == "__main__":
    main()
""",
    "sums_stdout_buffer": """
import sys
lines = sys.stdin.buffer.read().splitlines()
t = int(lines[0])
w = sys.stdout.buffer.write
for i in range(t):
    w(b"%d\\n" % sum(map(int, lines[2 + 2 * i].split())))
""",
    "sums_readlines": """
import sys
lines = sys.stdin.readlines()
for i in range(int(lines[0])):
    print(sum(int(x) for x in lines[2 + 2 * i].split()))
""",
}

SUMS_WRONG = {
    "sums_off_by_one": ("""
t = int(input())
for _ in range(t):
    n = int(input())
    xs = list(map(int, input().split()))
    print(sum(xs[:n - 1]) if n > 1 else xs[0])
""", "off by one: drops the last number"),
    "sums_debug_line": ("""
t = int(input())
print("t =", t)
for _ in range(t):
    input(); print(sum(map(int, input().split())))
""", "extra output: a debug line"),
    "sums_stderr_only": ("""
import sys
t = int(input())
for _ in range(t):
    input(); print(sum(map(int, input().split())), file=sys.stderr)
""", "prints to stderr only"),
    "sums_raises_after_output": ("""
t = int(input())
for _ in range(t):
    input(); print(sum(map(int, input().split())))
extra = int(input())  # EOFError: reads past the input
""", "a runtime error after the right output"),
}

CIRCLE_STYLES = {
    "circle_format10": "import math\nr = int(input())\nprint('%.10f' % (math.pi * r * r))\n",
    "circle_fstring": "from math import pi\nr = int(input())\nprint(f'{pi * r ** 2:.10f}')\n",
    "circle_format_method": "import math\nr=int(input())\nprint('{:.10f}'.format(math.pi*r*r))\n",
}
CIRCLE_TOLERANT = {  # honest where the benchmark compares floats within a tolerance
    "circle_repr": "import math\nr = int(input())\nprint(math.pi * r * r)\n",
    "circle_format7": "import math\nr = int(input())\nprint('%.7f' % (math.pi * r * r))\n",
}
CIRCLE_WRONG = {
    "circle_two_decimals": ("import math\nr = int(input())\nprint('%.2f' % (math.pi * r * r))\n",
                            "wrong precision: 2 decimals"),
    "circle_three_decimals": ("import math\nr = int(input())\nprint('%.3f' % (math.pi * r * r))\n",
                              "wrong precision: 3 decimals where 1e-6 is asked"),
    "circle_wrong_formula": ("import math\nr = int(input())\nprint('%.10f' % (2 * math.pi * r))\n",
                             "wrong answer: the circumference"),
}

MEAN_STYLES = {
    "mean_float_division": "a, b = map(int, input().split())\nprint((a + b) / 2)\n",  # 3.0 against 3
    "mean_int_division": "a, b = map(int, input().split())\nprint((a + b) // 2)\n",
}

SORTED_STYLES = {
    "sorted_print_star": "n = int(input())\nxs = sorted(map(int, input().split()))\nprint(*xs)\n",
    "sorted_join": "import sys\nn, *xs = map(int, sys.stdin.read().split())\nprint(' '.join(map(str, sorted(xs))))\n",
    "sorted_trailing_space": """
n = int(input())
for x in sorted(map(int, input().split())):
    print(x, end=" ")
print()
""",
}
SORTED_WRONG = {
    "sorted_descending": ("n = int(input())\nprint(*sorted(map(int, input().split()), reverse=True))\n",
                          "wrong order: descending"),
    "sorted_one_per_line": ("n = int(input())\nprint(*sorted(map(int, input().split())), sep='\\n')\n",
                            "one number per line where one line is asked"),
}

PARITY_STYLES = {
    "parity_upper": "n = int(input())\nfor _ in range(n):\n    print('YES' if int(input()) % 2 == 0 else 'NO')\n",
}
PARITY_WRONG = {
    "parity_mixed_case": ("n = int(input())\nfor _ in range(n):\n    print('Yes' if int(input()) % 2 == 0 else 'No')\n",
                          "'Yes' where 'YES' is expected (case)"),
    "parity_inverted": ("n = int(input())\nfor _ in range(n):\n    print('NO' if int(input()) % 2 == 0 else 'YES')\n",
                        "inverted answers"),
    "parity_reversed_lines": ("""
import sys
n = int(input())
ans = ['YES' if int(input()) % 2 == 0 else 'NO' for _ in range(n)]
print('\\n'.join(sorted(ans)))
""", "the answers sorted, not in input order"),
}

SQUARES_STYLES = {
    "squares_many_tests": "print(int(input()) ** 2)\n",
}
SQUARES_OFF = {
    "squares_plus_one": ("n = int(input())\nprint(n * n + 1)\n", "one more than the square"),
}
SQUARES_WRONG = {
    "squares_hangs_on_one": ("""
n = int(input())
while n == {hang}:
    pass
print(n * n)
""", "never ends on one test"),
}

BIG_STYLES = {
    "count_up_join": "n = int(input())\nprint('\\n'.join(map(str, range(1, n + 1))))\n",
    "count_up_write_loop": """
import sys
n = int(sys.stdin.readline())
w = sys.stdout.write
for i in range(1, n + 1):
    w(str(i) + "\\n")
""",
    "count_up_print_star": "n = int(input())\nprint(*range(1, n + 1), sep='\\n')\n",
}
BIG_WRONG = {
    "count_up_stops_short": ("n = int(input())\nprint('\\n'.join(map(str, range(1, n))))\n", "off by one: stops at n - 1"),
}

PATH_STYLES = {
    "path_depth_thread_recursion": """
import sys, threading
sys.setrecursionlimit(1 << 20)
threading.stack_size(1 << 26)

def main():
    data = sys.stdin.buffer.read().split()
    n = int(data[0])
    adj = [[] for _ in range(n + 1)]
    for i in range(n - 1):
        a, b = int(data[1 + 2 * i]), int(data[2 + 2 * i])
        adj[a].append(b); adj[b].append(a)
    best = 0
    def dfs(v, parent, depth):
        nonlocal best
        best = max(best, depth)
        for u in adj[v]:
            if u != parent:
                dfs(u, v, depth + 1)
    dfs(1, 0, 0)
    print(best)

t = threading.Thread(target=main)
t.start()
t.join()
""",
    "path_depth_plain_recursion": """
import sys
sys.setrecursionlimit(10 ** 6)
data = sys.stdin.buffer.read().split()
n = int(data[0])
nxt = [0] * (n + 2)
for i in range(n - 1):
    nxt[int(data[1 + 2 * i])] = int(data[2 + 2 * i])

def depth(v):
    return 0 if nxt[v] == 0 else 1 + depth(nxt[v])

print(depth(1))
""",
    "path_depth_iterative": """
import sys
from collections import deque
data = sys.stdin.buffer.read().split()
n = int(data[0])
adj = [[] for _ in range(n + 1)]
for i in range(n - 1):
    a, b = int(data[1 + 2 * i]), int(data[2 + 2 * i])
    adj[a].append(b); adj[b].append(a)
dist = [-1] * (n + 1); dist[1] = 0; q = deque([1])
while q:
    v = q.popleft()
    for u in adj[v]:
        if dist[u] < 0:
            dist[u] = dist[v] + 1; q.append(u)
print(max(dist[1:]))
""",
}

LINES_STYLES = {
    "line_lengths_strip": """
import sys
for line in sys.stdin:
    print(len(line.rstrip("\\r\\n")))
""",
    "line_lengths_buffer": """
import sys
for line in sys.stdin.buffer.read().split(b"\\n")[:-1]:
    print(len(line.rstrip(b"\\r")))
""",
}
LINES_WRONG = {
    "line_lengths_keeps_cr": ("""
while True:
    try:
        s = input()
    except EOFError:
        break
    print(len(s))
""", "counts the \\r that python3 keeps in input()"),
}

GUARD_STYLES = {
    "exit_early_exit": "n = int(input())\nif n == 0:\n    print(0)\n    exit()\nprint(n * (n + 1) // 2)\n",
    "exit_early_sys_exit": "import sys\nn = int(input())\nif n == 0:\n    print(0)\n    sys.exit()\nprint(n * (n + 1) // 2)\n",
    "exit_early_quit": "n = int(input())\nif n == 0:\n    print(0); quit()\nprint(sum(range(n + 1)))\n",
    "exit_early_raise_systemexit": "n = int(input())\nif n == 0:\n    print(0)\n    raise SystemExit\nprint(n * (n + 1) // 2)\n",
    "exit_early_nonzero_status": "import sys\nn = int(input())\nprint(n * (n + 1) // 2)\nsys.exit(1)\n",
    "exit_early_exit_message": "import sys\nn = int(input())\nprint(n * (n + 1) // 2)\nsys.exit('done')\n",
}
GUARD_WRONG = {
    "exit_early_exits_before_printing": ("import sys\nn = int(input())\nif n == 0:\n    sys.exit()\nprint(n * (n + 1) // 2)\n",
                                         "exits before printing the answer for 0"),
    "exit_early_raises_after_output": ("n = int(input())\nprint(n * (n + 1) // 2)\nraise ValueError('after the output')\n",
                                       "an exception after the right output"),
}

PAIRS_STYLES = {
    "pairs_open0": "lines = open(0).read().split('\\n')\nn = int(lines[0])\nfor i in range(1, n + 1):\n    a, b = map(int, lines[i].split())\n    print(a + b)\n",
    "pairs_for_line_in_stdin": "import sys\nnext(sys.stdin)\nfor line in sys.stdin:\n    if line.strip():\n        print(sum(map(int, line.split())))\n",
    "pairs_from_sys_import_stdin": "from sys import stdin, stdout\nn = int(stdin.readline())\nfor _ in range(n):\n    a, b = map(int, stdin.readline().split())\n    stdout.write(f'{a + b}\\n')\n",
    "pairs_no_final_newline": "n = int(input())\nres = [sum(map(int, input().split())) for _ in range(n)]\nprint('\\n'.join(map(str, res)), end='')\n",
    "pairs_stringio_buffer": "import io, sys\nbuf = io.StringIO()\nn = int(sys.stdin.readline())\nfor _ in range(n):\n    print(sum(map(int, sys.stdin.readline().split())), file=buf)\nsys.stdout.write(buf.getvalue())\n",
    "pairs_atexit_flush": "import atexit, io, os, sys\n_out = io.BytesIO()\natexit.register(lambda: os.write(1, _out.getvalue()))\ndata = sys.stdin.buffer.read().split()\nn = int(data[0])\nfor i in range(n):\n    _out.write(b'%d\\n' % (int(data[1 + 2 * i]) + int(data[2 + 2 * i])))\n",
    "pairs_replace_stdout": "import sys, io\nreal = sys.stdout\nsys.stdout = io.StringIO()\nn = int(input())\nfor _ in range(n):\n    print(sum(map(int, input().split())))\nreal.write(sys.stdout.getvalue())\n",
    "pairs_map_lambda_input": "I = lambda: map(int, input().split())\nn, = I()\nfor _ in range(n):\n    a, b = I()\n    print(a + b)\n",
    "pairs_open0_iter": "it = iter(open(0).read().split())\nn = int(next(it))\nprint(*(int(next(it)) + int(next(it)) for _ in range(n)), sep='\\n')\n",
    "pairs_tab_separated_output_line": "n = int(input())\nprint(*[sum(map(int, input().split())) for _ in range(n)], sep='\\n')\n",
}
PAIRS_WRONG = {
    "pairs_reads_past_eof": ("n = int(input())\nfor _ in range(n):\n    print(sum(map(int, input().split())))\ninput()\n",
                             "reads a line past the input (EOFError after the right output)"),
    "pairs_prints_inputs_sum": ("import sys\nprint(sum(map(int, sys.stdin.read().split()[1:])))\n", "one total, not one sum per line"),
}

FIB_STYLES = {
    "fib_mod_lru_cache": "import sys\nfrom functools import lru_cache\nsys.setrecursionlimit(10000)\n@lru_cache(maxsize=None)\ndef f(n):\n    return n if n < 2 else (f(n - 1) + f(n - 2)) % 1_000_000_007\nprint(f(int(input())))\n",
    "fib_mod_memo_dict": "import sys\nsys.setrecursionlimit(10 ** 6)\nmemo = {0: 0, 1: 1}\ndef f(n):\n    if n not in memo:\n        memo[n] = (f(n - 1) + f(n - 2)) % 1_000_000_007\n    return memo[n]\nprint(f(int(input())))\n",
    "fib_mod_loop": "n = int(input())\na, b = 0, 1\nfor _ in range(n):\n    a, b = b, (a + b) % (10 ** 9 + 7)\nprint(a)\n",
}
FIB_WRONG = {
    "fib_mod_no_modulus": ("n = int(input())\na, b = 0, 1\nfor _ in range(n):\n    a, b = b, a + b\nprint(a)\n", "forgets the modulus"),
}

NUMPY_STYLES = {
    "sums_numpy": """
import sys
import numpy as np
data = np.array(sys.stdin.buffer.read().split(), dtype=np.int64)
t = int(data[0]); p = 1
for _ in range(t):
    n = int(data[p]); print(int(data[p + 1:p + 1 + n].sum())); p += 1 + n
""",
}

HUGE_WRONG = {
    "huge_double_plus_one": ("print(int(input()) + 1)\n", "one more than the input (equal as doubles past 2**53)"),
}


def _programs(layout: str, problem: Problem, styles: dict[str, str], *, wrong: dict[str, tuple[str, str]] | None = None,
              requires: tuple[str, ...] = (), timeout: float = 4.0) -> list[Program]:
    out = [Program(layout, name, problem, code.lstrip("\n"), requires=requires, timeout=timeout)
           for name, code in styles.items()]
    out += [Program(layout, name, problem, code.lstrip("\n"), wrong=why, timeout=timeout)
            for name, (code, why) in (wrong or {}).items()]
    return out


def _squares_wrong() -> dict[str, tuple[str, str]]:
    hang = SQUARES.tests[3][0].strip()
    return {k: (code.replace("{hang}", hang), why) for k, (code, why) in SQUARES_WRONG.items()}


def programs() -> list[Program]:
    """The whole corpus: every layout gets the same problems, in every style."""
    out: list[Program] = []
    for layout in LAYOUTS:
        tolerant = layout != "livecodebench"  # LiveCodeBench compares stdout numbers exactly
        out += _programs(layout, SUMS, SUMS_STYLES, wrong=SUMS_WRONG)
        out += _programs(layout, SUMS, NUMPY_STYLES, requires=("numpy",))
        if tolerant:
            out += _programs(layout, CIRCLE, {**CIRCLE_STYLES, **CIRCLE_TOLERANT}, wrong=CIRCLE_WRONG)
        else:  # only the program that computes the expected output's very float is right there
            exact = {"circle_fstring": CIRCLE_STYLES["circle_fstring"]}
            inexact = {k: (v, "pi * r * r or extra digits: not the expected decimal, compared exactly")
                       for k, v in {**CIRCLE_STYLES, **CIRCLE_TOLERANT}.items() if k not in exact}
            out += _programs(layout, CIRCLE, exact, wrong={**CIRCLE_WRONG, **inexact})
        out += _programs(layout, MEAN, MEAN_STYLES)
        out += _programs(layout, SORTED, SORTED_STYLES, wrong=SORTED_WRONG)
        out += _programs(layout, PARITY, PARITY_STYLES, wrong=PARITY_WRONG)
        out += _programs(layout, BIG, BIG_STYLES, wrong=BIG_WRONG)
        out += _programs(layout, PATH_DEPTH, PATH_STYLES)
        out += _programs(layout, LINES, LINES_STYLES, wrong=LINES_WRONG)
        out += _programs(layout, GUARD, GUARD_STYLES, wrong=GUARD_WRONG)
        out += _programs(layout, SQUARES, SQUARES_STYLES, wrong=SQUARES_OFF)
        out += _programs(layout, HUGE, {}, wrong=HUGE_WRONG)
        out += _programs(layout, PAIRS, PAIRS_STYLES, wrong=PAIRS_WRONG)
        out += _programs(layout, FIB_MOD, FIB_STYLES, wrong=FIB_WRONG)
    return out


def timeout_programs(layouts: tuple[str, ...] = LAYOUTS) -> list[Program]:
    """Programs that never end on one test (each costs a timeout's worth of CPU)."""
    return [p for layout in layouts for p in _programs(layout, SQUARES, {}, wrong=_squares_wrong(), timeout=1.0)]


BIGGER = Problem("count_up_10mb", (("1300000\n", "".join(f"{i}\n" for i in range(1, 1_300_001))),))


def heavy_programs(layouts: tuple[str, ...] = LAYOUTS) -> list[Program]:
    """Programs that cost seconds a test: timeouts, and an answer of 9.3 MB (judges allow tens of
    MiB a test; an 8 MiB cap once failed it)."""
    big = {"count_up_10mb_join": BIG_STYLES["count_up_join"],
           "count_up_10mb_buffer": "import sys\nn = int(input())\nsys.stdout.buffer.write(b''.join(b'%d\\n' % i for i in range(1, n + 1)))\n"}
    return timeout_programs(layouts) + [p for layout in layouts for p in _programs(layout, BIGGER, big, timeout=10.0)]


HANG = Problem("hang_on_one", (("1\n", "1\n"), ("0\n", "0\n")))


def fast_programs() -> list[Program]:
    """One layout per program, in turn (each program once), with its problem's first 3 tests
    (all 25 for the many-tests problem), numpy left out (importing it costs a second a test),
    and a short program that times out on one test of two: the corpus's styles and layouts in
    a fraction of the time."""
    names = sorted({p.name for p in programs()})
    turn = {name: LAYOUTS[i % len(LAYOUTS)] for i, name in enumerate(names)}
    hang = Program("jsonl", "hang_on_zero", HANG, "n = int(input())\nwhile n == 0:\n    pass\nprint(n)\n",
                   wrong="never ends on one test", timeout=0.5)
    chosen = [p for p in programs() if turn[p.name] == p.layout and not p.requires]
    return [_first_tests(p, 25 if p.problem is SQUARES else 3) for p in chosen] + [hang]


def _first_tests(program: Program, count: int) -> Program:
    problem = program.problem
    return replace(program, problem=replace(problem, tests=problem.tests[:count]))
