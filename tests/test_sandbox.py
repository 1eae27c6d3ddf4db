"""run_tests / arun_tests end to end, and the fork-server pool behind them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from structlog.testing import capture_logs
from support.attacks import strict_pool

from agentenv.errors import ConfigError, IsolationUnavailable, SandboxError
from agentenv.grading import RunResult, arun_tests, run_tests
from agentenv.sandbox import Limits, SandboxPool, default_pool
from agentenv.sandbox._isolation import bwrap_path
from agentenv.sandbox._limits import scrubbed_env
from agentenv.sandbox.testing import leftover_processes, process_table
from agentenv.tasks.schema import StdioCase

CHECKS = ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"]
WALKTHROUGH = {
    "correct": ("def add(a, b):\n    return a + b\n", 1.0, None),
    "wrong": ("def add(a, b):\n    return a - b\n", 0.0, "assertion"),
    "crashes": ("def add(a, b):\n    raise ValueError('boom')\n", 0.0, "exception"),
    "syntax error": ("def add(a, b)\n    return a + b\n", 0.0, "syntax"),
    "infinite loop": ("def add(a, b):\n    while True: pass\n", 0.0, "timeout"),
}


def strict_or_skip() -> SandboxPool:
    return strict_pool(2, "this test")


@pytest.fixture(scope="module", params=["strict", "rlimits"])
def pool(request: pytest.FixtureRequest) -> Iterator[SandboxPool]:
    """A pool at each isolation level; the same behaviour is expected from both."""
    made = strict_or_skip() if request.param == "strict" else SandboxPool(size=2, isolation="rlimits")
    yield made
    made.close()


@pytest.mark.parametrize("label", list(WALKTHROUGH))
def test_the_walkthrough_cases_score_as_the_post_says(pool: SandboxPool, label: str) -> None:
    """correct/wrong/crashes/syntax error/infinite loop give 1.0/0.0/0.0/0.0/0.0."""
    code, fraction, kind = WALKTHROUGH[label]
    result = run_tests(code, CHECKS, timeout=1.0, pool=pool)
    assert result.fraction == fraction
    assert result.total == 2 and result.passed == int(fraction * 2)
    assert result.timed_out is (label == "infinite loop")
    assert [f.kind for f in result.failures] == ([kind] * 2 if kind else [])
    assert [f.index for f in result.failures] == ([0, 1] if kind else [])
    assert result.isolation == pool.level
    assert leftover_processes(pool) == []


def test_failure_records_carry_index_check_kind_and_a_short_message(pool: SandboxPool) -> None:
    """Each failed check gets its own record naming the call and what went wrong."""
    result = run_tests("def add(a, b):\n    return a - b\n", CHECKS, pool=pool)
    first = result.failures[0]
    assert (first.index, first.check, first.kind) == (0, CHECKS[0], "assertion")
    assert first.message == "add(2, 3) returned -1"
    crash = run_tests("def add(a, b):\n    raise ValueError('boom')\n", CHECKS, pool=pool)
    assert crash.failures[1].message == "add(-1, 1) raised ValueError: boom"


def test_a_crash_in_one_check_does_not_hide_the_others(pool: SandboxPool) -> None:
    """Checks are scored on their own: the dense reward sees partial progress."""
    code = "def add(a, b):\n    if a < 0:\n        raise ValueError('neg')\n    return a + b\n"
    checks = [*CHECKS, "assert add(10, 20) == 30", "for i in range(3):\n    assert add(i, 0) == i"]
    result = run_tests(code, checks, pool=pool)
    assert result.passed_indices == (0, 2, 3)
    assert result.fraction == 0.75
    assert result.graded_in_child == 0  # the loop was graded by the judge process


def test_comparisons_follow_python_by_default_and_types_when_strict(pool: SandboxPool) -> None:
    """5.0 and True pass where 5 and 1 are expected under Python's ==, not under equality="strict"."""
    as_float = "def add(a, b):\n    return float(a + b)\n"
    assert run_tests(as_float, CHECKS, pool=pool).passed == 2
    assert run_tests(as_float, CHECKS, pool=pool, equality="strict").passed == 0
    as_bool = "def f():\n    return True\n"
    assert run_tests(as_bool, ["assert f() == 1"], pool=pool).passed == 1
    assert run_tests(as_bool, ["assert f() == 1"], pool=pool, equality="strict").passed == 0


