"""Stage 1, prepare: source rows -> selection -> adapter -> filters -> the model's chat template
-> dedup -> PromptRecords.

Per config, in this order (each rejection is kept with its reason, never silent):

    scanned     every row read (JSONL line, Parquet row, Hub row); capped by --limit / scan_limit
    repeats     rows repeating a selected row's key (same source id) and prompts: counted, not selected
    selected    the seeded selection, consumed in rank order until `n` prompts are prepared
                (sources/selection.py); a row gives one prompt, or one per user turn (every_user_prefix)
    adapted     adapter errors: malformed_json, wrong_type, missing_field, empty_user_turn, …;
                too_many_chars for a raw row over `max_row_bytes` (refused while read, never parsed); and
                repeated_id for a row giving a selected row's source id to other prompts
    content     empty_prompt, non_text_content                        (sources/filters.py)
    tools       invalid_tool_schema
    language    language                                              (opt-in)
    chars       too_many_chars     (default max_chars: max_seq_len × 32, sources/filters.py)
    decontam    contaminated (which eval set, which n-gram)           (sources/decontam.py, opt-in)
    render      template_error, no_generation_prompt, prompt_id_out_of_vocab (an id >= the model's
                vocabulary size, model_profile.model_vocab_size: a server cannot embed it)
    length      prompt_too_long: prompt_len + max_new_tokens > max_seq_len (never truncated)
    dedup       duplicate_prompt (naming the kept id), within and across the configs prepared together
    near_dedup  near_duplicate                                        (sources/dedup.py, opt-in)
    prepared

Each prepared prompt keeps the source's own answer beside it when the source has one (`answer`, for
`kimi-data score`); prompts without one are counted (`without_answer`), never dropped.

Counts land in `prepared/<CFG>.json` (`selected`, `prepared`, `rejected` by reason,
`rejected_total`, the `funnel`, scan statistics); rejected rows in `prepared/<CFG>.rejects.jsonl`.
Accounting: selected = prepared + rejected_total.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable

from kimi_eagle_data.chat_format import ChatFormat, ToolSchemaUnsupported, with_partition_options
from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.sources.partitions import Partition
from kimi_eagle_data.sources.decontam import DecontamSettings, Decontaminator
from kimi_eagle_data.sources.dedup import DedupSettings, ExactDedup, MinHashDedup, exact_key
from kimi_eagle_data.sources.filters import check_chars, check_content, check_language, check_tools, max_row_bytes, user_text
from kimi_eagle_data.records import PromptRecord, Rejection, SourcePrompt, SourceRowError
from kimi_eagle_data.sources.selection import ScanStats, select
from kimi_eagle_data.sources.adapters import CHAT_COLUMNS, adapter_columns
from kimi_eagle_data.sources.readers import SourceFileError, SourceRow, iter_source, local_source, record_columns
from kimi_eagle_data.sources.rows import AdapterColumns
from kimi_eagle_data.prompts.tokenizer import load_tokenizer, special_text_line
from kimi_eagle_data.prompts.prepared_file import write_prepared
from kimi_eagle_data.model_profile import INSTANT, THINKING, ModelProfile, model_vocab_size
from kimi_eagle_data.sources.modes import ModePlan, choose_effort, choose_mode, choose_sampling, run_wide_overridden
from kimi_eagle_data.store.workdir import Workdir
from kimi_eagle_data.wording import counted
from kimi_eagle_data.profile import get_profile

log = logging.getLogger(__name__)

STAGES = ("adapted", "content", "tools", "language", "chars", "decontam", "render", "length", "dedup", "near_dedup")
REASON_STAGE = {
    "empty_prompt": "content", "non_text_content": "content", "special_token_text": "content",
    "invalid_tool_schema": "tools",
    "language": "language", "too_many_chars": "chars", "contaminated": "decontam",
    "template_error": "render", "no_generation_prompt": "render",
    "prompt_id_out_of_vocab": "render", "prompt_too_long": "length",
    "duplicate_prompt": "dedup", "duplicate_source_row": "dedup", "near_duplicate": "near_dedup",
}


def sample_id(config: str, source: str, source_id: str, prompt_rule: str, mode: str = THINKING) -> str:
    """Stable id: same source row + same settings -> same id, on any machine. The mode enters the key only
    for instant prompts: thinking ids are the ids prompts had before there were modes (a run resumes)."""
    parts = (config, source, source_id, prompt_rule) + ((mode,) if mode != THINKING else ())
    key = "\x1f".join(parts)
    return f"{config}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


class PrepareError(KimiDataError):
    """Configs that could not be prepared (a source that cannot be read, or none of whose rows became a prompt),
    in one line; the other configs were prepared."""


@dataclass
class PrepareReport:
    config: str
    source: str
    selected: int = 0                      # prompts taken from the selection (= prepared + rejected)
    prepared: int = 0
    rejected: Counter = field(default_factory=Counter)
    n: int | None = None                   # prompts wanted
    seed: int = 0
    policy: str = "first_user"
    scanned: int = 0                       # source rows read
    rows_selected: int = 0                 # source rows consumed from the selection
    candidates: int = 0                    # rows the selection held
    repeated_rows: int = 0                 # rows repeating a selected row's key and prompts (not selected)
    scan_errors: Counter = field(default_factory=Counter)   # row-level failures among all scanned rows
    exhausted: bool = False                # fewer than n prepared: the candidates ran out
    passed: Counter = field(default_factory=Counter)        # prompts past each stage
    without_answer: int = 0                # prepared prompts whose source has no answer to score (`score`)
    contaminated_by: Counter = field(default_factory=Counter)
    partition: dict = field(default_factory=dict)
    limit: int | None = None               # --limit: source rows read at most (a pilot), None for the full source
    ignored_columns: list = field(default_factory=list)     # a local source's columns the adapter does not read
    # prompts kept although their text holds special-token strings (partition special_text = "as_served")
    special_text_kept: int = 0
    # prepared prompts per code of what their history holds that the format renders but never accepts from the
    # model (PromptModes.history_notes: K3's tool-call arguments not JSON, or NaN): kept, counted, warned
    history_arguments: Counter = field(default_factory=Counter)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "PrepareReport":
        """The summary fields of a written report (what a reused prepare shows)."""
        return cls(config=d["config"], source=d["source"], selected=d["selected"], prepared=d["prepared"],
                   rejected=Counter(d["rejected"]), special_text_kept=d.get("special_text_kept", 0))

    def funnel(self) -> list[tuple[str, int]]:
        return [("scanned", self.scanned), ("selected", self.selected)] + [(s, self.passed[s]) for s in STAGES]

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("rejected", "scan_errors", "contaminated_by", "history_arguments"):
            d[k] = dict(sorted(getattr(self, k).items()))
        d.pop("passed")
        d["rejected_total"] = sum(self.rejected.values())
        d["funnel"] = dict(self.funnel())
        return d


class PrepareState:
    """What the configs prepared together share: the dedup indexes and the decontaminator."""

    def __init__(self, dedup: DedupSettings | None = None, decontam: DecontamSettings | Decontaminator | None = None):
        self.dedup = dedup or DedupSettings()
        self.exact = ExactDedup(self.dedup.across_configs) if self.dedup.exact else None
        self._near: MinHashDedup | None = None
        if isinstance(decontam, Decontaminator):
            self.decontam = decontam
        else:
            self.decontam = Decontaminator(decontam) if decontam and decontam.sets else None

    def near(self) -> MinHashDedup:
        if self._near is None:
            d = self.dedup
            self._near = MinHashDedup(d.near_threshold, d.shingle_words, d.num_perm)
        return self._near


def partition_info(p: Partition) -> dict[str, Any]:
    return {"name": p.name, "upstream": p.upstream, "upstream_config": p.upstream_config, "split": p.upstream_split,
            "revision": p.revision, "adapter": p.adapter, "policy": p.policy, "license": p.license,
            "prompt_rule": p.prompt_rule, "n": p.n, "seed": p.seed, "builtin": p.builtin,
            "filters": asdict(p.filters), **({} if p.modes.is_default else {"modes": p.modes.to_json()}),
            **({"max_turns": p.max_turns} if p.conversations else {}),
            **({"special_text": p.special_text} if p.special_text != "reject" else {}),
            **({"template_options": p.template_options} if p.template_options else {})}


def prepare_rows(partition: Partition, rows: Iterable[SourceRow], tokenizer, *, modes: "PromptModes",
                 max_new_tokens: int, max_seq_len: int, source_desc: str, state: PrepareState | None = None,
                 n: int | None = None, seed: int | None = None, vocab_size: int | None = None,
                 source_name: str | None = None) -> tuple[list[PromptRecord], list[Rejection], PrepareReport]:
    """Prepare one config. Raises SourceFileError when the source cannot be read at all.
    `modes`: the run's format, and how each prompt's mode and sampling are chosen (`PromptModes.of`).
    `vocab_size`: the model's id bound (model_profile.model_vocab_size; default the tokenizer's length).
    `source_name`: what the rows' `source` names (default the partition's upstream: a Hub id or its label)."""
    state = state or PrepareState()
    vocab_size = len(tokenizer) if vocab_size is None else vocab_size
    cfg = partition.config
    n = partition.n if n is None else n
    seed = partition.seed if seed is None else seed
    report = PrepareReport(cfg, source_desc, n=n, seed=seed, policy=partition.policy,
                           partition=partition_info(partition))
    records: list[PromptRecord] = []
    rejections: list[Rejection] = []
    seen_ids: set[str] = set()
    near_on = state.dedup.near if partition.near_dedup is None else partition.near_dedup
    scan = ScanStats()
    candidates = select(partition, rows, n=n, seed=seed, stats=scan)
    report.scanned, report.candidates = scan.scanned, len(candidates)
    report.scan_errors = scan.errors

    def reject(source_id: str, code: str, message: str, id_: str = "") -> None:
        report.rejected[code] += 1
        rejections.append(Rejection(cfg, "prepare", source_id, code, message, id_))

    def full() -> bool:
        return n is not None and report.prepared >= n

    config = _Config(partition, tokenizer, modes, max_new_tokens, max_seq_len, vocab_size, seed, state, near_on,
                     seen_ids, report, source_name or partition.upstream)

    for cand in candidates:
        if full():
            break
        report.rows_selected += 1
        report.repeated_rows += cand.repeats
        where = f"{cfg} row {cand.row_number}"
        if cand.error is not None:
            report.selected += 1
            reject(cand.name, cand.error.code, f"{where}: {cand.error.message}")
            continue
        for sid, item in cand.items:
            if full():
                break
            report.selected += 1
            if isinstance(item, SourceRowError):
                reject(sid, item.code, f"{where}: {item.message}")
                continue
            report.passed["adapted"] += 1
            _prepare_prompt(config, item, where, records, reject)
    # short of n although the source had more rows than the selection held: oversample was too small
    report.exhausted = (n is not None and report.prepared < n and report.rows_selected == len(candidates)
                        and scan.scanned - scan.duplicate_row_keys > len(candidates))
    return records, rejections, report


@dataclass
class _Config:
    """What every prompt of one config is prepared against (prepare_rows makes it once)."""
    partition: Partition
    tokenizer: Any
    modes: "PromptModes"
    max_new_tokens: int
    max_seq_len: int
    vocab_size: int
    seed: int
    state: PrepareState
    near_on: bool
    seen_ids: set[str]
    report: PrepareReport
    source_name: str                # the rows' `source`


@dataclass
class _Draft:
    """One prompt on its way through the steps: its id, mode and sampling, and what the steps find."""
    sp: SourcePrompt
    id: str
    mode: str
    effort: str | None
    sampling: dict[str, float]
    special: tuple[str, list[str]] | None          # the special-token text it holds (_special_text)
    prompt_ids: list[int] = field(default_factory=list)   # the render step's
    exact_key: bytes = b""                           # the dedup step's
    near_sig: Any = None                             # the near_dedup step's


# A step: the prompt's rejection (reason code, message) or None, when it passes.
Failure = tuple[str, str] | None


def _draft(c: _Config, sp: SourcePrompt) -> _Draft:
    p, modes, sid = c.partition, c.modes, sp.source_id
    id_ = sample_id(p.config, p.upstream, sid, p.id_rule)
    mode = choose_mode(p.modes, c.seed, id_)      # drawn from the thinking id: stable whatever the mode
    effort = choose_effort(p.modes, c.seed, id_, mode, modes.default_effort)
    sampling = choose_sampling(p.modes, c.seed, id_, mode, modes.profile, modes.run_wide)
    if mode != THINKING:
        id_ = sample_id(p.config, p.upstream, sid, p.id_rule, mode)
    return _Draft(sp, id_, mode, effort, sampling, _special_text(sp, modes.special_text()))


def _content_step(c: _Config, d: _Draft) -> Failure:
    return check_content(d.sp.messages) or _special_text_reason(c.partition, d.special)


def _tools_step(c: _Config, d: _Draft) -> Failure:
    return check_tools(d.sp.tools) if c.partition.filters.validate_tools else None


def _language_step(c: _Config, d: _Draft) -> Failure:
    return check_language(d.sp.messages, c.partition.filters)


def _chars_step(c: _Config, d: _Draft) -> Failure:
    return check_chars(d.sp.messages, d.sp.tools, c.partition.filters, c.max_seq_len)


def _decontam_step(c: _Config, d: _Draft) -> Failure:
    hit = c.state.decontam.check(d.sp.messages) if c.state.decontam is not None else None
    if not hit:
        return None
    name, row, gram = hit
    c.report.contaminated_by[name] += 1
    return "contaminated", f"shares {len(gram.split())} words with eval set {name} row {row}: {gram[:120]!r}"


def _render_step(c: _Config, d: _Draft) -> Failure:
    try:
        d.prompt_ids = c.modes.render(d.sp.messages, d.sp.tools, d.mode, d.effort)
    except ToolSchemaUnsupported as e:
        # never a JSON-declared prompt in the data: the row is counted out with its reason
        return "tool_schema_unsupported", str(e)
    except Exception as e:  # jinja raises many types; the message is what matters
        return "template_error", f"chat template failed: {' '.join(str(e).split())[:300]}"
    gen_prompt_ids = c.modes.generation_prompts[d.mode]
    if not gen_prompt_ids or d.prompt_ids[-len(gen_prompt_ids):] != gen_prompt_ids:
        return "no_generation_prompt", (f"rendered prompt does not end with the profile's {d.mode}-mode "
                                        "generation prompt")
    beyond = [t for t in d.prompt_ids if t >= c.vocab_size]
    if beyond:
        # A server cannot embed such an id (real SGLang and vLLM crash on it): the prompt is never sent.
        return "prompt_id_out_of_vocab", (f"prompt holds {len(beyond)} id(s) at or above the model's vocabulary size "
                                          f"{c.vocab_size}, first {beyond[0]}")
    return None


def _length_step(c: _Config, d: _Draft) -> Failure:
    if len(d.prompt_ids) + c.max_new_tokens > c.max_seq_len:
        return "prompt_too_long", (f"prompt_len {len(d.prompt_ids)} + max_new_tokens {c.max_new_tokens} > "
                                   f"max_seq_len {c.max_seq_len}")
    return None


def _dedup_step(c: _Config, d: _Draft) -> Failure:
    if d.id in c.seen_ids:
        return "duplicate_source_row", f"source id {d.sp.source_id!r} seen before"
    if c.state.exact is None:
        return None
    d.exact_key = exact_key(d.sp.messages, d.sp.tools)
    kept = c.state.exact.check(c.partition.config, d.exact_key)
    return ("duplicate_prompt", f"same prompt (normalized) as {kept}") if kept is not None else None


def _near_dedup_step(c: _Config, d: _Draft) -> Failure:
    if not c.near_on:
        return None
    near = c.state.near()
    d.near_sig = near.signature(user_text(d.sp.messages))
    hit = near.check(c.partition.config, d.near_sig, c.state.dedup.across_configs)
    return ("near_duplicate", f"near duplicate of {hit[0]} (estimated Jaccard {hit[1]:.2f})") if hit else None


# The steps a prompt passes, in order, each named by the funnel stage it counts in (STAGES after `adapted`).
PROMPT_STEPS = (("content", _content_step), ("tools", _tools_step), ("language", _language_step),
                ("chars", _chars_step), ("decontam", _decontam_step), ("render", _render_step),
                ("length", _length_step), ("dedup", _dedup_step), ("near_dedup", _near_dedup_step))


def _prepare_prompt(c: _Config, sp: SourcePrompt, where: str, records: list[PromptRecord], reject) -> None:
    """One adapted prompt through PROMPT_STEPS: rejected at the first step that fails it, else kept (its ids in the
    dedup indexes, its record appended)."""
    d = _draft(c, sp)
    for stage, step in PROMPT_STEPS:
        failure = step(c, d)
        if failure:
            reject(sp.source_id, failure[0], f"{where}: {failure[1]}", d.id)
            return
        c.report.passed[stage] += 1
    cfg = c.partition.config
    c.seen_ids.add(d.id)
    if c.state.exact is not None:
        c.state.exact.add(cfg, d.exact_key, d.id)
    if c.near_on:
        c.state.near().add(cfg, d.near_sig, d.id)
    records.append(PromptRecord(d.id, cfg, c.source_name, sp.source_id, sp.messages, sp.tools, d.prompt_ids,
                                sp.answer, mode=d.mode, effort=d.effort, temperature=d.sampling["temperature"],
                                top_p=d.sampling["top_p"], script=sp.script))
    c.report.prepared += 1
    c.report.without_answer += sp.answer is None
    c.report.special_text_kept += d.special is not None
    c.report.history_arguments.update(c.modes.history_notes(sp.messages))


def _special_text(sp: SourcePrompt, finder) -> tuple[str, list[str]] | None:
    """Where the text the prompt and its conversation render (the prompt's messages and tools, and under
    own_history the source's later turns) holds special-token strings, and which; None when it holds none, or
    when the format keeps typed special-token text as text (`finder` None: K3)."""
    if finder is None:
        return None
    return finder.in_chat(sp.messages, sp.tools) or finder.in_chat(sp.script or ())


def _special_text_reason(partition: Partition, found: tuple[str, list[str]] | None) -> "tuple[str, str] | None":
    """special_token_text for a row whose text holds special-token strings, unless the partition keeps such rows
    as served (special_text = "as_served")."""
    if found is None or partition.special_text == "as_served":
        return None
    return "special_token_text", (f"{special_text_line(found)}, which the tokenizer and the serving stack encode "
                                  "as the special tokens themselves; partition option special_text = \"as_served\" "
                                  "keeps such rows")


@dataclass(frozen=True)
class PromptModes:
    """What choosing and rendering a prompt's mode needs: the profile (per-mode sampling defaults), each
    mode's generation prompt ids, and the run's explicit sampling settings (None where not given)."""

    profile: ModelProfile
    generation_prompts: dict[str, list[int]]
    chat_format: ChatFormat          # the run's, bound to its profile and tokenizer (formats/, from the stage)
    run_wide: dict[str, float | None] = field(default_factory=dict)

    @property
    def default_effort(self) -> str | None:
        """The effort a thinking prompt announces without an efforts table (None: the format has no efforts)."""
        return self.chat_format.default_effort

    def render(self, messages, tools, mode: str, effort: str | None = None) -> list[int]:
        return self.chat_format.render_prompt(messages, tools, mode, effort)

    def special_text(self):
        """The finder of special-token text in a prompt's text; None where the format keeps it text (K3)."""
        return self.chat_format.special_text()

    def history_notes(self, messages) -> set[str]:
        """What the prompt's history holds that the format renders but never accepts from the model."""
        return self.chat_format.history_notes(messages)

    def history_line(self, config: str, counts: Counter) -> str | None:
        """The warning for a config's prompts kept with such a history; None when it has none."""
        if not counts:
            return None
        what = "; ".join(f"{counted(n, 'prompt')} whose history holds {self.chat_format.history_note_descriptions[code]}"
                         f" ({code})" for code, n in sorted(counts.items()))
        return f"{config}: {what}; kept, rendered as the model renders them (prepared/{config}.json: history_arguments)"

    def check_renderer(self, records: list[PromptRecord], where: str) -> None:
        self.chat_format.check_renderer(records, where)

    @classmethod
    def of(cls, profile: ModelProfile, tokenizer, chat_format: ChatFormat, thinking_ids: list[int] | None = None,
           run_wide: dict[str, float | None] | None = None) -> "PromptModes":
        """`chat_format` bound to `profile` and `tokenizer` here (where it is not already)."""
        chat_format = chat_format.bind(profile, tokenizer)

        def ending(mode: str) -> list[int]:
            return chat_format.generation_prompt_ids(mode)

        prompts = {THINKING: list(thinking_ids) if thinking_ids is not None else ending(THINKING),
                   INSTANT: ending(INSTANT)}
        return cls(profile, prompts, chat_format, dict(run_wide or {}))


# -- several configs ----------------------------------------------------------------------------------

@dataclass
class PrepareRun:
    reports: dict[str, PrepareReport]
    errors: dict[str, str]                 # config -> one line: its source could not be read, or gave no prompt
    decontam: dict[str, dict[str, int]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)    # one line each: columns a local source has that go unread

    def error_line(self) -> str:
        """The configs that failed, in one line; the others were prepared all the same."""
        others = [c for c in self.reports if c not in self.errors]
        return "; ".join(self.errors.values()) + (f"; {', '.join(others)} prepared" if others else "")


def prepare_configs(settings, partitions, tokenizer, *, gen_prompt_ids: list[int], max_new_tokens: int,
                    max_seq_len: int, workdir: Workdir | None, chat_format: ChatFormat) -> PrepareRun:
    """Prepare `settings.configs` in order, sharing dedup and decontamination across them.

    `settings` is a RunSettings (duck-typed: configs, profile, sources, samples, revision, limit), `partitions`
    the partition config it was resolved with (sources/config.py). With `workdir=None` nothing is written
    (`prepare --dry-run`). A config whose source cannot be read is recorded in `errors` and skipped; the others
    go on."""
    pconf = partitions
    profile = get_profile(settings.profile)
    vocab_size = model_vocab_size(profile, tokenizer)
    modes = PromptModes.of(profile, tokenizer, chat_format, gen_prompt_ids,
                           {"temperature": settings.temperature, "top_p": settings.top_p})
    state = PrepareState(pconf.dedup, pconf.decontam)
    run = PrepareRun({}, {}, state.decontam.summary() if state.decontam else {})
    warn_run_wide_overridden(modes.run_wide, {c: pconf.partition(c).modes for c in settings.configs})
    if (ignored := samples_ignored(settings, pconf)) is not None:
        run.warnings.append(ignored)
    run_modes = modes
    for config in settings.configs:
        part = pconf.partition(config)
        # A partition's own template arguments (its `preserve_thinking`) over the run's: its prompts render so.
        modes = replace(run_modes, chat_format=with_partition_options(chat_format, part.template_options))
        columns: dict[str, None] = {}      # a local file's columns, as its rows are read
        try:
            desc, rows = iter_source(part, settings.sources.get(config), samples=settings.samples,
                                     revision=settings.revision, limit=settings.limit,
                                     max_row_bytes=max_row_bytes(max_seq_len, part.filters.max_chars))
            local = local_source(part, settings.sources.get(config), samples=settings.samples)
            if local is not None:
                rows = record_columns(rows, columns)
            records, rejections, report = prepare_rows(
                part, rows, tokenizer, modes=modes, max_new_tokens=max_new_tokens, max_seq_len=max_seq_len,
                source_desc=desc, state=state, vocab_size=vocab_size,
                # A built-in partition read from a local file: the rows name that file (by its name: a published
                # dataset carries no local path), not the Hub dataset they did not come from.
                source_name=local.name if local is not None and part.builtin else None)
        except SourceFileError as e:
            run.errors[config] = f"{config}: {e}"
            continue
        modes.check_renderer(records, f"{config} ({desc})")
        report.limit = settings.limit
        expected = adapter_columns(part.adapter, part.id_field)
        report.ignored_columns = expected.ignored(columns)
        if report.ignored_columns and report.prepared:   # without any prompt, the error line names the columns
            run.warnings.append(ignored_columns_line(part, desc, report.ignored_columns, expected))
        history = modes.history_line(config, report.history_arguments)
        if history:
            run.warnings.append(history)
        if pconf.sha256:
            report.partition["config_file"] = pconf.path
            report.partition["config_sha256"] = pconf.sha256
        if workdir is not None:
            write_prepared(workdir, config, records, rejections, report)
        run.reports[config] = report
        if report.selected and not report.prepared:
            run.errors[config] = no_prompt_line(part, desc, report, list(columns), expected, workdir)
    return run


def samples_ignored(settings, partitions) -> str | None:
    """The warning when --samples stands in for none of the configs prepared: each reads the local file its
    --source names (or is a partition of the user's, which has no bundled rows)."""
    if not settings.samples or not settings.sources:
        return None
    if any(partitions.partition(c).builtin and c not in settings.sources for c in settings.configs):
        return None
    files = ", ".join(f"{c} reads {settings.sources[c]}" for c in settings.configs if c in settings.sources)
    return (f"--samples applies to none of the configs prepared ({files}, named by --source): their rows come from "
            "those files, not the bundled samples; drop --samples, or --source for a config to read its samples")


def warn_run_wide_overridden(run_wide: dict[str, float | None], plans: dict[str, ModePlan]) -> None:
    """A run-wide temperature / top_p that every config of the run replaces for every prompt is a setting no
    row gets: a warning naming it and what replaces it."""
    for key, value in run_wide.items():
        if value is None or not plans:
            continue
        why = {c: run_wide_overridden(plan, key) for c, plan in plans.items()}
        if all(why.values()):
            log.warning("the run-wide %s = %g (--%s or [sampling] %s) is never used: %s", key, value,
                        key.replace("_", "-"), key, "; ".join(f"{c}: {w}" for c, w in why.items()))


def ignored_columns_line(part: Partition, desc: str, ignored: list[str], expected: AdapterColumns) -> str:
    line = (f"{part.config}: column(s) {', '.join(ignored)} in {desc} are not read by {part.config}'s "
            f"{part.adapter} adapter (it reads: {expected.reads()})")
    if part.adapter != "chat" and set(ignored) & set(CHAT_COLUMNS.required + CHAT_COLUMNS.optional):
        line += ("; to keep them, define a partition with the chat adapter in a --config file (see "
                 "examples/partitions.toml)")
    settings = dict.fromkeys(PARTITION_SETTING_COLUMNS[c] for c in ignored if c in PARTITION_SETTING_COLUMNS)
    if settings:
        line += f"; the partition sets a prompt's {' and '.join(settings)}, not its row (examples/partitions.toml)"
    return line


# Columns a user may expect to set a prompt's mode or effort per row: the partition config sets them.
_EFFORT, _MODE = "effort (its `efforts` table)", "mode (its `instant_share`, or `off` in `efforts`)"
PARTITION_SETTING_COLUMNS = {"thinking_effort": _EFFORT, "effort": _EFFORT, "mode": _MODE, "thinking": _MODE}


def no_prompt_line(part: Partition, desc: str, report: PrepareReport, columns: list[str], expected: AdapterColumns,
                   workdir: Workdir | None) -> str:
    """A config none of whose selected rows became a prompt: why, what its adapter reads, where the reasons are."""
    reasons = ", ".join(f"{k} {v}" for k, v in report.rejected.most_common(3))
    line = (f"{part.config}: none of the {report.selected:,} selected rows of {desc} became a prompt ({reasons}); "
            f"{part.config}'s {part.adapter} adapter reads {expected.reads()}")
    if columns:
        line += f", the file has {', '.join(columns)}"
    if workdir is not None:
        line += f"; each row's reason is in {workdir.prepare_rejects(part.config)}"
    return line


# -- dry run --------------------------------------------------------------------------------------------

def dry_run(settings, partitions, chat_format: ChatFormat) -> PrepareRun:
    """Everything prepare does except writing: per-config counts after each stage. `settings` resolved with
    `partitions` (pipeline.load_partitions)."""
    tokenizer = load_tokenizer(settings.tokenizer_path, chat_format)
    chat_format = chat_format.bind(settings.model_profile, tokenizer)
    sampling = settings.resolved_sampling()
    return prepare_configs(settings, partitions, tokenizer,
                           gen_prompt_ids=PromptModes.of(settings.model_profile, tokenizer,
                                                         chat_format).generation_prompts[THINKING],
                           max_new_tokens=sampling.max_new_tokens, max_seq_len=sampling.max_seq_len, workdir=None,
                           chat_format=chat_format)
