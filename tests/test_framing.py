"""Length-prefixed framing (agentenv.sandbox._framing): the one implementation the pool, the
worker and the judge channel share, and the worker's reply of raw blobs."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

import pytest

from agentenv.sandbox import _framing
from agentenv.sandbox._wire import pack_message, unpack_message


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    r, w = os.pipe()
    yield r, w
    for fd in (r, w):
        with contextlib.suppress(OSError):
            os.close(fd)


def _write_in_thread(target: object, *args: object) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
    thread.start()
    return thread


def test_frames_round_trip_through_a_pipe_small_and_big(pipe: tuple[int, int]) -> None:
    """Bodies bigger than a pipe's buffer arrive whole and in order, small ones alongside."""
    r, w = pipe
    bodies = [b"", b"a", os.urandom(3 << 20), b"tail" * 10]
    writer = _write_in_thread(_framing.write_frames, w, bodies)
    got = [_framing.read_frame(r) for _ in bodies]
    writer.join(timeout=30)
    assert got == bodies


def test_a_reply_carries_its_blobs_raw_beside_its_header(pipe: tuple[int, int]) -> None:
    r, w = pipe
    blobs = {"result": os.urandom(1 << 20), "stdout": "é\n".encode(), "stderr": b""}
    header = {"id": 3, "timed_out": False, "died": None, "seconds": 0.5}
    writer = _write_in_thread(_framing.write_reply, w, header, blobs, pack_message)
    reply = _framing.read_reply(r, unpack_message)
    writer.join(timeout=30)
    assert reply == {**header, **blobs}
    assert all(type(reply[name]) is bytes for name in blobs)


def test_a_stream_that_ends_mid_frame_reads_as_ended(pipe: tuple[int, int]) -> None:
    r, w = pipe
    os.write(w, _framing.HEADER.pack(10) + b"short")
    os.close(w)
    assert _framing.read_frame(r) is None
    assert _framing.read_frame(r) is None  # and so does one that ends before a header


def test_a_reply_cut_before_its_blobs_reads_as_ended(pipe: tuple[int, int]) -> None:
    r, w = pipe
    bodies = _framing.reply_bodies({"id": 1}, {"result": b"x" * 100}, pack_message)
    os.write(w, _framing.frame(bodies[0]))  # the header names a blob that never comes
    os.close(w)
    assert _framing.read_reply(r, unpack_message) is None


def test_a_frame_over_the_readers_limit_is_refused_before_it_is_read(pipe: tuple[int, int]) -> None:
    r, w = pipe
    os.write(w, _framing.HEADER.pack(1 << 30))  # declares a gigabyte, sends nothing
    with pytest.raises(_framing.FrameTooLarge, match="over the 1024-byte limit"):
        _framing.read_frame(r, limit=1024)


@pytest.mark.parametrize("names", ["result", [1, 2], ["ok", None]])
def test_a_reply_whose_blob_names_are_not_strings_is_malformed(pipe: tuple[int, int], names: object) -> None:
    r, w = pipe
    os.write(w, _framing.frame(pack_message({"id": 1, _framing.BLOBS: names})))
    with pytest.raises(ValueError, match="blob names"):
        _framing.read_reply(r, unpack_message)


def test_the_judge_channel_frames_through_the_same_implementation() -> None:
    """_rpc sends and receives with _framing; a message over its limit is a protocol error."""
    path = list(sys.path)
    try:
        from agentenv.sandbox import _rpc  # puts its directory on sys.path, as in the sandbox
    finally:
        sys.path[:] = path
    a, b = os.pipe()
    try:
        _rpc.send(b, {"op": "name", "n": "f"})
        assert _rpc.recv(a) == {"op": "name", "n": "f"}
        os.write(b, _framing.HEADER.pack(_rpc.MAX_FRAME + 1))
        with pytest.raises(_rpc.ProtocolError, match="over the"):
            _rpc.recv(a)
        os.close(b)
        with pytest.raises(_rpc.ChannelClosed):
            _rpc.recv(a)
    finally:
        for fd in (a, b):
            with contextlib.suppress(OSError):
                os.close(fd)
