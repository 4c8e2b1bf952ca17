"""Where each stage keeps its output inside a workdir, and the run settings that bind them.

    <workdir>/run.json                     settings fixed at the first run (model, template, sampling)
    <workdir>/prepared/<CFG>.parquet       PromptRecords (prepare)
    <workdir>/prepared/<CFG>.rejects.jsonl source rows rejected at prepare, with reasons
    <workdir>/prepared/<CFG>.json          prepare counts and fingerprint
    <workdir>/generations.sqlite           the generation checkpoint (generate; store/checkpoint.py)
    <workdir>/generations.shard-I-of-N.sqlite  the checkpoint of `generate --shard I/N`
    <workdir>/validated/<CFG>.parquet      light columns per row: verdict, lengths, issues (validate)
    <workdir>/validated/<CFG>.json         validation counts
    <workdir>/dataset/                     the Hub-layout tree, the only copy of the token rows (emit)
    <workdir>/score.sqlite                 the score checkpoint (score; store/scores.py)
    <workdir>/score.json                   the score report (score)
    <workdir>/slurm/                       `kimi-data slurm submit`: job scripts, logs, shard markers (executors/slurm)
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from kimi_eagle_data.diskfull import is_disk_full, writing
from kimi_eagle_data.errors import KimiDataError, MissingInputError
from kimi_eagle_data.json_text import JsonTextError, parse_json
from kimi_eagle_data.run_checks import check_config_name
from kimi_eagle_data.store.swap import recover_dataset


_UMASK = os.umask(0)
os.umask(_UMASK)


class SettingsMismatchError(KimiDataError, RuntimeError):
    pass


class WorkdirError(KimiDataError, OSError):
    """A workdir that cannot be made (a read-only or missing parent, /proc): one line naming it."""


class DamagedFileError(KimiDataError, ValueError):
    """A workdir's JSON file that does not parse (edited by hand, or damaged): one line naming it."""


# What to do about a damaged run.json: the settings are in no other file, but a run started again with the same
# options binds the same ones (the checkpoint is keyed by sample id, so nothing generated is lost).
_RUN_JSON_REMEDY = ("restore it, or move it aside and rerun `kimi-data build` there with the options the run was "
                    "started with")


@dataclass(frozen=True)
class Workdir:
    root: Path
    # Where this view's dataset is: emit writes the new one beside the old (store/swap.py), then swaps them.
    dataset_root: Path | None = None

    @classmethod
    def at(cls, path: str | os.PathLike) -> "Workdir":
        root = Path(path).resolve()
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            if is_disk_full(e):
                raise
            raise WorkdirError(f"cannot make the workdir {root} ({e.strerror or e}); pass a --workdir in a folder you "
                               "can write") from None
        return cls(root)

    @property
    def settings_path(self) -> Path:
        return self.root / "run.json"

    def prepared(self, config: str) -> Path:
        return self.root / "prepared" / f"{check_config_name(config)}.parquet"

    def prepare_rejects(self, config: str) -> Path:
        return self.root / "prepared" / f"{check_config_name(config)}.rejects.jsonl"

    def prepare_report(self, config: str) -> Path:
        return self.root / "prepared" / f"{check_config_name(config)}.json"

    @property
    def checkpoint(self) -> Path:
        return self.root / "generations.sqlite"

    def shard_checkpoint(self, shard: tuple[int, int] | None) -> Path:
        """One checkpoint file per shard (`--shard i/N`), so nodes sharing one workdir never write the same
        SQLite file; the main one without a shard."""
        return self.checkpoint if shard is None else self.root / f"generations.shard-{shard[0]}-of-{shard[1]}.sqlite"

    def validated(self, config: str) -> Path:
        return self.root / "validated" / f"{check_config_name(config)}.parquet"

    def validate_report(self, config: str) -> Path:
        return self.root / "validated" / f"{check_config_name(config)}.json"

    @property
    def dataset(self) -> Path:
        return self.dataset_root or self.root / "dataset"

    @property
    def slurm(self) -> Path:
        """The Slurm executor's folder (executors/slurm/layout.py says what it holds)."""
        return self.root / "slurm"

    @property
    def score_checkpoint(self) -> Path:
        return self.root / "score.sqlite"

    @property
    def score_report(self) -> Path:
        return self.root / "score.json"

    def checkpoint_paths(self) -> list[Path]:
        """Every checkpoint file of the workdir: the main one and one per shard (`--shard i/N`)."""
        return sorted(self.root.glob("generations*.sqlite"))

    def remove_stale_temp_files(self) -> int:
        """Hidden temp files (`.NAME.*.tmp`, emit's `.SPLIT-NNNNN.parquet.tmp`) a killed process left behind; only
        for the workdir's one writer, which knows that no write is under way."""
        recover_dataset(self.root)    # a stopped emit's new dataset, or the old one it had moved aside
        stale = [p for p in self.root.rglob(".*.tmp") if p.is_file()]
        for p in stale:
            p.unlink(missing_ok=True)
        return len(stale)

    def validated_configs(self) -> list[str]:
        d = self.root / "validated"
        return sorted(p.stem for p in d.glob("*.parquet")) if d.exists() else []

    @property
    def has_validated(self) -> bool:
        return (self.root / "validated").is_dir()

    def prepared_configs(self) -> list[str]:
        d = self.root / "prepared"
        return sorted(p.stem for p in d.glob("*.parquet")) if d.exists() else []

    # -- run settings -------------------------------------------------------------------------
    def bind_settings(self, settings: dict[str, Any], *, binding_keys: tuple[str, ...],
                      code_keys: tuple[str, ...] = ()) -> dict[str, Any]:
        """Record settings at the first run; later runs must agree on the keys that change data.

        A workdir's checkpoint is keyed by sample id, so resuming it with another model, template
        or sampling would mix two runs' completions in one dataset: refuse instead. `code_keys`: binding keys that
        hash code rather than record a setting (no option gives the old value back).
        """
        if self.settings_path.exists():
            old = self.settings()
            diffs = [k for k in binding_keys if old.get(k) != settings.get(k)]
            if diffs:
                shown = "; ".join(_change(k, old.get(k), settings.get(k)) for k in diffs)
                if set(diffs) <= set(code_keys):
                    raise SettingsMismatchError(
                        f"{self.root} was started under other rendering code ({shown}); use a new --workdir, or "
                        "resume it with the install that started it")
                raise SettingsMismatchError(
                    f"{self.root} was started with other settings ({shown}); use a new --workdir, "
                    "or pass the original settings to resume")
            merged = {**old, **{k: v for k, v in settings.items() if k not in binding_keys}}
            if merged == old:     # nothing new: no write (shards share the file while they run)
                return old
        else:
            merged = settings
        write_json(self.settings_path, merged)
        # Hand back what the file holds (sorted keys), so a first run and a resumed run render the
        # same card and manifest byte for byte.
        return self.settings()

    def settings(self) -> dict[str, Any]:
        if not self.settings_path.exists():
            there = "has no run.json" if self.root.is_dir() else "does not exist"
            raise MissingInputError(f"no run in {self.root} (it {there}): start one there with `kimi-data build` (or "
                                    "`prepare`), or pass the --workdir of an existing run")
        return read_json_object(self.settings_path, remedy=_RUN_JSON_REMEDY)


