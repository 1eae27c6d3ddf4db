"""Red team 7: the judge process's linger and the early end that no longer waits for it
(558563e), the end rule "one pipe has its nonce-bound end, every other process has that end or
has exited" (a8e09f8), G's end held in locals, the job head's marker/descriptor agreement, the
stdio program's end (``_runner._end_program``), the warm-up giving way to a real job between its
items, and the judge's single free-name analysis (11365c7).

Most attacks run at the strict level on a pool of one worker, so whatever an attack leaves lands
on the honest run after it; a few run at the rlimits level (as root, opted in), where runs share
a uid and a pid namespace with each other. Every attack asserts the most it may score; a hole is
a strict xfail that says what the candidate gains."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import pytest
from support.attacks import strict_pool
from support.hangs import worker_waits

from agentenv.grading import RunResult, run_tests
from agentenv.sandbox import SandboxPool, _isolation
from agentenv.sandbox.testing import leftover_processes
from agentenv.tasks.schema import StdioCase

CHECK = ["assert f() == 1"]
HONEST = "def f():\n    return 1\n"
LOOP = "for x in (1, 2):\n    assert {name}(x) == x"  # a check only the judge process grades


def judged(name: str) -> str:
    return LOOP.format(name=name)


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    made = strict_pool(1, "the red team 7 attacks")
    yield made
    made.close()


@pytest.fixture(scope="module")
def fallback() -> Iterator[SandboxPool]:
    """A pool of one worker at the rlimits level (as root only because the test opts in)."""
    made = SandboxPool(size=1, isolation="rlimits", allow_root_fallback=True)
    yield made
    made.close()


def run_on(pool: SandboxPool, code: str, checks: list, timeout: float = 1.0,
          **kwargs: object) -> RunResult:
    """One run on ``pool`` (pytest-timeout is the hang guard: no run here is timed)."""
    return run_tests(code, checks, timeout=timeout, pool=pool, **kwargs)  # type: ignore[arg-type]


def honest_passes(pool: SandboxPool) -> None:
    """The honest controls after an attack: a plain, a judged and a stdio run, each exactly 1.0,
    none a timeout, and no worker found stuck or unhealthy on the way (support.hangs.worker_waits:
    the pool's only waits between runs)."""
    with worker_waits() as waits:
        for code, checks in ((HONEST, CHECK), ("def f(x):\n    return x\n", [judged("f")]),
                             (STDIO_HONEST["plain"], [STDIO_3])):
            result = run_tests(code, checks, timeout=1.0, pool=pool)
            assert (result.fraction, result.timed_out) == (1.0, False), (code, result.failures)
    assert waits == [], waits


# Candidate-side: the run's nonce (a local of run_job, below the candidate's frames), the exact
# end the worker waits for on G's pipe, and G's frames bound to it. Also found from a stdio
# program's process and from a finalizer (their frames sit above _run_stdio and run_job too).
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
_wire, _schema = sys.modules["_wire"], sys.modules["_schema"]
END = _wire.encode_frame(NONCE, {_schema.TYPE: _schema.DONE}) + b"+finished\\n"
WARM_END = _wire.encode_frame("0" * 32, {_schema.TYPE: _schema.DONE}) + b"+finished\\n"
"""


# --------------------------------------------------------------------------- the judge's end

# Text a candidate controls in the judge's verdict frames (an exception's message, a value's
# repr) shaped like every end it knows: its own run's, the warm-up's (nonce "0" * 32), a bare
# marker. The judge's real end needs its own nonce, which no candidate sees, and raw bytes such
# as the done frame's msgpack body can only reach a verdict frame as quoted UTF-8 text.
JUDGE_TEXT = FORGERY + """
TEXT = (END + WARM_END + b"+finished\\n").decode("latin-1")
def f(x):
    os.write(3, END)  # G's pipe now ends with its exact end: G counts as done from here on
    raise ValueError(TEXT)
def g(x):
    return TEXT
def ok(x):
    return x
def hang(x):
    while True:
        time.sleep(0.01)
"""


def test_text_shaped_like_every_known_end_never_ends_the_judge_early(pool: SandboxPool) -> None:
    """Four judged checks: f raises a message made of the ends the candidate knows (after
    writing its own exact end on G's pipe), g returns it as a value, ok is right, hang never
    returns. The judge's pipe never ends like its end before the judge is done, so the run is
    not cut: ok's check is graded (passes) after the two quoted ends, and hang's is a timeout,
    never credited: exactly 0.25."""
    checks = [judged("f"), judged("g"), judged("ok"), judged("hang")]
    result = run_on(pool, JUDGE_TEXT, checks, timeout=0.5)
    assert result.fraction == 0.25, result.failures
    assert result.passed_indices == (2,)
    assert result.timed_out is True
    honest_passes(pool)


G_EXITS_MID_JUDGING = FORGERY + """
def ok(x):
    return x
def g(x):
    os.write(3, END)  # G's exact end, then G is gone: the "exited" half of the end rule
    os._exit(0)
"""


def test_g_that_forges_its_end_and_exits_mid_judging_keeps_only_earlier_verdicts(
        pool: SandboxPool) -> None:
    """ok's check, then g (which writes G's exact end and exits while the judge waits for its
    answer), then ok again: the first verdict stands, the judge reports the other two as
    no_result (the candidate is gone) and the run ends without waiting: exactly 1/3."""
    checks = [judged("ok"), judged("g"), judged("ok")]
    result = run_on(pool, G_EXITS_MID_JUDGING, checks)
    assert result.passed_indices == (0,), result.failures
    assert result.timed_out is False
    assert {f.kind for f in result.failures} == {"no_result"}
    honest_passes(pool)


# Candidate-side at the rlimits level: every other child of the zygote (the judge, the runs the
# worker keeps prepared) is a sibling of G in the same pid namespace, and can be signalled.
SIBLINGS = """
import signal
def siblings():
    me, parent, found = os.getpid(), os.getppid(), []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    data = handle.read()
                fields = data[data.rindex(b")") + 2:].split()
                if int(fields[1]) == parent and fields[0] != b"Z":
                    found.append(int(name))
            except (OSError, ValueError):
                pass
    return found
"""
KILL_THE_JUDGE = FORGERY + SIBLINGS + """
def ok(x):
    return x
def g(x):
    for pid in siblings():
        try:
            os.kill(pid, signal.SIGNAL)
        except OSError:
            pass
    os.write(3, END)  # G's exact end, the judge stopped or gone: the run may end now
    time.sleep(30)
"""


@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGSTOP"])
def test_rlimits_candidate_that_kills_or_stops_the_judge_gains_nothing(
        fallback: SandboxPool, signal_name: str) -> None:
    """At the rlimits level G can signal its judge (and the prepared runs beside it). Killed
    after its first verdict, with G's exact end written, the run ends at once (the judge has
    exited): the first check stands, the rest are no_result: exactly 1/3. Stopped, the judge
    neither ends nor exits: the run is stopped by its wall limit, still 1/3. The next honest
    runs, on prepared runs the worker had to replace, score exactly 1.0."""
    checks = [judged("ok"), judged("g"), judged("ok")]
    code = KILL_THE_JUDGE.replace("SIGNAL", signal_name)
    result = run_on(fallback, code, checks, timeout=0.5)
    assert result.passed_indices == (0,), result.failures
    assert result.timed_out is (signal_name == "SIGSTOP")
    for _ in range(2):
        honest_passes(fallback)


STEAL_THE_JUDGES_NONCE = SIBLINGS + """
import re
_wire, _schema = sys.modules["_wire"], sys.modules["_schema"]
PATTERN = re.compile(rb'"role": "judge", "nonce": "([0-9a-f]{32})"')
def nonce_of(pid):
    with open(f"/proc/{pid}/maps") as handle:
        regions = [line.split() for line in handle]
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for region in regions:
            low, high = (int(x, 16) for x in region[0].split("-"))
            if "rw" not in region[1] or high - low > (64 << 20):
                continue
            try:
                mem.seek(low)
                found = PATTERN.search(mem.read(high - low))
            except (OSError, ValueError, OverflowError):
                continue
            if found:
                return found.group(1).decode()
