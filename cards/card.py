"""The dataset card: huggingface_hub's card classes for the YAML, a Jinja template for the body."""

from __future__ import annotations

from importlib import resources
from typing import Any

import pyarrow as pa

from kimi_eagle_data.chat_format import CardText, ChatFormat, with_partition_options
from kimi_eagle_data.records import END_REASONS, SpecDecodeCounts, describe_drafter, tokens_per_verify_step
from kimi_eagle_data.sources.partitions import PARTITIONS
from kimi_eagle_data.profile import get_profile
from kimi_eagle_data.schema import ROW_SCHEMA, features
from kimi_eagle_data.run_checks import REPO_ID

COUNT_KEYS = ("selected", "later_turns", "rejected_at_prepare", "generated", "failed", "pending", "valid", "rejected",
              "train_tokens")


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "1M<n<10M"


def _cell(text: str) -> str:
    """Text for one Markdown table cell: a `|` or a line break would split the row."""
    return " ".join(str(text).replace("|", "\\|").split())


def hub_link(repo_id: str, kind: str = "datasets") -> str:
    """`[org/name](https://huggingface.co/…)` for a Hub id; anything else as it is."""
    prefix = "" if kind == "models" else f"{kind}/"
    return f"[{repo_id}](https://huggingface.co/{prefix}{repo_id})" if REPO_ID.match(repo_id) else repo_id


# Where prepare read a config's rows (its report's `source`, written by sources/readers.iter_source): the
# bundled samples, the partition's Hub dataset (`upstream[@revision]`), or else a local file, whose path is
# never published.
SAMPLES, HUB, LOCAL = "samples", "hub", "local"
ORIGIN_PHRASES = {HUB: "Hub datasets", SAMPLES: "sample rows bundled with kimi-eagle-data", LOCAL: "local files"}


def prompt_origin(source: str | None, upstream: str, builtin: bool) -> tuple[str, str]:
    """(kind, Markdown for the card's table) of where a config's prompts came from."""
    schema = f" in the schema of {hub_link(upstream)}" if builtin else ""
    if source and source.startswith("bundled samples"):
        return SAMPLES, f"bundled sample rows{schema}"
    if source is None or source == upstream or source.startswith(upstream + "@"):
        revision = source.partition("@")[2] if source else ""
        return HUB, hub_link(upstream) + (f" at revision `{revision}`" if revision else "")
    return LOCAL, f"a local file{schema}"


def origins_phrase(kinds: list[str]) -> str:
    """"Hub datasets and a local file": the intro's summary of where the prompts came from."""
    phrases = [ORIGIN_PHRASES[k] for k in (HUB, SAMPLES, LOCAL) if k in kinds]
    if kinds.count(LOCAL) == 1:
        phrases[-1] = "a local file"
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]


