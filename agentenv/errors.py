"""The exception tree of agentenv: one root, and every message says what to do next.

    AgentEnvError
    ├── EnvStateError        an env method called in the wrong state (step before reset, ...)
    ├── TaskFormatError      a task file or record is malformed (names file, task and field)
    ├── RunFormatError       a run directory or one of its files is missing or malformed
    ├── DatasetUnavailable   a dataset cannot be found locally or downloaded
    ├── TemplateError        a prompt template is missing or uses an undefined variable
    ├── PolicyError          a policy is misconfigured (no API key, unknown name, ...)
    │   └── PolicyCallError  one policy call failed after its retries (server errors, bad request)
    │       └── ServerUnavailable  the circuit breaker is open: the server stopped answering
    ├── ConfigError          a bad option value passed by a user or on the command line
    │   └── SnapshotMismatch an episode snapshot taken under other env settings or tasks
    ├── EpisodeInterrupted   an episode stopped by the infrastructure; carries its partial record
    ├── MissingDependency    an optional dependency (an extra such as ``gym`` or ``hf``) is absent
    └── SandboxError         an infrastructure fault of the sandbox (never a candidate's fault)
        └── IsolationUnavailable   a required isolation level cannot be provided here

Failures of candidate code are never exceptions: they are data in a ``RunResult``.
"""

from __future__ import annotations

__all__ = [
    "DISTRIBUTION",
    "AgentEnvError",
    "ConfigError",
    "DatasetUnavailable",
    "EnvStateError",
    "EpisodeInterrupted",
    "IsolationUnavailable",
    "MissingDependency",
    "PolicyCallError",
    "PolicyError",
    "RunFormatError",
    "SandboxError",
    "ServerUnavailable",
    "SnapshotMismatch",
    "TaskFormatError",
    "TemplateError",
    "install_hint",
]


class AgentEnvError(Exception):
    """Root of every error agentenv raises on purpose."""


class EnvStateError(AgentEnvError):
    """An environment method was called in a state that does not allow it."""


class TaskFormatError(AgentEnvError, ValueError):
    """A task file or record is malformed.

    ``problems`` holds every problem found in the task as ``(field, message)`` pairs (one when
    only one was found); the message names them all, and :meth:`lines` gives one line each.
    ``field`` and ``detail`` are the first problem's.
    """

    def __init__(self, message: str, *, path: str | None = None, task: str | None = None,
                 field: str | None = None,
                 problems: tuple[tuple[str | None, str], ...] | list[tuple[str | None, str]] | None = None) -> None:
        self.problems: tuple[tuple[str | None, str], ...] = tuple(problems) if problems else ((field, message),)
        if problems:
            field, message = self.problems[0]
        self.detail = message  # the (first) message without the file/task/field prefix
        self.path = path
        self.task = task
        self.field = field
        if len(self.problems) == 1:
            text = self._where(field) + message
        else:
            text = (self._where(None) + f"{len(self.problems)} problems: "
                    + "; ".join(f"{self._label(f)}{m}" for f, m in self.problems))
        super().__init__(text)

    @staticmethod
    def _label(field: str | None) -> str:
        return f"field {field!r}: " if field is not None else ""

    def _where(self, field: str | None) -> str:
        where = []
        if self.path is not None:
            where.append(f"file {self.path}")
        if self.task is not None:
            where.append(f"task {self.task!r}")
        if field is not None:
            where.append(f"field {field!r}")
        return (", ".join(where) + ": ") if where else ""

    def lines(self) -> list[str]:
        """One line per problem, each naming the file, the task and the field."""
        return [self._where(field) + message for field, message in self.problems]

    def located(self, *, path: str | None = None, task: str | None = None) -> TaskFormatError:
        """The same problems, said of this file and this task (where given)."""
        return TaskFormatError(self.detail, path=path if path is not None else self.path,
                               task=task if task is not None else self.task, field=self.field,
                               problems=self.problems)