def test_float_tolerance_is_honoured_when_the_task_gives_one(pool: SandboxPool) -> None:
    """0.1 + 0.2 matches 0.3 only within an explicit tolerance."""
    code, checks = "def f():\n    return 0.1 + 0.2\n", ["assert f() == 0.3"]
    assert run_tests(code, checks, pool=pool).passed == 0
    assert run_tests(code, checks, float_tolerance=1e-9, pool=pool).passed == 1


def test_setup_code_runs_after_the_candidate_and_the_checks_can_use_it(pool: SandboxPool) -> None:
    """setup_code defines helpers (overriding the candidate's) before the checks run."""
    code = "def helper(x):\n    return 'candidate'\ndef f(x):\n    return helper(x)\n"
    setup = "def helper(x):\n    return 'trusted'\nEXPECTED = 'trusted'\n"
    result = run_tests(code, ["assert f(1) == 'trusted'", "assert f(1) == EXPECTED"],
                       setup_code=setup, pool=pool)
    assert result.passed == 2
    assert result.graded_in_child == 0  # EXPECTED is a setup name: the judge process knows it


def test_values_that_are_not_plain_data_fail_with_a_clear_message(pool: SandboxPool) -> None:
    """A custom object is never equal to the check's data (the judge process grades it, as
    a handle): 'returned <the candidate's Foo>'."""
    code = "class Foo:\n    pass\ndef add(a, b):\n    return Foo()\n"
    result = run_tests(code, CHECKS, pool=pool)
    assert result.passed == 0
    assert result.failures[0].message == "add(2, 3) returned <the candidate's Foo>"


def test_stdio_cases_run_the_program_and_compare_output_loosely(pool: SandboxPool) -> None:
    """Stdin goes in, stdout is compared with trailing spaces and final newlines ignored."""
    code = "n = int(input())\nfor i in range(n):\n    print(i, ' ')\n"
    cases = [StdioCase("2\n", "0\n1\n"), StdioCase("1", "0"), StdioCase("3\n", "0\n1\n")]
    result = run_tests(code, cases, pool=pool)
    assert result.passed_indices == (0, 1)
    assert result.failures[0].kind == "assertion"
    assert "expected stdout" in result.failures[0].message


def test_a_stdio_program_that_raises_fails_that_case_as_an_exception(pool: SandboxPool) -> None:
    """An uncaught exception is a failure even when some output was printed."""
    code = "print(int(input()) * 2)\nraise RuntimeError('late')\n"
    result = run_tests(code, [StdioCase("4\n", "8\n")], pool=pool)
    assert result.passed == 0
    assert result.failures[0].kind == "exception"
    assert "RuntimeError: late" in result.failures[0].message


def test_a_task_can_mix_function_checks_and_stdio_cases(pool: SandboxPool) -> None:
    """Function checks load the module; stdio cases run it as __main__."""
    code = ("def double(x):\n    return 2 * x\n"
            "if __name__ == '__main__':\n    print(double(int(input())))\n")
    result = run_tests(code, ["assert double(4) == 8", StdioCase("5\n", "10\n")], pool=pool)
    assert result.fraction == 1.0


def test_candidate_output_is_captured_and_capped(pool: SandboxPool) -> None:
    """stdout/stderr come back for debugging, cut at Limits.max_output."""
    code = "import sys\nprint('hello')\nsys.stderr.write('x' * 100000)\ndef add(a, b):\n    return a + b\n"
    result = run_tests(code, CHECKS, pool=pool, limits=Limits(max_output=1000))
    assert result.stdout == "hello\n"
    assert result.stderr.startswith("x" * 1000)
    assert len(result.stderr) < 1100 and "more bytes dropped" in result.stderr
    assert result.fraction == 1.0


