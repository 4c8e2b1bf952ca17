"""Write what SpecForge's own `kimi-k3-thinking` template makes of our Kimi-K3 rows: SpecForge as an oracle.

The rows: every assistant turn of our K3 golden conversations (tests/golden/k3/conversations.json) that we render,
as a row of ours: the conversation up to that turn rendered with its generation prompt (its mode, effort, tools),
then the turn itself as the completion the model would write, each segment encoded on its own with the tiny K3
tokenizer; `loss_mask` 0 over the prompt and 1 over the completion, as `kimi-data emit` writes it (`k3_rows`). A
turn that no generation prompt opens (a named assistant) is no row. The golden turns are all at effort max, so a
few conversations are rows again at efforts low and high and with none (`NAME@EFFORT/K`).

SpecForge is run from the checkout you name (`--specforge PATH`), never from this repository: its
`specforge.data.preprocessing.preprocess_conversations` (what `build_eagle3_dataset` runs on each batch) with
`TEMPLATE_REGISTRY.get("kimi-k3-thinking")` and the tiny K3 tokenizer (`trust_remote_code`), three ways per row:

- `all_turns`: the row's messages and tools as a `conversations` record (SpecForge renders them through the
  tokenizer's own `apply_chat_template`), every assistant turn trained (SpecForge's default);
- `last_turn`: the same with `train_only_last_turn=True`;
- `preformatted`: the row's own text (its ids decoded: the joined segments) as a `text` record
  (`is_preformatted=True`), `train_only_last_turn=True`.

Each outcome is SpecForge's input_ids (their count and sha256, `ids_sha256`) and the spans `[start, end)` where
its loss mask is 1, or the error it raised, with the warnings it gave. The output (tests/golden/k3/specforge.json)
records the SpecForge commit and the sha256 of each SpecForge file that ran. SpecForge's package imports whole
here (it needs torch, transformers, datasets, pydantic, tqdm; not sglang or CUDA): nothing is stubbed.
tests/formats/kimi_k3/test_k3_specforge.py holds our masks against it.

Usage: python scripts/specforge_k3_oracle.py --specforge PATH [--commit SHA] [--out F]
(--commit is needed when PATH is not a git checkout, e.g. `git archive HEAD | tar -x -C PATH`.)
Exit 0 when written; 2 on usage errors.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "k3"
TEMPLATE = "kimi-k3-thinking"
MAX_LENGTH = 1 << 20           # no row is cut (SpecForge's default, 2048, would cut none of ours either)
MODES = ("all_turns", "last_turn", "preformatted")
EFFORT_VARIANTS = {"multi_turn_reasoning_history": ("low", "high", None), "tool_call_round_trip": ("low", "high")}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tiny_k3_tokenizer():
    from kimi_eagle_data.formats.kimi_k3 import TINY_KIMI_K3
    from kimi_eagle_data.prompts.tokenizer import open_tokenizer

    return open_tokenizer(TINY_KIMI_K3.model_path)


def ids_sha256(ids) -> str:
    return hashlib.sha256(",".join(str(int(i)) for i in ids).encode()).hexdigest()


def _options(request: dict[str, Any]) -> dict[str, Any]:
    """render_segments' keyword arguments of a golden request (an absent effort is K3's default)."""
    from kimi_eagle_data.formats.kimi_k3.render import DEFAULT_EFFORT

    return {"thinking": request.get("thinking", True), "effort": request.get("effort", DEFAULT_EFFORT),
            "response_format": request.get("response_format"), "tool_choice": request.get("tool_choice")}


def _requests(conversations: Path):
    """(row id prefix, request): each golden conversation, then the effort variants."""
    golden = json.loads(conversations.read_text(encoding="utf-8"))["conversations"]
    for conversation in golden:
        yield conversation["name"], conversation["request"]
    for conversation in golden:
        for effort in EFFORT_VARIANTS.get(conversation["name"], ()):
            yield f"{conversation['name']}@{effort or 'none'}", {**conversation["request"], "effort": effort}


def k3_rows(tokenizer, conversations: Path = GOLDEN / "conversations.json") -> list[dict[str, Any]]:
    """Our rows, one per assistant turn we render (module docstring): id `NAME/K` (K-th assistant turn)."""
    from kimi_eagle_data.errors import KimiDataError
    from kimi_eagle_data.formats.kimi_k3.render import END_OF_MSG, joined_text, render_segments
    from kimi_eagle_data.formats.kimi_k3.segment_ids import encode_segments

    rows = []
    for name, request in _requests(conversations):
        messages, tools, options = request["messages"], request.get("tools"), _options(request)
        turns = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"]
        for k, i in enumerate(turns):
            try:
                prompt = render_segments(copy.deepcopy(messages[:i]), tools, **options)
                full = render_segments(copy.deepcopy(messages[:i + 1]), tools, add_generation_prompt=False,
                                       **options)
            except KimiDataError:
                continue              # a conversation K3 (or we) refuse has no rows
            if full[:len(prompt)] != prompt:
                continue              # a notice (tool choice, response format) follows the messages
            end = next(e for e in range(len(prompt), len(full)) if full[e].text == END_OF_MSG)
            completion = full[len(prompt):end + 1]
            prompt_ids, completion_ids = encode_segments(tokenizer, prompt), encode_segments(tokenizer, completion)
            rows.append({"id": f"{name}/{k}", "thinking": options["thinking"],
                         "effort": options["effort"] if options["thinking"] else None,
                         "messages": messages[:i + 1], "tools": tools or [],
                         "text": joined_text(prompt) + joined_text(completion),
                         "input_ids": prompt_ids + completion_ids,
                         "loss_mask": [0] * len(prompt_ids) + [1] * len(completion_ids)})
    return rows


def mask_spans(mask) -> list[list[int]]:
    """[start, end) of each run of 1s."""
    spans, start = [], None
    for p, bit in enumerate(list(mask) + [0]):
        if bit and start is None:
            start = p
        elif not bit and start is not None:
            spans.append([start, p])
            start = None
    return spans


def load_specforge(path: Path):
    """SpecForge's preprocess_conversations and its template registry, imported from the checkout at `path`."""
    if not (path / "specforge" / "data" / "template.py").is_file():
        raise ValueError(f"{path} is not a SpecForge checkout (no specforge/data/template.py)")
    sys.path.insert(0, str(path))
    try:
        from specforge.data.preprocessing import preprocess_conversations
        from specforge.data.template import TEMPLATE_REGISTRY
    finally:
        sys.path.remove(str(path))
    loaded = Path(sys.modules["specforge"].__file__).resolve().parent
    if loaded != (path / "specforge").resolve():
        raise ValueError(f"specforge was imported from {loaded}, not from {path}")
    if TEMPLATE not in TEMPLATE_REGISTRY.get_all_template_names():
        raise ValueError(f"SpecForge at {path} has no {TEMPLATE!r} template")
    import specforge.data.prompt_builder  # noqa: F401 - the pre-tokenized reader the tests run, hashed with the rest
    return preprocess_conversations, TEMPLATE_REGISTRY.get(TEMPLATE)