class RunFormatError(AgentEnvError, ValueError):
    """A run directory (``trajectories.jsonl``, ``summary.json``) is missing or malformed."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        where = ""
        if path is not None:
            where = f"file {path}" + (f", line {line}" if line is not None else "") + ": "
        super().__init__(where + message)
        self.path = path
        self.line = line


class DatasetUnavailable(AgentEnvError):
    """A dataset could not be read from disk nor downloaded."""


class TemplateError(AgentEnvError):
    """A prompt template is missing or refers to an undefined variable."""


class PolicyError(AgentEnvError):
    """A policy cannot run as configured."""


class PolicyCallError(PolicyError):
    """One call to a policy's model failed for good (retries exhausted, or the request rejected).

    Unlike its parent this is about one episode, not the configuration. ``transient`` says
    whether trying again later may help (the server was unreachable, timed out, answered 5xx or
    kept rate-limiting): the runner then records the episode as failed, keeps its graded turns
    (a partial record) and continues it from there on resume.
    Otherwise the server rejected the request itself (a 400 such as a context-length error):
    the episode ends there with its graded turns kept and ``stop_reason`` (``"context_length"``
    or ``"policy_error"``), since asking again would fail again. ``status`` is the HTTP status,
    when there was one.
    """

    def __init__(self, message: str, *, status: int | None = None, transient: bool = False,
                 context_length: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient
        self.context_length = context_length

    @property
    def stop_reason(self) -> str:
        """The stop reason of an episode this error ends."""
        return "context_length" if self.context_length else "policy_error"

    def __reduce__(self) -> tuple[object, ...]:  # keyword fields survive pickling (Ray)
        return (_rebuild_call_error, (type(self), str(self), self.status, self.transient,
                                      self.context_length))


def _rebuild_call_error(cls: type[PolicyCallError], message: str, status: int | None,
                        transient: bool, context_length: bool) -> PolicyCallError:
    return cls(message, status=status, transient=transient, context_length=context_length)


class ServerUnavailable(PolicyCallError):
    """The policy's server failed too many calls in a row (its circuit breaker is open).

    Not about one episode: the runner stops the run, keeps what is finished and the graded turns
    of the episodes in flight, and says how to resume once the server is back.
    """

    def __init__(self, message: str, **kwargs: object) -> None:
        kwargs.setdefault("transient", True)
        super().__init__(message, **kwargs)  # type: ignore[arg-type]


class ConfigError(AgentEnvError, ValueError):
    """An option has a value agentenv cannot use."""


class SnapshotMismatch(ConfigError):
    """An episode snapshot cannot be restored into this env: it was taken under other settings
    (templates, tokenizer, budget, ...) or of a task the env does not have."""


class EpisodeInterrupted(AgentEnvError):
    """An episode in a rollout run stopped before its end by the infrastructure (``cause``: the
    model server gone, a sandbox fault, a cancelled run), after at least one graded turn.

    ``partial`` is its record so far (a ``Trajectory`` whose ``partial`` is true), which the
    runner writes and a resumed run continues; the runner then handles ``cause`` as it would
    have without the partial. Raised by the rollout runner's episode worker, never by
    ``run_episode`` itself.
    """

    def __init__(self, partial: object, cause: BaseException) -> None:
        super().__init__(f"episode stopped after {len(getattr(partial, 'turns', ()))} graded turn(s): "
                         f"{type(cause).__name__}: {cause}")
        self.partial = partial
        self.cause = cause

    def __reduce__(self) -> tuple[object, ...]:  # both fields survive pickling (Ray)
        return (type(self), (self.partial, self.cause))


# The distribution's name on the package index (``agentenv`` there is someone else's package);
# the import name stays ``agentenv``. Kept here so every install line reads the same way.
DISTRIBUTION = "agentenv-coding"


def install_hint(extra: str | None = None) -> str:
    """The install line for agentenv (with an extra): the published name, and the form that
    works in a clone of the repository."""
    suffix = f"[{extra}]" if extra else ""
    return f'pip install "{DISTRIBUTION}{suffix}", or pip install -e ".{suffix}" in a clone of the repository'


class MissingDependency(AgentEnvError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it.

    Build it with :meth:`for_extra` so every such message reads the same way.
    """

    def __init__(self, message: str, *, package: str | None = None, extra: str | None = None) -> None:
        super().__init__(message, name=package)
        self.package = package
        self.extra = extra

    @classmethod
    def for_extra(cls, package: str, extra: str, feature: str) -> MissingDependency:
        """``feature`` needs ``package``, which agentenv's extra ``extra`` brings
        (:func:`install_hint`)."""
        return cls(
            f"{feature} needs the optional package {package!r}, which is not installed; "
            f"install it with {install_hint(extra)}.",
            package=package, extra=extra,
        )


class SandboxError(AgentEnvError):
    """The sandbox itself failed (not the candidate code)."""


class IsolationUnavailable(SandboxError):
    """The isolation level that was required is not available on this machine."""
