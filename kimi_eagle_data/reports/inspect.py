"""`kimi-data inspect`: one sample decoded and split into its segments.

The run's chat format splits the sample (`segmenter`: formats/kimi_k2/format.py says what it answers); the CLI hands
`inspect` the function that gives a profile's format, since the profile is read here from the run. Every
token belongs to exactly one segment, so the segments concatenated are the row's `input_ids`, and the
loss-mask boundary (`prompt_len`) always falls between two segments. Kimi-K3's split is
formats/kimi_k3/segments.py; Kimi-K2.5's is formats/kimi_k2/segments.py.
"""

from __future__ import annotations

import secrets
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kimi_eagle_data.conversation.shape import TURN_COLUMNS
from kimi_eagle_data.store.checkpoint import CorruptCheckpointError
from kimi_eagle_data.store.checkpoint_set import open_workdir_checkpoints
from kimi_eagle_data.profile import get_profile, plugin_hint
from kimi_eagle_data.model_profile import ModelProfile
from kimi_eagle_data.run_checks import config_name_problem
from kimi_eagle_data.reports.stats import QualityError, generation_so_far, order_configs
from kimi_eagle_data.store.workdir import Workdir, dataset_configs, dataset_shards
from kimi_eagle_data.wording import counted
from kimi_eagle_data.prompts.tokenizer import load_tokenizer, tokenizer_fingerprint

LIGHT_COLUMNS = ["id", "prompt_len", "completion_len", "issues"]


@dataclass
class Segment:
    kind: str              # one of the kinds cli/inspect.py STYLES colours
    label: str             # human label, e.g. "tool call 0: get_weather"
    start: int             # position in input_ids (inclusive)
    end: int               # (exclusive)
    loss: int              # the loss-mask value of every token in it (0 prompt, 1 completion)
    ids: list[int] = field(default_factory=list)
    text: str = ""

    @property
    def n_tokens(self) -> int:
        return self.end - self.start


# -- segmentation -------------------------------------------------------------------------------------

def segments_of(segmenter, input_ids, prompt_len: int) -> list[Segment]:
    """A segmenter's spans (a format's `segmenter`) as segments with their ids, text and loss-mask value."""
    ids = np.asarray(input_ids, dtype=np.int64)
    p = int(prompt_len)
    out = []
    for kind, label, lo, hi in segmenter.spans(ids, p):
        if hi > lo:
            chunk = ids[lo:hi].tolist()
            out.append(Segment(kind, label, lo, hi, 0 if hi <= p else 1, chunk, segmenter.decode(chunk)))
    return out


# -- finding rows -------------------------------------------------------------------------------------

@dataclass
class RowSource:
    """Where one config's rows live: a workdir's light columns (validated/) with its emitted shards for the full
    rows, or a dataset dir's split files for both."""

    files: list[tuple[Path, str | None]]   # light columns: (file, split; None: the file has a `split` column)
    workdir: Path | None                   # the run directory (run.json, checkpoint), when known
    dataset: Path | None
    where: str
    row_files: list[tuple[Path, str]]      # the full rows (token ids, messages): the emitted shards

    def light(self) -> pa.Table:
        tables = []
        for f, split in self.files:
            cols = LIGHT_COLUMNS + (["split"] if split is None else [])
            t = pq.read_table(f, columns=cols)
            if split is not None:
                t = t.append_column("split", pa.array([split] * t.num_rows, pa.string()))
            tables.append(t.select(LIGHT_COLUMNS + ["split"]))
        return pa.concat_tables(tables) if tables else pa.table({})

    def conversation(self, conversation_id: str) -> list[dict[str, Any]]:
        """The light columns of a conversation's rows (its generated turns), in turn order; [] in files written
        before turns."""
        turns = []
        for f, split in self.files:
            names = pq.read_schema(f).names
            if not set(TURN_COLUMNS) <= set(names):
                return []
            cols = ["id", "turn", "prompt_len", "completion_len", "end_reason"] + (["split"] if split is None else [])
            for r in pq.read_table(f, columns=cols, filters=[("conversation_id", "=", conversation_id)]).to_pylist():
                turns.append({"turn": r["turn"], "id": r["id"], "split": r.get("split", split),
                              "prompt_len": r["prompt_len"], "completion_len": r["completion_len"],
                              "end_reason": r["end_reason"]})
        return sorted(turns, key=lambda r: (r["turn"], r["id"]))

    def row(self, id_: str) -> dict[str, Any] | None:
        if not self.row_files:   # validate writes no token rows: they are in the dataset emit writes
            raise QualityError(f"{self.where} holds verdicts, not token rows; run `kimi-data emit --workdir "
                               f"{self.workdir}` to write them, then inspect again")
        for f, split in self.row_files:
            t = pq.read_table(f, filters=[("id", "=", id_)])
            if t.num_rows:
                row = t.slice(0, 1).to_pylist()[0]
                row["split"] = split
                return row
        return None


