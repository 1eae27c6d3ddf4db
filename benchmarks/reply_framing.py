"""The worker's reply to the pool at 1 MB and 8 MB of results: raw frames against base64 in JSON.

    python benchmarks/reply_framing.py [--repeats 15] [--sizes 1,8]

A worker sends the pool one reply per run: a few small fields (id, timed_out, died, seconds)
and the run's byte strings (the result channel, stdout, stderr). Two encodings, side by side,
interleaved per repeat:

- **before** (main up to this change): the result channel base64-encoded into a JSON map with
  the other fields, one length-prefixed frame; the pool parses the JSON and decodes the base64
  (``_worker.Worker.run`` + ``write_message``, ``_pool._WorkerHandle._read`` + ``_b64``, as they
  were; reproduced below);
- **after**: :func:`agentenv.sandbox._framing.write_reply` / :func:`~agentenv.sandbox._framing.read_reply`
  as the worker and the pool now call them: a small msgpack header naming the blobs, then each
  blob as a raw frame.

Each repeat writes one reply to a file on tmpfs (``/dev/shm`` where there is one) and reads it
back from its descriptor, so both sides' system calls and copies are counted. The table gives
the median ms per reply for writing (the worker's side) and reading (the pool's side) and the
ratio before/after (higher: the new reply is that many times cheaper).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import struct
import tempfile
import time
from collections.abc import Callable
from typing import Any

from agentenv.sandbox import _framing
from agentenv.sandbox._wire import pack_message, unpack_message

_HEADER = struct.Struct(">I")
MB = 1 << 20


# ------------------------------------------------------------------ before: base64 inside JSON

def old_write(fd: int, outcome: dict[str, Any], result: bytes, out: bytes, err: bytes) -> None:
    outcome = dict(outcome)
    outcome["result"] = base64.b64encode(result).decode("ascii")
    outcome["stdout"] = out.decode("utf-8", "replace")
    outcome["stderr"] = err.decode("utf-8", "replace")
    body = json.dumps(outcome).encode("utf-8")
    _framing.write_all(fd, _HEADER.pack(len(body)) + body)


def _old_read_exact(fd: int, n: int) -> bytes:
    parts: list[bytes] = []
    got = 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def old_read(fd: int) -> tuple[bytes, str, str]:
    header = _old_read_exact(fd, _HEADER.size)
    reply = json.loads(_old_read_exact(fd, _HEADER.unpack(header)[0]))
    return (base64.b64decode(str(reply.get("result", "")), validate=True),
            str(reply.get("stdout", "")), str(reply.get("stderr", "")))


# ------------------------------------------------------------------ after: raw frames

def new_write(fd: int, outcome: dict[str, Any], result: bytes, out: bytes, err: bytes) -> None:
    _framing.write_reply(fd, outcome, {"result": result, "stdout": out, "stderr": err}, pack_message)


def new_read(fd: int) -> tuple[bytes, str, str]:
    reply = _framing.read_reply(fd, unpack_message)
    assert reply is not None
    return (reply["result"], reply["stdout"].decode("utf-8", "replace"),
            reply["stderr"].decode("utf-8", "replace"))


# ------------------------------------------------------------------ measuring

def _time(fd: int, write: Callable[..., None], read: Callable[[int], tuple[bytes, str, str]],
          result: bytes) -> tuple[float, float]:
    outcome = {"timed_out": False, "died": None, "seconds": 0.0123, "id": 7}
    out, err = b"x" * 1000, b""
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    start = time.perf_counter()
    write(fd, outcome, result, out, err)
    wrote = time.perf_counter()
    os.lseek(fd, 0, os.SEEK_SET)
    back = read(fd)
    done = time.perf_counter()
    assert back[0] == result and back[1] == out.decode()
    return (wrote - start) * 1e3, (done - wrote) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--sizes", default="1,8", help="result sizes in MB, comma-separated")
    args = parser.parse_args()
    where = "/dev/shm" if os.path.isdir("/dev/shm") else None
    print(f"reply of a run: result channel of N MB + 1 KB stdout, through a file on {where or 'tmp'}; "
          f"median ms of {args.repeats} repeats, interleaved")
    print(f"{'MB':>4} | {'write before':>12} {'write after':>11} {'ratio':>6} | "
          f"{'read before':>11} {'read after':>10} {'ratio':>6} | {'total ratio':>11}")
    with tempfile.TemporaryFile(dir=where) as handle:
        fd = handle.fileno()
        for size in (int(s) for s in args.sizes.split(",")):
            result = os.urandom(size * MB)  # content does not matter to either encoding's cost
            times: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
            for _ in range(args.repeats):
                times["before"].append(_time(fd, old_write, old_read, result))
                times["after"].append(_time(fd, new_write, new_read, result))
            med = {k: (statistics.median(w for w, _ in v), statistics.median(r for _, r in v))
                   for k, v in times.items()}
            (wb, rb), (wa, ra) = med["before"], med["after"]
            print(f"{size:>4} | {wb:>12.2f} {wa:>11.2f} {wb / wa:>5.1f}x | {rb:>11.2f} {ra:>10.2f} "
                  f"{rb / ra:>5.1f}x | {(wb + rb) / (wa + ra):>10.1f}x")


if __name__ == "__main__":
    main()
