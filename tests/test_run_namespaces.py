"""Every kind of kernel state a strict run can leave, and what the next run on the worker sees.

One run plants whatever it can: listening and bound TCP and UDP sockets, connections left in
``TIME_WAIT`` on ports that spell a hidden input, abstract unix sockets (one held by a daemon,
one kept alive only as a descriptor in flight, which the kernel frees whenever its collector
runs), keys in each keyring it can name and in a named session keyring, mounts, SysV and POSIX
IPC objects, directories in any cgroup tree it can see, a hostname, and files in ``/tmp``,
``/dev/shm`` and its work dir. The next run on the same worker (the pool has one) looks for each
of them by name, and takes a snapshot of everything it can enumerate (``/proc/net``, its mount
table, ``/proc/sysvipc``, ``/proc/keys``, ``/tmp``, ``/dev/shm``, its hostname): the snapshot
equals one taken before the planting run, and nothing is found. Four identical honest samples
that serve on one loopback port all score 1.0 (a run's network namespace is its own).
"""

from __future__ import annotations

import ast
import os
import time
from collections.abc import Iterator

import pytest
from support.attacks import strict_pool

from agentenv.grading import run_tests
from agentenv.sandbox import SandboxPool

MARKER = f"ns{os.getpid()}x{int(time.time()) % 100000}"
SECRET = "hidden"  # a hidden input the planting run records in port numbers
PORT = 47123


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    """One strict worker: every run lands where the one before it ran."""
    made = strict_pool(1, "the run namespace tests")
    yield made
    made.close()


def probe(pool: SandboxPool, code: str) -> object:
    """What the candidate's ``probe()`` returned, printed by the candidate (a run's stdout is
    not cut short as a failure message is)."""
    code = (code.replace("MARKER", MARKER).replace("SECRET", SECRET)
            .replace("BASEPORT", str(PORT)))
    code += "\ndef report():\n    print('PROBE', repr(probe()))\n    return True\n"
    result = run_tests(code, ["assert report()"], timeout=4.0, pool=pool)
    assert result.fraction == 1.0, result.failures
    line = [ln for ln in result.stdout.splitlines() if ln.startswith("PROBE ")][-1]
    return ast.literal_eval(line[len("PROBE "):])


# Candidate-side helpers shared by the planting and the looking runs.
KEYS = """
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
ADD_KEY, REQUEST_KEY, KEYCTL = 248, 249, 250
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_READ, KEYCTL_SEARCH = 1, 11, 10
KEYRINGS = {'thread': -1, 'process': -2, 'session': -3, 'user': -4, 'user-session': -5}
HIDDEN_PORTS = [40000 + b for b in b'SECRET']
"""

SNAPSHOT = KEYS + """
def rows(path, column=None):
    try:
        lines = open(path).read().splitlines()[1:]
    except OSError as exc:
        return ['unreadable: %s' % exc.errno]
    if column is None:
        return sorted(' '.join(line.split()[1:4]) for line in lines)
    return sorted(line.split()[column] for line in lines if len(line.split()) > column)
def listing(path):
    out = []
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            out.append(os.path.relpath(os.path.join(root, name), path))
    return sorted(out)
def snapshot():
    state = {}
    for table in ('tcp', 'tcp6', 'udp', 'udp6', 'raw', 'raw6', 'udplite', 'packet', 'netlink'):
        state['net/' + table] = rows('/proc/net/' + table)
    state['net/unix-names'] = rows('/proc/net/unix', 7)
    state['net/dev'] = sorted(line.split(':')[0].strip() for line in open('/proc/net/dev').read().splitlines()[2:])
    state['mounts'] = sorted(' '.join(line.split()[4:6]) + ' ' + line.split(' - ')[1].split()[0]
                             for line in open('/proc/self/mountinfo').read().splitlines())
    for table in ('shm', 'msg', 'sem'):
        state['sysvipc/' + table] = rows('/proc/sysvipc/' + table, 0)
    # /proc/keys lists the keys of every process of this host uid (other sandboxes' too): only
    # this test's own are compared.
    state['keys'] = sorted(line.split(None, 8)[-1] for line in open('/proc/keys').read().splitlines()
                           if 'MARKER' in line)
    state['tmp'] = [p for p in listing('/tmp') if not p.startswith('run/')]
    state['dev-shm'] = listing('/dev/shm')
    state['hostname'] = socket.gethostname()
    return state
"""

NOTHING = SNAPSHOT + """
def probe():
    return snapshot()
"""