deadline = time.time() + 1.0
done = False
while not done and time.time() < deadline:
    for pid in siblings():
        try:
            nonce = nonce_of(pid)
        except OSError:
            continue
        if nonce:  # the judge's own result pipe, and verdicts bound to its nonce
            fd = os.open(f"/proc/{pid}/fd/3", os.O_WRONLY)
            os.write(fd, b"".join(_wire.encode_frame(nonce, {_schema.TYPE: _schema.CHECK,
                                                            _schema.INDEX: i, _schema.OK: True})
                                  for i in range(8)))
            done = True
            break
    time.sleep(0.01)
def f(x):
    return -1
"""
ROOT_FALLBACK = os.geteuid() == 0 and _isolation.fallback_uid() is None


@pytest.mark.skipif(not ROOT_FALLBACK, reason="needs candidates running as root (the root "
                    "fallback where the sandbox uid cannot run the interpreter)")
def test_rlimits_root_candidate_cannot_forge_the_judges_verdicts(fallback: SandboxPool) -> None:
    """At the fallback level as root (an opt-in), G ran as uid 0 with every capability, and
    CAP_SYS_PTRACE overrode the judge's non-dumpable flag: G read the judge's nonce from
    /proc/J/mem and wrote OK verdicts into /proc/J/fd/3 (a wrong f scored 1.0). G and J now
    drop every capability, the bounding set included, with the securebits locked."""
    checks = [judged("f"), "y = f(3)\nassert y == 3"]
    result = run_on(fallback, FORGERY + STEAL_THE_JUDGES_NONCE, checks, timeout=2.0)
    assert result.fraction == 0.0, result.failures


# A daemon that escapes G's process group (setsid) outlives its run at the rlimits level and
# stops every process the zygote forks afterwards: the next runs (prepared while it watches).
DAEMON = """
import os, signal, time
ZYGOTE, ME = os.getppid(), os.getpid()
ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(ready_w, b"!")  # out of G's group before G's run can end
        end = time.time() + 3
        while time.time() < end:
            for name in os.listdir("/proc"):
                if not name.isdigit() or int(name) == ME:
                    continue
                try:
                    with open(f"/proc/{name}/stat", "rb") as handle:
                        data = handle.read()
                    if int(data[data.rindex(b")") + 2:].split()[1]) == ZYGOTE:
                        os.kill(int(name), signal.SIGSTOP)
                except (OSError, ValueError):
                    pass
            time.sleep(0.0005)
        os._exit(0)
    os._exit(0)