def _change(key: str, was: Any, now: Any) -> str:
    """One bound setting's change; of a table (a module's hash, a partition's plan), only the entries that
    changed."""
    if isinstance(was, dict) and isinstance(now, dict) or (was is None and isinstance(now, dict)):
        was = was or {}
        return "; ".join(f"{key}[{k!r}]: {was.get(k)!r} -> {now.get(k)!r}"
                         for k in sorted(set(was) | set(now), key=str) if was.get(k) != now.get(k))
    return f"{key}: {was!r} -> {now!r}"


def read_json(path: Path, remedy: str = "restore it, or move it aside and rerun the command that writes it") -> Any:
    """A JSON file of the workdir; one that does not parse is DamagedFileError naming it and saying what to do."""
    path = Path(path)
    try:
        return parse_json(path.read_bytes())
    except JsonTextError as e:
        raise DamagedFileError(f"{path} is damaged: {e}; {remedy}") from None


def read_json_object(path: Path, remedy: str = "restore it, or move it aside and rerun the command that writes it"
                     ) -> dict[str, Any]:
    """read_json for a file that holds one JSON object (a list or a number there is damage too)."""
    obj = read_json(path, remedy)
    if not isinstance(obj, dict):
        raise DamagedFileError(f"{path} is damaged: it holds a JSON {type(obj).__name__}, not an object; {remedy}")
    return obj


def write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")


@contextmanager
def atomic_path(path: Path):
    """Yield a temp path beside `path`; on success it replaces `path` in one rename."""
    path = Path(path)
    tmp = None
    try:
        with writing(path):   # a full disk: one line naming `path`, and no temp file left
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            os.close(fd)
            yield Path(tmp)
            move_into_place(Path(tmp), path)
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def move_into_place(tmp: Path, path: Path) -> None:
    """A finished temp file becomes `path` in one rename, with the usual permissions (mkstemp makes 0600)."""
    os.chmod(tmp, 0o666 & ~_UMASK)
    os.replace(tmp, path)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# -- the Hub-layout tree (a workdir's dataset/ or a downloaded repo) -------------------------------

def dataset_data_dir(dataset_root: Path) -> Path:
    return Path(dataset_root) / "data"


def dataset_config_dir(dataset_root: Path, config: str) -> Path:
    """`data/<CONFIG>/`: the Parquet shards of one config, named `<split>-NNNNN-of-NNNNN.parquet`."""
    return dataset_data_dir(dataset_root) / check_config_name(config)


def dataset_shards(dataset_root: Path, config: str, split: str | None = None) -> list[Path]:
    return sorted(dataset_config_dir(dataset_root, config).glob(f"{split or '*'}-*.parquet"))


def dataset_configs(dataset_root: Path) -> list[str]:
    d = dataset_data_dir(dataset_root)
    return sorted(p.name for p in d.iterdir() if p.is_dir()) if d.is_dir() else []
