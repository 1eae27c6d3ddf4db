"""Candidate text is data: jobs of any size and head split arrive whole, text with NULs and lone
surrogates is carried, stored, resumed, shown and quoted without error."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

import pytest
from support.attacks import (
    ADD_FAST,
    ADD_LOOP,
    Case,
    check_attack_scores_only_honest_work_and_leaves_nothing_behind,
    check_case,
    honest_plain_passes,
    run_on,
)

from agentenv.sandbox import SandboxPool

CHECK_ATTACKS = [
    # --- candidate text the trusted side must carry without error ----------------------------
    check_case("lone_surrogates_and_nul_in_exception_messages_and_output", r"""
import sys
def add(a, b):
    sys.stdout.write('\udcff\x00' * 1000)
    sys.stderr.write('\ud800' * 1000)
    raise ValueError('\udcff\x00\ud800' * 200)
""", (*ADD_FAST, ADD_LOOP)),
]


@pytest.mark.parametrize("attack", CHECK_ATTACKS, ids=lambda a: a.name)
def test_check_attack_scores_only_honest_work_and_leaves_nothing_behind(
        attack: Case, pool_of_two: SandboxPool) -> None:
    """Each attack scores its honest fraction and leaves nothing behind (see the helper)."""
    check_attack_scores_only_honest_work_and_leaves_nothing_behind(attack, pool_of_two)


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
    honest_plain_passes(pool)


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
    honest_plain_passes(pool)


@pytest.mark.parametrize("size", [0, 8, 9, 65536, 212992])
def test_jobs_of_odd_sizes_through_the_pool_score_exactly(pool: SandboxPool, size: int) -> None:
    code = f"S = '{'c' * size}'\ndef f():\n    return len(S)\n"
    result = run_on(pool, code, [f"assert f() == {size}"])
    assert (result.fraction, result.timed_out) == (1.0, False), result.failures


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