PLANT = SNAPSHOT + """
import mmap, signal, time
made = []
def daemon(body):
    r, w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        try:
            body()
        finally:
            os.write(w, b'x')
        time.sleep(60)
        os._exit(0)
    os.close(w)
    os.read(r, 1)
def tcp_listen():
    s = socket.socket(); s.bind(('127.0.0.1', BASEPORT)); s.listen(); globals()['held'] = s
def udp_bound():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', BASEPORT + 1)); globals()['held2'] = s
def abstract_unix():
    s = socket.socket(socket.AF_UNIX); s.bind('\\0MARKER-held'); s.listen(); globals()['held3'] = s
daemon(tcp_listen); made.append('tcp-listen')
daemon(udp_bound); made.append('udp-bound')
daemon(abstract_unix); made.append('abstract-unix')
# Connections closed by the accepting side first: its ports wait in TIME_WAIT for a minute,
# the client ports spell the hidden input.
server = socket.socket(); server.bind(('127.0.0.1', BASEPORT + 2)); server.listen(16)
for port in HIDDEN_PORTS:
    client = socket.socket(); client.bind(('127.0.0.1', port)); client.connect(('127.0.0.1', BASEPORT + 2))
    conn, _ = server.accept(); conn.close(); client.recv(1); client.close()
server.close()
if any(' 06 ' in ' ' + row + ' ' for row in rows('/proc/net/tcp')):
    made.append('tcp-time-wait')
# An abstract socket nobody holds: in flight in a socket pair's queue that is itself in flight.
a, b = socket.socketpair()
ghost = socket.socket(socket.AF_UNIX); ghost.bind('\\0MARKER-inflight'); ghost.listen()
socket.send_fds(a, [b'x'], [ghost.fileno(), b.fileno()])
ghost.close(); a.close(); b.close()
made.append('abstract-unix-in-flight')
for name, ring in KEYRINGS.items():
    if libc.syscall(ADD_KEY, b'user', b'MARKER-' + name.encode(), b'SECRET', 6, ring) >= 0:
        made.append('key-' + name)
if libc.syscall(KEYCTL, KEYCTL_JOIN_SESSION_KEYRING, b'MARKER-ring') >= 0:
    if libc.syscall(ADD_KEY, b'user', b'MARKER-named', b'SECRET', 6, -3) >= 0:
        made.append('key-named-keyring')
os.makedirs('/tmp/mnt', exist_ok=True)
if libc.mount(b'tmpfs', b'/tmp/mnt', b'tmpfs', 0, None) == 0:
    made.append('mount')
if libc.umount2(b'/proc', 2) == 0:
    made.append('umount')
KEY = 0x5EE0
if libc.shmget(KEY, 4096, 0o1666) >= 0: made.append('sysv-shm')
if libc.msgget(KEY, 0o1666) >= 0: made.append('sysv-msg')
if libc.semget(KEY, 1, 0o1666) >= 0: made.append('sysv-sem')
rt = ctypes.CDLL('librt.so.1', use_errno=True)
if rt.mq_open(b'/MARKER', os.O_CREAT | os.O_RDWR, 0o666, None) >= 0: made.append('posix-mq')
for path in ('/tmp/MARKER', '/dev/shm/MARKER', '/tmp/run/../MARKER-2', os.getcwd() + '/MARKER'):
    try:
        open(path, 'w').write('SECRET'); made.append('file ' + path)
    except OSError:
        pass
cgroups = [line.split()[4] for line in open('/proc/self/mountinfo').read().splitlines()
           if line.split(' - ')[1].split()[0] in ('cgroup', 'cgroup2')]
for point in cgroups + ['/sys/fs/cgroup']:
    try:
        os.mkdir(point + '/MARKER'); made.append('cgroup ' + point)
    except OSError:
        pass
if libc.mount(b'none', b'/tmp/mnt', b'cgroup2', 0, None) == 0:
    made.append('cgroup2-mount')
if libc.sethostname(b'MARKER', 6) == 0:
    made.append('hostname')
def probe():
    return made
"""

