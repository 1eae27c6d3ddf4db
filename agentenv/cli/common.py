"""What every ``agentenv`` command shares: the command classes (global options, the usage
errors' one line), option types, the task-set options and loading, and the consoles.

Nothing printed is read as rich markup, so text in square brackets is shown as written.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import click
from rich.console import Console

from agentenv.errors import ConfigError
from agentenv.log import configure_logging

EXIT_OK, EXIT_FAILURES, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


# -- option types --------------------------------------------------------------------------------

class _Finite(click.FloatRange):
    """A float range that also refuses NaN (which compares false with every bound)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value!r} is not a number.", param, ctx)
        return number


POSITIVE_INT = click.IntRange(min=1)
NONNEG_INT = click.IntRange(min=0)
NONNEG_FLOAT = _Finite(min=0)
POSITIVE_FLOAT = _Finite(min=0, min_open=True)


class TreeShape(click.ParamType):
    """``N,M``: two whole numbers >= 1 (``--repair-tree``)."""

    name = "N,M"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        try:
            initial, repairs = (int(x) for x in str(value).split(","))
        except ValueError:
            self.fail(f"expected N,M (e.g. 5,2), got {value!r}", param, ctx)
        if initial < 1 or repairs < 1:
            self.fail(f"N and M must be >= 1, got {value!r}", param, ctx)
        return initial, repairs


# -- global options and the command classes -----------------------------------------------------

def state() -> dict[str, Any]:
    """The invocation's shared state (``ctx.obj``): the global options given, the command run."""
    ctx = click.get_current_context()
    if ctx.obj is None:
        ctx.obj = {}
    return ctx.obj


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """A global option given before or after the subcommand; the later one wins."""
    if value not in (None, False):
        if ctx.obj is None:
            ctx.obj = {}
        ctx.obj[param.name] = value


def _global_params() -> list[click.Parameter]:
    """--log-level, --log-json and -q, accepted before or after any subcommand."""
    return [
        click.Option(["--log-level"], default=None, expose_value=False, callback=_remember,
                     help="debug | info | warning | error (default: warning)"),
        click.Option(["--log-json"], is_flag=True, default=False, expose_value=False, callback=_remember,
                     help="log as JSON lines on stderr"),
        click.Option(["-q", "--quiet"], is_flag=True, default=False, expose_value=False, callback=_remember,
                     help="errors only: no progress bar, notes or log lines below error"),
    ]


def quiet() -> bool:
    return bool(state().get("quiet"))


class Command(click.Command):
    """A leaf command: takes the global options, and before its body runs records its name
    (errors point to its help) and configures logging."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("context_settings", CONTEXT_SETTINGS)
        super().__init__(*args, **kwargs)
        self.params.extend(_global_params())

    def invoke(self, ctx: click.Context) -> Any:
        shared = state()
        shared["prog"] = ctx.command_path
        configure_logging(level="error" if shared.get("quiet") else shared.get("log_level") or "warning",
                          json=bool(shared.get("log_json")))
        return super().invoke(ctx)


class Group(click.Group):
    """A group of commands, taking the global options; its commands are :class:`Command`."""

    command_class = Command

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("context_settings", CONTEXT_SETTINGS)
        kwargs.setdefault("invoke_without_command", True)  # a missing subcommand: our own message
        kwargs.setdefault("no_args_is_help", False)
        super().__init__(*args, **kwargs)
        self.params.extend(_global_params())

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # in the order they were added, as the help has always listed them


Group.group_class = Group


def usage_line(exc: click.UsageError) -> str:
    """A bad command line as one line naming the command and pointing at its help."""
    prog = exc.ctx.command_path if exc.ctx is not None else "agentenv"
    message = exc.format_message().rstrip(".").replace("\n", " ")
    if "--help`" in message:
        return f"error: {message}"
    return f"error: {prog}: {message} (see `{prog} --help`)"


# -- consoles and formatting ----------------------------------------------------------------------

def console(stderr: bool) -> Console:
    # markup=False: nothing we print is read as rich markup, so "[syntax]" or "[isolation:
    # strict]" (from us or from a run) always reaches the screen as written.
    made = Console(stderr=stderr, highlight=False, soft_wrap=True, markup=False)
    if not made.is_terminal:  # piped or captured: do not squeeze tables into 80 columns
        made.width = max(made.width, 120)
    return made


def stdout() -> Console:
    return console(stderr=False)


def stderr() -> Console:
    return console(stderr=True)


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def tolerant_output() -> None:
    """Task and candidate text may hold characters the terminal cannot encode (a lone
    surrogate): show them as escapes instead of failing."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if callable(reconfigure):
            with contextlib.suppress(ValueError, OSError):  # a stream that cannot change: leave it
                reconfigure(errors="backslashreplace")


