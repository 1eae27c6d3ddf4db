"""Red team 6: the early end bound to the run's nonce (``_candidate.ended``), G lingering after its
last bytes until the worker kills it (``_candidate.become_candidate``: ``LINGER``, ``_sleep``), and the job
sent as a head carrying its length (``_candidate.JOB_HEAD``, ``send_job``/``receive_job``).

The candidate knows its own run's nonce (the job is a local of the frames below its code) and
can reach the worker module's globals in its process, so every attack here forges the exact end
the worker waits for, or rebinds what G does after it. Runs at the strict level on a pool of one
worker, so whatever an attack leaves lands on the honest run after it."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from support.attacks import strict_pool
from support.hangs import worker_waits

from agentenv.grading import RunResult, run_tests
from agentenv.sandbox import SandboxPool
from agentenv.sandbox.testing import leftover_processes
from agentenv.tasks.schema import StdioCase

CHECK = ["assert f() == 1"]
HONEST = "def f():\n    return 1\n"
# f right, g wrong: honest work on these two checks scores exactly 0.5
HALF = ["assert f() == 1", "assert g() == 2"]
HALF_CODE = "def f():\n    return 1\ndef g():\n    return 3\n"


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    made = strict_pool(1, "the red team 6 attacks")
    yield made
    made.close()


def honest_passes(pool: SandboxPool) -> RunResult:
    """The honest control after an attack: exactly 1.0, no timeout, and no worker found stuck or
    unhealthy on the way (support.hangs.worker_waits: the pool's only waits between runs)."""
    with worker_waits() as waits:
        result = run_tests(HONEST, CHECK, timeout=1.0, pool=pool)
    assert (result.fraction, result.timed_out) == (1.0, False), result
    assert waits == [], waits
    return result


def run_on(pool: SandboxPool, code: str, checks: list, timeout: float = 1.0,
          **kwargs: object) -> RunResult:
    """One run on ``pool`` (pytest-timeout is the hang guard: no run here is timed)."""
    return run_tests(code, checks, timeout=timeout, pool=pool, **kwargs)  # type: ignore[arg-type]


# Candidate-side: the run's nonce (a local of run_job, below the candidate's frames), the worker
# module's globals (those of become_candidate), the exact end the worker waits for, and forged
# frames bound to the nonce.
FORGERY = """
import os, sys, threading, time
def _find(pick):
    frame = sys._getframe()
    while frame is not None:
        for scope in (frame.f_locals, frame.f_globals):
            try:
                found = pick(scope)
            except Exception:
                found = None
            if found is not None:
                return found
        frame = frame.f_back
NONCE = _find(lambda s: s["job"]["nonce"])
W = _find(lambda s: s if "become_candidate" in s else None)
_wire, _schema = sys.modules["_wire"], sys.modules["_schema"]
END = _wire.encode_frame(NONCE, {_schema.TYPE: _schema.DONE}) + b"+finished\\n"
assert END == W["ended"](NONCE)
def forged_call(index, value, j=0):
    return _wire.encode_frame(NONCE, {_schema.TYPE: _schema.CALL, _schema.INDEX: index,
                                      _schema.CALL_INDEX: j,
                                      _schema.VALUE: _wire.encode_value(value)})
SAVED = os.dup(3)  # the result pipe, still open once G has closed fd 3
def after_finished(action):
    # runs action() as soon as G has closed fd 3 (after FINISHED, while it lingers)
    def watch():
        while True:
            try:
                os.fstat(3)
            except OSError:
                break
            time.sleep(0.0005)
        action()
    threading.Thread(target=watch, daemon=True).start()
"""


def test_the_forgery_helper_finds_the_nonce_and_the_exact_end(pool: SandboxPool) -> None:
    """Control for the attacks below: the candidate does find its nonce and builds the very
    bytes ``_candidate.ended`` returns (an assert in the helper), and an honest f still scores 1.0."""
    result = run_on(pool, FORGERY + HONEST, CHECK)
    assert (result.fraction, result.timed_out) == (1.0, False), result.failures


# --------------------------------------------------------------------------- forged ends

def test_the_exact_end_forged_at_load_only_cuts_the_candidates_own_run(pool: SandboxPool) -> None:
    """The done frame with the run's nonce and FINISHED, written on fd 3 at load, then a pause
    so the worker reads it as the pipe's last bytes: the worker ends the run there and kills G
    before its load frame, so nothing is credited (0.0, not a timeout) and the next honest run
    on the same worker is untouched."""
    workers = pool.worker_pids
    code = FORGERY + "os.write(3, END)\ntime.sleep(0.5)\n" + HALF_CODE
    result = run_on(pool, code, HALF)
    assert result.fraction == 0.0, result.failures
    assert result.timed_out is False
    honest_passes(pool)
    assert pool.worker_pids == workers
    assert leftover_processes(pool) == []


def test_the_exact_end_forged_inside_a_call_cuts_the_later_checks_not_credits_them(
        pool: SandboxPool) -> None:
    """Inside f (before f's own frame), a forged frame giving g's call a wrong value, then the
    exact end: the run ends there. f's check never reported (no_result) and g's is judged on
    the forged value, which is wrong: 0.0. A forged frame is only ever what returning that
    value says (the first frame of a call wins), so forging never beats computing."""
    code = FORGERY + (
        "def f():\n"
        "    os.write(3, forged_call(1, 3) + END)\n"
        "    time.sleep(0.5)\n"
        "    return 1\n"
        "def g():\n    return 2\n")
    result = run_on(pool, code, HALF)
    # f's own frame never came (G was killed in f), g's forged wrong value is judged as such
    assert result.fraction == 0.0, result.failures
    assert {f.index for f in result.failures} == {0, 1}
    honest_passes(pool)


def test_frames_forged_after_the_done_frame_are_never_credited(pool: SandboxPool) -> None:
    """g raises; once G has written its done frame and FINISHED and closed fd 3, a thread
    writes through a saved copy of fd 3 a frame giving g's call the right value, then the exact
    end again (so the pipe's last bytes are a valid end once more). The real frame for g (it
    raised) came first, and the parent keeps the first frame of each call: 0.5, not 1.0."""
    code = FORGERY + (
        "after_finished(lambda: os.write(SAVED, forged_call(1, 2) + END))\n"
        "def f():\n    return 1\n"
        "def g():\n    raise ValueError('no')\n")
    for _ in range(3):
        result = run_on(pool, code, HALF)
        assert result.fraction == 0.5, result.failures
        assert [f.index for f in result.failures] == [1]
        assert result.timed_out is False
    honest_passes(pool)


def test_a_call_that_hangs_stays_unpaid_in_a_judged_run_whatever_g_forges(
        pool: SandboxPool) -> None:
    """A check only the judge process grades, and an f that hangs; a watchdog thread in G
    forges, with G's nonce, frames for the check and the exact end. The verdict is read only
    from J's pipe (J's nonce is not G's) and the early end waits for J to exit, so the check is
    not credited: 0.0, the run stopped by its time limit, not hung."""
    code = FORGERY + (
        "def watchdog():\n"
        "    time.sleep(0.2)\n"
        "    forged = _wire.encode_frame(NONCE, {_schema.TYPE: _schema.CHECK, "
        "_schema.INDEX: 0, _schema.OK: True})\n"
        "    os.write(3, forged + forged_call(0, 1) + END)\n"
        "threading.Thread(target=watchdog, daemon=True).start()\n"
        "def f(x):\n    while True:\n        time.sleep(0.01)\n")
    checks = ["for x in (1, 2):\n    assert f(x) == x"]
    result = run_on(pool, code, checks, timeout=0.5)
    assert (result.fraction, result.timed_out) == (0.0, True), result.failures
    honest_passes(pool)


# --------------------------------------------------------------------------- G's linger

# What G does after its last bytes, rebound by the candidate: the worker globals LINGER and
# _sleep (bound at import, but module globals of the candidate's own process), os._exit (read
# from the os module when G exits), and a stdout whose flush never returns (G flushes it before
# FINISHED). Each also makes G's last write a newline after the marker (harmless between frames,
# but the pipe no longer ends with the exact end, so the worker waits for G) and burns CPU in a
# thread.
KEEP_G_ALIVE = {
    "linger_forever": "W['LINGER'] = 1e6\n",
    "sleep_forever": "W['_sleep'] = lambda seconds: time.sleep(1e6)\n",
    "exit_disabled": "os._exit = lambda code: time.sleep(1e6)\n",
    "flush_never_returns": (
        "class Stuck:\n"
        "    def write(self, text):\n        return len(text)\n"
        "    def flush(self):\n        time.sleep(1e6)\n"
        "sys.stdout = Stuck()\n"),
}
BURN_AND_JUNK = """
def burn():
    while True:
        pass
threading.Thread(target=burn, daemon=True).start()
W["FINISHED"] = b"+finished\\n\\n"  # G's last write: a newline after the marker
"""


@pytest.mark.parametrize("how", sorted(KEEP_G_ALIVE))
def test_g_kept_alive_after_its_last_bytes_is_stopped_by_the_runs_limits(
        pool: SandboxPool, how: str) -> None:
    """Contained: G kept alive past FINISHED (or kept from writing it) while a thread burns
    CPU is stopped by the run's CPU or wall limit like any loop (no longer than a candidate
    whose f spins), scores exactly its earned work (0.5: f right, g wrong; the frames were all
    sent before), and the next honest run on the same worker scores 1.0, no worker waited out.
    A stuck flush (G never writes FINISHED) is a timeout; G lingering after FINISHED
    is, today, ended once G has closed its pipes. Rebinding LINGER or _sleep is new with 5a138a1 (at 8441f5c
    those two ended at once), but os._exit and a stuck flush did the same there already; with
    only the junk after the marker G lingers its 50 ms and exits (0.07-0.1 s, not a timeout)."""
    workers = pool.worker_pids
    code = FORGERY + KEEP_G_ALIVE[how] + BURN_AND_JUNK + HALF_CODE
    result = run_on(pool, code, HALF, timeout=0.5)
    assert result.fraction == 0.5, (how, result.failures)
    if how == "flush_never_returns":  # G never wrote FINISHED: only the time limit ends it
        assert result.timed_out is True, result
    honest_passes(pool)
    assert pool.worker_pids == workers
    assert leftover_processes(pool) == []


LOAD_BEHIND = """
import mmap, os, threading
def spin():
    while True:
        pass
for _ in range(4):
    threading.Thread(target=spin, daemon=True).start()
for _ in range(20):
    if os.fork() == 0:
        area = mmap.mmap(-1, 16 << 20)
        for at in range(0, 16 << 20, 4096):
            area[at] = 1
        spin()
def f():
    return 1
"""


def test_a_run_ending_early_with_load_behind_it_charges_nothing_to_the_next_run(
        pool: SandboxPool) -> None:
    """Four spinning threads in G and twenty spinning children holding 16 MiB each, alive at
    a normal (early) end: the worker kills G while they run. Alternated three times with an
    honest run on the same worker: the honest run scores exactly 1.0, not timed out, and
    nothing of the hostile run is left to share a core or be counted (no leftovers)."""
    workers = pool.worker_pids
    for _ in range(3):
        result = run_on(pool, LOAD_BEHIND, CHECK, timeout=2.0)
        assert result.fraction == 1.0, result.failures
        honest_passes(pool)
        assert leftover_processes(pool) == []
    assert pool.worker_pids == workers


def test_alternating_every_attack_with_honest_runs_keeps_every_honest_verdict(
        pool: SandboxPool) -> None:
    """Every hostile end of this file in a row, each followed by the honest control."""
    hostile = [
        FORGERY + "os.write(3, END)\ntime.sleep(0.3)\n" + HALF_CODE,
        FORGERY + "after_finished(lambda: os.write(SAVED, forged_call(0, 1) + END))\n" + HALF_CODE,
        FORGERY + KEEP_G_ALIVE["linger_forever"] + "after_finished(lambda: os.write(SAVED, b'x'))\n"
        + HALF_CODE,
        FORGERY + "after_finished(lambda: os.write(SAVED, END * 1000))\n" + HALF_CODE,
    ]
    for code in hostile:
        result = run_on(pool, code, HALF, timeout=0.5)
        assert result.fraction <= 0.5, result.failures
        honest_passes(pool)


# --------------------------------------------------------------------------- the job head

def _round_trip(job: bytes, with_peer: bool) -> tuple[bytes, bool]:
    """``_candidate.send_job`` on one end of a socket pair (in a thread: a big job fills the socket),
    ``receive_job`` on the other; returns what arrived and whether the fd that came with it
    is the one sent."""
    from agentenv.sandbox import _candidate

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    peer_r, peer_w = os.pipe()
    try:
        sender = threading.Thread(target=_candidate.send_job,
                                  args=(ours.fileno(), job, peer_w if with_peer else None))
        sender.start()
        payload, peer = _candidate.receive_job(theirs.detach())
        sender.join(10)
        same = peer is not None and os.fstat(peer).st_ino == os.fstat(peer_w).st_ino
        if peer is not None:
            os.close(peer)
        return payload, (same if with_peer else peer is None)
    finally:
        ours.close()
        os.close(peer_r)
        os.close(peer_w)


ODD_SIZES = [1, 2, 7, 8, 9, 10, 4087, 4095, 4096, 4097, 65527, 65535, 65536, 65537,
             212983, 212991, 212992, 212993, (1 << 20) - 1, (1 << 20) + 9, (5 << 20) + 3]


@pytest.mark.parametrize("with_peer", [False, True])
def test_jobs_of_odd_sizes_arrive_whole_with_their_channel(with_peer: bool) -> None:
    """Sizes at and around the head (9 bytes), a page, a pipe, the socket's default buffer
    and a few MiB: each job arrives byte for byte, and the judge channel's fd comes with it
    when one is sent (never when none is)."""
    for size in ODD_SIZES:
        job = bytes((i * 7 + size) & 0xFF for i in range(size))
        payload, fd_ok = _round_trip(job, with_peer)
        assert (len(payload), payload == job, fd_ok) == (size, True, True), size


def test_a_head_split_across_writes_is_reassembled_and_a_short_job_is_refused() -> None:
    """The head in three pieces (the marker with the fd, then the length in two), then the job
    in two: the job arrives whole with its fd. A head that promises more than comes before the
    stream ends gives an empty job (the process exits), never a truncated one."""
    from agentenv.sandbox import _candidate

    job = b'{"nonce": "x", "code": "' + b"a" * 100_000 + b'"}'
    head = _candidate.JOB_HEAD.pack(b"J", len(job))
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    peer_r, peer_w = os.pipe()

    def send() -> None:
        socket.send_fds(ours, [head[:1]], [peer_w])
        for piece in (head[1:4], head[4:], job[:5000], job[5000:]):
            time.sleep(0.01)
            ours.sendall(piece)

    sender = threading.Thread(target=send)
    sender.start()
    payload, peer = _candidate.receive_job(theirs.detach())
    sender.join(10)
    ours.close()
    assert payload == job
    assert peer is not None and os.fstat(peer).st_ino == os.fstat(peer_w).st_ino
    os.close(peer)

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.sendall(_candidate.JOB_HEAD.pack(b"-", 100) + b"x" * 50)
    ours.close()
    payload, peer = _candidate.receive_job(theirs.detach())
    assert (payload, peer) == (b"", None)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.sendall(struct.pack(">c", b"-") + b"\x00\x00")  # a head cut short
    ours.close()
    assert _candidate.receive_job(theirs.detach()) == (b"", None)
    os.close(peer_r)
    os.close(peer_w)


BIG = 50_000_000


def test_a_50_mb_job_arrives_whole(pool: SandboxPool) -> None:
    """50 MB of code (one string literal) in the job: the candidate's process reads exactly
    the length its head gives, so the whole literal is there (f returns its length and a
    marker at its end), then the next honest run passes."""
    code = f"S = '{'a' * BIG}' + 'END'\ndef f():\n    return (len(S), S[-4:])\n"
    result = run_on(pool, code, [f"assert f() == ({BIG + 3}, 'aEND')"], timeout=10.0)
    assert (result.fraction, result.timed_out) == (1.0, False), result.failures
    honest_passes(pool)


def test_a_20_mb_job_with_a_judge_still_gives_the_pair_its_channel(pool: SandboxPool) -> None:
    """A check only the judge grades, with 20 MB of code: G's job and the channel's end come
    in one message, J's job and the other end in another; the judge asks G over the channel
    and passes the honest f (1.0); a wrong f (the last call wrong) scores 0.0."""
    size = 20_000_000
    checks = ["for x in (1, 2):\n    assert f(x) == (x, LEN)".replace("LEN", str(size))]
    for wrong, expected in ((0, 1.0), (2, 0.0)):
        code = (f"S = '{'b' * size}'\ndef f(x):\n"
                f"    return (x, len(S)) if x != {wrong} else (x, -1)\n")
        result = run_on(pool, code, checks, timeout=10.0)
        assert (result.fraction, result.timed_out) == (expected, False), result.failures
    honest_passes(pool)


@pytest.mark.parametrize("size", [0, 8, 9, 65536, 212992])
def test_jobs_of_odd_sizes_through_the_pool_score_exactly(pool: SandboxPool, size: int) -> None:
    code = f"S = '{'c' * size}'\ndef f():\n    return len(S)\n"
    result = run_on(pool, code, [f"assert f() == {size}"])
    assert (result.fraction, result.timed_out) == (1.0, False), result.failures


# Candidate-side: every socket it holds (and any fd of any process it can see) gets a forged
# job head and a hostile job. At the strict level a run holds no job socket once its job is read
# (the prepared runs' are in the worker, in no namespace a run can see); only a judged run holds
# a socket, the channel to its own judge.
WRITE_EVERY_SOCKET = """
import json, os, stat, struct
HOSTILE = json.dumps({"nonce": "0" * 32, "code": "def f():\\n    return 0\\n", "items": [],
                      "setup": "", "limits": {}, "env": {}, "workdir": "/"}).encode()
MESSAGE = struct.pack(">cQ", b"-", len(HOSTILE)) + HOSTILE
seen = []
paths = [f"/proc/self/fd/{n}" for n in os.listdir("/proc/self/fd")]
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            paths += [f"/proc/{pid}/fd/{n}" for n in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            pass
for path in paths:
    try:
        if not stat.S_ISSOCK(os.stat(path).st_mode):
            continue
        seen.append(path)
        fd = int(path.rsplit("/", 1)[1]) if path.startswith("/proc/self") else None
        if fd is not None:
            os.write(fd, MESSAGE)
    except OSError:
        pass
print("sockets:", seen)
def f(x=1):
    return x
"""


@pytest.mark.parametrize("judged", [False, True])
def test_a_candidate_cannot_write_a_job_to_any_prepared_run(pool: SandboxPool, judged: bool) -> None:
    """A forged head and job written to every socket the candidate can find: a plain run has
    none; a judged run has its own judge channel only (so at most it spoils its own run). The
    next honest run, taken from the runs prepared meanwhile, scores exactly 1.0."""
    checks = ["for x in (1, 2):\n    assert f(x) == x"] if judged else ["assert f() == 1"]
    result = run_on(pool, WRITE_EVERY_SOCKET, checks)
    assert result.fraction <= 1.0
    if not judged:
        assert "sockets: []" in result.stdout, result.stdout
    for _ in range(3):
        honest_passes(pool)


# --------------------------------------------------------------------------- honest edge cases

HONEST_CALLS = {
    "thread_still_sleeping": "import threading, time\n"
                             "threading.Thread(target=time.sleep, args=(30,)).start()\n",
    "thread_still_printing": "import threading\ndef p():\n    while True:\n"
                             "        print('x', end='')\n"
                             "threading.Thread(target=p, daemon=True).start()\n",
    "output_without_newline": "import sys\nsys.stdout.write('partial')\n",
    "stdout_closed": "import sys\nprint('hi')\nsys.stdout.close()\n",
    "stdout_replaced": "import io, sys\nsys.stdout = io.StringIO()\nprint('hi')\n",
    "background_subprocess": "import subprocess, sys\n"
                             "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n",
    "background_fork": "import os, time\nif os.fork() == 0:\n    time.sleep(30)\n    os._exit(0)\n",
}


@pytest.mark.parametrize("name", sorted(HONEST_CALLS))
def test_honest_solutions_with_loose_ends_score_exactly_one(pool: SandboxPool, name: str) -> None:
    """Threads still running at the end, output without a newline, stdout closed or replaced,
    a background child: 1.0 for two checks, no timeout, well within the limit."""
    code = HONEST_CALLS[name] + "def f():\n    return 1\ndef g():\n    return 2\n"
    result = run_on(pool, code, HALF)
    assert (result.fraction, result.timed_out) == (1.0, False), (name, result.failures)
    if name == "output_without_newline":
        assert result.stdout == "partial"


def test_an_honest_judged_solution_with_a_thread_still_running_scores_one(
        pool: SandboxPool) -> None:
    code = ("import threading, time\nthreading.Thread(target=time.sleep, args=(30,)).start()\n"
            "def f(x):\n    return x\n")
    result = run_on(pool, code, ["for x in (1, 2, 3):\n    assert f(x) == x"])
    assert (result.fraction, result.timed_out) == (1.0, False), result.failures


STDIO = StdioCase(stdin="3\n", expected_stdout="9")
HONEST_STDIO = {
    "plain": "n = int(input())\nprint(n * n)\n",
    "without_newline": "import sys\nn = int(input())\nsys.stdout.write(str(n * n))\n",
    "stdout_closed": "import sys\nn = int(input())\nprint(n * n)\nsys.stdout.close()\n",
    "stdout_rewrapped": "import io, os, sys\nn = int(input())\n"
                        "sys.stdout = io.TextIOWrapper(os.fdopen(1, 'wb'))\nprint(n * n)\n",
    "daemon_thread_left": "import threading, time\nn = int(input())\n"
                          "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
                          "print(n * n)\n",
    "sys_exit": "import sys\nn = int(input())\nprint(n * n)\nsys.exit(0)\n",
    "background_child_off_stdout": "import subprocess, sys\nn = int(input())\n"
                                   "subprocess.Popen([sys.executable, '-c', 'import time; "
                                   "time.sleep(30)'], stdout=subprocess.DEVNULL)\nprint(n * n)\n",
}


@pytest.mark.parametrize("name", sorted(HONEST_STDIO))
def test_honest_stdio_programs_score_exactly_one(pool: SandboxPool, name: str) -> None:
    result = run_on(pool, HONEST_STDIO[name], [STDIO, STDIO])
    assert (result.fraction, result.timed_out) == (1.0, False), (name, result.failures)


# Found by this review, older than the commits it reviewed (the same at 8441f5c): a stdio
# program's process ended with os._exit right after flushing sys.stdout, where CPython first joins
# non-daemon threads and finalizes (so flushes) other file objects on fd 1. Both programs print 9
# under `python3`; _runner._end_program now does what the interpreter does.
PRE_EXISTING_STDIO = {
    "non_daemon_thread_prints_after_main": "import threading, time\nn = int(input())\n"
                                           "def p():\n    time.sleep(0.1)\n    print(n * n)\n"
                                           "threading.Thread(target=p).start()\n",
    "own_buffered_file_on_fd_1": "n = int(input())\nout = open(1, 'w', closefd=False)\n"
                                 "out.write(str(n * n))\n",
}


@pytest.mark.parametrize("name", sorted(PRE_EXISTING_STDIO))
def test_honest_stdio_programs_relying_on_interpreter_exit_score_one(
        pool: SandboxPool, name: str) -> None:
    result = run_on(pool, PRE_EXISTING_STDIO[name], [STDIO])
    assert (result.fraction, result.timed_out) == (1.0, False), (name, result.failures)
