"""Where a loader's raw rows come from: a local copy on disk, or the Hugging Face Hub.

Every benchmark loader resolves its rows the same way, in this order:

1. ``path=`` given to the loader (a file, or a directory of files);
2. an environment variable naming a local copy (``AGENTENV_MBPP_PATH``, ...);
3. the Hub, through the ``hf`` extra (:func:`agentenv.errors.install_hint`).

Local files may be JSON Lines (``.jsonl``, optionally ``.gz``), JSON (a list of records, or an
object holding one), or Parquet (needs ``pyarrow``, which the ``hf`` extra brings). A directory
is read file by file in name order; a directory written by ``datasets``' ``save_to_disk`` is
read with ``datasets.load_from_disk``.

The Hub path never hangs: before downloading, a short connection probe (a few seconds, in a
daemon thread so slow DNS cannot block it) checks that the Hub endpoint answers; when it does
not, :class:`~agentenv.errors.DatasetUnavailable` says how to supply a local copy instead. With
``HF_HUB_OFFLINE=1`` (or ``HF_DATASETS_OFFLINE=1``) the probe is skipped and only the local
Hugging Face cache is used. What this module leaves out: mapping rows to tasks (each loader
does that) and any caching of its own (``datasets`` and ``huggingface_hub`` cache downloads).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentenv import settings
from agentenv.errors import DatasetUnavailable, TaskFormatError, install_hint
from agentenv.log import get_logger

__all__ = [
    "DEFAULT_ENDPOINT",
    "PROBE_TIMEOUT",
    "Row",
    "download_hub_files",
    "hub_offline",
    "hub_reachable",
    "load_hub_rows",
    "local_copy_hint",
    "local_source",
    "read_rows",
]

log = get_logger(__name__)

DEFAULT_ENDPOINT = "https://huggingface.co"
PROBE_TIMEOUT = 3.0
_ROW_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".parquet")


@dataclass(frozen=True)
class Row:
    """One raw record and where it came from (for error messages: file and line or index)."""

    data: Mapping[str, Any]
    origin: str
    position: int
    unit: str = "record"  # "line" for JSON Lines (1-based), else "record" (0-based index)

    @property
    def where(self) -> str:
        """Where the row sits, for error messages: ``FILE line N`` or ``FILE record N``."""
        return f"{self.origin} {self.unit} {self.position}"


# ---------------------------------------------------------------- local copies


def local_copy_hint(name: str, placeholder: str = "FILE_OR_DIR") -> str:
    """How to point a loader at a local copy, in both spellings: the command line's and Python's."""
    return (f"`--data {placeholder}` on the command line, or load_tasks({name!r}, "
            f"path={placeholder!r}) in Python")


def local_source(path: str | os.PathLike[str] | None, env_var: str | None) -> Path | None:
    """The local copy to read: ``path`` if given, else the file named by ``env_var``, else None.

    A path that does not exist raises DatasetUnavailable naming where it came from.
    """
    origin = "--data / path="
    chosen: str | os.PathLike[str] | None = path
    if chosen is None and env_var:
        chosen = settings.dataset_path(env_var)
        origin = f"${env_var}"
    if chosen is None:
        return None
    resolved = Path(chosen).expanduser()
    if not resolved.exists():
        raise DatasetUnavailable(
            f"{origin} points at {str(resolved)!r}, which does not exist; give the path of a "
            f"local copy (a .jsonl/.json/.parquet file or a directory of them)."
        )
    return resolved


def read_rows(path: str | os.PathLike[str], *, files: Sequence[str] | None = None) -> Iterator[Row]:
    """Yield every record of a local copy, streaming JSON Lines one line at a time.

    ``files`` restricts a directory to those file names (in that order). Malformed content
    raises TaskFormatError naming the file and line.
    """
    root = Path(path).expanduser()
    if root.is_dir():
        if (root / "dataset_info.json").exists() or (root / "state.json").exists():
            yield from _read_saved_dataset(root)
            return
        if files is not None:
            chosen = [root / name for name in files]
            missing = [str(p) for p in chosen if not p.exists()]
            if missing:
                raise DatasetUnavailable(f"the local copy in {root} lacks {missing}; download them "
                                         f"or point at a directory that has them.")
        else:
            chosen = sorted(p for p in root.iterdir()
                            if p.is_file() and p.name.lower().endswith(_ROW_SUFFIXES))
            if not chosen:
                raise DatasetUnavailable(f"{root} holds no .jsonl, .json or .parquet files; "
                                         f"point at the dataset file itself or at its folder.")
        for file in chosen:
            yield from _read_file(file)
        return
    yield from _read_file(root)


def _read_file(path: Path) -> Iterator[Row]:
    name = path.name.lower()
    if name.endswith(".parquet"):
        yield from _read_parquet(path)
        return
    opener = gzip.open if name.endswith(".gz") else open
    stem = name[:-3] if name.endswith(".gz") else name
    if stem.endswith(".json"):
        with opener(path, "rt", encoding="utf-8") as handle:
            try:
                data = json.load(handle)
            except json.JSONDecodeError as exc:
                raise TaskFormatError(f"is not valid JSON ({exc}); a .json file must hold a list "
                                      f"of records or an object with one", path=str(path)) from None
        for i, record in enumerate(_records_of(data, path)):
            yield Row(record, str(path), i)
        return
    # JSON Lines (the default for .jsonl and anything else).
    with opener(path, "rt", encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TaskFormatError(f"line {lineno} is not valid JSON ({exc.msg} at column "
                                      f"{exc.colno}); fix or remove that line", path=str(path)) from None
            if not isinstance(record, Mapping):
                raise TaskFormatError(f"line {lineno} holds a {type(record).__name__}, not a JSON "
                                      f"object; each line must be one record", path=str(path))
            yield Row(record, str(path), lineno, unit="line")


def _records_of(data: Any, path: Path) -> list[Mapping[str, Any]]:
    """The records of a parsed .json file: a list, an object holding one list, or one record."""
    if isinstance(data, Mapping):
        lists = [v for k, v in data.items() if k in ("tasks", "data", "rows", "problems", "test")
                 and isinstance(v, list)]
        data = lists[0] if len(lists) == 1 else [data]
    if not isinstance(data, list) or not all(isinstance(r, Mapping) for r in data):
        raise TaskFormatError("must hold a list of JSON objects (records), or an object with a "
                              "'tasks'/'data'/'rows' list", path=str(path))
    return data


def _read_parquet(path: Path) -> Iterator[Row]:
    if importlib.util.find_spec("pyarrow") is None:
        raise DatasetUnavailable(f"reading {path} needs pyarrow: {install_hint('hf')}; or "
                                 f"convert the file to JSON Lines.")
    import pyarrow.parquet as pq

    position = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=256):
        for record in batch.to_pylist():
            yield Row(record, str(path), position)
            position += 1


def _read_saved_dataset(root: Path) -> Iterator[Row]:
    if importlib.util.find_spec("datasets") is None:
        raise DatasetUnavailable(f"{root} was written by datasets.save_to_disk; reading it needs "
                                 f"the hf extra: {install_hint('hf')}.")
    import datasets

    loaded = datasets.load_from_disk(str(root))
    splits = loaded.values() if isinstance(loaded, datasets.DatasetDict) else [loaded]
    position = 0
    for split in splits:
        for record in split:
            yield Row(record, str(root), position)
            position += 1


# ---------------------------------------------------------------- the Hub


def hub_offline() -> bool:
    """True when the user asked Hugging Face libraries to stay offline (use the cache only)."""
    return settings.hub_offline()


def _probe_target() -> tuple[str, int]:
    """Host and port a download would connect to first: the HTTPS proxy if set, else the Hub."""
    url = settings.https_proxy() or settings.hf_endpoint() or DEFAULT_ENDPOINT
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname or "", port


def hub_reachable(timeout: float = PROBE_TIMEOUT) -> bool:
    """Whether a TCP connection to the Hub endpoint (or the HTTPS proxy) opens within ``timeout``.

    The probe runs in a daemon thread so that a resolver which never answers cannot block the
    caller past ``timeout``.
    """
    host, port = _probe_target()
    if not host:
        return False
    outcome: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                outcome.append(True)
        except OSError:
            outcome.append(False)

    thread = threading.Thread(target=probe, name="agentenv-hub-probe", daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    return bool(outcome and outcome[0])


def _unavailable(what: str, how_local: str, reason: str) -> DatasetUnavailable:
    return DatasetUnavailable(
        f"cannot load {what}: {reason.rstrip('. ')}. Supply a local copy instead: {how_local}. "
        f"If you downloaded it with Hugging Face tools before, set HF_HUB_OFFLINE=1 to use "
        f"that cache."
    )


def _require_hub(what: str, how_local: str, *, needs: str) -> None:
    """Fail fast, with directions, when the Hub cannot be used from here."""
    if importlib.util.find_spec(needs) is None:
        raise DatasetUnavailable(
            f"cannot load {what}: downloading from the Hugging Face Hub needs the hf extra "
            f"({install_hint('hf')}). Or supply a local copy: {how_local}."
        )
    if hub_offline():
        return
    if not hub_reachable():
        host, port = _probe_target()
        raise _unavailable(what, how_local, f"the Hugging Face Hub is not reachable from here "
                                            f"({host}:{port} did not answer within {PROBE_TIMEOUT:g} s)")


def load_hub_rows(dataset_id: str, *, what: str, how_local: str, config: str | None = None,
                  splits: Sequence[str] | None = None, revision: str | None = None) -> Iterator[Row]:
    """Yield the rows of a Hub dataset through ``datasets.load_dataset``, split after split.

    ``splits=None`` reads every split of the dataset in the order the Hub lists them.
    """
    _require_hub(what, how_local, needs="datasets")
    import datasets

    log.info("dataset_download", dataset=dataset_id, config=config, splits=splits)
    try:
        loaded = datasets.load_dataset(dataset_id, config, revision=revision)
    except Exception as exc:  # network, auth, missing config: all mean "not available here"
        raise _unavailable(what, how_local, f"datasets.load_dataset({dataset_id!r}) failed with "
                                            f"{type(exc).__name__}: {exc}") from exc
    names = list(splits) if splits is not None else list(loaded)
    unknown = [s for s in names if s not in loaded]
    if unknown:
        raise DatasetUnavailable(f"{dataset_id} has no split(s) {unknown}; its splits are "
                                 f"{sorted(loaded)}.")
    for split in names:
        origin = f"hf://datasets/{dataset_id}[{split}]"
        for position, record in enumerate(loaded[split]):
            yield Row(record, origin, position)


def download_hub_files(repo_id: str, filenames: Sequence[str] | Callable[[list[str]], list[str]], *,
                       what: str, how_local: str, revision: str | None = None) -> list[Path]:
    """Download raw files of a Hub dataset repository (cached) and return their local paths.

    ``filenames`` is a list of file names, or a function choosing them from the repository's
    file list. Used for datasets published as plain JSON Lines next to a loading script
    (LiveCodeBench, APPS): reading the files directly streams them line by line and needs no
    script.
    """
    _require_hub(what, how_local, needs="huggingface_hub")
    from huggingface_hub import HfApi, hf_hub_download

    if callable(filenames):
        try:
            listing = HfApi().list_repo_files(repo_id, repo_type="dataset", revision=revision)
        except Exception as exc:
            raise _unavailable(what, how_local, f"listing the files of {repo_id} failed with "
                                                f"{type(exc).__name__}: {exc}") from exc
        filenames = filenames(sorted(listing))
        if not filenames:
            raise DatasetUnavailable(f"{repo_id} holds none of the files {what} needs; "
                                     f"supply a local copy instead: {how_local}.")
    paths: list[Path] = []
    for filename in filenames:
        log.info("dataset_download", repo=repo_id, file=filename)
        try:
            local = hf_hub_download(repo_id, filename, repo_type="dataset", revision=revision,
                                    local_files_only=hub_offline())
        except Exception as exc:
            raise _unavailable(what, how_local, f"downloading {filename} from {repo_id} failed "
                                                f"with {type(exc).__name__}: {exc}") from exc
        paths.append(Path(local))
    return paths
