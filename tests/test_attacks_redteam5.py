"""Red team 5: the early answer on FINISHED (``_monitor.watch`` reads only what the pipes
report holding), the idle report that waits for every run to be reaped (``after_run``), the
zygote-wide syscall filter, the warm-up skipped when a job waits. Runs at the strict level, on a
pool of one worker, so whatever an attack leaves lands on the run after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.attacks import strict_pool
from support.hangs import worker_waits

from agentenv.grading import RunResult, run_tests
from agentenv.sandbox import Limits, SandboxPool
from agentenv.sandbox.testing import leftover_processes

CHECK = ["assert f() == 1"]
HONEST = "def f():\n    return 1\n"


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    made = strict_pool(1, "the red team 5 attacks")
    yield made
    made.close()


def honest_passes(pool: SandboxPool) -> RunResult:
    result = run_tests(HONEST, CHECK, timeout=1.0, pool=pool)
    assert (result.fraction, result.timed_out) == (1.0, False), result
    return result


# --------------------------------------------------------------------------- honest output

BIG_OUTPUT = """
import fcntl, os, subprocess, sys
GROW = GROW_TO
if GROW:
    fcntl.fcntl(1, 1031, GROW)  # F_SETPIPE_SZ
    fcntl.fcntl(2, 1031, GROW)
sys.stdout.write("o" * OUT)
sys.stderr.write("e" * ERR)
sys.stdout.flush(); sys.stderr.flush()
subprocess.run([sys.executable, "-c", "import sys; sys.stdout.write('c' * CHILD)"], check=True)
def f():
    return 1
"""


@pytest.mark.parametrize("grow", [0, 1 << 20])
def test_output_up_to_the_cap_written_before_a_normal_end_all_comes_back(
        pool: SandboxPool, grow: int) -> None:
    """Honest control: 1.5 MiB of stdout, 0.9 MiB of stderr and 0.2 MiB of a waited child's
    stdout, with the pipes left at 64 KiB or grown to 1 MiB (the most an unprivileged process
    may ask), all come back whole under a 4 MiB cap: at FINISHED what is left in each pipe is at
    most its size, and 16 reads of 64 KiB drain 1 MiB."""
    out, err, child = 3 << 19, 900_000, 200_000
    code = (BIG_OUTPUT.replace("GROW_TO", str(grow)).replace("OUT", str(out))
            .replace("ERR", str(err)).replace("CHILD", str(child)))
    result = run_tests(code, CHECK, timeout=5.0, pool=pool, limits=Limits(max_output=4 << 20))
    assert (result.fraction, result.timed_out) == (1.0, False), result.failures
    assert result.stdout == "o" * out + "c" * child, len(result.stdout)
    assert result.stderr == "e" * err, len(result.stderr)
    honest_passes(pool)


# --------------------------------------------------------------------------- the early answer

FLOOD_AFTER_END = """
import os, sys
if os.fork() == 0:  # never waited for: floods stdout and stderr until it is killed
    chunk = b"x" * 65536
    while True:
        try:
            os.write(1, chunk)
            os.write(2, chunk)
        except OSError:
            pass
FORGE
def f():
    return 1