os.read(ready_r, 1)
def f():
    return 0
"""


def test_rlimits_daemon_left_by_one_run_never_touches_the_next() -> None:
    """A setsid daemon escaped the kill of G's process group, outlived its run and SIGSTOPped
    each process the zygote forked next (the following honest runs scored 0.0 and 0.5). The
    zygote is now a subreaper at this level: it kills what a run left behind before the next
    run and resumes the runs it prepared meanwhile."""
    made = SandboxPool(size=1, isolation="rlimits", allow_root_fallback=True)
    began = time.monotonic()
    try:
        run_on(made, DAEMON, CHECK)
        for _ in range(2):
            result = run_on(made, HONEST, [CHECK[0], "for _ in (1,):\n    assert f() == 1"])
            assert (result.fraction, result.timed_out) == (1.0, False), result.failures
    finally:
        time.sleep(max(0.0, 3.5 - (time.monotonic() - began)))  # the daemon's own end
        made.close()


# --------------------------------------------------------------------------- G's end, in locals

# become_candidate's end uses values held in its locals; the candidate rebinds those locals
# through its frame (PyFrame_LocalsToFast: ctypes is preloaded) and makes G's last write a
# newline after the marker, so the pipe never ends with the exact end; a thread burns CPU.
REBIND_LOCALS = FORGERY + """
import ctypes
frame = sys._getframe()
while frame.f_code.co_name != "become_candidate":
    frame = frame.f_back