LOOK = SNAPSHOT + """
def probe():
    found = []
    for port, kind in ((BASEPORT, socket.SOCK_STREAM), (BASEPORT + 1, socket.SOCK_DGRAM), (BASEPORT + 2, socket.SOCK_STREAM)):
        try:
            socket.socket(socket.AF_INET, kind).bind(('127.0.0.1', port))
        except OSError as exc:
            found.append('port %d: %s' % (port, exc.strerror))
    for port in HIDDEN_PORTS:
        try:
            socket.socket().bind(('127.0.0.1', port))
        except OSError:
            found.append('hidden port %d' % port)
    for name in ('MARKER-held', 'MARKER-inflight'):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.bind('\\0' + name)
        except OSError:
            found.append('abstract name taken: ' + name)
        s.close()
        try:
            socket.socket(socket.AF_UNIX).connect('\\0' + name); found.append('abstract connect: ' + name)
        except OSError:
            pass
    for name, ring in KEYRINGS.items():
        if libc.syscall(KEYCTL, KEYCTL_SEARCH, ring, b'user', b'MARKER-' + name.encode(), 0) >= 0:
            found.append('key-' + name)
    if libc.syscall(KEYCTL, KEYCTL_JOIN_SESSION_KEYRING, b'MARKER-ring') >= 0:
        if libc.syscall(KEYCTL, KEYCTL_READ, -3, None, 0) > 0:
            found.append('key-named-keyring')
    if libc.shmget(0x5EE0, 0, 0) >= 0: found.append('sysv-shm')
    if libc.msgget(0x5EE0, 0) >= 0: found.append('sysv-msg')
    if libc.semget(0x5EE0, 0, 0) >= 0: found.append('sysv-sem')
    rt = ctypes.CDLL('librt.so.1', use_errno=True)
    if rt.mq_open(b'/MARKER', os.O_RDONLY) >= 0: found.append('posix-mq')
    for path in ('/tmp/MARKER', '/dev/shm/MARKER', '/tmp/MARKER-2', os.getcwd() + '/MARKER',
                 '/sys/fs/cgroup/MARKER'):
        if os.path.lexists(path):
            found.append('file ' + path)
    return {'found': found, 'snapshot': snapshot()}
"""


def test_the_next_run_sees_no_kernel_state_a_run_left(pool: SandboxPool) -> None:
    """Plant everything, then look: the next run finds nothing by name, and every table it can
    enumerate is what a run saw before the planting one."""
    before = probe(pool, NOTHING)
    made = probe(pool, PLANT)
    print(f"[namespaces] the planting run made: {made}")
    assert isinstance(made, list)
    # The planting was real: sockets of each kind, ports held past the run, IPC, files.
    assert {"tcp-listen", "udp-bound", "abstract-unix", "abstract-unix-in-flight",
            "tcp-time-wait", "sysv-shm", "sysv-msg", "sysv-sem", "posix-mq"} <= set(made), made
    assert any(m.startswith("file /tmp") for m in made) and "file /dev/shm/" + MARKER in made
    # What no run may do at all: mounts, cgroups, the hostname (no capabilities), keys (refused
    # by the syscall filter: keys are per uid, listed in /proc/keys for every later run).
    assert not {"mount", "umount", "cgroup2-mount", "hostname"} & set(made), made
    assert not [m for m in made if m.startswith("key-")], made
    assert not [m for m in made if m.startswith("cgroup ")], made
    after = probe(pool, LOOK)
    assert isinstance(after, dict) and isinstance(before, dict)
    assert after["found"] == [], after["found"]
    assert after["snapshot"] == before, {k: (before.get(k), v) for k, v in after["snapshot"].items()
                                         if before.get(k) != v}


HONEST_SERVER = f"""
import socket
def serve_once():
    srv = socket.socket()
    srv.bind(("127.0.0.1", {PORT}))
    srv.listen()
    cli = socket.create_connection(("127.0.0.1", {PORT}))
    conn, _ = srv.accept()
    conn.sendall(b"pong")
    conn.close()  # the server's side closes first: its port waits in TIME_WAIT
    data = cli.recv(4)
    cli.close()
    srv.close()
    return data
"""


def test_four_honest_samples_serving_on_one_port_all_score_one(pool: SandboxPool) -> None:
    """Each sample binds the same loopback port, without SO_REUSEADDR, and leaves it in
    TIME_WAIT: every one of them gets the port free, as it would on a machine of its own."""
    scores = [run_tests(HONEST_SERVER, ["assert serve_once() == b'pong'"], pool=pool).fraction
              for _ in range(4)]
    assert scores == [1.0, 1.0, 1.0, 1.0]


def test_a_run_has_a_loopback_and_nothing_else(pool: SandboxPool) -> None:
    """The run's network namespace has ``lo`` up (honest local servers work) and no route out."""
    code = ("import socket\n"
            "def probe():\n"
            "    names = sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').read().splitlines()[2:])\n"
            "    try:\n"
            "        socket.create_connection(('1.1.1.1', 80), timeout=1).close(); out = 'connected'\n"
            "    except OSError as exc:\n"
            "        out = exc.__class__.__name__\n"
            "    return [names, out]\n")
    names, outside = probe(pool, code)  # type: ignore[misc]
    assert names == ["lo"]
    assert outside != "connected"
