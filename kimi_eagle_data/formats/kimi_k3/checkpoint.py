"""A K3 checkpoint's own chat code against our renderer.

vLLM and SGLang render a K3 prompt through the checkpoint's tokenizer code (`apply_chat_template` ->
`build_chat_segments`), so `prepare` renders with that code where the tokenizer has it. The first prompts of every
config are rendered with our renderer too: any difference stops prepare in one line that names the encoder's
sha256 and the first differing segment. `encoder_sha256` is bound in run.json: a run never resumes under another
encoder.
"""

from __future__ import annotations

import hashlib
import inspect
import os
from typing import Any, Sequence

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.formats.kimi_k3.segment_ids import encode_segments
from kimi_eagle_data.wording import excerpt

# How many prompts of each config are rendered both ways.
CHECKED_PROMPTS = 32
# The file that holds K3's encoder in a checkpoint (beside the tokenizer class, which imports it).
ENCODER_FILE = "encoding_k3.py"


class RendererMismatch(KimiDataError):
    """The checkpoint's chat code and our K3 renderer give different prompts."""


def encoder_file(tokenizer) -> str | None:
    """The file of the tokenizer's K3 encoder: the checkpoint's `encoding_k3.py`, else its tokenizer class's file."""
    d = getattr(tokenizer, "name_or_path", "") or ""
    if os.path.isfile(os.path.join(d, ENCODER_FILE)):
        return os.path.join(d, ENCODER_FILE)
    try:
        src = inspect.getsourcefile(type(tokenizer))
    except TypeError:
        return None
    return src if src and os.path.isfile(src) else None


def encoder_sha256(tokenizer) -> str:
    path = encoder_file(tokenizer)
    if path is None:
        return ""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def checkpoint_segments(tokenizer, messages, tools, thinking: bool, effort: str | None) -> list | None:
    """The segments the checkpoint's code builds, where it exposes them (`chat_segments`, as the tiny K3 tokenizer,
    or a `build_chat_segments` in its module, as K3's); None otherwise."""
    if hasattr(tokenizer, "chat_segments"):
        return list(tokenizer.chat_segments(list(messages), tools or None, True, thinking, thinking_effort=effort))
    build = getattr(inspect.getmodule(type(tokenizer)), "build_chat_segments", None)
    if build is None:
        return None
    return list(build(list(messages), tools=tools or None, thinking=thinking, thinking_effort=effort))


def _as_pair(segment: Any) -> tuple[str, bool]:
    text, allow_special = segment[0], segment[1]
    return str(text), bool(allow_special)


def first_difference(theirs: Sequence | None, ours: Sequence, their_ids: list[int], our_ids: list[int],
                     decode) -> str:
    """Where two renderings part: the first differing segment, or (segments unknown) the first differing token."""
    if theirs is not None:
        a, b = [_as_pair(s) for s in theirs], [_as_pair(s) for s in ours]
        for i in range(max(len(a), len(b))):
            if i >= len(a) or i >= len(b) or a[i] != b[i]:
                got = excerpt(repr(a[i])) if i < len(a) else "nothing"
                want = excerpt(repr(b[i])) if i < len(b) else "nothing"
                return f"first differing segment {i}: checkpoint {got}, ours {want}"
    for i in range(max(len(their_ids), len(our_ids))):
        if i >= len(their_ids) or i >= len(our_ids) or their_ids[i] != our_ids[i]:
            return (f"first differing token {i}: checkpoint {excerpt(repr(decode(their_ids[i:i + 8])))}, ours "
                    f"{excerpt(repr(decode(our_ids[i:i + 8])))}")
    return "the same ids"


def check_prompts(chat_format, tokenizer, records: Sequence, where: str) -> None:
    """RendererMismatch (one line) when our renderer's ids differ from `records`' (rendered by the checkpoint's
    code) for any of the first CHECKED_PROMPTS."""
    for r in list(records)[:CHECKED_PROMPTS]:
        effort = getattr(r, "effort", None)
        ours = chat_format.segments(r.messages, r.tools, r.mode, effort)
        our_ids = encode_segments(tokenizer, ours)
        their_ids = [int(i) for i in r.prompt_ids]
        if our_ids == their_ids:
            continue
        thinking = r.mode != "instant"
        theirs = checkpoint_segments(tokenizer, r.messages, r.tools, thinking,
                                     (effort or chat_format.default_effort) if thinking else None)
        raise RendererMismatch(
            f"{where}: prompt {r.id}: the tokenizer's own chat code (encoder {encoder_file(tokenizer)}, sha256 "
            f"{encoder_sha256(tokenizer)}) renders it other than kimi-eagle-data's K3 renderer: "
            f"{first_difference(theirs, ours, their_ids, our_ids, tokenizer.decode)} -- use a checkpoint whose "
            "encoder matches (docs/kimi-k3.md, \"Which K3 encoder this matches\") or report the difference")