def _shards(ds: Path, config: str) -> list[tuple[Path, str]]:
    """A dataset dir's files of one config, with the split their name starts with."""
    return [(f, f.name.split("-", 1)[0]) for f in dataset_shards(ds, config)]


def locate(path: str | Path, config: str) -> RowSource:
    if config_name_problem(config):   # it becomes part of a path below
        raise QualityError(f"config {config_name_problem(config)}")
    d = Path(path).resolve()
    if not d.is_dir():
        raise QualityError(f"{path} is not a directory; pass a workdir or its dataset/ directory")
    validated = Workdir(d).validated(config)
    if validated.exists():
        ds = Workdir(d).dataset if Workdir(d).dataset.is_dir() else None
        return RowSource([(validated, None)], d, ds, f"{path}/validated/{config}.parquet",
                         _shards(ds, config) if ds else [])
    for ds in (d, Workdir(d).dataset):
        files = _shards(ds, config)
        if files:
            parent = ds.parent
            owner = Workdir(parent)
            workdir = parent if owner.settings_path.exists() and owner.dataset.resolve() == ds else None
            return RowSource(list(files), workdir, ds, f"{ds}/data/{config}/*.parquet", files)
    so_far = generation_so_far(Workdir(d))
    if so_far is not None and config in so_far.progress:     # a first generate under way: its counts
        raise so_far
    have = set(Workdir(d).validated_configs()) | {c for root in (d, Workdir(d).dataset) for c in dataset_configs(root)}
    have |= set(so_far.progress) if so_far is not None else set()
    raise QualityError(f"no config {config} in {path} (configs: {', '.join(order_configs(have)) or 'none'})")


def pick(src: RowSource, config: str, id_: str | None, *, random: bool = False, seed: int | None = None,
         shortest: bool = False, longest: bool = False, rejected: str | None = None,
         reasons: dict[str, str] | None = None) -> tuple[str, str]:
    """The id to show and how it was picked (a line for the user). `reasons`: the format's reason codes (to say
    when `rejected` is none of them)."""
    t = src.light()
    if id_ is not None:
        ids = t["id"].to_pylist() if t.num_rows else []
        if id_ in ids:
            return id_, ""
        starts = [i for i in ids if i.startswith(id_)]
        if len(starts) == 1:
            return starts[0], ""
        if len(starts) > 1:
            raise QualityError(f"id prefix {id_!r} matches {len(starts)} samples in {src.where} "
                               f"({', '.join(starts[:3])}, …); give more of the id")
        raise QualityError(f"no sample with id {id_!r} in {src.where} ({counted(len(ids), 'row')}); browse with "
                           f"`kimi-data inspect DIR {config} --random` (or --shortest, --longest, --rejected REASON)")
    how = []
    if rejected is not None:
        issues = t["issues"].combine_chunks()
        hit = np.zeros(t.num_rows, dtype=bool)
        flat = pc.list_flatten(issues)
        if len(flat):
            hit[pc.list_parent_indices(issues).to_numpy()[
                pc.equal(flat, rejected).to_numpy(zero_copy_only=False).astype(bool)]] = True
        if not hit.any():
            seen = sorted(set(flat.to_pylist())) if len(flat) else []
            known = "" if reasons is None or rejected in reasons else \
                f" ({rejected!r} is not a validation reason code)"
            raise QualityError(f"no {config} sample rejected for {rejected!r} in {src.where}{known}; reasons "
                               f"present: {', '.join(seen) or 'none'}")
        t = t.filter(pa.array(hit))
        how.append(f"rejected for {rejected}")
    if t.num_rows == 0:
        raise QualityError(f"{src.where} holds no sample")
    ids = t["id"].to_pylist()
    lens = t["completion_len"].to_numpy()
    if shortest or longest:
        order = sorted(range(len(ids)), key=lambda i: (int(lens[i]) if shortest else -int(lens[i]), ids[i]))
        i = order[0]
        how.append(f"{'shortest' if shortest else 'longest'} completion ({counted(int(lens[i]), 'token')}) of "
                   f"{len(ids)}")
    elif random:
        seed = secrets.randbelow(2 ** 31) if seed is None else seed
        i = int(np.random.default_rng(seed).integers(len(ids)))
        how.append(f"random pick of {len(ids)} (--seed {seed} shows it again)")
    else:
        i = sorted(range(len(ids)), key=lambda k: ids[k])[0]
        how.append(f"first by id of {len(ids)}")
    return ids[i], "; ".join(how)


