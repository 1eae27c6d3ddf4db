"""A run directory on disk: ``config.json``, ``trajectories.jsonl`` and ``summary.json``.

``trajectories.jsonl`` is written incrementally, one finished episode per line, flushed as it
lands, so a crash loses at most the episodes in flight. Re-opening the same directory resumes:
the finished episode ids are read back and skipped. A torn last line (the process died while
writing it) is dropped; any other unreadable line is an error naming the file and line. A
resumed run must have the same settings, task set and template versions (``config.json`` is
checked; a run written before its identity held the templates' hashes is checked against the
``template_ids`` its episodes recorded): a template edited in between is refused, naming it,
rather than mixed into one run. A partial
episode (stopped by the infrastructure after a graded turn, see :mod:`agentenv.rollout.partial`)
is written as a line too; when it is continued, its finished record is appended and supersedes
it (:func:`latest_records`: per episode, the last finished record, else the last partial one).
When a run finishes, the file is put in plan order, one line per episode
(:meth:`RunStore.sort_episodes`), so two runs of the same settings give the same file whatever
order their episodes finished in and however often they were resumed. Every file is
created with the mode a plain ``open()`` gives (0666 less the umask), temporary ones included.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from agentenv.errors import ConfigError
from agentenv.log import get_logger
from agentenv.records import PARTIAL_STOP_REASONS, Trajectory

__all__ = ["CONFIG_FILE", "SUMMARY_FILE", "TRAJECTORIES_FILE", "RunStore", "latest_records", "read_trajectories",
           "replacing", "write_json_atomic"]

log = get_logger(__name__)

# The identity key that holds the templates' versions ({"feedback": "feedback@<hash>", ...}).
TEMPLATES_KEY = "template_ids"


def _template_changes(old: Any, new: Any) -> list[str]:
    """The templates whose version differs between two ``template_ids`` maps, as "name
    (old -> new)"."""
    old, new = dict(old or {}), dict(new or {})
    return [f"{name} ({old.get(name, '-')} -> {new.get(name, '-')})"
            for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]


def _templates_edited(run_dir: Path, edited: Sequence[str]) -> ConfigError:
    return ConfigError(
        f"{run_dir} was run with other templates: {', '.join(edited)}; resuming would mix template "
        "versions in one run. Restore the templates it was run with, or start a new --out")

TRAJECTORIES_FILE = "trajectories.jsonl"
SUMMARY_FILE = "summary.json"
CONFIG_FILE = "config.json"


def _temporary_file(path: Path) -> tuple[int, str]:
    """A new, empty temporary file next to ``path``: its descriptor and name. Unlike mkstemp's
    0600 it gets 0666 less the umask, like the rest of the run's files."""
    while True:
        name = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), name
        except FileExistsError:  # pragma: no cover - 48 random bits collided
            continue


@contextmanager
def replacing(path: Path) -> Iterator[str]:
    """The one way a whole file is written here: yields the name of an empty temporary file next
    to ``path`` (mode 0666 less the umask, as a plain ``open()`` gives), renamed onto ``path``
    when the block ends normally and removed when it raises, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _temporary_file(path)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to ``path`` via a temporary file and a rename (readers never see half a file)."""
    with replacing(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=False)
        fh.write("\n")


def _parse_lines(path: Path) -> tuple[list[Trajectory], int | None]:
    """Trajectories in ``path``, and the byte offset of a torn last line (None when intact)."""
    raw = path.read_bytes()
    out: list[Trajectory] = []
    offset = 0
    lines = raw.split(b"\n")
    for lineno, line in enumerate(lines, start=1):
        start = offset
        offset += len(line) + 1
        if not line.strip():
            continue
        is_last = lineno == len(lines) or all(not x.strip() for x in lines[lineno:])
        try:
            out.append(Trajectory.from_json(line))
        except (ValueError, TypeError, KeyError) as exc:
            if is_last and not raw.endswith(b"\n"):
                return out, start
            raise ConfigError(f"{path}:{lineno}: not a trajectory record ({type(exc).__name__}: "
                              f"{str(exc)[:120]}); fix or remove that line") from None
    return out, None


def _standing(keys: Sequence[tuple[str | None, bool]]) -> dict[str, int]:
    """Given (episode id, partial?) of each record in file order: the index of the record that
    stands for each episode, its last finished one, else (still to be continued) its last
    partial one. A finished record is never superseded by a partial one."""
    kept: dict[str, int] = {}
    for i, (episode_id, partial) in enumerate(keys):
        if episode_id is None or (partial and episode_id in kept and not keys[kept[episode_id]][1]):
            continue
        kept[episode_id] = i
    return kept


def latest_records(trajectories: Iterable[Trajectory]) -> list[Trajectory]:
    """One record per episode id (see :func:`_standing`), where the id first appears; records
    without an id are all kept, in place."""
    items = list(trajectories)
    keys = [(t.episode_id, t.partial) for t in items]
    kept = _standing(keys)
    first: dict[str, int] = {}
    for i, (episode_id, _) in enumerate(keys):
        if episode_id is not None:
            first.setdefault(episode_id, i)
    return [items[i] if episode_id is None else items[kept[episode_id]]
            for i, (episode_id, _) in enumerate(keys) if episode_id is None or first[episode_id] == i]


