"""The ``agentenv`` command line: run rollouts, inspect and validate tasks, score a file, report.

Commands (one module each, on click)::

    agentenv run [options]                  rollouts into runs/<timestamp>/ (offline by default)
    agentenv tasks list [SET]               the tasks of a set (SET or --tasks SET, as run takes it)
    agentenv tasks show NAME [--tasks SET]  one task in full
    agentenv tasks validate [SET]           every problem of every task, then every reference solution run
    agentenv check CODE_FILE --task NAME    score one file against a task, failures shown
    agentenv report RUN_DIR [RUN_DIR2]      text + HTML + rollout browser for a run, plots with
                                            matplotlib (two runs: revise vs resample)
    agentenv compare RUN_A RUN_B            per-task paired differences with bootstrap intervals

``--log-level``, ``--log-json`` and ``-q`` (errors only) go before or after the subcommand
(:mod:`agentenv.cli.common` has them, the option types and the task-set options). The package
only parses options, calls the library and prints; it is the one place (with the examples)
that configures logging. Every error a user can cause (a bad flag, a missing or malformed
file, a missing API key) ends as one line on stderr and a non-zero exit code: 2 for usage and
configuration errors, 1 when the work ran but found failures (a run whose episodes mostly
ended in ``policy_error``, the server refusing the requests, is one), 130 on Ctrl-C. An error
points to the help of the subcommand it was given to.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

import click

from agentenv._version import __version__
from agentenv.cli.check import check_command
from agentenv.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    Group,
    state,
    tolerant_output,
    usage_line,
)
from agentenv.cli.compare import compare_command
from agentenv.cli.report import report_command
from agentenv.cli.run import run_command
from agentenv.cli.tasks import tasks_group
from agentenv.errors import AgentEnvError, ConfigError
from agentenv.untrusted import printable

__all__ = ["app", "main"]


@click.group("agentenv", cls=Group, help="RL environments for LLM coding agents: rollouts, tasks, reports.")
@click.version_option(__version__, "--version", prog_name="agentenv", message="%(prog)s %(version)s")
@click.pass_context
def app(ctx: click.Context) -> int | None:
    if ctx.invoked_subcommand is None:  # `agentenv` alone: the help, as a usage error
        state()["prog"] = ctx.command_path
        click.echo(ctx.get_help())
        return EXIT_USAGE
    return None


for _command in (run_command, tasks_group, check_command, report_command, compare_command):
    app.add_command(_command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``agentenv`` command line; returns the exit code."""
    tolerant_output()
    shared: dict[str, Any] = {}
    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        with app.make_context("agentenv", args, obj=shared) as ctx:
            code = app.invoke(ctx)
        return code if isinstance(code, int) else EXIT_OK
    except click.exceptions.Exit as exc:  # --help / --version
        return exc.exit_code
    except click.UsageError as exc:
        print(printable(usage_line(exc)), file=sys.stderr)
        return EXIT_USAGE
    except click.ClickException as exc:
        print(printable(f"agentenv: error: {exc.format_message()}"), file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:  # an option's value: where the options are described
        prog = str(shared.get("prog", "agentenv"))
        hint = "" if "--help" in str(exc) or prog == "agentenv" else f" (see `{prog} --help`)"
        print(printable(f"agentenv: error: {exc}{hint}"), file=sys.stderr)
        return EXIT_USAGE
    except (AgentEnvError, OSError, json.JSONDecodeError) as exc:
        print(printable(f"agentenv: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except (KeyboardInterrupt, click.Abort):
        print("agentenv: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except asyncio.CancelledError:  # pragma: no cover - a cancelled run, reported like Ctrl-C
        print("agentenv: cancelled", file=sys.stderr)
        return EXIT_INTERRUPTED
