"""`kimi-data probe` over a workdir: the held-out split, the arms, a drafter per arm and seed, their acceptance.

Drafters are trained on the training prompts of every probed partition together (one drafter per arm and seed, not
one per partition: on CPU that keeps both arms and 2 seeds of the demo within minutes) and measured on each
partition's held-out prompts; `kimi-data probe B4` probes one partition alone. Every arm gets the same loss-token
budget, every drafter the same held-out prompts, decoded greedily in-process (probe/decode.py) with up to `k` drafts
per verify step.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.probe.arms import (CURVE, TrainRow, compared_arms, compared_names, input_rows, passes, subset,
                                       to_train_row, upstream_row)
from kimi_eagle_data.probe.decode import Target, speculative
from kimi_eagle_data.probe.drafter import (DrafterSpec, Eagle3Drafter, aux_layer_ids, load_drafter, require_speculators,
                                           save_drafter)
from kimi_eagle_data.probe.history import OWN, SOURCE, LaterTurn, held_out_later, later_turns, source_history_rows
from kimi_eagle_data.probe.data_check import belonging_rows
from kimi_eagle_data.probe.interval import FEW_PROMPTS
from kimi_eagle_data.probe.report import build_report, is_workdir_dataset, report_path, write_report
from kimi_eagle_data.probe.served import ServedTarget, served_acceptance
from kimi_eagle_data.probe.split import HELD_OUT, held_out, prompt_key
from kimi_eagle_data.probe.train import SEQ_LEN
from kimi_eagle_data.probe.trainers import resolve_trainer, train
from kimi_eagle_data.prompts.prepared_file import read_prepared
from kimi_eagle_data.records import PromptRecord
from kimi_eagle_data.run_context import RunContext
from kimi_eagle_data.engines.local import LocalEngine
from kimi_eagle_data.probe.arm_data import write_arms
from kimi_eagle_data.progress import Snapshot

log = logging.getLogger(__name__)

DRAFTS = 3                 # k: drafts per verify step (speculators' ttt_steps; SGLang's --speculative-num-steps 3)
MAX_NEW_TOKENS = 96        # per held-out prompt
BUDGET = 20_000            # loss tokens per drafter
SEEDS = (0, 1)
IN_PROCESS = "in-process"


@dataclass
class ProbeOptions:
    data: Path | None = None          # None: the workdir's dataset
    configs: list[str] = field(default_factory=list)
    seeds: tuple[int, ...] = SEEDS
    budget: int = BUDGET
    held_out: int = HELD_OUT
    drafts: int = DRAFTS
    max_new_tokens: int = MAX_NEW_TOKENS
    curve: bool = True
    upstream: bool = True             # False: the own arms only (a damaged copy compared with the clean data)
    history: bool = True              # own_history configs: own vs source history (probe/history.py)
    split_seed: int = 0
    engine: str = IN_PROCESS          # who measures acceptance: IN_PROCESS (probe/decode.py) or "vllm" (probe/served.py)
    device: str = "cpu"               # with engine vllm: "cpu" (the CPU recipe) or "gpu" (vLLM installed here)
    tp: int = 1                       # with engine vllm on "gpu": its tensor-parallel GPUs
    out: Path | None = None           # the report's file (None: probe/report.report_path's default)
    compare: Path | None = None       # a second dataset: `data` against it, paired (no upstream, curve, history)
    write_arms: Path | None = None    # write each arm's rows there (probe/arm_data.py) and train nothing
    drafters: dict[str, list[Path]] = field(default_factory=dict)   # saved drafters to measure: arm -> a dir per seed
    trainer: str = "auto"             # probe/trainers.py TRAINERS, or "auto" (speculators' Trainer on a GPU)


class ProbeError(KimiDataError):
    pass


def load_target(path: str):
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.logging.disable_progress_bar()   # loading and saving models: the probe's own progress is what counts
    if "OMP_NUM_THREADS" not in __import__("os").environ:
        torch.set_num_threads(1)     # as the local engine: a tiny model gains nothing from more on shared cores
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


@dataclass
class Split:
    """A workdir's prompts split for a probe: the held-out prompts per partition, and the data's rows that may be
    trained on (every row of a held-out conversation, or with a held-out prompt, left out)."""

    records: dict[str, list[PromptRecord]]
    held: dict[str, list[PromptRecord]]
    firsts: dict[str, PromptRecord]          # first-turn prompts by id
    kept: list[TrainRow]
    excluded: int                            # the data's rows left out as held out
    data: Path
    own_all: list[TrainRow]                  # every row of the data in the probed configs, held out or not
    held_prompts: set[str]                   # prompt_key of each held-out prompt
    data_check: dict[str, Any] | None = None  # other data's rows against the workdir (probe/data_check.py)


def split_rows(ctx: RunContext, data: Path | None, configs: list[str], held_count: int, split_seed: int,
               max_new_tokens: int) -> Split:
    """The held-out split of `configs` (all prepared ones when empty) and the rows of `data` (the workdir's dataset
    when None) left to train on."""
    wd = ctx.workdir
    configs = configs or [c for c in ctx.configs if wd.prepared(c).exists()]
    records = {c: read_prepared(wd, c) for c in configs}
    max_prompt = ctx.max_seq_len - max_new_tokens
    held = {c: held_out(rs, held_count, split_seed, max_prompt) for c, rs in records.items()}
    cut = {c: len(h) for c, h in held.items() if len(h) < held_count}
    if cut:
        log.warning("--held-out %d is cut to half of each partition's first-turn prompts: %s", held_count,
                    ", ".join(f"{c} {n}" for c, n in cut.items()))
    held_ids = {r.id for rs in held.values() for r in rs}
    held_prompts = {prompt_key(r.prompt_ids) for rs in held.values() for r in rs}
    firsts = {r.id: r for rs in records.values() for r in rs if r.turn == 1}
    by_prompt = {prompt_key(r.prompt_ids): r for r in firsts.values()}
    data = data or wd.dataset
    if not data.exists():
        raise ProbeError(f"{data} does not exist; run `kimi-data emit --workdir {wd.root}` first or give the data to "
                         "probe with --data")
    raws, check = (input_rows(data), None) if is_workdir_dataset(wd, data) else belonging_rows(ctx, data)
    own_all = [to_train_row(raw, firsts, by_prompt) for raw in raws]
    own_all = [r for r in own_all if r.config in records or r.config is None]
    kept = [r for r in own_all if r.conversation not in held_ids and (r.id or "") not in held_ids
            and prompt_key(r.prompt.tolist()) not in held_prompts]
    return Split(records, held, firsts, kept, len(own_all) - len(kept), data, own_all, held_prompts,
                 check)


def prompts_of(held: dict[str, list[PromptRecord]]) -> dict[str, list[tuple[str, list[int]]]]:
    """Held-out prompt records as the decoder takes them: config -> (id, prompt ids)."""
    return {c: [(r.id, r.prompt_ids) for r in rs] for c, rs in held.items()}


def acceptance_per_prompt(decoder_target: Target, drafter, prompts: dict[str, list[tuple[str, list[int]]]],
                          drafts: int, max_new_tokens: int, stop: tuple[int, ...]) -> dict[str, list[dict[str, Any]]]:
    """Each held-out prompt (config -> (id, prompt ids)) decoded greedily with `drafter`: its tokens and verify
    steps, per partition."""
    per_prompt: dict[str, list[dict[str, Any]]] = {}
    for config, pairs in prompts.items():
        per_prompt[config] = []
        for pid, ids in pairs:
            d = speculative(decoder_target, drafter, ids, drafts, max_new_tokens, stop)
            per_prompt[config].append({"id": pid, "tokens": d.tokens, "steps": d.steps})
    return per_prompt


def probe_run(ctx: RunContext, opts: ProbeOptions) -> dict[str, Any]:
    if opts.write_arms is None:
        require_speculators()
    t0 = time.perf_counter()
    split = split_rows(ctx, opts.data, opts.configs, opts.held_out, opts.split_seed, opts.max_new_tokens)
    records, held, firsts, kept, excluded, data = (split.records, split.held, split.firsts, split.kept,
                                                   split.excluded, split.data)
    own_all, held_prompts, configs = split.own_all, split.held_prompts, list(records)
    max_prompt = ctx.max_seq_len - opts.max_new_tokens
    held_ids = {r.id for rs in held.values() for r in rs}
    lead, baseline = "own", "upstream"
    if opts.compare is not None:
        other = split_rows(ctx, opts.compare, opts.configs, opts.held_out, opts.split_seed, opts.max_new_tokens)
        lead, baseline = compared_names(data, other.data)
        arm_rows = compared_arms(kept, other.kept, firsts, (lead, baseline))
    else:
        arm_rows = _arms(ctx, opts, kept, firsts)
    if opts.drafters:
        return _measure_saved(ctx, opts, split, t0)
    empty = [a for a, rows in arm_rows.items() if not rows]
    if empty:
        raise ProbeError(f"arm {empty[0]} has no training row (held out {len(held_ids)} prompts of "
                         f"{sum(len(r) for r in records.values())}); probe more data or fewer held-out prompts")
    repeats = passes(arm_rows, opts.budget, (lead, baseline))
    if opts.write_arms is not None:
        return write_arms(opts.write_arms, arm_rows, prompts_of(held))

    max_turns = {c: ctx.partitions.partition(c).max_turns for c in configs
                 if ctx.partitions.partition(c).conversations}
    history_asked = opts.history and max_turns and opts.compare is None
    turns = later_turns(own_all, firsts, max_turns) if history_asked else []
    if history_asked and not turns:
        log.warning("the own_history configs (%s) have no later turn in the data: the history arms are left out",
                    ", ".join(sorted(max_turns)))

    target_path = str(ctx.run["model"])
    trainer = resolve_trainer(opts.trainer)
    target = load_target(target_path)
    aux = aux_layer_ids(int(target.config.num_hidden_layers))
    spec = DrafterSpec(target_path, tuple(aux), ttt_steps=opts.drafts)
    decoder_target = Target(target, aux)
    stop = (ctx.tokens.end_of_turn,)
    drafter_info: dict[str, Any] = {}
    drafters = DrafterProgress(ctx.progress, (len(arm_rows) + (2 if turns else 0)) * len(opts.seeds))
    served = ServedTarget(target_path, ctx.profile, ctx.max_seq_len, ctx.workdir.root / "probe-drafters",
                          device=opts.device, tp=opts.tp, vocab_size=ctx.vocab_size()) \
        if opts.engine != IN_PROCESS else None
    engine_info: dict[str, Any] = {}

    def acceptance_of(trained, arm: str, seed: int, prompts) -> dict[str, list[dict[str, Any]]]:
        """The held-out prompts decoded with the trained drafter: in-process, or by vLLM serving it (saved as
        speculators saves a drafter, under WORKDIR/probe-drafters/)."""
        nonlocal engine_info
        if served is None:
            return acceptance_per_prompt(decoder_target, Eagle3Drafter(trained.model), prompts, opts.drafts,
                                         opts.max_new_tokens, stop)
        saved = served.log_dir / f"{arm.replace(' ', '-')}-seed{seed}"
        save_drafter(trained.model, saved, str(ctx.run["model"]),
                     {"arm": arm, "seed": seed, "steps": trained.steps, "loss_tokens": trained.loss_tokens})
        per_prompt, engine_info = served_acceptance(served, saved, prompts, opts.drafts, opts.max_new_tokens, stop)
        return per_prompt

    def measure(arms: dict[str, list[TrainRow]], prompts: dict[str, list[tuple[str, list[int]]]]
                ) -> dict[str, dict[int, dict[str, Any]]]:
        """Each arm trained per seed, then decoded on the held-out prompts (config -> (id, prompt ids))."""
        nonlocal drafter_info
        results: dict[str, dict[int, dict[str, Any]]] = {}
        for arm, rows in arms.items():
            results[arm] = {}
            for seed in opts.seeds:
                log.info("probe: training arm %s, seed %d on %d rows", arm, seed, len(rows))
                trained = train(rows, target, spec, budget=opts.budget, seed=seed, trainer=trainer)
                drafter_info = spec.describe(trained.model)
                t1 = time.perf_counter()
                per_prompt = acceptance_of(trained, arm, seed, prompts)
                pooled = [p for ps in per_prompt.values() for p in ps]
                log.info("probe: arm %s, seed %d: %d steps in %.0fs, acceptance %.3f on %d held-out prompts (%.0fs)",
                         arm, seed, trained.steps, trained.seconds, sum(p["tokens"] for p in pooled) /
                         max(1, sum(p["steps"] for p in pooled)), len(pooled), time.perf_counter() - t1)
                drafters.measured(sum(p["tokens"] for p in pooled))
                results[arm][seed] = {"rows": len(rows), "prompts": len({x.id for x in rows}),
                                      "loss_tokens_available": sum(x.loss_tokens for x in rows),
                                      "steps": trained.steps, "loss_tokens": trained.loss_tokens,
                                      "train_seconds": round(trained.seconds, 1),
                                      "decode_seconds": round(time.perf_counter() - t1, 1),
                                      "last_loss": round(trained.last_loss, 4), "prompts_by_config": per_prompt}
        return results

    try:
        results = measure(arm_rows, prompts_of(held))
        history = (_history(ctx, turns, held_ids, held_prompts, opts, max_prompt, target_path, measure) if turns
                   else None)
    finally:
        drafters.stop()
    setup = {"target": target_path, "model": ctx.run["model"], "trainer": trainer, "drafter": drafter_info,
             "budget_loss_tokens": opts.budget, "seq_len": SEQ_LEN, "seeds": list(opts.seeds),
             "drafts_per_step": opts.drafts, "max_new_tokens": opts.max_new_tokens, "held_out_per_config":
             opts.held_out, "split_seed": opts.split_seed, "data": str(data),
             "device": "gpu" if trainer == "speculators" and torch.cuda.is_available() else "cpu",
             "data_name": "this dataset" if is_workdir_dataset(ctx.workdir, data) else data.name,
             "data_check": split.data_check, "excluded_held_out_rows": excluded,
             "budget_policy": "equal loss tokens per arm", "passes": repeats,
             "measured_by": "engine" if served else IN_PROCESS, "engine": engine_info or None}
    if opts.compare is not None:
        setup |= {"data_name": f"{lead} against {baseline}", "compared_with": str(opts.compare),
                  "compared_data_check": other.data_check}
    report = build_report(setup, {c: [r.id for r in rs] for c, rs in held.items()}, results, lead, baseline)
    if opts.compare is not None:
        report["compared"] = [lead, baseline]
    if history is not None:
        report["history"] = history
    report["seconds"] = round(time.perf_counter() - t0, 1)
    few = [c for c, e in report["configs"].items() if 0 < e["held_out"] < FEW_PROMPTS]
    if few:
        log.warning("the intervals of %s are over fewer than %d held-out prompts each: their spread is barely "
                    "estimated (raise --held-out or probe more prompts)", ", ".join(few), FEW_PROMPTS)
    write_report(opts.out or report_path(ctx.workdir, opts.data, None, opts.compare), report)
    return report


def _measure_saved(ctx: RunContext, opts: ProbeOptions, split: Split, t0: float) -> dict[str, Any]:
    """`--drafter ARM=DIR`: saved drafters (speculators' format; e.g. trained by speculators' trainer on a GPU node)
    measured on this workdir's held-out prompts, in-process or served by vLLM, and reported as trained ones are."""

    target_path = str(ctx.run["model"])
    prompts = prompts_of(split.held)
    stop = (ctx.tokens.end_of_turn,)
    served = ServedTarget(target_path, ctx.profile, ctx.max_seq_len, ctx.workdir.root / "probe-drafters",
                          device=opts.device, tp=opts.tp, vocab_size=ctx.vocab_size()) \
        if opts.engine != IN_PROCESS else None
    decoder_target = None
    if served is None:
        target = load_target(target_path)
        decoder_target = Target(target, aux_layer_ids(int(target.config.num_hidden_layers)))
    engine_info: dict[str, Any] = {}
    results: dict[str, dict[int, dict[str, Any]]] = {}
    for arm, dirs in opts.drafters.items():
        results[arm] = {}
        for seed, d in enumerate(dirs):
            t1 = time.perf_counter()
            if served is None:
                per_prompt = acceptance_per_prompt(decoder_target, Eagle3Drafter(load_drafter(d, target_path)),
                                                   prompts, opts.drafts, opts.max_new_tokens, stop)
            else:
                per_prompt, engine_info = served_acceptance(served, d, prompts, opts.drafts, opts.max_new_tokens,
                                                            stop)
            results[arm][seed] = {"rows": None, "prompts": None, "loss_tokens_available": None, "drafter": str(d),
                                  "decode_seconds": round(time.perf_counter() - t1, 1),
                                  "prompts_by_config": per_prompt}
    lead, baseline = "own", "upstream"
    setup = {"target": target_path, "model": ctx.run["model"], "trainer": "saved drafters (--drafter)",
             "drafters": {a: [str(d) for d in ds] for a, ds in opts.drafters.items()}, "seeds":
             sorted({s for r in results.values() for s in r}), "drafts_per_step": opts.drafts,
             "max_new_tokens": opts.max_new_tokens, "held_out_per_config": opts.held_out,
             "split_seed": opts.split_seed, "data": str(split.data), "data_name": "saved drafters",
             "measured_by": "engine" if served else IN_PROCESS, "engine": engine_info or None}
    report = build_report(setup, {c: [r.id for r in rs] for c, rs in split.held.items()}, results, lead, baseline)
    report["seconds"] = round(time.perf_counter() - t0, 1)
    write_report(opts.out or report_path(ctx.workdir, opts.data, None, opts.compare), report)
    return report


