"""The syscall policy of every run, declared as rules, and its compiler to a seccomp filter.

:data:`REFUSED` lists the syscalls no run may make at all, :data:`RULES` those refused only with
certain arguments, each with why; :data:`TABLES` gives each machine's syscall numbers.
:func:`compile_policy` turns them into a classic-BPF program (a list of ``(code, jt, jf, k)``
steps, ``struct sock_filter``) through a small assembler that resolves jumps by label, and
:func:`filter_syscalls` installs it. A refused call fails with ``EPERM``; any call through
another ABI (i386, x32) is refused outright. Standard library only; loaded by path inside the
sandbox.
"""

from __future__ import annotations

import os
import platform
import signal
import sys
from typing import NamedTuple

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.append(_here)  # last: nothing in this directory may shadow a standard module

import _kernel  # noqa: E402

# The builtins this module's functions use: a copy taken when it is imported, before any
# candidate code runs in this process (see _worker).
globals()["__builtins__"] = dict(vars(__import__("builtins")))

__all__ = ["REFUSED", "RULES", "TABLES", "ArgIs", "ArgSet", "Rule", "compile_policy",
           "filter_syscalls"]

# Refused outright, for every process of every run (candidate and judge alike).
REFUSED = {
    # Each can make the kernel hold a pipe's lock while it waits on something else (a socket
    # with no data, an io_uring worker); every read of that pipe, O_NONBLOCK or not, then
    # sleeps on the lock in state D. Aimed at a run's stdout, stderr or result pipe, that
    # would stop the worker itself mid-read, past every deadline it keeps. shutil and
    # socket.sendfile fall back to plain reads and writes when sendfile is refused.
    "splice": "holds a pipe's lock while it waits",
    "tee": "holds a pipe's lock while it waits",
    "vmsplice": "holds a pipe's lock while it waits",
    "sendfile": "holds a pipe's lock while it waits",
    "io_uring_setup": "holds a pipe's lock while it waits",
    "io_uring_enter": "holds a pipe's lock while it waits",
    "io_uring_register": "holds a pipe's lock while it waits",
    # Its faults can stall a kernel copy from user memory (a write to such a pipe) for as long
    # as the run likes.
    "userfaultfd": "stalls a kernel copy for as long as the run likes",
    # Reaching into another process's memory or descriptors. Where runs share a uid (the
    # fallback level) a traced run's zombie is its tracer's to reap, so a candidate that traced
    # itself from a process it left behind held the zygote in waitpid.
    "ptrace": "reaches into another process",
    "process_vm_readv": "reaches into another process",
    "process_vm_writev": "reaches into another process",
    "pidfd_getfd": "reaches into another process",
    # Keys belong to a uid, not to a namespace: a key a run made stays listed in /proc/keys
    # for every later run of the same uid, and its description can hold a hidden input.
    "add_key": "kernel keyrings outlive the run",
    "request_key": "kernel keyrings outlive the run",
    "keyctl": "kernel keyrings outlive the run",
}


class ArgIs(NamedTuple):
    """Argument ``arg`` (its low 32 bits) equals ``value``."""

    arg: int
    value: int


class ArgSet(NamedTuple):
    """Argument ``arg`` (all 64 bits) is not zero: a pointer given, a pid other than self."""

    arg: int


class Rule(NamedTuple):
    """Refuse ``syscall`` when every one of ``when`` holds."""

    syscall: str
    when: tuple[ArgIs | ArgSet, ...]
    why: str


RULES = (
    # A child whose parent ignores SIGCHLD (SIG_IGN or SA_NOCLDWAIT) is reaped by the kernel
    # the moment it exits and its CPU time is added to nobody's, so a run could compute in
    # many short-lived children and never be charged (_monitor.cpu_used). rt_sigaction is the
    # only way to change a disposition (these native tables have no legacy sigaction/signal);
    # querying it (no new action) still works.
    Rule("rt_sigaction", (ArgIs(0, int(signal.SIGCHLD)), ArgSet(1)),
         "changing what SIGCHLD does hides the CPU time of the run's children"),
    # Where runs share a uid (the fallback level) a run lowered the zygote's limits and every
    # later run inherited them. A process's own limits (pid 0, as setrlimit passes it) and
    # every query (no new limit) still work.
    Rule("prlimit64", (ArgSet(0), ArgSet(2)),
         "setting another process's resource limits"),
)


class Table(NamedTuple):
    """A machine's audit arch and the numbers of the syscalls the policy names."""

    arch: int
    numbers: dict[str, int]