def files_run(path: Path) -> dict[str, str]:
    """sha256 of every SpecForge file imported from `path` (relative path -> sha256)."""
    root, ran = path.resolve(), {}
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve().is_relative_to(root):
            ran[Path(file).resolve().relative_to(root).as_posix()] = sha256(Path(file))
    return dict(sorted(ran.items()))


def specforge_outcome(preprocess, template, tokenizer, row: dict[str, Any], mode: str) -> dict[str, Any]:
    """One row through SpecForge in one mode: {"n_tokens", "ids_sha256", "mask"} or {"error"}, and any
    "warnings"."""
    if mode == "preformatted":
        source, options = row["text"], {"is_preformatted": True, "train_only_last_turn": True}
    else:
        source = copy.deepcopy(row["messages"])
        options = {"is_preformatted": False, "train_only_last_turn": mode == "last_turn"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = preprocess(tokenizer, [source], template, MAX_LENGTH, tools=[copy.deepcopy(row["tools"])],
                             **options)
        except Exception as err:  # noqa: BLE001 - what SpecForge raises on a row is an outcome to record
            outcome: dict[str, Any] = {"error": f"{type(err).__name__}: {err}"}
        else:
            ids, mask = out["input_ids"][0][0].tolist(), out["loss_mask"][0][0].tolist()
            outcome = {"n_tokens": len(ids), "ids_sha256": ids_sha256(ids), "mask": mask_spans(mask)}
    said = sorted({str(w.message) for w in caught if issubclass(w.category, UserWarning)})
    return {**outcome, **({"warnings": said} if said else {})}


def commit_of(path: Path, given: str | None) -> str:
    if given:
        return given
    proc = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ValueError(f"{path} is not a git checkout: name its commit with --commit SHA")
    return proc.stdout.strip()


def oracle_text(provenance: dict, rows: dict[str, dict]) -> str:
    """The oracle file as JSON, one row outcome per line (diffs stay readable)."""
    body = ",\n".join(f"  {json.dumps(rid)}: {json.dumps(outcomes, ensure_ascii=False)}"
                      for rid, outcomes in rows.items())
    return (f'{{\n "provenance": {json.dumps(provenance, ensure_ascii=False, indent=2)},\n "rows": {{\n'
            + body + "\n }\n}\n")


def run(specforge: Path, commit: str | None) -> tuple[dict, dict]:
    """(provenance, row id -> {mode -> outcome}) for our rows through the SpecForge at `specforge`."""
    preprocess, template = load_specforge(specforge)
    tokenizer = tiny_k3_tokenizer()
    rows = {row["id"]: {mode: specforge_outcome(preprocess, template, tokenizer, row, mode) for mode in MODES}
            for row in k3_rows(tokenizer)}
    provenance = {
        "made_by": "scripts/specforge_k3_oracle.py",
        "specforge": {"repository": "sgl-project/SpecForge", "commit": commit_of(specforge, commit),
                      "files_sha256": files_run(specforge)},
        "template": TEMPLATE, "template_fields": template.model_dump(),
        "called": "specforge.data.preprocessing.preprocess_conversations(tokenizer, [source], template, "
                  f"max_length={MAX_LENGTH}, is_preformatted=..., train_only_last_turn=..., tools=[row tools])",
        "tokenizer": "kimi_eagle_data/assets/tiny-kimi-k3 (trust_remote_code)",
        "conversations_sha256": sha256(GOLDEN / "conversations.json"),
        "modes": {"all_turns": "conversations record, train_only_last_turn=False",
                  "last_turn": "conversations record, train_only_last_turn=True",
                  "preformatted": "text record (the row's joined text), train_only_last_turn=True"},
    }
    return provenance, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--specforge", type=Path, required=True, help="a checkout of sgl-project/SpecForge")
    parser.add_argument("--commit", help="its commit, when PATH is not a git checkout")
    parser.add_argument("--out", type=Path, default=GOLDEN / "specforge.json")
    args = parser.parse_args(argv)
    try:
        provenance, rows = run(args.specforge.resolve(), args.commit)
    except (OSError, ValueError, ImportError) as err:
        print(f"specforge_k3_oracle: {err}", file=sys.stderr)
        return 2
    args.out.write_text(oracle_text(provenance, rows), encoding="utf-8")
    print(f"wrote {args.out}: {len(rows)} rows through SpecForge {provenance['specforge']['commit']} "
          f"({TEMPLATE})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
