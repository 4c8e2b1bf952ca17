"""The manifest and the card vouch for each other: manifest.json holds the card's sha256 (with every other
file's), and the card holds the sha256 of the manifest's content with that one entry left out. So neither
file can be edited after emit without `kimi-data push` noticing (a manifest whose version was changed to
9.9.9 would otherwise be tagged v9.9.9 over a card that says 0.1.0)."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson

CARD = "README.md"
# The card's line that records the hash (cards/dataset_card.md.jinja writes it; push reads it back).
CARD_HASH = re.compile(r"manifest sha256 `([0-9a-f]{64})`")
CARD_VERSION = re.compile(r"^Version \*\*([^*]+)\*\*", re.MULTILINE)


def manifest_sha256(manifest: dict[str, Any]) -> str:
    """sha256 of the manifest as canonical JSON (sorted keys, no whitespace) without the card's own entry:
    a reformatted manifest.json keeps its hash, any changed value changes it."""
    files = {k: v for k, v in (manifest.get("files") or {}).items() if k != CARD}
    body = {**manifest, "files": files}
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def card_mismatch(manifest: dict[str, Any], card_text: str) -> str | None:
    """What differs between manifest.json and the card that was emitted with it (None: they agree)."""
    recorded = CARD_HASH.search(card_text)
    if recorded is None:
        return f"the card ({CARD}) records no manifest sha256 (emitted by an older kimi-data or edited)"
    version = CARD_VERSION.search(card_text)
    if version and version.group(1) != manifest.get("version"):
        return f"manifest.json says version {manifest.get('version')} but the card ({CARD}) says {version.group(1)}"
    actual = manifest_sha256(manifest)
    if actual != recorded.group(1):
        return (f"manifest.json's content (sha256 {actual[:12]}…) is not what the card ({CARD}) records "
                f"({recorded.group(1)[:12]}…)")
    return None