_GENERIC = {"sendfile": 71, "vmsplice": 75, "splice": 76, "tee": 77, "userfaultfd": 282,
            "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
            "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
            "pidfd_getfd": 438, "add_key": 217, "request_key": 218, "keyctl": 219,
            "rt_sigaction": 134, "prlimit64": 261}
_X86_64 = {"sendfile": 40, "splice": 275, "tee": 276, "vmsplice": 278, "userfaultfd": 323,
           "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
           "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
           "add_key": 248, "request_key": 249, "keyctl": 250, "rt_sigaction": 13,
           "prlimit64": 302}
# Machines without an entry (or a kernel without seccomp filters) get no filter.
TABLES = {"x86_64": Table(0xC000003E, _X86_64), "amd64": Table(0xC000003E, _X86_64),
          "aarch64": Table(0xC00000B7, _GENERIC), "arm64": Table(0xC00000B7, _GENERIC),
          "riscv64": Table(0xC00000F3, _GENERIC)}

X32_BIT = 0x40000000  # x86_64's x32 syscalls: another table
LD_W_ABS, JEQ_K, JGE_K, RET_K = 0x20, 0x15, 0x35, 0x06
ALLOW, EPERM = 0x7FFF0000, 0x00050000 | 1
NR, ARCH, ARGS = 0, 4, 16  # offsets in struct seccomp_data (args are 8 bytes each, little-endian)

Step = tuple[int, int, int, int]


class _Assembler:
    """Steps with jumps to labels; :meth:`build` turns labels into the skips BPF counts."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, str, str, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.steps)

    def load(self, offset: int) -> None:
        self.steps.append((LD_W_ABS, "", "", offset))

    def jump(self, code: int, k: int, true: str, false: str) -> None:
        """``true``/``false``: a label, or "" for the next step."""
        self.steps.append((code, true, false, k))

    def ret(self, action: int) -> None:
        self.steps.append((RET_K, "", "", action))

    def build(self) -> list[Step]:
        def skip(target: str, at: int) -> int:
            if not target:
                return 0
            gap = self.labels[target] - at - 1
            if not 0 <= gap <= 255:
                raise ValueError(f"a jump to {target!r} does not fit a BPF step")
            return gap

        return [(code, skip(true, at), skip(false, at), k)
                for at, (code, true, false, k) in enumerate(self.steps)]


def compile_policy(table: Table, refused: dict[str, str] | None = None,
                   rules: tuple[Rule, ...] = RULES) -> list[Step]:
    """The BPF program enforcing ``refused`` (default :data:`REFUSED`) and ``rules`` on a
    machine whose syscalls are numbered as ``table`` says."""
    refused = REFUSED if refused is None else refused
    asm = _Assembler()
    asm.load(ARCH)
    asm.jump(JEQ_K, table.arch, "", "deny")  # a foreign ABI: refused
    asm.load(NR)
    asm.jump(JGE_K, X32_BIT, "deny", "")  # x32: refused
    for number in sorted(table.numbers[name] for name in refused):
        asm.jump(JEQ_K, number, "deny", "")
    for i, rule in enumerate(rules):
        other = f"rule{i + 1}"
        asm.label(f"rule{i}")
        asm.load(NR)
        asm.jump(JEQ_K, table.numbers[rule.syscall], "", other)
        for j, cond in enumerate(rule.when):
            low = ARGS + 8 * cond.arg
            if isinstance(cond, ArgIs):
                asm.load(low)
                asm.jump(JEQ_K, cond.value, "", other)
            else:  # ArgSet: the low word, else the high word, is not zero
                holds = f"rule{i}.{j}"
                asm.load(low)
                asm.jump(JEQ_K, 0, "", holds)
                asm.load(low + 4)
                asm.jump(JEQ_K, 0, other, "")
                asm.label(holds)
        asm.ret(EPERM)  # every condition holds
    asm.label(f"rule{len(rules)}")
    asm.ret(ALLOW)
    asm.label("deny")
    asm.ret(EPERM)
    return asm.build()


def filter_syscalls() -> None:
    """Refuse, for this process and everything it ever forks, what the policy refuses.

    Installed once in the zygote (with no-new-privs, which it needs), so every run, candidate
    and judge alike, inherits it from its first instruction. SIGCHLD's disposition is set to
    the default first: no run can change it afterwards (:data:`RULES`).
    """
    table = TABLES.get(platform.machine())
    if table is None:
        return
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _kernel.libc.prctl(_kernel.PR_SET_NO_NEW_PRIVS, 1)
    _kernel.libc.seccomp_filter(compile_policy(table))