"""


@pytest.mark.parametrize("forge", ["", "os.write(3, b'+finished\\n')"])
def test_a_child_flooding_the_pipes_past_the_end_neither_wedges_nor_delays_the_worker(
        pool: SandboxPool, forge: str) -> None:
    """A child the candidate never waits for writes 64 KiB chunks to stdout and stderr without
    end, and the candidate ends normally (or first forges FINISHED on fd 3). Each read of the
    drain finds more (16 rounds at most, then the answer); the run is killed first, so the
    flood stops with the pid namespace. Contained: the honest run passes (the forged marker
    at most cuts the candidate's own run short: 0 or 1), the flooded run is answered before its
    time limit (not a timeout), on the same worker, and nothing is left."""
    workers = pool.worker_pids
    result = run_tests(FLOOD_AFTER_END.replace("FORGE", forge), CHECK, timeout=1.0, pool=pool)
    # the forged marker ends the run only if the worker reads it before the frames behind it
    assert result.fraction in ((0.0, 1.0) if forge else (1.0,)), result.failures
    assert result.timed_out is False, result
    assert len(result.stdout) <= 64 * 1024 + 100
    honest_passes(pool)
    assert pool.worker_pids == workers
    assert leftover_processes(pool) == []


SLOW_TEARDOWN = """
import mmap, os, signal
def hog():
    # Sparse: one touched page per 2 MiB, so each page also costs a page table.
    size = 1 << 30
    area = mmap.mmap(-1, size)
    for at in range(0, size, 1 << 21):
        area[at] = 1
kids = []
for _ in range(40):
    pid = os.fork()
    if pid == 0:
        try:
            hog()
        finally:
            os.write(1, b"k")
            while True:
                signal.pause()
    kids.append(pid)
import time
time.sleep(0.5)
def f():
    return 1
"""


def test_a_run_that_is_slow_to_tear_down_only_delays_the_next_run_on_its_worker(
        pool: SandboxPool) -> None:
    """40 processes that each map 1 GiB and touch one page per 2 MiB (512 pages and 512 page
    tables each), left alive at a normal end: the idle report now waits until the zygote has
    reaped the run. Contained if the next honest run passes on the same worker, the idle report
    in before IDLE_TIMEOUT (10 s; missing it makes the pool log the worker unhealthy and replace
    it)."""
    workers = pool.worker_pids
    result = run_tests(SLOW_TEARDOWN, CHECK, timeout=2.0, pool=pool)
    with worker_waits() as waits:
        honest_passes(pool)
    assert result.fraction == 1.0, (result.failures, result.stderr[-500:])
    assert waits == [], waits
    assert pool.worker_pids == workers
    assert leftover_processes(pool) == []


# --------------------------------------------------------------------------- with a judge

JUDGED = ("for x in (1, 2, 3):\n    assert f(x) == x",)
JUDGED_CODE = """
import os, sys
FORGE
sys.stdout.write("o" * 200_000)
sys.stdout.flush()
def f(x):
    os.write(3, b"+finished\\n") if FORGE_IN_CALL else None
    print("call", x)
    return x if x != WRONG else -1
"""


@pytest.mark.parametrize(("forge", "in_call", "wrong", "expected"), [
    ("", False, 0, 1.0),
    ("os.write(3, b'+finished\\n')", False, 0, 1.0),
    ("", True, 0, 1.0),
    ("os.write(3, b'+finished\\n')", True, 3, 0.0),
])
def test_a_forged_finished_marker_never_ends_a_judged_run_before_its_judge(
        pool: SandboxPool, forge: str, in_call: bool, wrong: int, expected: float) -> None:
    """A check only the judge process can grade (a loop), and a candidate that writes FINISHED
    on fd 3 at load and/or inside every call the judge makes, so G's result pipe ends with the
    marker while the judge still works. The early answer also waits for the judge to exit, so
    the verdict is the judge's, earned work only: 1.0 when every call is right, 0.0 (not a
    forged pass) when the last one is wrong; 200 kB of stdout written at load comes back."""
    code = (JUDGED_CODE.replace("FORGE_IN_CALL", str(in_call)).replace("FORGE", forge)
            .replace("WRONG", str(wrong)))
    result = run_tests(code, JUDGED, timeout=2.0, pool=pool, limits=Limits(max_output=1 << 20))
    assert (result.fraction, result.timed_out) == (expected, False), result.failures
    assert result.stdout.startswith("o" * 200_000), len(result.stdout)
    honest_passes(pool)


# --------------------------------------------------------------------------- packet-mode pipes

PACKETS = """
import fcntl, os
fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_DIRECT)  # packet mode
fcntl.fcntl(1, 1031, 1 << 20)  # F_SETPIPE_SZ: 256 slots, one packet each
for i in range(200):
    os.write(1, b"%04d\\n" % i)
