"""`validate` as a stage of a run: every completion of the run's view judged (assemble.py), per config; the
light rows to validated/, and, with sinks (emit), the full rows handed on as they are judged."""

from __future__ import annotations

from typing import Callable

from kimi_eagle_data.run_context import RunContext
from kimi_eagle_data.validate.assemble import ChunkSink, ValidateReport, validate_config
from kimi_eagle_data.validate.verdicts import VerdictPool


def verdict_pool(ctx: RunContext) -> VerdictPool:
    """The run's Validator in --workers processes (verdicts.py)."""
    validator = ctx.format.validator(ctx.tokens, ctx.tokenizer, ctx.max_seq_len,
                                             keep_truncated=ctx.settings.keep_truncated)
    return VerdictPool(validator, ctx.settings.workers)


def validate(ctx: RunContext, sinks: dict[str, ChunkSink] | None = None, pool: VerdictPool | None = None,
             light_done: Callable[[str, int], None] | None = None) -> dict[str, ValidateReport]:
    """Judge every completion; light rows to validated/. With `sinks` (config -> a ChunkSink: emit/rows.py), the
    same pass hands each config's judged chunks on. `light_done(config, rows)` runs as soon as a config's light
    rows are in place (its full rows may still be being written). `pool`: the caller's (kept open)."""
    ckpt = ctx.checkpoints()
    own = pool is None
    pool = pool or verdict_pool(ctx)
    reports = {}
    try:
        for c in ctx.configs:
            done = None if light_done is None else (lambda rows, c=c: light_done(c, rows))
            reports[c] = validate_config(ctx.workdir, c, ckpt, pool, (sinks or {}).get(c), done)
    finally:
        ckpt.close()
        if own:
            pool.close()
    return reports