def render_card(summary: dict[str, Any], *, chat_format: ChatFormat, version: str, provenance: dict[str, Any],
                plots: dict[str, str], manifest_sha256: str, repo_id: str | None = None, score: dict[str, Any] | None = None,
                probe: dict[str, Any] | None = None,
                vocab: dict[str, Any] | None = None, vocab_plot: tuple[str, str] | None = None,
                conversations: dict[str, dict[str, Any]] | None = None,
                cache: dict[str, dict[str, Any]] | None = None, schema: pa.Schema = ROW_SCHEMA) -> str:
    """`chat_format`: the run's format (`RunContext.format`): what the card says of the rules, the reasoning's end
    and the generation prompts is its `card_text`.

    `score`: `kimi-data score`'s section (score/report.card_section; None: left out); `probe`: `kimi-data
    probe`'s measured value (probe/report.card_section; None: left out); `vocab`: the
    draft-vocabulary coverage (emit/token_freq.py's coverage_by_config), shown with `vocab_plot`
    (title, path); `plots`: the other plots, {title: path}; `conversations`: config -> the shape of its
    conversations (emit/writer.conversation_shapes; configs of policy own_history), shown with the validation
    reports' later turns and end reasons (none: the section is left out); `cache`: config -> the share of its prompt
    tokens the engine served from its prefix cache, per turn (store/cache_hits.workdir_cache; none: not reported);
    `schema`: the rows' (schema.row_schema)."""
    from huggingface_hub import DatasetCard, DatasetCardData

    profile = get_profile(provenance["profile"])
    vocab = _vocab_section(vocab, vocab_plot)
    feats = features(schema)._to_yaml_list()
    configs_yaml, infos_yaml, rows = [], [], []
    for config, s in summary.items():
        configs_yaml.append({
            "config_name": config,
            "data_files": [{"split": split, "path": f"data/{config}/{split}-*.parquet"} for split in s["splits"]],
        })
        infos_yaml.append({
            "config_name": config,
            "features": feats,
            "splits": [{"name": split, "num_bytes": i.num_bytes, "num_examples": i.rows}
                       for split, i in s["splits"].items()],
        })
        # What prepare recorded of the partition (config-file and user-defined ones included).
        p = s.get("partition") or {}
        builtin = PARTITIONS.get(config)
        upstream = p.get("upstream") or (builtin.upstream if builtin else "user-defined")
        kind, origin = prompt_origin(s.get("source"), upstream, p.get("builtin", builtin is not None))
        rows.append({"config": config, "kind": kind, "origin": _cell(origin),
                     "license": _cell(p.get("license") or (builtin.license if builtin else "other")),
                     "prompt_rule": _cell(p.get("prompt_rule") or (builtin.prompt_rule if builtin else "")),
                     "r": s["report"]})
    licenses = sorted({r["license"] for r in rows})
    total_rows = sum(r["r"]["valid"] + r["r"]["rejected"] for r in rows)
    card_data = DatasetCardData(
        license=licenses[0] if len(licenses) == 1 else "other",
        pretty_name=f"{profile.display_name} EAGLE-3 drafter data v{version}",
        task_categories=["text-generation"],
        tags=["eagle3", "speculative-decoding", *profile.card_tags, "kimi-eagle-data"],
        size_categories=[_size_category(total_rows)],
        configs=configs_yaml,
        dataset_info=infos_yaml,
    )
    totals = {k: sum(r["r"].get(k, 0) for r in rows) for k in COUNT_KEYS}
    text = chat_format.card_text()
    template = resources.files("kimi_eagle_data.cards") / "dataset_card.md.jinja"
    card = DatasetCard.from_template(
        card_data, template_str=template.read_text(encoding="utf-8"),
        pretty_name=card_data.pretty_name, version=version, provenance=provenance, plots=plots, rules=text.rules,
        model_name=profile.display_name, reasoning_end=text.reasoning_end,
        history_reasoning=_history_reasoning(summary, chat_format),
        model_link=hub_link(provenance["model_path"], "models"),
        origins=origins_phrase([r["kind"] for r in rows]),
        configs=rows, totals=totals, repo_id=repo_id, load_path=repo_id or "path/to/dataset",
        first_config="B4" if "B4" in summary else next(iter(summary)),
        score=score, probe=probe, manifest_sha256=manifest_sha256, vocab=vocab,
        modes=_modes_section(rows, text, provenance.get("sampling") or {}),
        conversations=_conversations_section(rows, conversations or {}),
        cache=_cache_line(cache or {}),
        drafter=drafter_line(provenance.get("server_args") or {}, provenance.get("spec_decode")),
        special_text={"rejected": {r["config"]: n for r in rows
                                   if (n := (r["r"].get("prepare_reasons") or {}).get("special_token_text", 0))},
                      "kept": {r["config"]: n for r in rows if (n := r["r"].get("special_text_kept", 0))}},
    )
    return str(card)


def _history_reasoning(summary: dict[str, Any], chat_format: ChatFormat) -> str:
    """How the history's reasoning is rendered (the format's `card_text`): one sentence where every config renders it
    alike, else one per group of configs, as a partition's own template arguments (its `preserve_thinking`, which
    prepare recorded) make them differ."""
    said: dict[str, list[str]] = {}
    for config, s in summary.items():
        options = (s.get("partition") or {}).get("template_options") or {}
        said.setdefault(with_partition_options(chat_format, options).card_text().history_reasoning,
                        []).append(config)
    if len(said) <= 1:
        return next(iter(said), chat_format.card_text().history_reasoning)
    return "it depends on the config: " + "; ".join(f"in {', '.join(configs)}, {text}" for text, configs in said.items()
                                                    if text)


def _modes_section(rows: list[dict[str, Any]], text: CardText, run_sampling: dict[str, Any]) -> dict[str, Any]:
    """Rows per config and mode (thinking / instant), train and rejected, and per config and the sampling each
    row got (mode, temperature, top_p: only values some row was generated with), from the validation reports.
    A row with no sampling of its own (prepared before modes) got the run's (`run_sampling`)."""
    names = [m for m in ("thinking", "instant") if any(m in (r["r"].get("modes") or {}) for r in rows)]
    table = []
    for r in rows:
        m = r["r"].get("modes") or {}
        table.append({"config": r["config"],
                      "cells": [f"{m.get(k, {}).get('valid', 0)} / {m.get(k, {}).get('rejected', 0)}" for k in names]})
    sampling = []
    for r in rows:
        for e in r["r"].get("sampling") or ():
            sampling.append({"config": r["config"], "mode": e["mode"], "valid": e["valid"], "rejected": e["rejected"],
                             **{k: _value(e[k] if e[k] is not None else run_sampling.get(k))
                                for k in ("temperature", "top_p")}})
    return {"names": names, "rows": table, "sampling": sampling, "thinking_prompt": text.thinking_prompt,
            "instant_prompt": text.instant_prompt, "efforts": _efforts_table(rows)}


