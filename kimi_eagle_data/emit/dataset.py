"""An emitted dataset as read from disk (`load_local`): its manifest, its files and their hashes, checked against
the tree and the card. What `check`, `push` and `export` read; nothing here writes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.store.workdir import dataset_config_dir, file_sha256
from kimi_eagle_data.emit.manifest import CARD, card_mismatch

MANIFEST = "manifest.json"


class DatasetError(KimiDataError, RuntimeError):
    """An emitted dataset that is not whole or not its manifest's; printed as one line."""


@dataclass
class LocalDataset:
    root: Path
    manifest: dict[str, Any]
    files: dict[str, str]          # path in repo -> sha256 (manifest.json excluded)

    @property
    def version(self) -> str:
        return self.manifest["version"]

    @property
    def tag(self) -> str:
        return f"v{self.version}"

    @property
    def workdir_hint(self) -> str:
        """The workdir to name in hints (WORKDIR when the tree does not sit in one)."""
        parent = self.root.parent
        return str(parent) if self.root.name == "dataset" and (parent / "run.json").is_file() else "WORKDIR"

    @property
    def configs(self) -> list[str]:
        return list(self.manifest.get("configs", {}))

    @property
    def first_config(self) -> str:
        return "B4" if "B4" in self.configs else (self.configs[0] if self.configs else "default")

    def total_bytes(self) -> int:
        return sum((self.root / p).stat().st_size for p in [*self.files, MANIFEST])

    def judged_with(self) -> tuple[str, int, bool]:
        """(profile, max_seq_len, keep_truncated): the settings its rows were validated with (the provenance)."""
        try:
            p = self.manifest["provenance"]
            return str(p["profile"]), int(p["max_seq_len"]), bool(p["keep_truncated"])
        except (KeyError, TypeError, ValueError) as e:
            raise DatasetError(f"{self.root / MANIFEST}: no provenance {e} (emitted by an older kimi-data?); re-run "
                               "`kimi-data emit`") from None

    def shards(self) -> list[Path]:
        """Every Parquet shard the manifest lists, config by config; DatasetError for one the folder lacks."""
        try:
            files = [dataset_config_dir(self.root, config) / name for config, entry in self.manifest["configs"].items()
                     for info in entry["splits"].values() for name in info["files"]]
        except (KeyError, TypeError, AttributeError) as e:
            raise DatasetError(f"{self.root / MANIFEST}: its configs do not list their splits' files ({e}); re-run "
                               "`kimi-data emit`") from None
        missing = [f for f in files if not f.is_file()]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise DatasetError(f"{missing[0]} is missing{more}: {MANIFEST} lists it; re-run `kimi-data emit`")
        return files

    def rows(self) -> int:
        return sum(int(info.get("rows", 0)) for entry in self.manifest["configs"].values()
                   for info in entry["splits"].values())


def has_dataset(path: str | os.PathLike) -> bool:
    """`path` is an emitted dataset, or the workdir of one (it or its dataset/ holds manifest.json)."""
    return any((p / MANIFEST).is_file() for p in (Path(path), Path(path) / "dataset"))


def dataset_dir(path: str | os.PathLike) -> Path:
    """DIR may be a workdir or its `dataset/` tree."""
    p = Path(path)
    for cand in (p, p / "dataset"):
        if (cand / MANIFEST).is_file():
            return cand
    raise DatasetError(f"{p} has no {MANIFEST} (nor {p / 'dataset' / MANIFEST}); "
                       f"run `kimi-data emit --workdir WORKDIR` first and pass the workdir or its dataset/")


def _is_hidden(rel: Path) -> bool:
    return any(part.startswith(".") for part in rel.parts)


def load_local(path: str | os.PathLike, *, verify: bool = True) -> LocalDataset:
    """Read the manifest and (by default) check the tree against it: same files, same sha256."""
    root = dataset_dir(path)
    try:
        manifest = orjson.loads((root / MANIFEST).read_bytes())
    except orjson.JSONDecodeError as e:
        raise DatasetError(f"{root / MANIFEST} is not valid JSON ({e}); re-run `kimi-data emit`") from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not isinstance(manifest.get("version"), str):
        raise DatasetError(f"{root / MANIFEST} is not a kimi-data manifest (no version/files); re-run `kimi-data emit`")
    ds = LocalDataset(root=root, manifest=manifest, files=dict(files))
    if verify:
        problems: list[str] = []
        for rel, sha in sorted(files.items()):
            f = root / rel
            if not f.is_file():
                problems.append(f"{f} is missing")
            elif file_sha256(f) != sha:
                problems.append(f"{f} does not match its sha256 in {MANIFEST}")
        listed = set(files) | {MANIFEST}
        for f in sorted(root.rglob("*")):
            rel = f.relative_to(root)
            if f.is_file() and not _is_hidden(rel) and rel.as_posix() not in listed:
                problems.append(f"{f} is not listed in {MANIFEST}")
        if problems:
            extra = len(problems) - 1
            more = f" (and {extra} more problem{'s' if extra > 1 else ''})" if extra else ""
            raise DatasetError(f"{problems[0]}{more}: the tree changed after emit; re-run `kimi-data emit` "
                               "(or restore the files) before pushing")
        check_manifest_against_card(ds)
    return ds


def check_manifest_against_card(ds: LocalDataset) -> None:
    """The manifest is not covered by its own hashes: the card records its hash (emit/manifest.py)."""
    card = ds.root / CARD
    if CARD not in ds.files:
        raise DatasetError(f"{ds.root / MANIFEST} lists no {CARD} (the dataset card); re-run `kimi-data emit "
                           f"--workdir {ds.workdir_hint}` before pushing")
    differs = card_mismatch(ds.manifest, card.read_text(encoding="utf-8", errors="replace"))
    if differs:
        version = ds.manifest.get("version")
        raise DatasetError(f"{ds.root / MANIFEST} does not match the card it was emitted with: {differs}; it was edited "
                           f"after emit: re-run `kimi-data emit --workdir {ds.workdir_hint} --dataset-version {version}` "
                           f"(or restore {MANIFEST}) before pushing")
