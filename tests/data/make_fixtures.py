"""Write the small benchmark-shaped fixtures the loader tests read (run from the repo root).

    python tests/data/make_fixtures.py

The problems are written for these tests (none is copied from a benchmark); only the record
layouts follow the real datasets:

- ``livecodebench_sample.jsonl``: LiveCodeBench ``code_generation_lite`` rows, LeetCode-style
  functional problems and AtCoder/Codeforces stdin problems, private tests encoded base64 →
  zlib → pickle → JSON as the dataset does (one early-style row keeps them as plain JSON);
- ``apps_sample.jsonl``: APPS rows (stdio and call-based, outputs wrapped the way APPS wraps
  them), TACO rows (TACO difficulty labels, tag lists as strings, a ``class Solution`` starter),
  a row without tests, a TACO duplicate of an APPS statement, and a native CodeContests row;
- ``custom_qa.jsonl``: a made-up dataset with its own field names for the generic loader.

``mbpp_sample.jsonl`` is different: ten lines copied unchanged from MBPP (CC BY 4.0), task ids
1, 2, 3, 11, 16, 126, 341, 367, 601, 927.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentenv.tasks.livecodebench import encode_private_tests

HERE = Path(__file__).resolve().parent


def functional(args: list[Any], expected: Any) -> dict[str, str]:
    return {"input": "\n".join(json.dumps(a) for a in args), "output": json.dumps(expected),
            "testtype": "functional"}


def stdin(text: str, out: str) -> dict[str, str]:
    return {"input": text, "output": out, "testtype": "stdin"}


def lcb_row(question_id: str, title: str, content: str, platform: str, date: str, difficulty: str,
            public: list[dict[str, str]], private: list[dict[str, str]], *, starter: str = "",
            func_name: str | None = None, plain_private: bool = False) -> dict[str, Any]:
    return {
        "question_title": title,
        "question_content": content,
        "platform": platform,
        "question_id": question_id,
        "contest_id": question_id.split("_")[0],
        "contest_date": date,
        "starter_code": starter,
        "difficulty": difficulty,
        "public_test_cases": json.dumps(public),
        "private_test_cases": json.dumps(private) if plain_private else encode_private_tests(private),
        "metadata": json.dumps({"func_name": func_name} if func_name else {}),
    }


def livecodebench_rows() -> list[dict[str, Any]]:
    return [
        lcb_row(
            "3501", "Digit Sums Divisible by K",
            "You are given an integer array nums and an integer k. Return how many elements of "
            "nums have a digit sum divisible by k.",
            "leetcode", "2024-09-14T00:00:00", "easy",
            public=[functional([[12, 33, 4], 3], 2)],
            private=[functional([[1, 2, 3, 4, 5, 6], 2], 3), functional([[99, 18, 7], 9], 2),
                     functional([[10], 5], 0)],
            starter="class Solution:\n    def countDivisibleDigitSums(self, nums: List[int], k: int) -> int:\n        ",
            func_name="countDivisibleDigitSums",
        ),
        lcb_row(
            "abc370_b", "Spread",
            "You are given N integers. Print the difference between the largest and the smallest.\n\n"
            "Input\n\nN\nA_1 A_2 ... A_N\n\nOutput\n\nPrint the answer.",
            "atcoder", "2024-09-07T00:00:00", "medium",
            public=[stdin("3\n4 1 7\n", "6\n")],
            private=[stdin("1\n5\n", "0\n"), stdin("4\n-3 10 2 2\n", "13\n")],
        ),
        lcb_row(
            "1850A", "Pair Products",
            "The first line holds t. Each of the next t lines holds two integers a and b. For "
            "each line print a*b.",
            "codeforces", "2023-07-20T00:00:00", "hard",
            public=[stdin("2\n2 3\n4 5\n", "6\n20\n")],
            private=[stdin("1\n-7 6\n", "-42\n"), stdin("3\n0 9\n1 1\n100000 100000\n", "0\n1\n10000000000\n")],
        ),
        lcb_row(
            "3300", "Average of Extremes",
            "Given an integer array nums, return the average of its minimum and maximum element.",
            "leetcode", "2024-08-01T00:00:00", "medium",
            public=[functional([[1, 2, 4]], 2.5)],
            private=[functional([[3]], 3.0), functional([[-1, 2]], 0.5)],
            starter="class Solution:\n    def averageOfExtremes(self, nums: List[int]) -> float:\n        ",
            func_name="averageOfExtremes", plain_private=True,
        ),
        lcb_row(
            "3105", "Split Into Equal Parts",
            "Given a string s and an integer parts, return true if s can be split into parts "
            "non-empty pieces that are all equal, else false.",
            "leetcode", "2024-05-11T00:00:00", "medium",
            public=[functional(["abab", 2], True)],
            private=[functional(["abc", 2], False), functional(["zzz", 3], True),
                     functional(["", 1], False)],
            starter="class Solution:\n    def canSplit(self, s: str, parts: int) -> bool:\n        ",
            func_name="canSplit",
        ),
    ]


def apps_rows() -> list[dict[str, Any]]:
    sum_solution = "n = int(input())\nprint(sum(int(x) for x in input().split()))\n"
    return [
        {"problem_id": 0, "difficulty": "introductory", "url": "https://example.org/p/0",
         "question": "Read n, then n integers on one line. Print their sum.",
         "starter_code": "",
         "solutions": json.dumps([sum_solution]),
         "input_output": json.dumps({"inputs": ["3\n1 2 3\n", "1\n-5\n"], "outputs": ["6\n", "-5\n"]})},
        {"problem_id": 1, "difficulty": "interview", "url": "https://example.org/p/1",
         "question": "Write digital_root(n) that sums the digits of n repeatedly until one digit remains.",
         "starter_code": "def digital_root(n):\n\t",
         "solutions": json.dumps(["def digital_root(n):\n    while n >= 10:\n        n = sum(map(int, str(n)))\n    return n\n"]),
         "input_output": json.dumps({"fn_name": "digital_root", "inputs": [[16], [942], [0]],
                                     "outputs": [[7], [6], [0]]})},
        {"problem_id": 2, "difficulty": "competition", "url": "https://example.org/p/2",
         "question": "Write evens_up_to(n) returning the even numbers from 1 to n as a list.",
         "starter_code": "def evens_up_to(n):\n\t",
         "solutions": json.dumps(["def evens_up_to(n):\n    return list(range(2, n + 1, 2))\n"]),
         "input_output": json.dumps({"fn_name": "evens_up_to", "inputs": [[5], [1]],
                                     "outputs": [[[2, 4]], [[]]]})},
        {"problem_id": 3, "difficulty": "MEDIUM_HARD", "source": "codeforces", "date": "2024-10-02",
         "tags": "['Math', 'Greedy']", "skill_types": "['Greedy algorithms']",
         "question": "Read two lines, each with one integer. Print their product, then their sum, on two lines.",
         "starter_code": "",
         "solutions": json.dumps(["a = int(input())\nb = int(input())\nprint(a * b)\nprint(a + b)\n"]),
         "input_output": json.dumps({"inputs": [["2", "3"], ["-1", "4"]], "outputs": [["6", "5"], ["-4", "3"]]})},
        {"problem_id": 4, "difficulty": "EASY", "source": "leetcode", "tags": "['Array']",
         "question": "Given nums, return the largest difference between two elements.",
         "starter_code": "class Solution:\n    def maxGap(self, nums: List[int]) -> int:\n        ",
         "solutions": json.dumps(["class Solution:\n    def maxGap(self, nums):\n        return max(nums) - min(nums)\n"]),
         "input_output": json.dumps({"fn_name": "maxGap", "inputs": [[[1, 5, 2]], [[7]]], "outputs": [4, 0]})},
        {"problem_id": 5, "difficulty": "interview", "question": "A problem whose tests were lost.",
         "starter_code": "", "solutions": json.dumps(["print(1)\n"]), "input_output": ""},
        {"problem_id": 6, "difficulty": "UNKNOWN_DIFFICULTY", "source": "codechef",
         "tags": "['Math']",
         "question": "Read n, then n integers on one line. Print their sum.",  # TACO repeats APPS
         "starter_code": "",
         "solutions": json.dumps([sum_solution]),
         "input_output": json.dumps({"inputs": ["2\n4 4\n"], "outputs": ["8\n"]})},
        {"problem_id": 7, "difficulty": "interview",
         "question": "Write mean(xs) returning the arithmetic mean of a list of numbers.",
         "starter_code": "def mean(xs):\n\t",
         "solutions": json.dumps(["def mean(xs):\n    return sum(xs) / len(xs)\n"]),
         "input_output": json.dumps({"fn_name": "mean", "inputs": [[[1, 2]], [[0.1, 0.2, 0.3]]],
                                     "outputs": [[1.5], [0.2]]})},
        {"name": "1234_A. Tiny Sum", "difficulty": 7, "cf_rating": 800, "cf_tags": ["math"],
         "source": 2,
         "description": "Given two integers a and b on one line, print a + b.",
         "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
         "private_tests": {"input": ["-4 4\n", "10 20\n"], "output": ["0\n", "30\n"]},
         "generated_tests": {"input": ["5 5\n"], "output": ["10\n"]},
         "solutions": {"language": [1, 3], "solution": ["a, b = map(int, raw_input().split())\nprint a + b\n",
                                                        "a, b = map(int, input().split())\nprint(a + b)\n"]}},
    ]


def custom_rows() -> list[dict[str, Any]]:
    return [
        {"id": "q1", "question": "Write double(x) that returns twice x.",
         "tests": ["assert double(2) == 4", "assert double(-3) == -6", "assert double(0) == 0"],
         "solution": "def double(x):\n    return 2 * x\n", "level": "introductory",
         "topic": ["math", "warmup"], "released": "2024-09-01"},
        {"id": "q2", "question": "Write hyp(a, b): the hypotenuse of a right triangle with legs a, b.",
         "tests": "import math\nassert hyp(3, 4) == 5.0\nassert math.isclose(hyp(1, 1), 2 ** 0.5)\n",
         "solution": "import math\n\ndef hyp(a, b):\n    return math.hypot(a, b)\n", "level": "competition",
         "topic": "geometry, math", "released": "2023-01-15"},
        {"id": "q3", "question": "Read one line and print it reversed.",
         "tests": [{"input": "abc\n", "output": "cba\n"}, {"input": "x\n", "output": "x\n"}],
         "solution": "print(input()[::-1])\n", "level": "interview", "topic": ["strings"],
         "released": "2024-11-30"},
        {"id": "q4", "question": "def inc(n):\n    \"\"\"Return n + 1.\"\"\"\n",
         "tests": "METADATA = {'author': 'fixture'}\n\ndef check(candidate):\n    assert candidate(1) == 2\n    assert candidate(-1) == 0\n",
         "entry": "inc", "solution": "def inc(n):\n    return n + 1\n", "level": "introductory",
         "topic": ["warmup"]},
        {"id": "q5", "question": "Write double(x) that returns twice x.",  # a duplicate prompt
         "tests": ["assert double(5) == 10"], "solution": "def double(x):\n    return x + x\n",
         "level": "introductory", "topic": ["math"], "released": "2024-10-01"},
    ]


def write(directory: Path, name: str, rows: list[dict[str, Any]]) -> None:
    with (directory / name).open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def main(directory: Path = HERE) -> None:
    write(directory, "livecodebench_sample.jsonl", livecodebench_rows())
    write(directory, "apps_sample.jsonl", apps_rows())
    write(directory, "custom_qa.jsonl", custom_rows())


if __name__ == "__main__":
    main()