# -- tokenizer and settings ---------------------------------------------------------------------------

def _read_json(path: Path) -> dict[str, Any]:
    try:
        return orjson.loads(path.read_bytes()) if path.exists() else {}
    except orjson.JSONDecodeError:
        return {}


def resolve_tokenizer(src: RowSource, override: str | None) -> tuple[str, ModelProfile, dict[str, Any]]:
    """(tokenizer path, profile, run settings). The run's `options.tokenizer` / `options.model`, else the
    profile's model path (the dataset's manifest names the profile)."""
    run = _read_json(Workdir(src.workdir).settings_path) if src.workdir else {}
    manifest = _read_json(src.dataset / "manifest.json") if src.dataset else {}
    prov = manifest.get("provenance", {})
    name = run.get("profile") or prov.get("profile")
    if not name:    # rows judged with an unknown profile would be split by a guess
        raise QualityError(f"{src.where}: neither run.json nor the dataset's manifest names the model profile its "
                           "rows were made with; inspect reads a kimi-data workdir or dataset")
    try:
        profile = get_profile(name)
    except ValueError as e:
        raise QualityError(f"{src.where}: made with profile {name!r}: {e}; {plugin_hint()}") from e
    opts = run.get("options", {})
    path = override or opts.get("tokenizer") or opts.get("model") or profile.model_path
    return path, profile, run


def finish_detail(src: RowSource, id_: str) -> dict[str, Any]:
    if src.workdir is None:
        return {}
    try:
        ckpt = open_workdir_checkpoints(Workdir(src.workdir))
    except CorruptCheckpointError:
        return {}   # inspect shows the row; the detail only refines `length` verdicts
    if ckpt is None:
        return {}
    try:
        return ckpt.finish_detail(id_) or {}
    finally:
        ckpt.close()


# -- the whole inspection -----------------------------------------------------------------------------