held = frame.f_locals  # one snapshot: each read of f_locals refreshes it from the frame
held.update(CHANGES)
held["finished"] = b"+finished\\n\\n"
ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))
del frame
def burn():
    while True:
        pass
threading.Thread(target=burn, daemon=True).start()
def f():
    return 1
def g():
    return 3
"""
LOCALS = {"linger_forever": "{'wait': 1e6}",
          "exit_sleeps": "{'leave': lambda code: time.sleep(1e6)}",
          "close_sleeps": "{'close': lambda fd: time.sleep(1e6)}"}


@pytest.mark.parametrize("how", sorted(LOCALS))
def test_g_end_rebound_through_its_frame_is_stopped_by_the_runs_limits(
        pool: SandboxPool, how: str) -> None:
    """The values G's end holds in locals (held "before any candidate code runs") can still be
    rebound through the frame; that only keeps the candidate's own run going: G lingering or
    sleeping instead of exiting ends the run once G has closed its pipes, a close that never
    returns is a timeout; each scores exactly its earned work (f right, g wrong: 0.5), within
    the run's limits."""
    code = REBIND_LOCALS.replace("CHANGES", LOCALS[how])
    result = run_on(pool, code, ["assert f() == 1", "assert g() == 2"], timeout=0.5)
    assert result.fraction == 0.5, (how, result.failures)
    if how == "close_sleeps":  # G never gets past its close: only the time limit ends it
        assert result.timed_out is True, result
    honest_passes(pool)
    assert leftover_processes(pool) == []


# --------------------------------------------------------------------------- the stdio end

STDIO_3 = StdioCase(stdin="3\n", expected_stdout="9")
STDIO_4 = StdioCase(stdin="4\n", expected_stdout="16")
STDIO_HONEST = {
    "plain": "n = int(input())\nprint(n * n)\n",
    "own_buffered_file_on_fd_1": "n = int(input())\nout = open(1, 'w', closefd=False)\n"
                                 "out.write(str(n * n))\n",
    "non_daemon_thread_prints_after_main": "import threading, time\nn = int(input())\n"
                                           "def p():\n    time.sleep(0.05)\n    print(n * n)\n"
                                           "threading.Thread(target=p).start()\n",
    "thread_with_a_big_stack_for_recursion": "import sys, threading\n"
                                             "sys.setrecursionlimit(1 << 25)\n"
                                             "threading.stack_size(1 << 26)\n"
                                             "def d(k):\n    return 0 if k == 0 else 1 + d(k - 1)\n"
                                             "def main():\n    n = int(input())\n"
                                             "    print(n * n + d(20000) - 20000)\n"
                                             "threading.Thread(target=main).start()\n",
    "gc_collect_replaced_by_a_hang": "import gc, time\ngc.collect = lambda *a: time.sleep(1e6)\n"
                                     "print(int(input()) ** 2)\n",
    "finalizer_prints_its_own_line": "class P:\n    def __del__(self):\n"
                                     "        print('', end='')\n"
                                     "p = P()\nprint(int(input()) ** 2)\n",
}


@pytest.mark.parametrize("name", sorted(STDIO_HONEST))
def test_honest_stdio_programs_score_exactly_one_back_to_back(pool: SandboxPool, name: str) -> None:
    for _ in range(2):
        result = run_on(pool, STDIO_HONEST[name], [STDIO_3, STDIO_4])
        assert (result.fraction, result.timed_out) == (1.0, False), (name, result.failures)


# Found by this review, older than the reviewed commits (both print 9 under python3 and scored 0.0
# at bad9d05 too): _end_program did part of what the interpreter does at exit, not all of it; it
# now runs atexit handlers, and the program's end flushes sys.__stdout__ as well.
STDIO_DIVERGENT = {
    # The competitive-programming idiom: buffer all output, write it out at exit.
    "atexit_writes_the_buffered_output": "import atexit, io, sys\nbuf = io.StringIO()\n"
                                         "sys.stdout = buf\n@atexit.register\ndef out():\n"
                                         "    sys.__stdout__.write(buf.getvalue())\n"
                                         "print(int(input()) ** 2)\n",
    # sys.__stdout__ (the original stream on fd 1) is flushed when the interpreter finalizes.
    "unflushed_write_to_sys_dunder_stdout": "import io, sys\nsys.stdout = io.StringIO()\n"
                                            "sys.__stdout__.write(str(int(input()) ** 2))\n",
}


