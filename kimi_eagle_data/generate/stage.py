"""`generate`: every prompt of the run's view (store/prompt_view.py) that no stored completion answers, through
the run's engine into this shard's checkpoint file.

Turn 1 of this shard's conversations and their stored later turns are generated; a conversation whose source
changed after a turn that still stands is continued from that turn; what no longer answers its prompt is deleted
from this shard's own file first (others' files are only read; every reader skips it there). The run says how
much it reuses, how much it generates again, and what the checkpoint keeps outside the selection.
"""

from __future__ import annotations

import logging
from dataclasses import asdict

from kimi_eagle_data.engines.base import Engine, EngineError
from kimi_eagle_data.engines.drafter import lossy_drafter
from kimi_eagle_data.engines.vllm import split_prefill_hazard
from kimi_eagle_data.engines.factory import check_local_model, run_engine
from kimi_eagle_data.generate.records import GenerateReport, generate_records
from kimi_eagle_data.prompts.prepared_file import read_prepared
from kimi_eagle_data.records import PromptRecord, SpecDecodeCounts
from kimi_eagle_data.run_context import RunContext
from kimi_eagle_data.store.checkpoint import Checkpoint
from kimi_eagle_data.store.prompt_hash import conversation_origin, prompt_hash
from kimi_eagle_data.store.prompt_view import ConfigPrompts, read_views
from kimi_eagle_data.store.shard_split import ShardSplit
from kimi_eagle_data.conversation.next_turn import NextTurn

log = logging.getLogger(__name__)


def generate(ctx: RunContext, engine: Engine | None = None, *, pilot_limit: int | None = None) -> GenerateReport:
    """`engine`: the caller's (kept open); default: the run's (closed at the end). `pilot_limit`: the --limit of
    the prepare this run's prepare replaced (prompts/stage.py), named in the reuse line."""
    s = ctx.settings
    prepared = [r for c in ctx.configs for r in read_prepared(ctx.workdir, c)]
    seen = ctx.checkpoints()
    try:
        views = read_views(ctx.workdir, ctx.configs, seen)
        split = shard_split(views, s.shard)
        continuing = {c: v.to_continue() for c, v in views.items()}
        resume = seen.completions_of(i for c in continuing.values() for _, i in c)
        origins = {k: o for v in views.values() for k, o in v.origins.items()}
        wanted = {i for v in views.values() for i in v.later
                  if i not in v.done and split.holds(v.conversation(i))}
        later = seen.turn_records(ids=sorted(wanted) + [i for c in continuing.values() for conv, i in c if i != conv],
                                  origins=origins)
        failed = seen.failures()
    finally:
        seen.close()
    for line in (_stale_line(views, split), reuse_line(views, s.configs, split, pilot_limit)):
        if line:
            log.info("%s", line)
    done = set().union(*(v.done for v in views.values()))
    records = [r for r in prepared if split.holds(r.conversation)] + [r for r in later if r.id in wanted]
    done_later = sum(1 for v in views.values() for i in v.later if i in v.done and split.holds(v.conversation(i)))
    next_turn = make_next_turn(ctx, prepared)
    path = ctx.workdir.shard_checkpoint(s.shard)
    if not path.exists() and not any(split.holds(conv) for c in continuing.values() for conv, _ in c) \
            and not _todo(records, done, failed, s.retry_failed):
        return _skipped(records, done, failed, done_later)    # nothing to write: no checkpoint is made
    if engine is None:
        check_local_model(s, ctx.max_seq_len)
    ckpt = Checkpoint(path)
    try:
        _forget_stale(ckpt, views)
        if next_turn is not None:
            stood = {r.id: r for r in prepared} | {r.id: r for r in later}
            records += _continue(ckpt, views, continuing, resume, stood, next_turn, split)
        if not _todo(records, done, failed, s.retry_failed):
            return _skipped(records, done, failed, done_later)
        if next_turn is not None:   # the longest conversations first: short chains, not long ones, end the run
            records.sort(key=lambda r: -next_turn.turns_left(r))
            origins.update((r.id, conversation_origin(prompt_hash(r.prompt_ids), r.script)) for r in prepared
                           if r.id not in origins)
        own = engine is None
        engine = engine or run_engine(ctx)
        try:
            info = engine.info()
            refuse_unsafe_server(info, ctx)
            ckpt.set_meta("engine", asdict(info))
            counted = engine.spec_decode_counts()
            try:
                report = generate_records(records, engine, ckpt, ctx.sampling, done=done, failed=failed,
                                          retry_failed=s.retry_failed, progress=ctx.progress,
                                          reasoning_length=ctx.format.reasoning_length,
                                          next_turn=next_turn, origins=origins)
            finally:
                if counted is not None:    # also for a run cut short: what it generated was drafted so
                    record_spec_decode(ckpt, counted, engine.spec_decode_counts())
            report.skipped_done += done_later
            return report
        finally:
            if own:
                engine.close()
    finally:
        ckpt.close()


def run_temperature(ctx: RunContext) -> float:
    """The highest temperature this run samples at: the run's, or a partition's mode or mix override."""
    overrides = [o for p in ctx.partitions.partitions.values() for o in p.modes.overrides()]
    return max([ctx.sampling.temperature, *(o.temperature for o in overrides if o.temperature is not None)])


def refuse_unsafe_server(info, ctx: RunContext) -> None:
    """A drafter that would not keep the samples the target's own at the run's temperature, or a server the run's
    requests would kill: one line, nothing sent."""
    temperature = run_temperature(ctx)
    why = lossy_drafter(info.engine, info.server_args, temperature) \
        or split_prefill_hazard(info.engine, info.server_args, temperature)
    if why:
        raise EngineError(why)


