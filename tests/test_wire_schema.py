"""The wire schema (agentenv.sandbox._schema) is the one statement of what crosses the sandbox
boundary: the sandbox-side modules spell frames with its names only, every frame a real run
sends carries only the keys and kinds it declares, and jobs are written and read with exactly
the keys it lists."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

import pytest

import agentenv.grading.run as grading_run
from agentenv.grading import run_tests
from agentenv.grading.plan import plan_checks
from agentenv.sandbox import RawRun, SandboxPool, _schema
from agentenv.sandbox._isolation import SANDBOX_DIR, SANDBOX_FILES
from agentenv.tasks.schema import StdioCase

WRITERS = ("_runner.py", "_judge.py")  # the sandbox-side modules that write result frames
FRAME_KEYS = frozenset().union(*_schema.FRAMES.values())


def _dicts(name: str) -> Iterator[ast.Dict]:
    tree = ast.parse((SANDBOX_DIR / name).read_text(encoding="utf-8"))
    yield from (node for node in ast.walk(tree) if isinstance(node, ast.Dict))


def _schema_value(node: ast.expr | None) -> Any:
    assert isinstance(node, ast.Name), f"a frame key spelled as {ast.unparse(node) if node else '**'}"
    assert hasattr(_schema, node.id), f"{node.id} is not a name of the wire schema"
    return getattr(_schema, node.id)


@pytest.mark.parametrize("name", WRITERS)
def test_the_sandbox_side_spells_no_frame_with_bare_strings(name: str) -> None:
    """A frame written as {"t": ...} would be a second, unwritten statement of the schema."""
    bare = [ast.unparse(d) for d in _dicts(name)
            if any(isinstance(k, ast.Constant) and k.value == _schema.TYPE for k in d.keys)]
    assert bare == []


@pytest.mark.parametrize("name", WRITERS)
def test_every_frame_the_sandbox_side_builds_uses_only_declared_keys(name: str) -> None:
    frames = [d for d in _dicts(name)
              if any(isinstance(k, ast.Name) and k.id in ("TYPE", "KIND", "MESSAGE") for k in d.keys)]
    assert frames, f"{name} builds no frame with the schema's names"
    for frame in frames:
        keys = {_schema_value(k) for k in frame.keys if k is not None}  # None: a ** of a frame
        declared = FRAME_KEYS
        for key, value in zip(frame.keys, frame.values, strict=True):
            if key is not None and _schema_value(key) == _schema.TYPE:
                declared = _schema.FRAMES[_schema_value(value)]
        assert keys <= declared, f"{ast.unparse(frame)} carries undeclared keys {keys - declared}"


def test_the_schema_ships_into_the_sandbox_and_imports_nothing() -> None:
    """Inside the sandbox it is loaded by path beside the runner: standard library only (here,
    nothing at all), and bound into the sandbox with the other files."""
    assert "_schema.py" in SANDBOX_FILES and "_framing.py" in SANDBOX_FILES
    tree = ast.parse((SANDBOX_DIR / "_schema.py").read_text(encoding="utf-8"))
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [ast.unparse(n) for n in imports] == ["from __future__ import annotations"]


def test_the_plans_items_carry_only_declared_keys() -> None:
    plan = plan_checks(["assert f(1) == 2", "for x in [1]: assert f(x) == 2", StdioCase("1\n", "2\n")])
    for item in plan.job_items():
        assert set(item) == _schema.ITEMS[item[_schema.ITEM_KIND]]
    assert [set(item) for item in plan.judge_items()] == [_schema.JUDGE_ITEM]


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    made = SandboxPool(size=1)
    yield made
    made.close()


def test_every_frame_of_real_runs_is_declared_by_the_schema(pool: SandboxPool,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs that make every kind of frame (values, raised calls, non-plain values, stdio output,
    load failures, judge verdicts, a judge setup that fails): each frame's type, keys and kind
    are the schema's."""
    seen: list[dict[str, Any]] = []
    real = grading_run.judge

    def spy(plan: Any, frames: Any, **kwargs: Any) -> Any:
        seen.extend(frames)
        seen.extend(kwargs["judge_frames"])
        return real(plan, frames, **kwargs)

    monkeypatch.setattr(grading_run, "judge", spy)
    code = ("def f(x):\n    if x < 0:\n        raise ValueError('neg')\n    return x + 1\n"
            "def g():\n    return object()\n"
            "import sys\nif __name__ == '__main__':\n    print(int(sys.stdin.read()) + 1)\n")
    checks = ["assert f(1) == 2", "assert f(-1) == 0", "assert g() == 1",
              "for x in [1, 2]:\n    assert f(x) == x + 1", StdioCase("1\n", "2\n")]
    assert run_tests(code, checks, pool=pool).passed == 3
    run_tests("def f(:\n", ["assert f(1) == 2"], pool=pool)
    run_tests(code, ["for x in [1]:\n    assert helper(x)"], pool=pool, setup_code="raise RuntimeError")
    assert seen
    for frame in seen:
        kind = frame[_schema.TYPE]
        assert kind in _schema.FRAMES, frame
        assert set(frame) <= _schema.FRAMES[kind], frame
        if _schema.KIND in frame:
            assert frame[_schema.KIND] in _schema.KINDS, frame
    types = {frame[_schema.TYPE] for frame in seen}
    assert types == set(_schema.FRAMES), f"no frame of type {set(_schema.FRAMES) - types}"


