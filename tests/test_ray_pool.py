"""RayPool on a real multi-node Ray cluster on this machine: runs spread over nodes, survive a
node lost mid-batch, and plug into run_tests, the environments and code_reward unchanged."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

ray = pytest.importorskip("ray", reason="RayPool needs the 'ray' extra")
cluster_utils = pytest.importorskip("ray.cluster_utils")

from agentenv import CodingEnv  # noqa: E402
from agentenv.errors import SandboxError  # noqa: E402
from agentenv.grading import run_tests  # noqa: E402
from agentenv.integrations.trl import code_reward  # noqa: E402
from agentenv.sandbox import set_default_pool  # noqa: E402
from agentenv.sandbox.ray_pool import RayPool  # noqa: E402
from agentenv.tasks.builtin import builtin_tasks  # noqa: E402

pytestmark = pytest.mark.slow

RIGHT = "import time\n\ndef add(a, b):\n    time.sleep(0.2)\n    return a + b\n"
WRONG = "import time\n\ndef add(a, b):\n    time.sleep(0.2)\n    return a - b\n"
CHECKS = ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"]


@pytest.fixture(scope="module")
def cluster(ray_cluster: Any) -> Any:
    """The cluster shared with tests/test_ray_backend.py (tests/conftest.py): a head node and two
    worker nodes, one CPU each, as separate raylets on this machine."""
    return ray_cluster


@pytest.fixture(scope="module")
def pool(cluster: Any) -> Iterator[RayPool]:
    p = RayPool(refresh_seconds=0.5)
    yield p
    p.close()


def test_a_run_on_the_cluster_gives_the_same_verdict_as_a_local_run(pool: RayPool) -> None:
    """The caller still judges: only the raw run crossed the cluster."""
    good = run_tests(RIGHT, CHECKS, timeout=5, pool=pool)
    bad = run_tests(WRONG, CHECKS, timeout=5, pool=pool)
    assert (good.passed, good.total, good.fraction) == (2, 2, 1.0)
    assert (bad.passed, bad.fraction) == (0, 0.0)
    assert good.isolation == pool.level


def test_runs_are_spread_over_every_node(pool: RayPool) -> None:
    """One actor per node; a concurrent batch reaches all three."""
    assert len(pool.nodes) == 3
    before = pool.stats()
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(
        run_tests(RIGHT, CHECKS, timeout=5, pool=pool))) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(results) == 12 and all(r.fraction == 1.0 for r in results)
    after = pool.stats()
    assert all(after[node] > before.get(node, 0) for node in after)


def test_code_reward_and_the_env_grade_through_a_default_ray_pool(pool: RayPool) -> None:
    """set_default_pool moves every grader onto the cluster without other changes."""
    task = next(t for t in builtin_tasks() if t.name == "add")
    before = sum(pool.stats().values())
    set_default_pool(pool)
    try:
        rewards = code_reward(["p", "p"], [f"```python\n{task.reference_solution}\n```", "nothing"],
                              checks=[list(task.checks)] * 2, entry_point=["add", "add"])
        env = CodingEnv(tasks=[task], seed=0)
        env.reset()
        _, reward, done, _ = env.step(task.reference_solution or "")
    finally:
        set_default_pool(None)
    assert rewards == [1.0, 0.0]
    assert reward == 1.0 and done
    assert sum(pool.stats().values()) >= before + 2


def test_a_node_lost_mid_batch_loses_and_duplicates_no_verdict(cluster: Any, pool: RayPool) -> None:
    """Removing a worker node while runs are in flight: every run still returns exactly once,
    with the right verdict, and the node disappears from the pool."""
    n = 24
    verdicts: dict[int, float] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    started = threading.Semaphore(0)

    def one(i: int) -> None:
        started.release()
        try:
            result = run_tests(RIGHT if i % 2 == 0 else WRONG, CHECKS, timeout=10, pool=pool)
        except BaseException as exc:  # collected: the assertion below shows them
            with lock:
                errors.append(exc)
            return
        with lock:
            assert i not in verdicts  # one answer per run
            verdicts[i] = result.fraction

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for _ in range(n):
        started.acquire()
    victim = cluster.workers.pop()
    # Remove the node only once it is running one of the batch's runs, so one is surely lost.
    for _ in range(600):
        actor = pool._actors.get(victim.node_id)
        if actor is not None and actor.in_flight > 0:
            break
        threading.Event().wait(0.05)
    with capture_logs() as logs:
        cluster.remove_node(victim)
        for t in threads:
            t.join(timeout=300)
    assert not errors, errors
    assert any(e["event"] == "ray_sandbox_run_moved" for e in logs)
    assert sorted(verdicts) == list(range(n))
    assert all(verdicts[i] == (1.0 if i % 2 == 0 else 0.0) for i in range(n))
    pool.refresh(force=True)
    assert len(pool.nodes) == 2


def test_a_closed_ray_pool_says_so(cluster: Any) -> None:
    p = RayPool()
    p.close()
    p.close()  # idempotent
    with pytest.raises(SandboxError, match="closed"):
        run_tests(RIGHT, CHECKS, timeout=5, pool=p)
