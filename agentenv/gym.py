"""Gymnasium adapter: agentenv's environments as ``gymnasium.Env``, and their registered ids.

Importing this module registers three ids, so that ``gymnasium.make(id, **kwargs)`` works, as
does the ``gymnasium.make("agentenv.gym:agentenv/Coding-v0")`` form that imports it for you:

- ``agentenv/NumberGuess-v0``: :class:`NumberGuessGymEnv` over ``agentenv.toy.NumberGuessEnv``;
  observation ``{"low", "high"}`` (ints), action an int guess;
- ``agentenv/Coding-v0``: :class:`CodingGymEnv` over ``agentenv.envs.coding.CodingEnv``;
  observation ``{"prompt", "entry_point", "task_name"}``, action the policy's raw text;
- ``agentenv/MultiTurnCoding-v0``: :class:`MultiTurnCodingGymEnv` over
  ``agentenv.envs.multiturn.MultiTurnCodingEnv``; the same text fields plus ``feedback``,
  ``turn`` and ``turns_left``.

Keyword arguments to ``gymnasium.make`` go to the wrapped environment (``tasks=`` may also be a
task-set name such as ``"mbpp"``), except the adapter's own: ``max_text_length``,
``max_action_length`` and ``render_mode`` (``"ansi"``).

What the adapter adds to the native ``reset()/step()`` contract:

- Gymnasium's signatures: ``reset(seed=, options=) -> (obs, info)`` and
  ``step(action) -> (obs, reward, terminated, truncated, info)``, with ``terminated`` and
  ``truncated`` taken from the native ``info``.
- Seeding: all randomness comes from ``self.np_random``. The coding adapters draw the task index
  from it; the number game gets a fresh inner env seeded from it. So ``reset(seed=s)`` always
  poses the same task. ``options={"task_index": i}`` or ``{"task_name": name}`` picks a task.
- Spaces that contain what is returned. Text is :class:`UnicodeText`: any string (every Unicode
  character, not Gymnasium's default alphanumerics) up to a maximum length.
- Text-only observations. A coding observation is a ``Dict`` of ``UnicodeText`` fields (plus
  the turn counters in multi-turn). The multi-turn conversation (a list of ``{"role",
  "content"}`` dicts that grows every turn) is not in the observation but in
  ``info["messages"]``: Gymnasium has no space for a growing list of free-form dicts that
  vector envs and wrappers handle well, and a chat policy wants the messages as they are, not
  a padded encoding. The observation keeps what changes per turn: the latest ``feedback`` and
  the turn counters.
- Deterministic ``info``: timings (``exec_seconds``) are left out, since Gymnasium's checker
  requires equal infos for equal seeds and actions; they stay in
  ``env.unwrapped.env.trajectory``.

Vectorisation is Gymnasium's own: ``gymnasium.make_vec(id, num_envs, vectorization_mode="sync")``
works as is; the "async" mode needs ``vector_kwargs={"shared_memory": False}``, since text
cannot live in shared memory. Not here: training code.
"""

from __future__ import annotations

import copy
import operator
import string
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, SupportsFloat, TypeVar

from agentenv.errors import ConfigError, EnvStateError, MissingDependency

try:
    import gymnasium
    from gymnasium import spaces
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependency.for_extra("gymnasium", "gym", "agentenv.gym") from exc

from agentenv.tasks import select
from agentenv.tasks.schema import Task
from agentenv.toy import NumberGuessEnv

__all__ = [
    "DEFAULT_MAX_ACTION_LENGTH",
    "DEFAULT_MAX_TEXT_LENGTH",
    "ENV_IDS",
    "CodingGymEnv",
    "MultiTurnCodingGymEnv",
    "NumberGuessGymEnv",
    "UnicodeText",
    "register_envs",
]

DEFAULT_MAX_TEXT_LENGTH = 1 << 16    # characters per observation field (raised to fit the tasks)
DEFAULT_MAX_ACTION_LENGTH = 1 << 20  # characters per completion: far beyond any model's output

