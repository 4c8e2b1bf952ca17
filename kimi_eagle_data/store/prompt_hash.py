"""What ties a stored completion to the exact prompt it answered, and a conversation's later turns to the sources
they were derived from (docs/reliability.md, "A completion belongs to its prompt").

- `prompt_hash(ids)`: blake2b-128 of a prompt's token ids (little-endian int32). Generate stores it with each
  completion; a completion is reused only where it equals the hash of the prompt prepared now, so an edited
  source row that keeps its id is generated again.
- `conversation_origin(first_prompt_hash, script)`: the hash of a conversation's first prompt and the source's
  script (everything after the first user turn: policy own_history). Generate stores it with every later turn
  and conversation end; they are kept only while it equals the origin of the conversation prepared now, so an
  edited later user turn (or tool result, or answer) makes the conversation continue again from its first turn's
  completion.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

import numpy as np
import orjson


def prompt_hash(ids: Sequence[int] | np.ndarray | bytes | memoryview) -> str:
    """blake2b-128 (hex) of the prompt's ids as little-endian int32 bytes (the checkpoint's blob format)."""
    blob = ids if isinstance(ids, (bytes, memoryview)) else np.asarray(ids, dtype="<i4").tobytes()
    return hashlib.blake2b(blob, digest_size=16).hexdigest()


def conversation_origin(first_prompt_hash: str, script: str | list[dict[str, Any]] | None) -> str:
    """The hash of a conversation's first prompt (its prompt_hash) and its script, as JSON with sorted keys (the
    same from the prepared file's text and from the parsed list)."""
    if isinstance(script, str):
        script = orjson.loads(script) if script else None
    text = orjson.dumps(script or [], option=orjson.OPT_SORT_KEYS)
    h = hashlib.blake2b(first_prompt_hash.encode(), digest_size=16)
    h.update(b"\0")
    h.update(text)
    return h.hexdigest()
