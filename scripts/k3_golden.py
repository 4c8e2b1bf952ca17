"""Write the Kimi-K3 golden file: what K3's own encoder renders for each of our test conversations.

Reads tests/golden/k3/conversations.json (our own conversations; each `request` holds the arguments of
`kimi_eagle_data.formats.kimi_k3.render.render_segments`), runs Moonshot's `encoding_k3.py` from the path you give
on each (`build_chat_segments`, called with the effort K3's tokenizer defaults to, max, where a request names
none), and writes tests/golden/k3/expected.json: conversation name -> its segments, each `[text, allow_special]`,
or the type of the error the encoder raised; with the sha256 of the encoder (and of the conversations file) as
provenance.

With `--tokenizer-code PATH/tokenization_kimi.py`, each rendered conversation is also rendered through that file's
`apply_chat_template(tokenize=False)`, letting it choose the default effort itself, and its text must equal the
joined segments; its sha256 is recorded too.

Neither file is in this repository (licence): they are the launch `encoding_k3.py` and `tokenization_kimi.py` of
moonshotai's K3 tokenizer (public verbatim in leyten/shard, vendor/kimi_k3_ref/).

Usage: python scripts/k3_golden.py --encoder PATH/encoding_k3.py [--tokenizer-code PATH] [--conversations F] [--out F]
Exit 0 when written; 1 when the tokenizer code disagrees with the encoder; 2 on usage errors.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "k3"
DEFAULT_EFFORT = "max"     # what K3's tokenizer passes when the caller names no effort


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_module(path: Path, name: str, needs: str):
    """The Python module at `path`; ValueError (one line) when it is not a module with `needs`."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module       # the tokenizer code imports the encoder by this name
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - whatever the file does wrong, one line says so
        raise ValueError(f"{path} cannot be loaded ({type(err).__name__}: {err})") from None
    if not hasattr(module, needs):
        raise ValueError(f"{path} has no {needs}; is it K3's {name}.py?")
    return module


def encoder_call(encoder, request: dict[str, Any]) -> dict[str, Any]:
    """What the encoder renders for one request: {"segments": [[text, allow_special], ...]} or {"error": ...}."""
    request = copy.deepcopy(request)
    try:
        segments = encoder.build_chat_segments(
            request.pop("messages"), tools=request.pop("tools", None),
            add_generation_prompt=request.pop("add_generation_prompt", True),
            thinking=request.pop("thinking", True), thinking_effort=request.pop("effort", DEFAULT_EFFORT),
            **request)
    except Exception as err:  # noqa: BLE001 - a refusal is an outcome to record
        return {"error": type(err).__name__}     # the type only: the message is their text
    return {"segments": [[s.text, s.allow_special] for s in segments]}


def tokenizer_text(tokenizer_code, request: dict[str, Any]) -> str:
    """The joined prompt as the tokenizer's own `apply_chat_template` writes it (no vocabulary needed)."""
    request = copy.deepcopy(request)
    options = {"thinking_effort": request.pop("effort")} if "effort" in request else {}
    return tokenizer_code.TikTokenTokenizer.apply_chat_template(
        None, request.pop("messages"), tools=request.pop("tools", None), tokenize=False,
        add_generation_prompt=request.pop("add_generation_prompt", True), thinking=request.pop("thinking", True),
        **options, **request)


def golden_text(provenance: dict, expected: dict[str, dict]) -> str:
    """The golden file as JSON with one segment per line (diffs stay readable)."""
    def dumps(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    entries = []
    for name, outcome in expected.items():
        if "segments" in outcome:
            body = ",\n".join(f"   {dumps(segment)}" for segment in outcome["segments"])
            entries.append(f'  {dumps(name)}: {{"segments": [\n{body}\n  ]}}')
        else:
            entries.append(f"  {dumps(name)}: {dumps(outcome)}")
    return (f'{{\n "provenance": {json.dumps(provenance, ensure_ascii=False, indent=2)},\n "expected": {{\n'
            + ",\n".join(entries) + "\n }\n}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoder", type=Path, required=True, help="K3's encoding_k3.py")
    parser.add_argument("--tokenizer-code", type=Path, help="K3's tokenization_kimi.py (cross-checks the text)")
    parser.add_argument("--conversations", type=Path, default=GOLDEN / "conversations.json")
    parser.add_argument("--out", type=Path, default=GOLDEN / "expected.json")
    args = parser.parse_args(argv)
    try:
        encoder = load_module(args.encoder, "encoding_k3", "build_chat_segments")
        tokenizer_code = (load_module(args.tokenizer_code, "tokenization_kimi", "TikTokenTokenizer")
                          if args.tokenizer_code else None)
        conversations = json.loads(args.conversations.read_text(encoding="utf-8"))["conversations"]
    except (OSError, ValueError, KeyError) as err:
        print(f"k3_golden: {err}", file=sys.stderr)
        return 2
    expected, disagreements = {}, []
    for conversation in conversations:
        outcome = encoder_call(encoder, conversation["request"])
        expected[conversation["name"]] = outcome
        if tokenizer_code is not None and "segments" in outcome:
            joined = "".join(text for text, _ in outcome["segments"])
            if tokenizer_text(tokenizer_code, conversation["request"]) != joined:
                disagreements.append(conversation["name"])
    provenance = {
        "made_by": "scripts/k3_golden.py",
        "encoder": {"file": args.encoder.name, "sha256": sha256(args.encoder)},
        "tokenizer_code": ({"file": args.tokenizer_code.name, "sha256": sha256(args.tokenizer_code),
                            "checked": "apply_chat_template(tokenize=False) equals the joined segments, "
                                       "its default effort included"} if tokenizer_code else None),
        "conversations_sha256": sha256(args.conversations),
    }
    args.out.write_text(golden_text(provenance, expected), encoding="utf-8")
    rendered = sum("segments" in o for o in expected.values())
    print(f"wrote {args.out}: {len(expected)} conversations ({rendered} rendered, {len(expected) - rendered} "
          f"refused) by encoder sha256 {provenance['encoder']['sha256']}")
    if disagreements:
        print(f"the tokenizer code's text differs from the joined segments for: {', '.join(disagreements)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
