"""The syscall policy compiled to BPF decides as its rules say: a small interpreter of classic
BPF runs the compiled program on seccomp data for every machine table, beside the rules read
as plain Python. The kernel's own verdicts are covered by the attack suites."""

from __future__ import annotations

import signal
import struct

import pytest

from agentenv.sandbox import _seccomp

LD, JEQ, JGE, JA, RET = 0x20, 0x15, 0x35, 0x05, 0x06


def run_bpf(program: list[tuple[int, int, int, int]], data: bytes) -> int:
    """What a classic-BPF seccomp program returns on ``data`` (the few opcodes it may use)."""
    acc, pc, steps = 0, 0, 0
    while True:
        steps += 1
        assert steps <= len(program), "a BPF program only jumps forward"
        code, jt, jf, k = program[pc]
        if code == LD:
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code == JEQ:
            pc += 1 + (jt if acc == k else jf)
        elif code == JGE:
            pc += 1 + (jt if acc >= k else jf)
        elif code == JA:
            pc += 1 + k
        elif code == RET:
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")


def seccomp_data(nr: int, arch: int, *args: int) -> bytes:
    full = (list(args) + [0] * 6)[:6]
    return struct.pack("<iIQ6Q", nr, arch, 0x400000, *full)


def expected(table: _seccomp.Table, nr: int, arch: int, args: tuple[int, ...]) -> int:
    """The policy read as plain Python."""
    if arch != table.arch or nr >= _seccomp.X32_BIT:
        return _seccomp.EPERM
    names = {number: name for name, number in table.numbers.items()}
    name = names.get(nr)
    if name in _seccomp.REFUSED:
        return _seccomp.EPERM
    full = (list(args) + [0] * 6)[:6]
    for rule in _seccomp.RULES:
        if rule.syscall != name:
            continue
        if all((full[c.arg] & 0xFFFFFFFF) == c.value if isinstance(c, _seccomp.ArgIs)
               else full[c.arg] != 0 for c in rule.when):
            return _seccomp.EPERM
    return _seccomp.ALLOW


ARGUMENTS = [0, 1, int(signal.SIGCHLD), int(signal.SIGINT), 0x7FFD_0000_0000,
             0x1_0000_0000, 0x1_0000_0000 | int(signal.SIGCHLD), 12345]


@pytest.mark.parametrize("machine", sorted(_seccomp.TABLES))
def test_the_compiled_program_decides_every_call_as_the_rules_say(machine: str) -> None:
    table = _seccomp.TABLES[machine]
    program = _seccomp.compile_policy(table)
    numbers = sorted(set(table.numbers.values()) | {0, 1, 2, 59, 60, 231, 500})
    for nr in [*numbers, _seccomp.X32_BIT + 1]:
        for arch in (table.arch, 0x40000003):
            for a0 in ARGUMENTS:
                for a1 in (0, 0x7FFD_0000_1000, 0x1_0000_0000):
                    for a2 in (0, 0x7FFD_0000_2000):
                        args = (a0, a1, a2)
                        got = run_bpf(program, seccomp_data(nr, arch, *args))
                        assert got == expected(table, nr, arch, args), (machine, nr, arch, args)


def test_the_rules_refuse_what_no_run_may_do_and_keep_what_honest_code_needs() -> None:
    table = _seccomp.TABLES["x86_64"]
    program = _seccomp.compile_policy(table)

    def verdict(name: str, *args: int) -> str:
        got = run_bpf(program, seccomp_data(table.numbers[name], table.arch, *args))
        return "allow" if got == _seccomp.ALLOW else "refuse"

    sigchld, act = int(signal.SIGCHLD), 0x7FFD_0000_1000
    assert verdict("rt_sigaction", sigchld, act) == "refuse"  # SIG_IGN or a handler for SIGCHLD
    assert verdict("rt_sigaction", sigchld, 0) == "allow"  # a query
    assert verdict("rt_sigaction", int(signal.SIGINT), act) == "allow"
    assert verdict("prlimit64", 0, 9, act) == "allow"  # its own limits (setrlimit)
    assert verdict("prlimit64", 4242, 9, 0) == "allow"  # a query of another process's
    assert verdict("prlimit64", 4242, 9, act) == "refuse"
    assert verdict("prlimit64", 0x1_0000_0000, 9, act) == "refuse"  # a pid in the high word
    for name in _seccomp.REFUSED:
        assert verdict(name) == "refuse"
    read = run_bpf(program, seccomp_data(0, table.arch))
    assert read == _seccomp.ALLOW
    assert run_bpf(program, seccomp_data(0, 0x40000003)) == _seccomp.EPERM  # i386
    assert run_bpf(program, seccomp_data(_seccomp.X32_BIT, table.arch)) == _seccomp.EPERM


def test_every_syscall_the_policy_names_has_a_number_on_every_machine() -> None:
    names = set(_seccomp.REFUSED) | {rule.syscall for rule in _seccomp.RULES}
    for machine, table in _seccomp.TABLES.items():
        assert names <= set(table.numbers), (machine, names - set(table.numbers))