# Used only to draw samples; membership accepts every character.
_SAMPLE_ALPHABET = string.printable + "éüßñλπΣж中文한🙂—…"
_SAMPLE_MAX_LENGTH = 64
_NONDETERMINISTIC_INFO = frozenset({"exec_seconds"})


class UnicodeText(spaces.Text):
    """A string of any Unicode characters with ``min_length <= len <= max_length``.

    Gymnasium's ``Text`` checks every character against a finite charset (alphanumerics by
    default), which rejects the punctuation, whitespace and Unicode that prompts and code are
    made of. This space accepts any ``str`` that is valid Unicode (no lone surrogates, so it can
    be written as UTF-8). ``sample()`` draws from a small mixed alphabet of printable ASCII and a
    few non-ASCII characters, with lengths up to ``sample_max_length``. It cannot be flattened
    into a fixed-size array.
    """

    def __init__(self, max_length: int, *, min_length: int = 0,
                 sample_max_length: int = _SAMPLE_MAX_LENGTH,
                 seed: int | Any | None = None) -> None:
        super().__init__(max_length, min_length=min_length, charset=_SAMPLE_ALPHABET, seed=seed)
        self.sample_max_length = max(self.min_length, min(self.max_length, int(sample_max_length)))

    def contains(self, x: Any) -> bool:
        """True for a ``str`` of allowed length that encodes as UTF-8."""
        if not isinstance(x, str) or not self.min_length <= len(x) <= self.max_length:
            return False
        try:
            x.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random string; a ``None`` length in ``mask``/``probability`` means up to ``sample_max_length``."""
        if mask is None and probability is None:
            mask = (None, None)
        drawn = mask if mask is not None else probability
        length, weights = drawn
        if length is None:
            length = int(self.np_random.integers(self.min_length, self.sample_max_length + 1))
        if probability is not None:
            return super().sample(probability=(length, weights))
        return super().sample(mask=(length, weights))

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, UnicodeText) and self.min_length == other.min_length
                and self.max_length == other.max_length)


def _plain(value: Any) -> Any:
    """A fresh, JSON-shaped deep copy (Gymnasium forbids sharing objects between calls)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return copy.deepcopy(value)


def _step_info(native: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _plain(v) for k, v in native.items() if k not in _NONDETERMINISTIC_INFO}


class _SeedOnFirstReset:
    """Lets ``gymnasium.make(id, seed=s)`` seed the first ``reset()`` that passes no seed."""

    _initial_seed: int | None

    def _take_seed(self, seed: int | None) -> int | None:
        if seed is None and self._initial_seed is not None:
            seed = self._initial_seed
        self._initial_seed = None
        return seed


# -- the number game ---------------------------------------------------------------------------