def _arms(ctx: RunContext, opts: ProbeOptions, kept: list[TrainRow], firsts: dict[str, PromptRecord]
          ) -> dict[str, list[TrainRow]]:
    """own, upstream and the learning curve's shares, on the training prompts with both an own row and an upstream
    answer."""
    own_firsts = {r.id for r in kept if r.id in firsts}
    upstream = [u for u in (upstream_row(firsts[i], ctx.format, ctx.max_seq_len)
                            for i in sorted(own_firsts) if firsts[i].answer) if u is not None]
    shared = {u.id for u in upstream}
    own = [r for r in kept if r.id in shared]
    arm_rows: dict[str, list[TrainRow]] = {"own": own, "upstream": upstream} if shared else {"own": kept}
    if not opts.upstream:
        arm_rows.pop("upstream", None)
    if not shared:
        log.warning("no training prompt has both an own row and an upstream answer: only the own arm is trained")
    if opts.curve:
        for share in CURVE[:-1]:
            arm_rows[f"own {share:g}"] = subset(own if shared else kept, share, opts.split_seed)
    return arm_rows


class DrafterProgress:
    """The probe's drafters as a progress step (trained and measured: done of total), so the CLI shows an ETA."""

    LABEL = "probe: drafters"

    def __init__(self, progress, total: int):
        self.progress, self.total, self.done, self.tokens = progress, total, 0, 0
        self.t0 = time.perf_counter()
        progress.start(self.LABEL, total)

    def measured(self, tokens: int) -> None:
        self.done += 1
        self.tokens += tokens
        self.progress.update(Snapshot(self.LABEL, self.done, self.total,
                                      self.tokens / max(time.perf_counter() - self.t0, 1e-9)))

    def stop(self) -> None:
        self.progress.stop()



