"""Grading: everything that turns a sandbox run's raw results into verdicts, on the trusted side.

The sandbox (:mod:`agentenv.sandbox`) runs untrusted code and hands back raw bytes; it never
imports this package. This package owns the policy on top of it:

- :mod:`~agentenv.grading.plan`: :func:`plan_checks`, what the child computes for each check and
  where the verdict is made;
- :mod:`~agentenv.grading.judging`: :func:`judge`, the frames that came back -> a ``RunResult``
  (frame keys and kinds: :mod:`agentenv.sandbox._schema`, the wire schema declared once);
- :mod:`~agentenv.grading.values`: how plain values are compared, shown and computed on, within
  budgets;
- :mod:`~agentenv.grading.result`: ``RunResult`` and ``Failure``, the records of a run;
- :mod:`~agentenv.grading.redact`: secret values removed from what a result carries;
- :mod:`~agentenv.grading.run`: ``run_tests`` / ``arun_tests``, which plan, run on a sandbox pool,
  judge and redact;
- :mod:`~agentenv.grading.scoring`: one submission of a task scored for an environment (hidden
  and visible checks, together or apart) behind the ``Grader`` seam.

The child computes; it never decides. A check is graded in one of three ways, and never in the candidate's process:

- **trusted** (``mode == "trusted"``): a single ``assert`` is decomposed with :mod:`ast` into the
  calls into the candidate it makes (``add(2, 3)`` in ``assert add(2, 3) == 5``). Only those call
  expressions, with their arguments, are sent to the child, which returns each result as plain
  data (see :mod:`agentenv.sandbox._wire`). The rest of the assertion, expected values included,
  is evaluated here with the returned values substituted, restricted to a small set of trusted
  builtins, with ``==``/``!=``/``in``/``not in`` compared under the task's ``equality``
  (:mod:`agentenv.grading.values`: Python's own ``==`` by default, or ``"strict"``: same exact type all
  the way down; floats within ``float_tolerance`` when the task gives one), and with every
  operator and builtin call going through budgets, so no candidate value can make this process
  compute without bound. A check whose call returns an object that is not plain data (an
  instance of the candidate's class) is run again, by :func:`run_tests`, in the judge process,
  which holds such objects as handles (a check that constructs a capitalised name, or calls a
  builtin the trusted side does not evaluate, such as ``issubclass``, goes there from the
  start); a value over a budget, or any error while judging, fails the check with a
  message naming the limit, never an exception. Builtin names in the assertion (``abs``,
  ``sorted``, ``len``...) are the trusted side's own, so a candidate that redefines them gains
  nothing; only an assertion that calls one builtin name and nothing else (MBPP's ``assert
  sum(10, 15) == 6`` for a task *about* ``sum``) sends those calls to the child. An assertion that calls a
  name the task's setup code defines (a helper such as HumanEval's ``poly``) is not decomposed:
  in the child that helper would run after the candidate patched builtins and modules, so it
  goes to the judge process.
- **stdio** (:class:`~agentenv.tasks.schema.StdioCase`): the child runs the candidate as a
  program with the case's stdin and returns what it wrote to stdout; the expected output never
  leaves this process; :mod:`agentenv.grading.stdout` compares it by the case's rule
  (``StdioCase.compare``: agentenv's tokens, or the rule of the benchmark it was loaded from).
  A program that ends with SystemExit (any status) is graded on its output; one that raised
  fails the test as a runtime error.
- **judge** (``mode == "judge"``): anything else (several statements, loops, helper functions,
  comprehensions, names from the setup code). The check program and the setup code run in a
  judge process (:mod:`agentenv.sandbox._judge`), sandboxed like the candidate's but forked
  apart from it, where every name the candidate defines is a proxy whose uses cross a channel
  to the candidate's process and come back as plain data or as handles to the candidate's
  objects (instances of mirror classes; the candidate's dunders decide nothing about the
  check's own data: see :mod:`agentenv.sandbox._judge`). The judge reports verdicts on a pipe
  of its own; the candidate never sees these checks, their expected values or their helpers,
  and holds nothing a verdict could be written on. Only runs with such checks pay for the judge
  process. The judge compares with Python's ``==`` (floats within ``float_tolerance`` on single
  ``==``/``!=``), whatever the task's ``equality``: ``"strict"`` applies to the decomposed
  asserts only.

No verdict comes from the candidate's process, so ``RunResult.graded_in_child`` is always 0
(the field stays for records written before the judge process existed). Exit codes never
decide anything, and stdout is never parsed for verdicts.
"""

from __future__ import annotations

from agentenv.grading.judging import judge
from agentenv.grading.plan import TRUSTED_NAMES, CheckPlan, Plan, plan_checks
from agentenv.grading.result import FAILURE_KINDS, Failure, FailureKind, RunResult
from agentenv.grading.run import arun_tests, run_tests
from agentenv.grading.stdout import compare_stdout, normalise_stdout
from agentenv.grading.values import strict_equal

__all__ = [
    "FAILURE_KINDS",
    "TRUSTED_NAMES",
    "CheckPlan",
    "Failure",
    "FailureKind",
    "Plan",
    "RunResult",
    "arun_tests",
    "compare_stdout",
    "judge",
    "normalise_stdout",
    "plan_checks",
    "run_tests",
    "strict_equal",
]