def read_trajectories(path: str | Path, *, partial: bool = False) -> list[Trajectory]:
    """The episodes in a ``trajectories.jsonl`` file (or in a run directory), one record per
    episode (:func:`latest_records`); episodes still partial only with ``partial=True``."""
    p = Path(path)
    if p.is_dir():
        p = p / TRAJECTORIES_FILE
    if not p.is_file():
        raise ConfigError(f"no trajectories at {p}; pass a run directory written by `agentenv run`")
    trajectories, _torn = _parse_lines(p)
    return [t for t in latest_records(trajectories) if partial or not t.partial]


class RunStore:
    """The files of one run directory, opened for writing (and resuming)."""

    def __init__(self, out_dir: str | Path) -> None:
        self.dir = Path(out_dir)
        self.trajectories_path = self.dir / TRAJECTORIES_FILE
        self.summary_path = self.dir / SUMMARY_FILE
        self.config_path = self.dir / CONFIG_FILE
        self._fh: IO[str] | None = None

    def open(self, config: Mapping[str, Any], identity: Mapping[str, Any]) -> list[Trajectory]:
        """Create or resume the run; returns the records already written, every line (partial
        ones and those they were superseded by included: see :func:`latest_records`).

        ``config`` is written to ``config.json``; ``identity`` (the settings that define the
        episodes) must equal the stored one when resuming, else ConfigError.
        """
        if self.dir.exists() and not self.dir.is_dir():
            raise ConfigError(f"--out {self.dir} exists and is not a directory")
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.config_path.is_file():
            try:
                stored = json.loads(self.config_path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise ConfigError(f"{self.config_path} is not valid JSON ({exc}); remove it or use a "
                                  "new --out") from None
            old = dict(stored.get("identity", {}))
            if TEMPLATES_KEY in identity and TEMPLATES_KEY not in old:
                old[TEMPLATES_KEY] = identity[TEMPLATES_KEY]  # written before: its records say
            changed = sorted(k for k in set(old) | set(identity) if old.get(k) != identity.get(k))
            edited = _template_changes(old.get(TEMPLATES_KEY), identity.get(TEMPLATES_KEY)) \
                if TEMPLATES_KEY in changed else None
            changed = [k for k in changed if k != TEMPLATES_KEY]
            if changed:
                diffs = ", ".join(f"{k}: {old.get(k)!r} -> {identity.get(k)!r}" for k in changed)
                raise ConfigError(f"{self.dir} holds a run with other settings ({diffs}); resume it "
                                  "with the same settings or choose a new --out")
            if edited:
                raise _templates_edited(self.dir, edited)
        done: list[Trajectory] = []
        if self.trajectories_path.is_file():
            done, torn = _parse_lines(self.trajectories_path)
            if torn is not None:
                log.warning("dropping_torn_line", path=str(self.trajectories_path), offset=torn)
                with self.trajectories_path.open("r+b") as fh:
                    fh.truncate(torn)
            elif self.trajectories_path.stat().st_size and \
                    not self.trajectories_path.read_bytes().endswith(b"\n"):
                with self.trajectories_path.open("a", encoding="utf-8") as fh:
                    fh.write("\n")  # the next record must start on its own line
        if TEMPLATES_KEY in identity:
            current = dict(identity[TEMPLATES_KEY])
            for record in done:  # the templates each episode names (single-step: no feedback)
                edited = _template_changes(record.template_ids,
                                           {k: current.get(k) for k in record.template_ids})
                if edited:
                    raise _templates_edited(self.dir, edited)
        write_json_atomic(self.config_path, {**config, "identity": dict(identity)})
        self._fh = self.trajectories_path.open("a", encoding="utf-8")
        return done

    def append(self, trajectory: Trajectory) -> None:
        """Write one episode (finished, or partial) as one line, flushed to the OS at once."""
        if self._fh is None:
            raise RuntimeError("RunStore.open() must be called before append()")
        self._fh.write(trajectory.to_json().decode("utf-8") + "\n")  # any candidate string fits
        self._fh.flush()

    def sort_episodes(self, order: Mapping[str, int]) -> None:
        """Put the lines of ``trajectories.jsonl`` in plan order (``order`` maps an episode id to
        its rank; lines it does not rank keep their order, after the ranked ones), one line per
        episode: a partial record its finished one supersedes is dropped, as is an older
        partial one (see :func:`latest_records`). Atomic, and a no-op when the file is in order
        already. Call it once the run's writes are over."""
        path = self.trajectories_path
        if not path.is_file():
            return
        lines = [line for line in path.read_bytes().split(b"\n") if line.strip()]
        keys: list[tuple[str | None, bool]] = []
        for line in lines:
            try:
                data = json.loads(line)
                episode_id = data.get("episode_id")
                keys.append((episode_id if isinstance(episode_id, str) else None,
                             data.get("stop_reason") in PARTIAL_STOP_REASONS))
            except (ValueError, AttributeError):
                keys.append((None, False))
        kept = _standing(keys)
        survivors = [(i, line) for i, line in enumerate(lines)
                     if (episode_id := keys[i][0]) is None or kept[episode_id] == i]

        def rank(item: tuple[int, bytes]) -> tuple[int, int]:
            episode_id = keys[item[0]][0]
            return (order.get(episode_id, len(order)) if episode_id is not None else len(order), item[0])

        ordered = [line for _, line in sorted(survivors, key=rank)]
        if ordered == lines:
            return
        with replacing(path) as tmp, open(tmp, "wb") as fh:
            fh.write(b"".join(line + b"\n" for line in ordered))

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        write_json_atomic(self.summary_path, dict(summary))

    def close(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            fh.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def ids_of(trajectories: Iterable[Trajectory]) -> set[str]:
    """The episode ids of finished trajectories."""
    return {t.episode_id for t in trajectories if t.episode_id is not None}