class _RecordingPool:
    """A pool that records the jobs it is given and reports a run that sent nothing."""

    level = "strict"
    closed = False

    def __init__(self) -> None:
        self.jobs: list[tuple[dict[str, Any], dict[str, Any] | None]] = []

    def run(self, job: dict[str, Any], timeout: float, limits: Any,
            judge: dict[str, Any] | None = None) -> RawRun:
        self.jobs.append((job, judge))
        return RawRun(result=b"", stdout="", stderr="", timed_out=False, seconds=0.0, died=None,
                      isolation=self.level)

    def close(self) -> None:
        pass


def test_the_jobs_run_tests_writes_carry_exactly_the_declared_keys() -> None:
    pool = _RecordingPool()
    run_tests("def f(x):\n    return x\n", ["assert f(1) == 1", "for x in [1]: assert f(x) == x",
                                            StdioCase("", "")], pool=pool)
    (job, judge), = pool.jobs
    assert set(job) | {"workdir", "env"} == _schema.JOB  # the pool adds those two for its worker
    assert set(job["test_limit"]) == {_schema.TEST_CPU, _schema.TEST_WALL, _schema.TEST_STARVED,
                                      _schema.TEST_OUTPUT}
    assert judge is not None and set(judge) == _schema.JUDGE_JOB
    assert judge["role"] == _schema.JUDGE_ROLE


def _job_keys_read(name: str) -> set[str]:
    """The string keys a sandbox-side module reads from a variable called ``job``."""
    keys = set()
    for node in ast.walk(ast.parse((SANDBOX_DIR / name).read_text(encoding="utf-8"))):
        target = key = None
        if isinstance(node, ast.Subscript):
            target, key = node.value, node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args:
            target, key = node.func.value, node.args[0]
        if isinstance(target, ast.Name) and target.id == "job" and isinstance(key, ast.Constant):
            keys.add(key.value)
    return keys


@pytest.mark.parametrize(("name", "declared"), [("_runner.py", _schema.JOB),
                                                ("_judge.py", _schema.JUDGE_JOB),
                                                ("_candidate.py", _schema.JOB | _schema.JUDGE_JOB)])
def test_the_sandbox_side_reads_only_declared_job_keys(name: str, declared: frozenset[str]) -> None:
    read = _job_keys_read(name)
    assert read, f"{name} reads no job key: the scan no longer sees how it reads the job"
    assert read <= declared, f"{name} reads undeclared job keys {read - declared}"


def test_the_typed_jobs_carry_exactly_the_schemas_keys() -> None:
    from agentenv.sandbox.contract import Job, JudgeJob

    # the pool adds the worker's own work dir and environment to every job
    assert set(Job.__annotations__) | {"workdir", "env"} == _schema.JOB
    assert set(JudgeJob.__annotations__) == _schema.JUDGE_JOB
