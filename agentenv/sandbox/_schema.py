"""The wire schema, declared once: the keys and kinds of what crosses the sandbox boundary.

Two agreements, each written by one side and read by the other:

- **jobs and their items** (trusted side -> candidate process): the keys of a job, what
  :mod:`agentenv.grading.plan` asks the child to compute for each check, read by :mod:`_runner`;
  and the judge process's job and checks, read by :mod:`_judge`;
- **result frames** (candidate or judge process -> trusted side): what :mod:`_runner` and
  :mod:`_judge` write on their result pipes (framed by :func:`_wire.encode_frame`), read by
  :func:`agentenv.grading.judging.judge`. Every frame is a map with its type under :data:`TYPE`;
  :data:`FRAMES` lists the keys each type may carry.

Why here, in the sandbox package, and not in :mod:`agentenv.grading`: the runner and the judge
process execute inside the sandbox, loaded by path (``python -I -S``, no site-packages, no
``agentenv`` package), so whatever they import must sit beside them in this directory, stdlib
only, self-contained (this module imports nothing). The trusted side imports it as
``agentenv.sandbox._schema``: an arrow down the layers (grading -> sandbox), never up. Both
sides name keys through this module only; ``tests/test_wire_schema.py`` fails when a frame
carries a key the schema does not declare, or when the sandbox-side modules spell a frame key
as a bare string again.
"""

from __future__ import annotations

__all__ = [
    "ASSERTION",
    "CALL",
    "CALL_INDEX",
    "CALL_SOURCES",
    "CALL_THEN",
    "CHECK",
    "CHECK_SOURCE",
    "DONE",
    "EXCEPTION",
    "FRAMES",
    "INDEX",
    "ITEMS",
    "ITEM_CALLS",
    "ITEM_INDEX",
    "ITEM_KIND",
    "ITEM_STDIO",
    "JOB",
    "JUDGE_ITEM",
    "JUDGE_JOB",
    "JUDGE_ROLE",
    "KIND",
    "KINDS",
    "LOAD",
    "MESSAGE",
    "NOT_PLAIN",
    "NO_RESULT",
    "OK",
    "OUT",
    "OVER_BUDGET",
    "RAISED",
    "SETUP",
    "STDIN",
    "STDIO",
    "STEPS",
    "SYNTAX",
    "TYPE",
    "VALUE",
]

# ------------------------------------------------------------------ jobs (parent -> child)

# A job is a JSON map; its keys are read where a run is set up (the worker) and run (the runner,
# the judge process). They are listed here, and tests/test_wire_schema.py holds every writer and
# reader of a job to these sets.
JOB = frozenset(("nonce", "code", "setup", "prelude", "items", "limits", "max_value_bytes",
                 "test_limit", "workdir", "env"))  # workdir, env: added by the pool for the worker
TEST_CPU = "cpu"  # under the job's "test_limit": CPU seconds each stdio program may use
TEST_WALL = "wall"  # and the wall-clock seconds it may take (waiting for a core not counted)
TEST_STARVED = "starved"  # up to this many times TEST_WALL in all
TEST_OUTPUT = "out"  # bytes of stdout each stdio program may print
# imports: [[name, module, attribute], ...] the judge makes itself; packages: the exposed
# third-party packages it imports itself when a check names them; defines: what the task asks
# the candidate to define (None: every name the candidate binds)
JUDGE_JOB = frozenset(("role", "nonce", "setup", "prelude", "checks", "limits", "float_tolerance",
                       "imports", "packages", "defines"))
JUDGE_ROLE = "judge"  # a judge process's job says so under "role"

# ------------------------------------------------------------------ job items (parent -> child)

ITEM_INDEX = "i"  # the check's index in the task's check list
ITEM_KIND = "k"  # what to compute: ITEM_CALLS or ITEM_STDIO
ITEM_CALLS = "calls"  # evaluate call expressions; their sources are under CALL_SOURCES
ITEM_STDIO = "stdio"  # run the candidate as a program with the stdin under STDIN
CALL_SOURCES = "calls"  # [source of one call expression, ...]
# Optional, per call: the operations a check applies to the call's result ([source, ...], each
# an expression over ``_agentenv_recv``). The child applies them only while the result is an
# object that cannot cross (a candidate's instance); once it is a value, it is sent as is and
# the trusted side applies the rest to the value it rebuilt.
CALL_THEN = "then"
STDIN = "stdin"  # the program's standard input (str)
CHECK_SOURCE = "src"  # a judge-process check: its program's source (with ITEM_INDEX)

ITEMS: dict[str, frozenset[str]] = {
    ITEM_CALLS: frozenset((ITEM_INDEX, ITEM_KIND, CALL_SOURCES, CALL_THEN)),
    ITEM_STDIO: frozenset((ITEM_INDEX, ITEM_KIND, STDIN)),
}
JUDGE_ITEM = frozenset((ITEM_INDEX, CHECK_SOURCE))

# ------------------------------------------------------------- result frames (child -> parent)

TYPE = "t"  # the frame's type: one of FRAMES
INDEX = "i"  # the check's index
CALL_INDEX = "j"  # the call's index within its check's CALL_SOURCES
VALUE = "v"  # a call's value: _wire.encode_value's bytes
KIND = "kind"  # what went wrong: one of KINDS
MESSAGE = "msg"  # a short text saying what went wrong
OK = "ok"  # True: loaded (LOAD), passed (CHECK)
OUT = "out"  # what a stdio program wrote to its stdout (str)
STEPS = "steps"  # CALL: how many of the call's CALL_THEN operations the child applied (default 0)

LOAD = "load"  # the candidate's code (prelude, solution, setup) loaded, or how it failed
CALL = "call"  # one call's value, or how it failed
STDIO = "stdio"  # one stdio case's output
CHECK = "check"  # the judge process's verdict on one check
SETUP = "setup"  # the judge process could not run the task's prelude or setup
DONE = "done"  # the process reached the end of its job

FRAMES: dict[str, frozenset[str]] = {
    LOAD: frozenset((TYPE, OK, KIND, MESSAGE)),
    CALL: frozenset((TYPE, INDEX, CALL_INDEX, VALUE, KIND, MESSAGE, STEPS)),
    STDIO: frozenset((TYPE, INDEX, OUT, KIND, MESSAGE)),
    CHECK: frozenset((TYPE, INDEX, OK, KIND, MESSAGE)),
    SETUP: frozenset((TYPE, KIND, MESSAGE)),
    DONE: frozenset((TYPE,)),
}

# Failure kinds a frame may carry under KIND.
ASSERTION = "assertion"  # ran, wrong value or output
EXCEPTION = "exception"  # raised while running
SYNTAX = "syntax"  # does not compile
NOT_PLAIN = "type"  # a call returned something that is not plain data
OVER_BUDGET = "budget"  # a call returned plain data over one of the wire's budgets
NO_RESULT = "no_result"  # the judge process lost the candidate's process mid-check
TIMEOUT = "timeout"  # a stdio program ran past its own test's time limit

KINDS = frozenset((ASSERTION, EXCEPTION, SYNTAX, NOT_PLAIN, OVER_BUDGET, NO_RESULT, TIMEOUT))
RAISED = (ASSERTION, EXCEPTION, SYNTAX)  # what an exception in candidate code is reported as
