"""`prepare` as a stage of a run: every config's prompts (prompts/prepare.py) into the workdir, or, with
`reuse` (build, demo), the prompts an earlier prepare made from the same inputs and settings (its fingerprint):
resuming a run must not re-stream its upstream datasets, nor re-select its prompts."""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass

import orjson

from kimi_eagle_data import __version__
from kimi_eagle_data.prompts.prepare import PrepareError, PrepareReport, partition_info, prepare_configs
from kimi_eagle_data.run_context import RunContext
from kimi_eagle_data.store.workdir import read_json, write_json

log = logging.getLogger(__name__)


@dataclass
class Prepared:
    reports: dict[str, PrepareReport]
    pilot_limit: int | None = None     # --limit of the earlier prepare this one replaced (a pilot's)


def prepare(ctx: RunContext, reuse: bool = False) -> Prepared:
    """Selection, adapters, filters, decontamination, rendering and dedup for every config. A config whose
    source cannot be read at all is skipped while the others are prepared, then reported as one error line
    (PrepareError); so is a config none of whose rows became a prompt."""
    fingerprint = prepare_fingerprint(ctx)
    paths = {c: ctx.workdir.prepare_report(c) for c in ctx.configs}
    if reuse and all(p.exists() and ctx.workdir.prepared(c).exists()
                     and read_json(p).get("fingerprint") == fingerprint for c, p in paths.items()):
        return Prepared({c: PrepareReport.from_json(read_json(p)) for c, p in paths.items()})
    pilot_limit = _earlier_limit(ctx, [read_json(p).get("limit") for p in paths.values() if p.exists()])
    run = prepare_configs(ctx.settings, ctx.partitions, ctx.tokenizer,
                          gen_prompt_ids=ctx.format.generation_prompt_ids(),
                          max_new_tokens=ctx.sampling.max_new_tokens, max_seq_len=ctx.max_seq_len,
                          workdir=ctx.workdir, chat_format=ctx.format)
    for warning in run.warnings:
        log.warning("%s", warning)
    if run.errors:
        raise PrepareError(run.error_line())
    for c in run.reports:
        write_json(paths[c], {**read_json(paths[c]), "fingerprint": fingerprint})
    return Prepared(run.reports, pilot_limit)


def _earlier_limit(ctx: RunContext, earlier: list[int | None]) -> int | None:
    """--limit is a pilot's setting, not inherited: say so when this prepare reads more than the last one."""
    limits = [x for x in earlier if x is not None]
    limit = ctx.settings.limit
    if not limits or (limit is not None and limit <= max(limits)):
        return None
    now = "the full sources" if limit is None else f"at most {limit} rows per config"
    log.info("note: the earlier prepare of this workdir read at most %d source rows per config (--limit %d, a "
             "pilot); this one reads %s. Completed samples of prompts selected again are reused, not generated "
             "twice.", max(limits), max(limits), now)
    return max(limits)


def prepare_fingerprint(ctx: RunContext) -> str:
    """Everything prepare's output depends on: partitions, sources (local files by size and mtime), selection,
    tokenizer and template, lengths, and this project's version."""
    s = ctx.settings

    def source_stamp(config: str):
        path = s.sources.get(config) or ctx.partitions.partition(config).source
        if path and os.path.exists(path):
            st = os.stat(path)
            return [str(path), st.st_size, st.st_mtime_ns]
        return path

    key = {
        "configs": s.configs,
        "partitions": {c: partition_info(ctx.partitions.partition(c)) for c in s.configs},
        "sources": {c: source_stamp(c) for c in s.configs},
        "samples": s.samples, "revision": s.revision, "limit": s.limit,
        "config_file_sha256": ctx.partitions.sha256,
        "tokenizer": ctx.run["tokenizer_sha256"], "template": ctx.run["chat_template_sha256"],
        "tokenizer_code": ctx.run.get("tokenizer_code_sha256"), "tool_encoder": ctx.format.tool_encoder_version,
        **({"template_options": ctx.run["template_options"]} if "template_options" in ctx.run else {}),
        "max_new_tokens": ctx.sampling.max_new_tokens, "max_seq_len": ctx.max_seq_len,
        "project_version": __version__,
    }
    return hashlib.sha256(orjson.dumps(key, default=str, option=orjson.OPT_SORT_KEYS)).hexdigest()
