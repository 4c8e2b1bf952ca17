"""Publish an emitted dataset: `kimi-data push` (docs/reliability.md); the tree is read from disk by
emit/dataset.py (`load_local`).

The tree is checked against its `manifest.json` (every file's sha256, no file the manifest does not
list) and the manifest against the card (which records the manifest's sha256: emit/manifest.py), the repo
is created when missing, and then:
  * tag `v<version>` exists on the Hub: its `manifest.json` is compared with the local one. The same
    content -> "already published" (exit 0); other content -> refused: a published version is
    immutable, bump `--dataset-version` and re-emit;
  * otherwise the tree is uploaded in one commit (`HfApi.upload_folder`; remote files the tree no
    longer has are deleted in the same commit, so an old shard cannot leak into the new version's
    `data/<CFG>/train-*.parquet` glob) and tag `v<version>` is created on that commit.
The card is part of the hashed content, so push never rewrites it: `kimi-data emit --repo ORG/NAME`
renders the card's load line with the repo id (and records it in the manifest); push only notes when
the card names another repo or none.

The token comes from the variable `--token-env` names (which must be set: no fallback to another
token), else from huggingface_hub (`HF_TOKEN`, stored login). It is handed to `HfApi` only and scrubbed
from every message we print: no token in output, logs, files or exceptions.
"""

from __future__ import annotations

import glob
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from kimi_eagle_data.emit.dataset import MANIFEST, DatasetError, load_local
from kimi_eagle_data.emit.stale import marked_stale
from kimi_eagle_data.run_checks import REPO_ID
from kimi_eagle_data.emit.manifest import CARD



class PublishError(DatasetError):
    """A failure the user can fix; printed as one line."""


def tree_summary(paths) -> str:
    """"26 files (16 Parquet shards, 9 plots, the card README.md, manifest.json)": what emit and push count,
    the manifest included. `paths`: the manifest's `files` (manifest.json itself is not among them)."""
    from collections import Counter

    kinds = Counter("shard" if p.endswith(".parquet") else "plot" if p.endswith(".png") else
                    "card" if p == CARD else "other" for p in paths if p != MANIFEST)
    parts = [f"{n} {what}{'s' if n != 1 else ''}" for what, n in
             (("Parquet shard", kinds["shard"]), ("plot", kinds["plot"]), ("other file", kinds["other"])) if n]
    if kinds["card"]:
        parts.append(f"the card {CARD}")
    parts.append(MANIFEST)
    total = sum(kinds.values()) + 1
    return f"{total} file{'s' if total != 1 else ''} ({', '.join(parts)})"


# -- push -----------------------------------------------------------------------------------------
@dataclass
class PushResult:
    repo_id: str
    tag: str
    status: str                    # "pushed" | "already published" | "dry run"
    commit_oid: str | None = None
    commit_url: str | None = None
    files: int = 0
    bytes: int = 0
    notes: list[str] = field(default_factory=list)

    def load_line(self, config: str) -> str:
        return f'load_dataset("{self.repo_id}", "{config}", revision="{self.tag}")'


def next_patch(version: str) -> str:
    """0.1.0 -> 0.1.1 (a pre-release 0.2.0-rc1 -> 0.2.0), for the hint after a refused push."""
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)(-.+)?$", version)
    if not m:
        return "X.Y.Z"
    major, minor, patch, pre = m.groups()
    return f"{major}.{minor}.{patch}" if pre else f"{major}.{minor}.{int(patch) + 1}"


def named_token(token_env: str) -> str:
    """The token in `$token_env`: a variable named on the command line must hold it (no silent fallback to
    another token, which could belong to another account)."""
    token = os.environ.get(token_env, "").strip()
    if not token:
        state = "is empty" if token_env in os.environ else "is not set"
        raise PublishError(f"--token-env {token_env}: the environment variable {token_env} {state}; export the Hub "
                           "token in it, or leave --token-env out to use HF_TOKEN or `hf auth login`'s stored token")
    return token


def resolve_token(token_env: str | None) -> str | None:
    """The token from `$token_env` when a variable is named, else huggingface_hub's (HF_TOKEN, stored login).
    Never printed."""
    if token_env is not None:
        return named_token(token_env)
    from huggingface_hub import get_token

    return get_token()


def _scrub(text: str, token: str | None) -> str:
    if token:
        text = text.replace(token, "***")
    return " ".join(line.strip() for line in str(text).splitlines() if line.strip())


