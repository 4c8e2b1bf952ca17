"""`validate` as a stage of a run: every completion of the run's view judged (assemble.py), per config; the
light rows to validated/, and, with sinks (emit), the full rows handed on as they are judged."""

from __future__ import annotations

from typing import Callable

from kimi_eagle_data.errors import MissingInputError
from kimi_eagle_data.run_context import RunContext
from kimi_eagle_data.store.workdir import read_json
from kimi_eagle_data.validate.assemble import ChunkSink, ValidateReport, validate_config
from kimi_eagle_data.validate.verdicts import VerdictPool


def verdict_pool(ctx: RunContext) -> VerdictPool:
    """The run's Validator in --workers processes (verdicts.py)."""
    validator = ctx.format.validator(ctx.max_seq_len, keep_truncated=ctx.settings.keep_truncated)
    return VerdictPool(validator, ctx.settings.workers)


def validate(ctx: RunContext, sinks: dict[str, ChunkSink] | None = None, pool: VerdictPool | None = None,
             light_done: Callable[[str, int], None] | None = None) -> dict[str, ValidateReport]:
    """Judge every completion; light rows to validated/. With `sinks` (config -> a ChunkSink: emit/rows.py), the
    same pass hands each config's judged chunks on. `light_done(config, rows)` runs as soon as a config's light
    rows are in place (its full rows may still be being written). `pool`: the caller's (kept open)."""
    refuse_lost_checkpoint(ctx)
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


def refuse_lost_checkpoint(ctx: RunContext) -> None:
    """validated/ counts samples generated (or failed) that no checkpoint file holds any more: it was deleted or
    moved. Validating now would count them all pending while dataset/ keeps their rows, and the checkpoint is the
    only copy of what was generated: say so, and change nothing."""
    if ctx.checkpoint_paths():
        return
    counted = 0
    for c in ctx.configs:
        path = ctx.workdir.validate_report(c)
        if path.exists():
            report = read_json(path)
            counted += int(report.get("generated") or 0) + int(report.get("failed") or 0)
    if counted:
        raise MissingInputError(
            f"{ctx.workdir.checkpoint} is missing, yet validated/ counts {counted:,} samples generated or failed "
            "in it: it holds the only copy of what was generated; restore it (from a backup, or move it back) and "
            f"rerun, or run `kimi-data generate --workdir {ctx.workdir.root}` to generate them anew first "
            "(validated/ and dataset/ are left as they are)")