def record_spec_decode(ckpt: Checkpoint, before, after) -> None:
    """Add what the engine's drafter counters rose by over this run to the checkpoint's (meta "spec_decode"). A
    counter that fell (a server restarted mid-run) or a server that stopped answering leaves this run uncounted."""
    delta = None if after is None else after - before
    if delta is None or min(delta.astuple()) < 0:
        log.warning("the drafter's counters could not be read over this run (a server restarted or stopped "
                    "answering /metrics): its acceptance is not counted")
        return
    stored = SpecDecodeCounts.from_json(ckpt.get_meta("spec_decode")) or SpecDecodeCounts()
    ckpt.set_meta("spec_decode", (stored + delta).to_json())


def _todo(records: list[PromptRecord], done: set[str], failed, retry_failed: bool) -> bool:
    return any(r.id not in done and (retry_failed or r.id not in failed) for r in records)


def _skipped(records: list[PromptRecord], done: set[str], failed, done_later: int) -> GenerateReport:
    """The report of a pass with nothing to send: what is done, what failed before."""
    return GenerateReport(skipped_done=sum(r.id in done for r in records) + done_later,
                          skipped_failed=sum(r.id in failed and r.id not in done for r in records))


def make_next_turn(ctx: RunContext, prepared: list[PromptRecord]):
    """What follows each turn of the run's own_history conversations (conversation/next_turn.py's NextTurn);
    None when no config continues conversations."""
    configs = [c for c in ctx.configs if ctx.partitions.partition(c).conversations]
    if not configs:
        return None
    validator = ctx.format.validator(ctx.max_seq_len, keep_truncated=ctx.settings.keep_truncated)
    return NextTurn(validator, max_new_tokens=ctx.sampling.max_new_tokens,
                    max_seq_len=ctx.max_seq_len,
                    max_turns={c: ctx.partitions.partition(c).max_turns for c in configs},
                    scripts={r.id: r.script for r in prepared if r.config in configs}, chat_format=ctx.format,
                    config_formats={c: ctx.config_format(c) for c in configs})


def shard_split(views: dict[str, ConfigPrompts], shard: tuple[int, int] | None) -> ShardSplit:
    """This run's shard of the conversations of its views (store/shard_split.py: dealt from the selection)."""
    return ShardSplit((c for v in views.values() for c in v.first), shard)


def reuse_line(views: dict[str, ConfigPrompts], configs: list[str], split: ShardSplit,
               pilot_limit: int | None) -> str | None:
    """'reusing N completed samples from an earlier run …' when this run's prompts (this shard's) have
    completions already; also what the checkpoint keeps outside this selection (a pilot's rows the full
    selection did not take, and its conversations' later turns: kept, never generated further nor emitted)."""
    reused = sum(1 for v in views.values() for i in v.done if split.holds(v.conversation(i)))
    unused = sum(v.completions_not_selected for v in views.values())
    turns = sum(v.kept_not_selected for v in views.values())
    if not reused and not unused and not turns:
        return None
    line = f"reusing {reused:,} completed samples from an earlier run"
    if pilot_limit is not None:
        line += f" (pilot limited to {pilot_limit} rows per config)"
    if unused:
        line += (f"; {unused:,} other completed samples of {', '.join(configs)} are not among this run's "
                 "prompts and stay out of the dataset")
    if turns:
        line += (f"; {turns:,} later turns of conversations not in this selection are kept in the checkpoint, not "
                 "generated further and not emitted")
    return line


def _stale_line(views: dict[str, ConfigPrompts], split: ShardSplit) -> str | None:
    """How many stored completions of this shard answered an earlier version of their prompt."""
    n = sum(1 for v in views.values() for i in v.stale_done if split.holds(v.conversation(i)))
    m = sum(1 for v in views.values() for conv in v.stale_turns.values() if split.holds(conv))
    if not n and not m:
        return None
    return (f"{n:,} completions answered an earlier version of their prompt and are generated again; {m:,} later "
            "turns of those conversations too (their source changed)")


def _forget_stale(ckpt: Checkpoint, views: dict[str, ConfigPrompts]) -> None:
    """Delete from this shard's own file what no longer answers the view: generate stores the new version under
    the same id (the checkpoint never overwrites a stored row)."""
    for c, v in views.items():
        hashes = ckpt.completion_hashes(c)
        turns = [t.id for t in ckpt.turn_index(c) if t.conversation in v.origins and t.origin is not None
                 and t.origin != v.origins[t.conversation]]
        stale = [i for i, h in hashes.items() if h is not None and v.prompt_hash(i) not in (None, h)]
        ends = [e.conversation_id for e, o in ckpt.end_rows(c) if e.conversation_id in v.origins
                and o is not None and o != v.origins[e.conversation_id]]
        if stale or turns or ends:
            ckpt.forget(completions=stale + [i for i in turns if i in hashes], turns=turns, conversations=ends)


def _continue(ckpt: Checkpoint, views: dict[str, ConfigPrompts], continuing, resume, stood, next_turn,
              split: ShardSplit) -> list[PromptRecord]:
    """What follows each turn whose completion stands while its conversation's source changed after it (the
    view's to_continue), computed now and stored; the next turns among it are this run's to generate."""
    out = []
    for c, pairs in continuing.items():
        for conv, tid in pairs:
            if tid not in stood or tid not in resume or not split.holds(conv):
                continue
            follow = next_turn(stood[tid], resume[tid])
            if follow is None:
                continue
            ckpt.commit_follow(follow, views[c].origins[conv])
            if isinstance(follow, PromptRecord):
                out.append(follow)
    return out