class NumberGuessGymEnv(_SeedOnFirstReset, gymnasium.Env[dict[str, Any], Any]):
    """``NumberGuessEnv`` as a Gymnasium env: guess an int in ``[low, high]``.

    The observation is the remaining range ``{"low", "high"}``; on a hit it collapses to the
    secret (the native env returns an empty dict there). ``terminated`` means the secret was
    hit; ``truncated`` means ``max_steps`` ran out.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012 - Gymnasium's class attribute

    def __init__(self, low: int = 1, high: int = 100, max_steps: int | None = None,
                 seed: int | None = None, render_mode: str | None = None) -> None:
        NumberGuessEnv(low=low, high=high, max_steps=max_steps)  # validates the arguments
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode must be one of {self.metadata['render_modes']} or None, "
                              f"got {render_mode!r}")
        self.low, self.high, self.max_steps = low, high, max_steps
        self.render_mode = render_mode
        self._initial_seed = seed
        n = high - low + 1
        self.observation_space = spaces.Dict({
            "low": spaces.Discrete(n, start=low),
            "high": spaces.Discrete(n, start=low),
        })
        self.action_space = spaces.Discrete(n, start=low)
        self.env: NumberGuessEnv | None = None
        self._obs: dict[str, int] = {"low": low, "high": high}
        self._steps = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, int], dict[str, Any]]:
        super().reset(seed=self._take_seed(seed))
        if options:
            raise ConfigError(f"NumberGuess-v0 takes no reset options, got {sorted(options)}")
        # A fresh inner env per episode, seeded from np_random: same seed, same secret.
        inner_seed = int(self.np_random.integers(0, 2**63 - 1))
        self.env = NumberGuessEnv(seed=inner_seed, low=self.low, high=self.high,
                                  max_steps=self.max_steps)
        self._obs = dict(self.env.reset())
        self._steps = 0
        return dict(self._obs), {}

    def step(self, action: int) -> tuple[dict[str, int], SupportsFloat, bool, bool, dict[str, Any]]:
        if self.env is None:
            raise EnvStateError("Cannot call env.step() before env.reset(); call env.reset() first.")
        if isinstance(action, bool):
            raise ConfigError(f"an action is an int guess, got {action!r}")
        try:
            guess = operator.index(action)
        except TypeError:
            raise ConfigError(f"an action is an int guess, got {type(action).__name__} {action!r}") from None
        obs, reward, done, info = self.env.step(guess)
        self._steps += 1
        truncated = bool(info.get("truncated", False))
        terminated = bool(done) and not truncated
        if terminated and not obs:  # a hit: the range collapses to the secret
            obs = {"low": int(info["secret"]), "high": int(info["secret"])}
        self._obs = {"low": int(obs["low"]), "high": int(obs["high"])}
        return dict(self._obs), float(reward), terminated, truncated, _step_info(info)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return f"secret in [{self._obs['low']}, {self._obs['high']}] after {self._steps} guesses\n"


# -- the coding environments -------------------------------------------------------------------

if TYPE_CHECKING:  # for annotations only: importing the runner is not needed to adapt an env
    from agentenv.rollout.contract import Env

    class _NativeEnv(Env, Protocol):
        """What a coding adapter wraps: an env of the rollout contract that lists its tasks."""

        @property
        def tasks(self) -> Sequence[Task]: ...

    _Native = TypeVar("_Native", bound=_NativeEnv)


def _resolve_tasks(tasks: Sequence[Task] | str | None) -> list[Task] | None:
    if tasks is None:
        return None
    if isinstance(tasks, str):
        from agentenv.tasks import load_tasks

        return load_tasks(tasks)
    return list(tasks)


class _CodingAdapter(_SeedOnFirstReset, gymnasium.Env[dict[str, Any], str]):
    """What the two coding adapters share: task choice, text spaces, info and rendering."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012 - Gymnasium's class attribute
    _TEXT_FIELDS: tuple[str, ...] = ("prompt", "entry_point", "task_name")

    def _setup(self, env: _NativeEnv, *, seed: int | None, render_mode: str | None,
               max_text_length: int | None, max_action_length: int) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode must be one of {self.metadata['render_modes']} or None, "
                              f"got {render_mode!r}")
        self.env = env
        self.tasks: list[Task] = list(env.tasks)
        self.render_mode = render_mode
        self._initial_seed = seed
        longest = max(len(getattr(t, f)) for t in self.tasks for f in ("prompt", "entry_point", "name"))
        if max_text_length is None:
            max_text_length = max(DEFAULT_MAX_TEXT_LENGTH, longest)
        elif longest > max_text_length:
            raise ConfigError(f"a task has a text field of {longest} characters, more than "
                              f"max_text_length={max_text_length}; raise max_text_length")
        if not isinstance(max_action_length, int) or max_action_length < 1:
            raise ConfigError(f"max_action_length must be a positive int, got {max_action_length!r}")
        self.max_text_length = max_text_length
        self.action_space = UnicodeText(max_action_length, min_length=0)
        self._obs: dict[str, Any] | None = None
        self._last: dict[str, Any] | None = None

    def _text(self, min_length: int = 1) -> UnicodeText:
        return UnicodeText(self.max_text_length, min_length=min_length)

    def _choose(self, options: Mapping[str, Any] | None) -> int:
        options = dict(options or {})
        unknown = sorted(set(options) - {"task_index", "task_name"})
        if unknown:
            raise ConfigError(f"unknown reset option(s) {unknown}; known: 'task_index', 'task_name'")
        if "task_index" in options and "task_name" in options:
            raise ConfigError("pass either task_index or task_name in reset options, not both")
        if "task_name" in options:
            return select.index_of(self.tasks, options["task_name"])
        if "task_index" in options:
            return select.task_index(self.tasks, options["task_index"])
        return int(self.np_random.integers(len(self.tasks)))

    def _fits(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        for key, value in obs.items():
            if isinstance(value, str) and len(value) > self.max_text_length:
                raise ConfigError(f"observation field {key!r} has {len(value)} characters, more than "
                                  f"max_text_length={self.max_text_length}; pass a larger "
                                  "max_text_length to gymnasium.make")
        return dict(obs)

    def _task_info(self, task: Task) -> dict[str, Any]:
        return {"task_name": task.name, "difficulty": task.difficulty, "source": task.source,
                "tags": list(task.tags)}

    def _check_action(self, action: Any) -> str:
        if not isinstance(action, str):
            raise ConfigError(f"an action is the policy's raw text (a str), got {type(action).__name__}")
        return action

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self._obs is None:
            return None
        lines = [f"task {self._obs['task_name']}", self._obs.get("feedback") or self._obs["prompt"]]
        if self._last is not None:
            lines.append(f"passed {self._last.get('passed')}/{self._last.get('total')} "
                         f"({self._last.get('outcome')}), stop_reason={self._last.get('stop_reason')}")
        return "\n".join(str(line) for line in lines) + "\n"

    def close(self) -> None:
        closer = getattr(self.env, "close", None)
        if callable(closer):
            closer()
        super().close()


def _native_env(env_class: Callable[..., _Native], tasks: Sequence[Task] | str | None, seed: int | None,
                env_kwargs: dict[str, Any]) -> _Native:
    """Build the native env an adapter wraps, with ``tasks`` given as a list or a set name."""
    resolved = _resolve_tasks(tasks)
    if resolved is not None:
        env_kwargs = {**env_kwargs, "tasks": resolved}
    return env_class(seed=seed, **env_kwargs)


class CodingGymEnv(_CodingAdapter):
    """``CodingEnv`` as a Gymnasium env: one step per episode (a contextual bandit).

    Observation: ``{"prompt", "entry_point", "task_name"}``, all :class:`UnicodeText`; the
    observation after the step is the same task (the episode has ended). ``info["messages"]``
    at reset is the opening chat (system + task) to send to a chat model. Action: the policy's
    raw text. Every episode terminates after one step.
    """

    def __init__(self, tasks: Sequence[Task] | str | None = None, *, seed: int | None = None,
                 render_mode: str | None = None, max_text_length: int | None = None,
                 max_action_length: int = DEFAULT_MAX_ACTION_LENGTH, **env_kwargs: Any) -> None:
        from agentenv.envs.coding import CodingEnv

        self._setup(_native_env(CodingEnv, tasks, seed, env_kwargs), seed=seed,
                    render_mode=render_mode, max_text_length=max_text_length,
                    max_action_length=max_action_length)
        self.observation_space = spaces.Dict({f: self._text() for f in self._TEXT_FIELDS})

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=self._take_seed(seed))
        index = self._choose(options)
        native = self.env.reset(task_index=index)
        self._obs = self._fits({f: native[f] for f in self._TEXT_FIELDS})
        self._last = None
        info = self._task_info(self.tasks[index])
        if "messages" in native:  # the opening chat, as for the multi-turn env
            info["messages"] = _plain(native["messages"])
        return dict(self._obs), info

    def step(self, action: str) -> tuple[dict[str, Any], SupportsFloat, bool, bool, dict[str, Any]]:
        _, reward, done, info = self.env.step(self._check_action(action))
        self._last = _step_info(info)
        terminated = bool(info.get("terminated", done))
        truncated = bool(info.get("truncated", False))
        assert self._obs is not None
        return dict(self._obs), float(reward), terminated, truncated, _step_info(info)