def f():
    return 1
"""


def test_output_in_a_packet_mode_pipe_written_before_a_normal_end_all_comes_back(
        pool: SandboxPool) -> None:
    """A pipe whose write end has O_DIRECT is in packet mode: every write is a buffer slot of its
    own and every read returns at most one slot. The early answer on FINISHED reads each pipe
    at most DRAIN_ROUNDS (16) times, so of 200 lines of 5 bytes (1000 bytes, far under the
    cap) written before a normal end only ~16 to ~25 came back (measured: 25, 17, 200 of 200 in
    three runs); before the early answer the pipes were read to their ends. Only the
    candidate's own stdout and stderr (its result channel carries frames the parent checks)
    and only by its own choice, so no verdict changes; the drain must read as many times as a
    pipe can have slots (256 at the default pipe-max-size of 1 MiB)."""
    limits = Limits(max_output=1 << 20)
    for _ in range(3):
        result = run_tests(PACKETS, CHECK, timeout=2.0, pool=pool, limits=limits)
        assert result.fraction == 1.0, result.failures
        assert result.stdout == "".join(f"{i:04d}\n" for i in range(200)), len(result.stdout) // 5


# --------------------------------------------------------------------------- the marker in a frame

ENDS_LIKE_THE_MARKER = """
import time
def f():
    return "+finished"
def g():
    time.sleep(0.3)
    return 2
"""


def test_an_honest_value_whose_frame_ends_like_the_finished_marker_keeps_its_later_checks(
        pool: SandboxPool) -> None:
    """A frame on the result channel is ``<nonce> <len>\\n<msgpack>\\n``, so a call that
    returns the string ``"+finished"`` writes a frame whose last bytes are exactly FINISHED.
    When the worker's read ended there (here: the next check sleeps first), the monitor took
    it for the run's end and killed G before the later checks ran: an honest solution passing
    both checks scored 0.5 (check 1: ``no_result``), answered in 0.02 s (older than the change
    red team 5 reviewed: the early answer of 5d4660c). Now the run ends early only on
    ``ENDED``, the job's done frame followed by the marker, followed across reads: both checks
    pass."""
    checks = ["assert f() == '+finished'", "assert g() == 2"]
    result = run_tests(ENDS_LIKE_THE_MARKER, checks, timeout=2.0, pool=pool)
    assert (result.fraction, result.timed_out) == (1.0, False), result.failures


# Values whose raw bytes on the wire end like a done frame's body and the marker (found by a
# second review): a mixed list of small ints spelling it, a typed int array (16 or more ints
# travel as raw machine words), plain bytes.
ENDS_LIKE_A_DONE_FRAME = {
    "mixed_list": '[10, {"t": "done"}, 10, 43, 102, 105, 110, 105, 115, 104, 101, 100]',
    "int_array": "[0] * 16 + [-1585378816, 1868866676, 722101614, 1768843622, 1684367475]",
    "bytes": "b'payload\\n\\x81\\xa1t\\xa4done\\n+finished'",
}


@pytest.mark.parametrize("value", sorted(ENDS_LIKE_A_DONE_FRAME))
def test_an_honest_value_whose_frame_ends_like_a_done_frame_keeps_its_later_checks(
        pool: SandboxPool, value: str) -> None:
    """A call whose value's raw bytes end like the done frame's body and the marker: when the
    early answer matched that (``ENDED`` without the run), the run was cut before the next
    check (0.5, ``no_result``, in 0.002-0.009 s). The end a worker waits for now includes the
    done frame's header line with the run's 128-bit nonce: both checks pass."""
    code = f"import time\ndef f():\n    return {ENDS_LIKE_A_DONE_FRAME[value]}\n" \
           "def g():\n    time.sleep(0.3)\n    return 2\n"
    result = run_tests(code, ["assert f() == f()", "assert g() == 2"], timeout=2.0, pool=pool)
    assert (result.fraction, result.timed_out) == (1.0, False), (value, result.failures)