@pytest.mark.parametrize("name", sorted(STDIO_DIVERGENT))
def test_honest_stdio_programs_relying_on_atexit_or_the_original_stdout(
        pool: SandboxPool, name: str) -> None:
    result = run_on(pool, STDIO_DIVERGENT[name], [STDIO_3])
    assert (result.fraction, result.timed_out) == (1.0, False), (name, result.failures)


# Each prints the right answer, then keeps its process from ending at _end_program.
STDIO_NEVER_ENDS = {
    "non_daemon_thread_sleeps_forever": "import threading, time\n"
                                        "threading.Thread(target=time.sleep, args=(1e6,)).start()\n",
    "non_daemon_thread_spins_forever": "import threading\ndef spin():\n    while True:\n"
                                       "        pass\nthreading.Thread(target=spin).start()\n",
    # (finalizers keep what they need in their defaults, as finalizers run at exit should)
    "finalizer_sleeps_forever": "import time\nclass Stuck:\n    def __del__(self, time=time):\n"
                                "        time.sleep(1e6)\nstuck = Stuck()\n",
    "finalizer_spins_forever": "class Stuck:\n    def __del__(self):\n        while True:\n"
                               "            pass\nstuck = [Stuck()]\nstuck.append(stuck)\n",
    "threading_module_replaced": "import sys, time\nclass T:\n    @staticmethod\n"
                                 "    def _shutdown():\n        time.sleep(1e6)\n"
                                 "sys.modules['threading'] = T\n",
    "finalizer_forks_a_child_holding_stdout": "import os, time\nclass Fork:\n"
                                              "    def __del__(self, os=os, time=time):\n"
                                              "        if os.fork() == 0:\n"
                                              "            time.sleep(1e6)\n"
                                              "keep = Fork()\n",
}


@pytest.mark.parametrize("name", sorted(STDIO_NEVER_ENDS))
def test_stdio_program_that_never_ends_is_a_timeout_not_a_hang(pool: SandboxPool, name: str) -> None:
    """Right output, then a thread, a finalizer or a replaced threading module that never
    returns (or a child forked at finalization that keeps fd 1 open): the program never ends,
    as under python3, so its case never reports: 0.0, a timeout (its test's own limit or the
    run's), and the next honest runs are untouched."""
    code = "print(int(input()) ** 2)\n" + STDIO_NEVER_ENDS[name]
    result = run_on(pool, code, [STDIO_3], timeout=0.5)
    assert result.fraction == 0.0, (name, result.failures)
    assert [f.kind for f in result.failures] == ["timeout"], (name, result.failures)
    honest_passes(pool)
    assert leftover_processes(pool) == []


STDIO_FINALIZER_FORGES = FORGERY + """
n = int(input())
print(n * n)
class Forge:
    def __del__(self, n=n, os=os, time=time, frame=_wire.encode_frame, nonce=NONCE, end=END,
                s=_schema):
        if n == 3:  # the first case: a frame for the second (index 1) saying "9", then G's end
            os.write(3, frame(nonce, {s.TYPE: s.STDIO, s.INDEX: 1, s.OUT: "9\\n"}) + end)
            time.sleep(0.5)
forge = Forge()
"""


def test_stdio_finalizer_forging_frames_and_the_end_gains_nothing(pool: SandboxPool) -> None:
    """At the program's end (namespace cleared), a finalizer in the first case's process writes
    on the result pipe a stdio frame for the next case and G's exact end. The run ends there,
    before G has reported the first case (G sends it once the program's process is gone): that
    case is no_result and the forged frame is judged like printed output (wrong: 9 for 4):
    0.0, never more than printing the same would earn."""
    result = run_on(pool, STDIO_FINALIZER_FORGES, [STDIO_3, STDIO_4])
    assert result.fraction == 0.0, result.failures
    assert [f.kind for f in result.failures] == ["no_result", "assertion"]
    assert result.timed_out is False
    honest_passes(pool)