def test_all_output_written_before_the_checks_end_comes_back(pool: SandboxPool) -> None:
    """The worker answers as soon as every process of the run wrote its last bytes, without
    waiting for the pipes to close: whatever was printed up to then (unflushed buffers, big
    writes on both streams, a check that prints) still comes back whole, run after run."""
    code = ("import sys\nsys.stdout.write('o' * 60000)\nsys.stderr.write('e' * 60000)\n"
            "def add(a, b):\n    print('called', a, b)\n    return a + b\n")
    for _round in range(5):
        result = run_tests(code, CHECKS, pool=pool)
        assert result.fraction == 1.0, result
        assert result.stdout.startswith("o" * 60000) and result.stdout.count("called") == len(CHECKS)
        assert result.stderr == "e" * 60000

def test_exit_codes_and_exits_decide_nothing(pool: SandboxPool) -> None:
    """sys.exit(0) in the middle of the checks fails the rest rather than passing them."""
    code = "import sys\ndef add(a, b):\n    if a < 0:\n        sys.exit(0)\n    return a + b\n"
    result = run_tests(code, CHECKS, pool=pool)
    assert result.passed_indices == (0,)
    assert result.failures[0].kind == "exception"
    assert "SystemExit" in result.failures[0].message


def test_no_state_carries_over_between_submissions(pool: SandboxPool) -> None:
    """Module patches, files in the work dir and in /tmp are gone by the next run."""
    first = ("import json, builtins\njson.LEAK = 1\nbuiltins.LEAK = 1\n"
             "open('leak.txt', 'w').write('x')\n"
             "import tempfile, os\nopen(os.path.join(tempfile.gettempdir(), 'agentenv-leak'), 'w').write('x')\n"
             "def f():\n    return 1\n")
    assert run_tests(first, ["assert f() == 1"], pool=pool).fraction == 1.0
    second = ("import json, builtins, os, tempfile\n"
              "def f():\n    return [hasattr(json, 'LEAK'), hasattr(builtins, 'LEAK'),"
              " os.path.exists('leak.txt'),"
              " os.path.exists(os.path.join(tempfile.gettempdir(), 'agentenv-leak'))]\n")
    for _ in range(pool.size + 1):  # whichever worker serves it
        assert run_tests(second, ["assert f() == [False, False, False, False]"],
                         pool=pool).fraction == 1.0