def _history(ctx: RunContext, turns: list[LaterTurn], held_ids: set[str], held_prompts: set[str], opts: ProbeOptions,
             max_prompt: int, target_path: str, measure) -> dict[str, Any] | None:
    """The history arms (probe/history.py) on the same later turns, measured on the held-out conversations' later
    turns; None (with a warning) when either arm or the held-out set is empty."""
    held_later = held_out_later(turns, held_ids, opts.held_out, opts.split_seed, max_prompt)
    training = [t for t in turns if t.first.id not in held_ids and prompt_key(t.row.prompt.tolist()) not in held_prompts]
    engine = LocalEngine(target_path)
    try:
        source = source_history_rows(training, ctx, engine)
    finally:
        engine.close()
    answered = {r.id for r in source}
    own = [t.row for t in training if t.row.id in answered]
    if not own or not held_later:
        log.warning("the history arms are left out: %s", "no later turn of a held-out conversation" if own else
                    "no later turn could be answered on the source's history")
        return None
    results = measure({OWN: own, SOURCE: source},
                      {c: [(r.id or "", r.prompt.tolist()) for r in rows] for c, rows in held_later.items()})
    report = build_report({}, {c: [r.id or "" for r in rows] for c, rows in held_later.items()}, results, OWN, SOURCE)
    return {k: report[k] for k in ("held_out", "arms", "configs")}