# --------------------------------------------------------------------------- the warm-up

FDS = """
import os
def f(*_):
    found = []
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            found.append((int(name), os.readlink(f"/proc/self/fd/{name}").split(":")[0]))
        except OSError:
            pass
    return found
"""


def test_no_descriptor_of_the_warm_up_reaches_the_job(pool: SandboxPool) -> None:
    """The warm-up opens /dev/null as its sink and passes it over a socket pair: the real job
    holds stdin (/dev/null), its three pipes, and (judged) the judge channel, nothing more."""
    plain = [(0, "/dev/null"), (1, "pipe"), (2, "pipe"), (3, "pipe")]
    for _ in range(3):
        result = run_tests(FDS + "def g():\n    return f()\n", [f"assert g() == {plain!r}"],
                           pool=pool)
        assert result.fraction == 1.0, result.failures
        result = run_tests(FDS, [f"for _ in (1,):\n    found = f()\n    assert found[:4] == "
                                 f"{plain!r} and [k for _, k in found[4:]] == ['socket']"],
                           pool=pool)
        assert result.fraction == 1.0, result.failures


def test_back_to_back_honest_runs_arriving_during_the_warm_up_all_score_one(
        pool: SandboxPool) -> None:
    """Thirty runs in a row on one worker (plain, judged, stdio, with output): each job arrives
    while the runs prepared after the last one are still warming up; every score is exactly 1.0
    and every output exactly the run's own."""
    kinds = [
        ("import sys\nprint('plain', end='')\ndef f():\n    return 1\n", CHECK, "plain"),
        ("print('judged', end='')\ndef f(x):\n    return x\n", [judged("f")], "judged"),
        (STDIO_HONEST["plain"], [STDIO_3, STDIO_4], ""),
    ]
    for round_ in range(30):
        code, checks, out = kinds[round_ % len(kinds)]
        result = run_tests(code, checks, timeout=1.0, pool=pool)
        assert (result.fraction, result.timed_out) == (1.0, False), (round_, result.failures)
        assert result.stdout == out, (round_, result.stdout)


# --------------------------------------------------------------------------- the job head

def _receive(head: bytes, fds: list[int]) -> tuple[bytes, int | None]:
    from agentenv.sandbox import _candidate

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        socket.send_fds(ours, [head + b"{}"], fds)
        ours.shutdown(socket.SHUT_WR)
        return _candidate.receive_job(theirs.detach())
    finally:
        ours.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_head_whose_marker_and_descriptors_disagree_gives_no_job_and_leaks_nothing() -> None:
    """'J' without a descriptor, '-' with one, an unknown marker with or without: no job and
    no descriptor (the one that came is closed); 'J' with one and '-' without give the job."""
    from agentenv.sandbox import _candidate

    read_end, write_end = os.pipe()
    try:
        before = _open_fds()
        for marker, fds in ((b"J", []), (b"-", [write_end]), (b"X", []), (b"X", [write_end])):
            assert _receive(_candidate.JOB_HEAD.pack(marker, 2), fds) == (b"", None), marker
            assert _open_fds() == before, marker
        job, peer = _receive(_candidate.JOB_HEAD.pack(b"J", 2), [write_end])
        assert job == b"{}" and peer is not None
        assert os.fstat(peer).st_ino == os.fstat(write_end).st_ino
        os.close(peer)
        assert _receive(_candidate.JOB_HEAD.pack(b"-", 2), []) == (b"{}", None)
        assert _open_fds() == before
    finally:
        os.close(read_end)
        os.close(write_end)


# --------------------------------------------------------------------------- many rounds