def _efforts_table(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Thinking rows per config and effort (train / rejected), efforts by their rows, most first; None when no
    row announced an effort (a profile without efforts)."""
    totals: dict[str, int] = {}
    for r in rows:
        for effort, n in (r["r"].get("efforts") or {}).items():
            totals[effort] = totals.get(effort, 0) + n["valid"] + n["rejected"]
    if not totals:
        return None
    names = sorted(totals, key=lambda e: (-totals[e], e))
    table = [{"config": r["config"], "cells": [f"{e.get('valid', 0)} / {e.get('rejected', 0)}"
                                               for e in ((r["r"].get("efforts") or {}).get(k, {}) for k in names)]}
             for r in rows]
    return {"names": names, "rows": table}


def drafter_line(server_args: dict[str, Any], spec_decode: dict[str, Any] | None = None) -> str | None:
    """The drafter the engine generated with, as it reported it (engines/drafter.py: SGLang's server_info
    speculative_*, vLLM's /metrics), and vLLM's counted acceptance (`spec_decode`, the manifest's); None when it ran
    none (or did not say)."""
    drafter = describe_drafter(server_args)
    if drafter is None:
        return None
    shape = ", ".join(f"{label} {drafter[k]}" for k, label in (
        ("num_steps", "steps"), ("topk", "top-k"), ("num_draft_tokens", "draft tokens")) if drafter.get(k) is not None)
    algorithm, model = drafter["algorithm"], drafter["model"]
    counts = SpecDecodeCounts.from_json(spec_decode)
    rate = tokens_per_verify_step(counts) if counts else None
    return (f"{algorithm or 'a drafter'}" + (f" `{model}`" if model else " (the engine did not name its model)")
            + (f" ({shape})" if shape else "")
            + (f"; {rate:.2f} output tokens per target step (the engine's counters)" if rate else "")
            + "; every token accepted by sampling from the target's distribution")


def _cache_line(cache: dict[str, dict[str, Any]]) -> str | None:
    """Per config, the share of prompt tokens the engine served from its prefix cache (and per turn, for
    conversations), in one table cell; None when the engine reported none."""
    def pct(x: float | None) -> str:
        return "–" if x is None else f"{100 * x:.1f}%"

    parts = []
    for config, c in cache.items():
        turns = c.get("by_turn") or {}
        by_turn = (" (turn " + ", ".join(f"{k}: {pct(v['hit_share'])}" for k, v in turns.items()) + ")"
                   if len(turns) > 1 else "")
        parts.append(f"{config} {pct(c['hit_share'])}{by_turn}")
    return "; ".join(parts) or None


def _value(x: Any) -> str:
    return "–" if x is None else f"{x:g}" if isinstance(x, float) else str(x)


def _conversations_section(rows: list[dict[str, Any]], shapes: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """Per config of policy own_history: conversations, later turns, turns per conversation; and the end
    reasons' counts per config beside each reason's meaning (None: no such config, the section is left out)."""
    talk = [r for r in rows if r["config"] in shapes]
    if not talk:
        return None
    table = []
    for r in talk:
        tpc = shapes[r["config"]]["turns_per_conversation"]
        table.append({"config": r["config"], "conversations": shapes[r["config"]]["conversations"],
                      "later_turns": r["r"].get("later_turns", 0), "kept": r["r"].get("kept_not_selected", 0),
                      "mean": "–" if tpc["mean"] is None else f"{tpc['mean']:.2f}", "max": tpc["max"] or "–",
                      "by_turns": ", ".join(f"{k}: {n}" for k, n in tpc["histogram"].items()) or "–"})
    ends = [{"reason": k, "meaning": _cell(v),
             "counts": [(r["r"].get("conversation_ends") or {}).get(k, 0) for r in talk]}
            for k, v in END_REASONS.items()]
    kept = [f"{r['config']}: {r['kept']:,}" for r in table if r["kept"]]
    return {"configs": [r["config"] for r in talk], "rows": table, "ends": ends, "kept": ", ".join(kept)}


def _vocab_section(vocab: dict[str, Any] | None, plot: tuple[str, str] | None) -> dict[str, Any] | None:
    """The draft-vocabulary table: per config and overall, the ids it takes to cover each share of the train
    split's loss tokens (None: no counts, the section is left out)."""
    if vocab is None:
        return None
    shares = vocab["shares"]

    def row(name: str, c: dict[str, Any]) -> dict[str, Any]:
        return {"config": name, "loss_tokens": f"{c['loss_tokens']:,}", "distinct_ids": f"{c['distinct_ids']:,}",
                "cover": ["–" if c["ids_to_cover"][f"{s:g}"] is None else f"{c['ids_to_cover'][f'{s:g}']:,}"
                          for s in shares]}

    return {"rows": [row(name, c) for name, c in vocab["configs"].items()], "all": row("all", vocab["all"]),
            "plot": plot[1] if plot else None, "plot_title": plot[0] if plot else None,
            "shares": [f"{100 * s:g}%" for s in shares], "vocab_size": f"{vocab['vocab_size']:,}"}