class MultiTurnCodingGymEnv(_CodingAdapter):
    """``MultiTurnCodingEnv`` as a Gymnasium env: submit, read feedback, revise.

    Observation: ``{"prompt", "entry_point", "task_name", "feedback", "turn", "turns_left"}``
    with the native meanings: ``feedback`` is the latest feedback text ("" at reset), ``turn``
    the 1-based turn the observation asks for (after the end, the last turn played),
    ``turns_left`` the submissions still allowed. ``info["messages"]`` holds the whole
    conversation in OpenAI chat format, ready to send to a chat model, and ``info`` also carries
    ``tokens_used``/``tokens_left``, ``max_tokens`` (the reply's allowance under a token budget)
    and ``seed``. The step reward follows the native ``step_reward`` (by default the change in
    score, so the rewards sum to the final score); with ``feedback_from="visible"`` nothing in the
    observation or ``info`` depends on a hidden check. ``terminated``: all hidden checks passed; ``truncated``: out
    of turns or of token budget.
    """

    _COPIED: tuple[str, ...] = ("prompt", "entry_point", "task_name", "feedback", "turn", "turns_left")

    def __init__(self, tasks: Sequence[Task] | str | None = None, *, seed: int | None = None,
                 render_mode: str | None = None, max_text_length: int | None = None,
                 max_action_length: int = DEFAULT_MAX_ACTION_LENGTH, **env_kwargs: Any) -> None:
        from agentenv.envs.multiturn import MultiTurnCodingEnv

        env = _native_env(MultiTurnCodingEnv, tasks, seed, env_kwargs)
        self._setup(env, seed=seed, render_mode=render_mode, max_text_length=max_text_length,
                    max_action_length=max_action_length)
        self.max_turns = int(env.max_turns)
        self.observation_space = spaces.Dict({
            **{f: self._text() for f in self._TEXT_FIELDS},
            "feedback": self._text(min_length=0),
            "turn": spaces.Discrete(self.max_turns, start=1),
            "turns_left": spaces.Discrete(self.max_turns + 1),
        })

    def _observe(self, native: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        obs = self._fits({k: native[k] for k in self._COPIED})
        obs["turn"], obs["turns_left"] = int(obs["turn"]), int(obs["turns_left"])
        extra = {"messages": _plain(native["messages"]), "tokens_used": native.get("tokens_used"),
                 "tokens_left": native.get("tokens_left"), "max_tokens": native.get("max_tokens"),
                 "seed": native.get("seed")}
        return obs, extra

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=self._take_seed(seed))
        index = self._choose(options)
        self._obs, extra = self._observe(self.env.reset(task_index=index))
        self._last = None
        return dict(self._obs), {**self._task_info(self.tasks[index]), **extra}

    def step(self, action: str) -> tuple[dict[str, Any], SupportsFloat, bool, bool, dict[str, Any]]:
        native, reward, _, info = self.env.step(self._check_action(action))
        self._obs, extra = self._observe(native)
        out = {**_step_info(info), **extra}
        self._last = out
        return (dict(self._obs), float(reward), bool(info["terminated"]), bool(info["truncated"]),
                out)


ENV_IDS: dict[str, str] = {
    "agentenv/NumberGuess-v0": "agentenv.gym:NumberGuessGymEnv",
    "agentenv/Coding-v0": "agentenv.gym:CodingGymEnv",
    "agentenv/MultiTurnCoding-v0": "agentenv.gym:MultiTurnCodingGymEnv",
}


def register_envs() -> None:
    """Register agentenv's ids with Gymnasium (idempotent; importing this module does it)."""
    for env_id, entry_point in ENV_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry_point)


register_envs()