def test_the_child_environment_carries_no_secrets(pool: SandboxPool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Variables named like credentials never reach the candidate."""
    secret = "sk-very-secret-value"
    for name in ("OPENAI_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "MY_SECRET", "AWS_CREDENTIALS"):
        monkeypatch.setenv(name, secret)
    code = "import os\nprint(dict(os.environ))\ndef env():\n    return sorted(os.environ)\n"
    with SandboxPool(size=1, isolation=pool.level) as fresh:  # started after the variables are set
        result = run_tests(code, ["assert env() == []"], pool=fresh)
    assert secret not in result.stdout
    if pool.level == "strict":
        assert result.fraction == 1.0  # strict: an empty environment
    env = scrubbed_env("/w", {"PATH": "/bin", "OPENAI_API_KEY": "x", "LANG": "C", "HOME": "/root"})
    assert env["HOME"] == "/w" and "OPENAI_API_KEY" not in env and env["PATH"] == "/bin"


def test_rlimits_workers_leave_no_temporary_directory_behind() -> None:
    """The fallback's work area lives under the system temp dir and is removed with the pool."""
    with SandboxPool(size=1, isolation="rlimits") as fallback:
        code = "import os\nopen('scratch.txt', 'w').write('x')\nos.mkdir('d')\nos.chmod('d', 0)\ndef f():\n    return os.getcwd()\n"
        result = run_tests(code, ["assert f() == ''"], pool=fallback)
        assert "returned '" in result.failures[0].message
        workdir = result.failures[0].message.split("returned ")[1].strip("'")
        assert os.path.isdir(os.path.dirname(workdir))
        # The worker wipes between runs (after replying): once the next run is served, it's done.
        run_tests("x = 1", ["assert x == 1"], pool=fallback)
        assert os.listdir(os.path.dirname(workdir)) in ([], ["run"])
        if os.path.isdir(workdir):
            assert os.listdir(workdir) == []
    assert not os.path.exists(os.path.dirname(workdir))


def test_isolation_is_reported_and_strict_can_be_required() -> None:
    """RunResult.isolation names the level; requiring strict on a fallback pool raises."""
    with SandboxPool(size=1, isolation="rlimits") as fallback:
        assert run_tests("def add(a, b):\n    return a + b\n", CHECKS, pool=fallback).isolation == "rlimits"
        with pytest.raises(IsolationUnavailable, match="strict"):
            run_tests("def add(a, b):\n    return a + b\n", CHECKS, isolation="strict", pool=fallback)


def test_without_bubblewrap_strict_raises_and_the_default_falls_back_with_one_warning(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No bwrap: isolation='strict' raises IsolationUnavailable; None warns once and uses rlimits."""
    monkeypatch.setenv("AGENTENV_BWRAP", "")
    with pytest.raises(IsolationUnavailable, match="bubblewrap"):
        SandboxPool(size=1, isolation="strict")
    import agentenv.sandbox._pool as pool_module

    monkeypatch.setattr(pool_module, "_warned", False)
    with capture_logs() as logs:
        first = SandboxPool(size=1)
        second = SandboxPool(size=1)
    try:
        assert first.level == second.level == "rlimits"
        warnings = [e for e in logs if e["event"] == "sandbox_isolation_fallback"]
        assert len(warnings) == 1 and warnings[0]["log_level"] == "warning"
        assert run_tests("def add(a, b):\n    return a + b\n", CHECKS, pool=first).fraction == 1.0
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"timeout": 0}, "timeout"),
    ({"timeout": float("nan")}, "timeout"),
    ({"isolation": "paranoid"}, "isolation"),
    ({"float_tolerance": -1.0}, "float_tolerance"),
])
def test_bad_arguments_raise_config_errors_that_say_what_is_expected(kwargs: dict, match: str) -> None:
    """Misuse by the caller is a ConfigError, raised before anything runs."""
    with pytest.raises(ConfigError, match=match):
        run_tests("x = 1", ["assert x == 1"], **kwargs)


def test_a_single_string_instead_of_a_list_of_checks_is_refused() -> None:
    """checks='assert ...' would be iterated character by character; it is rejected instead."""
    with pytest.raises(ConfigError, match="list of checks"):
        run_tests("x = 1", "assert x == 1")  # type: ignore[arg-type]


def test_run_tests_uses_the_default_pool_transparently() -> None:
    """Without pool= the process-wide pool serves the call, at the best level available."""
    result = run_tests("def add(a, b):\n    return a + b\n", CHECKS)
    assert result.fraction == 1.0
    assert result.isolation == default_pool().level
    expected = "strict" if bwrap_path() else "rlimits"
    assert result.isolation == expected


def test_threads_share_the_pool_safely(pool: SandboxPool) -> None:
    """Eight threads submitting at once all get correct, independent results."""
    codes = ["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"] * 4
    with ThreadPoolExecutor(max_workers=8) as executor:
        results = list(executor.map(lambda c: run_tests(c, CHECKS, pool=pool), codes))
    assert [r.fraction for r in results] == [1.0, 0.0] * 4


def test_arun_tests_serves_concurrent_asyncio_callers(pool: SandboxPool) -> None:
    """The asyncio twin returns the same results as run_tests, gathered concurrently."""
    async def main() -> list[RunResult]:
        codes = ["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a * b\n"] * 3
        return await asyncio.gather(*(arun_tests(c, CHECKS, pool=pool) for c in codes))

    results = asyncio.run(main())
    assert [r.fraction for r in results] == [1.0, 0.0] * 3


def test_close_is_idempotent_and_stops_every_worker() -> None:
    """close() twice is fine; the workers are gone; using a closed pool says so."""
    made = SandboxPool(size=2, isolation="rlimits")
    run_tests("def add(a, b):\n    return a + b\n", CHECKS, pool=made)
    pids = made.worker_pids
    assert pids
    made.close()
    made.close()
    assert made.worker_pids == []
    assert not set(pids) & set(process_table())
    with pytest.raises(SandboxError, match="closed"):
        run_tests("x = 1", ["assert x == 1"], pool=made)


def _kill_after(pids: list[int], delay: float) -> threading.Thread:
    def kill() -> None:
        time.sleep(delay)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    thread = threading.Thread(target=kill)
    thread.start()
    return thread


@pytest.mark.parametrize("level", ["strict", "rlimits"])
def test_a_run_whose_worker_dies_is_retried_once_on_a_fresh_worker(level: str) -> None:
    """Killing the worker mid-run costs a retry, not a wrong score."""
    made = strict_or_skip() if level == "strict" else SandboxPool(size=1, isolation=level)
    with made:
        run_tests("x = 1", ["assert x == 1"], pool=made)
        before = made.worker_pids
        killer = _kill_after(before, 0.3)
        code = "import time\ndef add(a, b):\n    time.sleep(0.8)\n    return a + b\n"
        with capture_logs() as logs:
            result = run_tests(code, CHECKS[:1], timeout=5.0, pool=made)
        killer.join()
        assert result.fraction == 1.0
        assert any(e["event"] == "sandbox_worker_died" for e in logs)
        assert set(made.worker_pids).isdisjoint(before)


def test_a_run_whose_worker_dies_twice_raises_an_infrastructure_error() -> None:
    """The second death is reported as SandboxError, never silently scored 0."""
    with SandboxPool(size=1, isolation="rlimits") as made:
        stop = threading.Event()

        def keep_killing() -> None:
            while not stop.is_set():
                for pid in made.worker_pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                time.sleep(0.05)

        run_tests("x = 1", ["assert x == 1"], pool=made)
        killer = threading.Thread(target=keep_killing)
        killer.start()
        try:
            with pytest.raises(SandboxError, match="infrastructure"):
                run_tests("import time\ntime.sleep(3)\n", ["assert True"], timeout=5.0, pool=made)
        finally:
            stop.set()
            killer.join()
        assert run_tests("x = 1", ["assert x == 1"], pool=made).fraction == 1.0


def test_a_worker_found_dead_while_idle_is_replaced_silently() -> None:
    """An idle worker that died is discarded at the next acquire; the run succeeds first time."""
    with SandboxPool(size=1, isolation="rlimits") as made:
        run_tests("x = 1", ["assert x == 1"], pool=made)
        (pid,) = made.worker_pids
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
        with capture_logs() as logs:
            assert run_tests("x = 1", ["assert x == 1"], pool=made).fraction == 1.0
        assert not any(e["event"] == "sandbox_worker_died" for e in logs)
        assert made.worker_pids != [pid]


@pytest.mark.parametrize("ending", ["normal exit", "SIGKILL"])
def test_no_worker_survives_the_interpreter_that_started_it(ending: str) -> None:
    """Workers go away at interpreter exit, and even when the interpreter is killed outright."""
    script = textwrap.dedent("""
        import sys, time
        from agentenv.grading import run_tests
        from agentenv.sandbox import default_pool
        from agentenv.sandbox.testing import process_table, _descendants
        run_tests("def add(a, b):\\n    return a + b\\n", ["assert add(1, 2) == 3"])
        table = process_table()
        pids = [p.pid for root in default_pool().worker_pids for p in _descendants(root, table)]
        print(" ".join(map(str, default_pool().worker_pids + pids)), flush=True)
        if sys.argv[1] == "SIGKILL":
            time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script, ending], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert pids
    if ending == "SIGKILL":
        proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30  # a poll that ends when they are gone, not a timing
    while set(pids) & set(process_table()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not set(pids) & set(process_table())


def test_the_root_launchers_staging_mount_hides_no_host_path() -> None:
    """The launcher mounts its staging tmpfs on a fresh empty directory of its own, never on a
    directory such as /tmp that may hold the checkout or the interpreter bubblewrap binds."""
    from agentenv.sandbox import _isolation

    stage = _isolation.stage_dir()
    assert os.path.isdir(stage) and os.listdir(stage) == []
    assert os.path.dirname(stage) == _isolation.STAGE_PARENT and stage != _isolation.STAGE_PARENT
    assert _isolation.stage_dir() == stage  # one per process


@pytest.mark.parametrize("size", [0, 1, 8, 9, 65535, 65536, 5 << 20])
@pytest.mark.parametrize("with_peer", [False, True])
def test_a_job_and_its_judge_channel_cross_the_job_socket_whole(size: int, with_peer: bool) -> None:
    """The worker sends a job's head (marker, length, the judge channel's end) and the job in
    one message; the prepared process reads exactly that many bytes, whatever the size, and
    gets a working channel end; a worker that hangs up first, or mid-job, gives an empty job."""
    import socket

    from agentenv.sandbox import _candidate

    job = bytes(range(256)) * (size // 256) + b"j" * (size % 256)
    ours, theirs = socket.socketpair()
    peer_ours, peer_theirs = socket.socketpair() if with_peer else (None, None)
    sender = threading.Thread(target=_candidate.send_job, args=(
        ours.fileno(), job, peer_theirs.fileno() if peer_theirs is not None else None))
    sender.start()
    payload, peer = _candidate.receive_job(theirs.detach())
    sender.join()
    ours.close()
    assert payload == job
    if peer_ours is None:
        assert peer is None
    else:
        assert peer is not None and peer_theirs is not None
        os.write(peer, b"ping")
        assert peer_ours.recv(4) == b"ping"
        os.close(peer)
        peer_ours.close()
        peer_theirs.close()
    for cut in (0, 5, _candidate.JOB_HEAD.size + min(size, 3)):  # hung up early: no job at all
        if cut >= _candidate.JOB_HEAD.size + size:
            continue
        ours, theirs = socket.socketpair()
        ours.sendall((_candidate.JOB_HEAD.pack(b"-", size) + job)[:cut])
        ours.close()
        assert _candidate.receive_job(theirs.detach()) == (b"", None)


def test_code_of_megabytes_with_judged_checks_runs_whole(pool: SandboxPool) -> None:
    """A submission of several megabytes reaches its process whole, and the judge process
    (a loop check) still gets its channel to it."""
    code = "BIG = " + repr("x" * (3 << 20)) + "\ndef add(a, b):\n    return a + b\n"
    checks = [*CHECKS, "for i in range(3):\n    assert add(i, i) == 2 * i", "assert len(BIG) == 3 << 20"]
    result = run_tests(code, checks, pool=pool, timeout=10)
    assert result.fraction == 1.0, result.failures


def test_threads_still_running_when_the_checks_end_change_nothing(pool: SandboxPool) -> None:
    """A solution that leaves threads running (busy, sleeping, printing) is scored on its
    values, answered without waiting for them, and leaves nothing behind for the next run."""
    code = textwrap.dedent("""
        import threading, time, sys
        def spin():
            while True:
                pass
        def chatter():
            while True:
                sys.stdout.write("tick\\n")
                time.sleep(0.001)
        for target in (spin, chatter, lambda: time.sleep(60)):
            threading.Thread(target=target, daemon=True).start()
        def add(a, b):
            return a + b
    """)
    for _round in range(3):
        result = run_tests(code, CHECKS, pool=pool, timeout=3)
        assert result.fraction == 1.0, result.failures
        assert not result.timed_out
        honest = run_tests(WALKTHROUGH["correct"][0], CHECKS, pool=pool)
        assert honest.fraction == 1.0 and not honest.timed_out
