"""JSON text a user gives us (source rows, files to check, a workdir's JSON files): parsed by one parser whose
limits are said plainly, and JSON lines read with a size cap.

- `parse_json`: orjson, strict JSON. Its parser refuses nesting deeper than JSON_DEPTH_LIMIT levels: such text is
  "nested too deep (limit 1024 levels)", not "not valid JSON", which would send the user looking for a typo.
- `bounded_lines`: the lines of a JSONL file, each at most `cap` bytes held; a longer line is skipped in 1 MiB
  chunks and reported by its size, so one 2 GB row costs no memory. A UTF-8 byte order mark before the first
  line (Windows tools write one) is not part of the row.
"""

from __future__ import annotations

from typing import Any, BinaryIO, Iterator

import orjson

# orjson's parser refuses nesting deeper than this (its "depth limit exceeded"; tests/test_json_text.py measures it).
JSON_DEPTH_LIMIT = 1024
UTF8_BOM = b"\xef\xbb\xbf"
SKIP_CHUNK = 1 << 20


class JsonTextError(ValueError):
    """Text that does not parse; the message says why: `not valid JSON (…)` or `JSON nested too deep (…)`."""


def json_problem(e: orjson.JSONDecodeError) -> str:
    """Why orjson refused a text, in words that point at the fix."""
    if str(e.msg).startswith("depth limit"):
        return f"JSON nested too deep (limit {JSON_DEPTH_LIMIT} levels of arrays and objects)"
    return f"not valid JSON ({e})"


def parse_json(data: bytes | str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise JsonTextError(json_problem(e)) from None


def bounded_lines(f: BinaryIO, cap: int | None) -> Iterator[tuple[int, bytes | None, int]]:
    """(line number, the line or None when it is longer than `cap` bytes, the bytes read for it) for each line of
    a binary file; a line over the cap is read past in SKIP_CHUNK pieces, never held."""
    n = 0
    while True:
        line = f.readline(cap + 1) if cap else f.readline()
        if not line:
            return
        n += 1
        bom = len(UTF8_BOM) if n == 1 and line.startswith(UTF8_BOM) else 0
        if cap and len(line) > cap and not line.endswith(b"\n"):
            size = len(line)
            del line
            while True:
                chunk = f.readline(SKIP_CHUNK)
                size += len(chunk)
                if not chunk or chunk.endswith(b"\n"):
                    break
            yield n, None, size
            continue
        yield n, line[bom:], len(line)