HOSTILE_ROUNDS = {
    "judge_text": (JUDGE_TEXT, [judged("f"), judged("g"), judged("ok"), judged("hang")], 0.25),
    "g_exits_mid_judging": (G_EXITS_MID_JUDGING, [judged("ok"), judged("g"), judged("ok")], 1 / 3),
    "locals_rebound": (REBIND_LOCALS.replace("CHANGES", LOCALS["linger_forever"]),
                       ["assert f() == 1", "assert g() == 2"], 0.5),
    "stdio_thread_forever": ("print(int(input()) ** 2)\n"
                             + STDIO_NEVER_ENDS["non_daemon_thread_sleeps_forever"], [STDIO_3], 0.0),
    "stdio_finalizer_fork": ("print(int(input()) ** 2)\n"
                             + STDIO_NEVER_ENDS["finalizer_forks_a_child_holding_stdout"],
                             [STDIO_3], 0.0),
    "stdio_finalizer_forges": (STDIO_FINALIZER_FORGES, [STDIO_3, STDIO_4], 0.0),
}


def test_alternating_hostile_and_honest_submissions_keep_every_honest_verdict(
        pool: SandboxPool) -> None:
    """Every hostile submission of this file in a row, twice, each followed by the honest
    controls (plain, judged, stdio): each hostile one scores at most its earned work, each
    honest one exactly 1.0 with no worker waited out."""
    workers = pool.worker_pids
    for _cycle in range(2):
        for name, (code, checks, most) in HOSTILE_ROUNDS.items():
            result = run_on(pool, code, checks, timeout=0.5)
            assert result.fraction <= most + 1e-9, (name, result.failures)
            honest_passes(pool)
    assert pool.worker_pids == workers
    assert leftover_processes(pool) == []


# --------------------------------------------------------------------------- the judge's nonce

# Candidate-side: every 32-hex-digit string anywhere in G's writable memory (the judge's
# requests it served included), compared by hash with the judge's nonce (the test makes both
# nonces known to itself, and gives the candidate only the hash).
SCAN_FOR_THE_JUDGES_NONCE = """
import ctypes, hashlib, re
def f(x):
    wanted = bytes.fromhex(WANTED)
    pattern = re.compile(rb"[0-9a-f]{32}")
    with open("/proc/self/maps") as handle:  # (G is not dumpable: no /proc/self/mem)
        regions = [line.split() for line in handle]
    for region in regions:
        low, high = (int(v, 16) for v in region[0].split("-"))
        if not region[1].startswith("rw") or high - low > (256 << 20):
            continue
        for found in pattern.findall(ctypes.string_at(low, high - low)):
            if hashlib.sha256(found).digest() == wanted:
                return -1
    return x
"""


def test_the_judges_nonce_is_nowhere_in_the_candidates_memory(
        pool: SandboxPool, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the run's two nonces known to the test, the candidate scans all its writable
    memory (its job, the judge's requests it served, the warm-up's leftovers) for the judge's
    nonce, by hash: never found (the check passes only then), in two runs; the same scan for
    its own nonce finds it (the control: the check fails)."""
    import hashlib
    import itertools
    import secrets

    made = itertools.count()
    nonces: list[str] = []

    def token_hex(nbytes: int | None = None) -> str:
        nonces.append(hashlib.sha256(f"rt7-{next(made)}".encode()).hexdigest()[:32])
        return nonces[-1]

    monkeypatch.setattr(secrets, "token_hex", token_hex)
    for run in range(3):
        # the run's first nonce is G's (the control: the scan finds it), its second the judge's
        own, theirs = (hashlib.sha256(f"rt7-{2 * run + k}".encode()).hexdigest()[:32]
                       for k in (0, 1))
        code = SCAN_FOR_THE_JUDGES_NONCE.replace(
            "WANTED", repr(hashlib.sha256((own if run == 0 else theirs).encode()).hexdigest()))
        result = run_on(pool, code, [judged("f")], timeout=10.0)
        assert nonces[-2:] == [own, theirs]
        expected = 0.0 if run == 0 else 1.0
        assert (result.fraction, result.timed_out) == (expected, False), result.failures