def hub_error_line(e: BaseException, token: str | None, endpoint: str, what: str) -> str:
    """One clean line for a failed Hub call (token scrubbed, never a traceback)."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if isinstance(e, OfflineModeIsEnabled):
        return f"{what}: HF_HUB_OFFLINE is set; unset it (and HF_DATASETS_OFFLINE) to push"
    if isinstance(e, HfHubHTTPError):
        status = e.response.status_code if e.response is not None else "?"
        msg = e.server_message or str(e).splitlines()[0]
        hint = ""
        if status in (401, 403):
            hint = "; check the token (--token-env, HF_TOKEN or `hf auth login`) has write access to the repo"
        return _scrub(f"{what}: Hub answered HTTP {status} ({msg}){hint}", token)
    name = type(e).__name__
    if isinstance(e, (ConnectionError, OSError)) or "Connect" in name or "Timeout" in name:
        return _scrub(f"{what}: cannot reach the Hub at {endpoint} ({name}: {e}); check the network or HF_ENDPOINT",
                      token)
    return _scrub(f"{what}: {name}: {e}", token)


def _allow_patterns(paths: list[str]) -> list[str]:
    return [glob.escape(p) for p in paths]


def _remote_manifest(api, repo_id: str, tag: str) -> dict[str, Any] | None:
    from huggingface_hub.errors import EntryNotFoundError

    with tempfile.TemporaryDirectory(prefix="kimi-data-push-") as tmp:
        try:
            path = api.hf_hub_download(repo_id, MANIFEST, repo_type="dataset", revision=tag, cache_dir=tmp)
        except EntryNotFoundError:
            return None
        try:
            return json.loads(Path(path).read_bytes())
        except ValueError:
            return None


def push_dataset(path: str | os.PathLike, repo_id: str, *, private: bool = False, token_env: str | None = None,
                 dry_run: bool = False) -> PushResult:
    """`token_env`: the variable holding the token (None: HF_TOKEN or the stored login)."""
    if not REPO_ID.match(repo_id):
        raise PublishError(f"--repo {repo_id!r}: expected ORG/NAME, e.g. my-org/kimi-k2.5-eagle3-data")
    if token_env is not None:
        named_token(token_env)      # a dry run too: the push it previews would fail
    ds = load_local(path)
    if stale := marked_stale(ds.root, ds.manifest):     # its rows are those of an earlier selection (a pilot's)
        raise PublishError(f"{stale}; push refuses it (a dry run too)")
    files = sorted(ds.files)
    result = PushResult(repo_id=repo_id, tag=ds.tag, status="dry run" if dry_run else "pushed",
                        files=len(files) + 1, bytes=ds.total_bytes())
    card_repo = ds.manifest.get("repo_id")
    if card_repo != repo_id:
        result.notes.append(
            f"the card's load line names {card_repo or 'no repo (path/to/dataset)'}; to name {repo_id}, re-emit with "
            f"`kimi-data emit --workdir {ds.workdir_hint} --repo {repo_id}` before pushing")
    if dry_run:
        return result

    token = resolve_token(token_env)
    from huggingface_hub import HfApi, constants

    endpoint = constants.ENDPOINT
    if token is None:
        raise PublishError("no Hub token: set HF_TOKEN (or pass --token-env VAR) or run `hf auth login`")
    api = HfApi(endpoint=endpoint, token=token)

    def hub(what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except PublishError:
            raise
        except Exception as e:  # noqa: BLE001 - every Hub failure becomes one clean line without the token
            raise PublishError(hub_error_line(e, token, endpoint, what)) from None

    def same_or_refuse(tag_commit: str | None) -> PushResult:
        remote = hub(f"reading {MANIFEST} at {ds.tag} of {repo_id}", _remote_manifest, api, repo_id, ds.tag)
        if remote is None:
            raise PublishError(f"{repo_id} already has tag {ds.tag} without a {MANIFEST} (not a kimi-data release); "
                               "published versions are immutable: pick another --dataset-version and re-emit")
        if remote != ds.manifest:
            raise PublishError(
                f"{repo_id} already has {ds.tag} with different content; published versions are immutable: bump "
                f"the version (`kimi-data emit --workdir {ds.workdir_hint} --dataset-version {next_patch(ds.version)} --repo "
                f"{repo_id}`) and push again")
        result.status = "already published"
        result.commit_oid = tag_commit
        if tag_commit:
            result.commit_url = f"{endpoint}/datasets/{repo_id}/commit/{tag_commit}"
        return result

    hub(f"creating {repo_id}", api.create_repo, repo_id, repo_type="dataset", private=private, exist_ok=True)
    refs = hub(f"listing the tags of {repo_id}", api.list_repo_refs, repo_id, repo_type="dataset")
    tags = {t.name: t.target_commit for t in refs.tags}
    if ds.tag in tags:
        return same_or_refuse(tags[ds.tag])

    message = f"kimi-eagle-data dataset v{ds.version}"
    configs = ", ".join(ds.configs)
    info = hub(f"uploading {ds.root} to {repo_id}", api.upload_folder, repo_id=repo_id, folder_path=ds.root,
               repo_type="dataset", commit_message=message,
               commit_description=f"Configs: {configs}. Files and sha256 in {MANIFEST}.",
               allow_patterns=_allow_patterns([*files, MANIFEST]), delete_patterns="*")
    from huggingface_hub.errors import HfHubHTTPError

    try:
        api.create_tag(repo_id, tag=ds.tag, revision=info.oid, repo_type="dataset", tag_message=message)
    except HfHubHTTPError as e:
        if e.response is not None and e.response.status_code == 409:   # tagged meanwhile by someone else
            return same_or_refuse(None)
        raise PublishError(hub_error_line(e, token, endpoint, f"tagging {repo_id} {ds.tag}")) from None
    except Exception as e:  # noqa: BLE001
        raise PublishError(hub_error_line(e, token, endpoint, f"tagging {repo_id} {ds.tag}")) from None
    result.commit_oid = info.oid
    result.commit_url = info.commit_url
    return result
