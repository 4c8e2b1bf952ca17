"""A dataset made from an earlier selection: a pilot's `dataset/` while the full run generates, or after its
finalize was refused. Emit records in the manifest the selection each config's rows come from (`selection`: the
digest of its prepared prompts and rejections, its prepare fingerprint and --limit); once prepare has selected
other rows for a config, the dataset is stale until it is emitted again. Only the config's own selection counts:
the same rows prepared with other configs beside it, or by another kimi-data version, leave it as it was.
`prepare` marks it where a user looks (`mark_stale`): the manifest gets a `stale` line and the card a notice under
its title, each still vouching for the other (emit/manifest.py), and `push` refuses it; `kimi-data stats` and
`slurm status` say the same line (`stale_line`), `export` and `check` warn (`marked_stale`). The rows are left as
they are: they are what that earlier selection made, and `check`, `inspect` and `load_dataset` still read them.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import orjson

from kimi_eagle_data.emit.manifest import CARD, CARD_HASH, manifest_sha256
from kimi_eagle_data.store.workdir import Workdir, atomic_path, file_sha256, read_json, write_json

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
# The card's notice, between these two comment lines, right after the YAML front matter.
_BEGIN, _END = "<!-- kimi-data: stale -->", "<!-- kimi-data: /stale -->"
_NOTICE = re.compile(re.escape(_BEGIN) + r".*?" + re.escape(_END) + r"\n\n?", re.S)


def selection(workdir: Workdir, configs) -> dict[str, dict[str, Any]]:
    """{config: {selection_sha256, fingerprint, limit}} of the prompts prepared now: what the manifest records at
    emit."""
    out = {}
    for c in configs:
        report = read_json(workdir.prepare_report(c)) if workdir.prepare_report(c).exists() else {}
        out[c] = {"selection_sha256": report.get("selection_sha256"), "fingerprint": report.get("fingerprint"),
                  "limit": report.get("limit")}
    return out


def _same_selection(then: dict[str, Any], now: dict[str, Any]) -> bool:
    """By content where both sides record it; a manifest or report an earlier kimi-data wrote has only the
    prepare fingerprint."""
    if then.get("selection_sha256") and now.get("selection_sha256"):
        return then["selection_sha256"] == now["selection_sha256"]
    return then.get("fingerprint") == now.get("fingerprint")


def stale_reason(workdir: Workdir, manifest: dict[str, Any] | None = None) -> str | None:
    """Why `dataset/` is stale, "made from an earlier selection (B4: 3 selected by a pilot (--limit 3); 28 now);
    …", when it was made from another selection than the one prepared now (None: it was not, or it records no
    selection: emitted by an earlier kimi-data, or there is no dataset). No path: the manifest and card hold it."""
    if manifest is None:
        path = workdir.dataset / MANIFEST
        if not path.is_file():
            return None
        try:
            manifest = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError:
            return None
    made_from = manifest.get("selection") if isinstance(manifest, dict) else None
    if not isinstance(made_from, dict) or not made_from:
        return None
    now = selection(workdir, made_from)
    changed = [c for c, then in made_from.items() if not _same_selection(then, now[c])]
    if not changed:
        return None
    parts = []
    for c in changed:
        counts = (manifest.get("configs") or {}).get(c, {}).get("counts", {})
        then = made_from[c]
        was = f"{counts['selected']:,} selected" if "selected" in counts else "its rows"
        if then.get("limit") is not None:
            was += f" by a pilot (--limit {then['limit']})"
        report = workdir.prepare_report(c)
        selected_now = read_json(report).get("selected") if report.exists() else None
        parts.append(f"{c}: {was}" + (f"; {selected_now:,} now" if selected_now is not None else "; none now"))
    return (f"made from an earlier selection ({'; '.join(parts)}): its rows are not those of the prompts prepared "
            "now; emit again once generate is done (`kimi-data emit`; on Slurm the finalize job does)")


def marked_stale(root, manifest: dict[str, Any]) -> str | None:
    """"DIR is stale: it was made from an earlier selection …" for a dataset whose manifest prepare marked (None:
    not marked): what a reader of the dataset alone (`export`, `check`, `push`) says of it."""
    reason = manifest.get("stale") if isinstance(manifest, dict) else None
    return f"{root} is stale: it was {reason}" if reason else None


def stale_line(workdir: Workdir) -> str | None:
    """"stale: DIR/dataset was made from an earlier selection …" (None: it is not stale): for stats and status."""
    reason = stale_reason(workdir)
    return f"stale: {workdir.dataset} was {reason}" if reason else None


def mark_stale(workdir: Workdir) -> str | None:
    """After prepare: mark `dataset/` stale in its manifest (`stale`: the reason) and card when it was made from
    another selection than the one prepared now, and take the mark off when it was made from this one again. Its
    stale line, or None."""
    path = workdir.dataset / MANIFEST
    if not path.is_file() or not (workdir.dataset / CARD).is_file():
        return None
    try:
        manifest = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        return None
    reason = stale_reason(workdir, manifest)
    line = f"stale: {workdir.dataset} was {reason}" if reason else None
    if manifest.get("stale") == reason:
        return line
    marked = {k: v for k, v in manifest.items() if k != "stale"} | ({"stale": reason} if reason else {})
    card = _NOTICE.sub("", (workdir.dataset / CARD).read_text(encoding="utf-8"))
    if reason:
        card = _with_notice(card, f"Stale: this dataset was {reason}.")
    card = CARD_HASH.sub(f"manifest sha256 `{manifest_sha256(marked)}`", card, count=1)
    with atomic_path(workdir.dataset / CARD) as tmp:
        tmp.write_text(card, encoding="utf-8")
    marked["files"] = {**marked.get("files", {}), CARD: file_sha256(workdir.dataset / CARD)}
    write_json(path, marked)
    if line:
        log.warning("%s", line)
    return line


def _with_notice(card: str, line: str) -> str:
    """The card with the notice right after its YAML front matter (at the top when it has none)."""
    notice = f"{_BEGIN}\n> **{line}**\n{_END}\n\n"
    if card.startswith("---\n") and (end := card.find("\n---\n", 4)) != -1:
        head = card[:end + 5]
        return head + "\n" + notice + card[end + 5:].lstrip("\n")
    return notice + card