# -- task sets ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskSelection:
    """A task set as the command line names it, with its loader options and filters."""

    tasks: str | None
    data: str | None = None
    field_map: str | None = None
    loader_options: tuple[str, ...] = ()
    difficulty: str | None = None
    tags: str | None = None
    since: str | None = None
    dedupe: bool = False
    shuffle_seed: int | None = None
    limit: int | None = None

    @property
    def spec(self) -> str:
        return self.tasks or "builtin"

    def with_set(self, positional: str | None) -> TaskSelection:
        """``[SET]`` or ``--tasks SET`` (refusing two different ones)."""
        if positional is None:
            return self
        if self.tasks not in (None, positional):
            prog = click.get_current_context().command_path
            raise click.UsageError(f"{prog}: two task sets given ({positional!r} and --tasks "
                                   f"{self.tasks!r}); give one (see `{prog} --help`)")
        return TaskSelection(**{**self.__dict__, "tasks": positional})

    def loader_kwargs(self) -> dict[str, Any]:
        options: dict[str, Any] = dict(_loader_option(o) for o in self.loader_options)
        for value, key in ((self.data, "path"), (self.field_map, "map"), (self.difficulty, "difficulty"),
                           (self.tags, "tags"), (self.since, "since"), (self.shuffle_seed, "shuffle_seed"),
                           (self.limit, "limit")):
            if value is not None:
                options[key] = value
        if self.dedupe:
            options["dedupe"] = True
        return options


_SELECTION_FIELDS = ("tasks", "data", "field_map", "loader_options", "difficulty", "tags", "since",
                     "dedupe", "shuffle_seed", "limit")


def task_options(default: str | None = "builtin") -> Callable[[F], F]:
    """Options that choose a task set and filter it, the same on every command that loads tasks;
    the command receives them as one ``selection: TaskSelection``."""
    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            picked = {name: kwargs.pop(name) for name in _SELECTION_FIELDS}
            picked["loader_options"] = tuple(picked["loader_options"])
            return fn(*args, selection=TaskSelection(**picked), **kwargs)

        options = [
            click.option("--limit", type=POSITIVE_INT, default=None, help="keep the first N tasks"),
            click.option("--shuffle-seed", type=int, default=None, help="shuffle the tasks with this seed"),
            click.option("--dedupe", is_flag=True, help="drop tasks whose prompt repeats an earlier one"),
            click.option("--since", default=None, metavar="YYYY-MM-DD",
                         help="keep tasks released on or after this date (contamination-free windows)"),
            click.option("--tag", "tags", default=None, help="keep tasks with one of these tags"),
            click.option("--difficulty", default=None, help="keep these difficulties (comma-separated)"),
            click.option("--option", "loader_options", multiple=True, metavar="KEY=VALUE",
                         help="extra loader option (repeatable; VALUE is read as JSON when it parses)"),
            click.option("--map", "field_map", default=None, metavar="FIELD=COLUMN,...",
                         help="field mapping for a generic JSONL/HF file, e.g. prompt=question,checks=tests"),
            click.option("--data", default=None, metavar="PATH",
                         help="local copy of a named benchmark (mbpp, livecodebench, apps, humaneval)"),
            click.option("--tasks", default=default, metavar="SET",
                         help="builtin | humaneval | mbpp | livecodebench | apps | PATH.jsonl | PATH.toml "
                              "| DIR (default: builtin)"),
        ]
        decorated: Any = wrapper
        for option in options:
            decorated = option(decorated)
        return decorated
    return decorate


def set_argument(fn: F) -> F:
    """``[SET]`` or ``--tasks SET`` (as ``run`` takes it), with the loader options and filters."""
    return click.argument("set_", metavar="[SET]", required=False, default=None)(task_options(default=None)(fn))


def _loader_option(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--option takes KEY=VALUE, got {text!r}")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return key.strip(), value


def load_tasks(selection: TaskSelection, problems: list[str] | None = None) -> list[Any]:
    """Load the task set named on the command line, with its loader options and filters
    (``problems``: collect what does not load instead of raising, see ``load_tasks``)."""
    from agentenv.tasks import load_tasks as load

    spec = selection.spec
    try:
        tasks = load(spec, problems=problems, **selection.loader_kwargs())
    except TypeError as exc:  # an option the chosen loader does not take
        raise ConfigError(f"task set {spec!r} does not take these options ({exc}); "
                          f"see `{click.get_current_context().command_path} --help`") from None
    if not tasks and not problems:
        raise ConfigError(f"task set {spec!r} has no tasks left after the filters")
    return tasks


def find_task(tasks: Sequence[Any], name: str, where: str) -> Any:
    from agentenv.tasks.select import index_of

    return tasks[index_of(tasks, name, where=where)]