def inspect_sample(path: str | Path, config: str, id_: str | None = None, *, format_of: Callable[[ModelProfile], Any],
                   tokenizer: str | None = None, random: bool = False, seed: int | None = None,
                   shortest: bool = False, longest: bool = False, rejected: str | None = None) -> dict[str, Any]:
    """Everything `kimi-data inspect --json` prints (keys documented in cli/inspect.py, INSPECT_JSON_HELP).
    `format_of`: a profile's chat format (formats.format_of; the CLI hands it in)."""
    src = locate(path, config)
    tok_path, profile, run = resolve_tokenizer(src, tokenizer)
    chat_format = format_of(profile)
    reasons = chat_format.reason_descriptions()
    chosen, how = pick(src, config, id_, random=random, seed=seed, shortest=shortest, longest=longest,
                       rejected=rejected, reasons=reasons)
    row = src.row(chosen)
    if row is None:     # pragma: no cover - the id came from the same files
        raise QualityError(f"sample {chosen} vanished from {src.where}")
    tok = load_tokenizer(tok_path, chat_format)
    warnings = []
    if run.get("tokenizer_sha256") and tokenizer_fingerprint(tok)["tokenizer_sha256"] != run["tokenizer_sha256"]:
        warnings.append(f"tokenizer {tok_path} is not the one the run used (vocabulary hash differs); "
                        "the decoded text may be wrong")
    chat_format = chat_format.bind(profile, tok)
    seg = chat_format.segmenter()
    ids = row["input_ids"]
    plen = int(row["prompt_len"])
    segments = segments_of(seg, ids, plen)
    mask = np.asarray(row["loss_mask"], dtype=np.int64)
    ones = np.flatnonzero(mask == 1)
    boundary = int(ones[0]) if ones.size else len(mask)
    if boundary != plen:
        warnings.append(f"the loss mask starts at position {boundary}, prompt_len is {plen}")

    details = _issue_details(chat_format, row, run, src, chosen)
    issues = [{"code": c, "description": reasons.get(c, "(not a reason code of this validator version)"),
               "detail": details.get(c)} for c in row["issues"] or []]
    return {
        "id": row["id"], "config": config, "split": row.get("split"), "picked": how,
        "source": row["source"], "source_id": row["source_id"], "finish_reason": row["finish_reason"],
        "mode": seg.mode(np.asarray(ids, dtype=np.int64), plen),
        "length": len(ids), "prompt_len": plen, "completion_len": int(row["completion_len"]),
        "reasoning_len": int(row["reasoning_len"]), "num_tool_calls": int(row["num_tool_calls"]),
        "loss_boundary": boundary, "tokenizer": tok_path, "profile": profile.name, "where": src.where,
        "issues": issues, "warnings": warnings,
        "conversation_id": row.get("conversation_id"), "turn": row.get("turn"), "end_reason": row.get("end_reason"),
        "conversation": conversation_around(src, row, path, config),
        "segments": [{"index": i, **{k: v for k, v in asdict(s).items()}, "n_tokens": s.n_tokens}
                     for i, s in enumerate(segments)],
    }


def conversation_around(src: RowSource, row: dict[str, Any], path: str | Path, config: str
                        ) -> dict[str, Any] | None:
    """The conversation a row is a turn of (policy own_history): its turns in order, each with its id, split,
    lengths and (the last) why the conversation ended, and the command that shows another. None for a row that
    is a conversation of one turn without an end reason (every other policy)."""
    conv = row.get("conversation_id")
    if conv is None:
        return None
    turns = src.conversation(conv)
    if len(turns) <= 1 and row.get("end_reason") is None:
        return None
    return {"id": conv, "turns": [{**t, "this": t["id"] == row["id"]} for t in turns],
            "inspect": f"kimi-data inspect {shlex.quote(str(path))} {config} ID"}


def _issue_details(chat_format, row: dict[str, Any], run: dict[str, Any], src: RowSource, id_: str
                   ) -> dict[str, str]:
    """Re-run the format's validator (`chat_format`: bound to the run's profile and tokenizer) on the row for the
    human line behind each reason code (best effort)."""
    if not row["issues"]:
        return {}
    try:
        max_seq_len = int(run.get("max_seq_len") or chat_format.profile.max_seq_len)
        v = chat_format.validator(max_seq_len, keep_truncated=bool(run.get("keep_truncated")))
        plen = int(row["prompt_len"])
        tools = orjson.loads(row["tools"]) if row["tools"] else None
        verdict = v.validate(row["input_ids"][:plen], row["input_ids"][plen:], row["finish_reason"],
                             finish_detail(src, id_), tools)
        return dict(zip(verdict.issues, verdict.details))
    except Exception:   # noqa: BLE001 - details are a convenience; the stored codes are authoritative
        return {}
