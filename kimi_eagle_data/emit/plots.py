"""Plots for the dataset card (matplotlib, Agg, deterministic PNGs)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from kimi_eagle_data.model_profile import INSTANT, THINKING
from kimi_eagle_data.store.workdir import Workdir, atomic_path
from kimi_eagle_data.emit.token_freq import COVERAGE_SHARES, DRAFT_VOCAB_SIZE, add_counts, read_counts, token_freq_path


COLORS = {"train": "#4C72B0", "rejected": "#DD8452"}


def _figure(rows: int, cols: int, width: float, height: float, *, left: float = 0.6, top: float = 0.45):
    """A figure with fixed margins (inches): cheaper than tight_layout, which draws every text twice."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False)
    fig.subplots_adjust(left=left / width, right=1 - 0.15 / width, bottom=0.5 / height, top=1 - top / height,
                        wspace=0.3, hspace=0.6)
    return plt, fig, axes


def _stacked_hist(ax, train, rejected, top: int) -> None:
    """Train and rejected counts stacked in ~30 equal bins from 0 (one filled step line each, not a bar per
    bin: the same picture, drawn in a fraction of the time)."""
    width = max(1, math.ceil((top + 1) / 30))
    bins = np.arange(32) * width
    h_train = np.histogram(train, bins=bins)[0]
    h_all = h_train + np.histogram(rejected, bins=bins)[0]
    ax.stairs(h_train, bins, fill=True, color=COLORS["train"], label="train")
    ax.stairs(h_all, bins, baseline=h_train, fill=True, color=COLORS["rejected"], label="rejected")
    ax.set_ylim(0, max(1, int(h_all.max())) * 1.05)


def _save(plt, fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)


LENGTHS_PLOT = ("Completion length per config", "completion_lengths.png")


def _histograms_plot(config: str) -> tuple[str, str]:
    return f"{config} token lengths", f"lengths_{config}.png"


VOCAB_PLOT = ("Loss tokens covered by the most frequent ids", "vocab_coverage.png")


def card_plots(configs: list[str], prefix: str = "assets") -> dict[str, str]:
    """The card's plots for these configs, {title: relative path}, in the card's order: known before they are
    drawn (emit hashes the shards while workers draw them)."""
    title, name = LENGTHS_PLOT
    vocab_title, vocab_name = VOCAB_PLOT
    return ({title: f"{prefix}/{name}"} | {t: f"{prefix}/{n}" for t, n in map(_histograms_plot, configs)}
            | {vocab_title: f"{prefix}/{vocab_name}"})


def plot_lengths(workdir: Workdir, configs: list[str], out_dir: Path) -> dict[str, str]:
    """Completion-length histograms per config (train vs rejected). Returns {title: relative path}."""
    cols = min(4, max(1, len(configs)))
    rows = math.ceil(len(configs) / cols)
    plt, fig, axes = _figure(rows, cols, 3.2 * cols, 2.6 * rows + 0.5, top=0.65)
    for ax in axes.flat[len(configs):]:
        ax.axis("off")
    for ax, config in zip(axes.flat, configs):
        data = config_lengths(workdir, config)
        train, rejected = data["train"]["completion"], data["rejected"]["completion"]
        _stacked_hist(ax, train, rejected, max(int(train.max(initial=0)), int(rejected.max(initial=0)), 1))
        ax.set_title(f"{config}  (n={len(train) + len(rejected)})", fontsize=9)
        ax.set_xlabel("completion tokens", fontsize=8)
        ax.tick_params(labelsize=7)
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("Completion length per config", fontsize=10)
    title, name = LENGTHS_PLOT
    _save(plt, fig, out_dir / name)
    return {title: f"assets/{name}"}


def plot_vocab_coverage(dataset_root: Path, configs: list[str], out_dir: Path) -> dict[str, str]:
    """The share of a config's loss tokens (train split) that its k most frequent ids cover, against k (log
    scale), one line per config and one for all of them, from dataset/token_freq/ (emit/token_freq.py)."""
    counts = {c: read_counts(token_freq_path(dataset_root, c)) for c in configs}
    plt, fig, axes = _figure(1, 1, 6.4, 3.8, left=0.7)
    ax = axes[0, 0]
    lines = list(counts.items()) + ([("all", add_counts(list(counts.values())))] if len(counts) > 1 else [])
    drawn = 0
    for name, c in lines:
        ranked = np.sort(c[c > 0])[::-1]
        if not ranked.size:
            continue
        drawn += 1
        covered = np.cumsum(ranked) / ranked.sum()
        ax.step(np.arange(1, ranked.size + 1), covered, where="post", label=name,
                **({"color": "black", "linewidth": 1.6} if name == "all" else {"linewidth": 0.9}))
    for share in COVERAGE_SHARES:
        ax.axhline(share, color="grey", linestyle=":", linewidth=0.6)
    if max(len(c) for c in counts.values()) > DRAFT_VOCAB_SIZE:   # a vocabulary larger than a usual draft one
        ax.axvline(DRAFT_VOCAB_SIZE, color="grey", linestyle="--", linewidth=0.6)
    ax.set_xscale("log")
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("most frequent ids (draft vocabulary size)", fontsize=8)
    ax.set_ylabel("share of loss tokens", fontsize=8)
    ax.tick_params(labelsize=7)
    if drawn:
        ax.legend(fontsize=6, ncol=2)
    title, name = VOCAB_PLOT
    fig.suptitle(title, fontsize=10)
    _save(plt, fig, out_dir / name)
    return {title: f"assets/{name}"}


LENGTH_PANELS = (("prompt", "prompt tokens"), ("completion", "completion tokens"), ("reasoning", "reasoning tokens"))


def plot_length_histograms(workdir: Workdir, configs: list[str], out_dir: Path, *,
                           prefix: str = "assets") -> dict[str, str]:
    """One PNG per config: prompt / completion / reasoning length histograms (train and rejected stacked,
    median marked), one row of panels per mode the config's rows have (thinking, instant): an instant row has no
    reasoning (its 0s would pile up beside the thinking rows' lengths), so its row has no reasoning panel. Written
    to `out_dir/lengths_<CFG>.png`; returns {title: f"{prefix}/lengths_<CFG>.png"}.

    Deterministic: same workdir, same bytes (Agg backend, no Software/date metadata)."""

    written: dict[str, str] = {}
    for config in configs:
        by_mode = config_lengths_by_mode(workdir, config)
        n = sum(len(data[s]["completion"]) for data in by_mode.values() for s in data)
        rows = len(by_mode)
        plt, fig, axes = _figure(rows, len(LENGTH_PANELS), 10.5, 2.5 * rows + 0.3, left=0.7)
        for r, (mode, data) in enumerate(by_mode.items()):
            m = sum(len(data[s]["completion"]) for s in data)
            for ax, (kind, label) in zip(axes[r], LENGTH_PANELS):
                if kind == "reasoning" and mode == INSTANT:
                    ax.axis("off")
                    ax.text(0.5, 0.5, "instant mode: no reasoning", ha="center", va="center", fontsize=8)
                    continue
                train, rejected = data["train"][kind], data["rejected"][kind]
                both = np.concatenate([train, rejected])
                _stacked_hist(ax, train, rejected, int(both.max()) if both.size else 1)
                if both.size:
                    med = float(np.median(both))
                    ax.axvline(med, color="black", linestyle="--", linewidth=0.8, label=f"median {med:g}")
                ax.set_xlabel(label, fontsize=8)
                ax.tick_params(labelsize=7)
                ax.legend(fontsize=6)
            axes[r][0].set_ylabel(f"{mode} (n={m})", fontsize=8)
        fig.suptitle(f"{config}: token lengths (n={n})", fontsize=10)
        title, name = _histograms_plot(config)
        _save(plt, fig, out_dir / name)
        written[title] = f"{prefix}/{name}"
    return written


def config_lengths(workdir: Workdir, config: str) -> dict[str, dict[str, np.ndarray]]:
    """{"train"|"rejected": {"prompt"|"completion"|"reasoning": lengths}} from validated/'s light columns."""
    return _lengths(_light_table(workdir, config))


def config_lengths_by_mode(workdir: Workdir, config: str) -> dict[str, dict[str, dict[str, np.ndarray]]]:
    """config_lengths per mode the config's rows have ({THINKING: …, INSTANT: …}, thinking first; rows validated
    before modes are thinking). A config without rows: {THINKING: empty lengths}."""
    import pyarrow.compute as pc

    t = _light_table(workdir, config, with_mode=True)
    if "mode" not in t.column_names:
        return {THINKING: _lengths(t)}
    present = set(t["mode"].to_pylist())
    modes = [m for m in (THINKING, INSTANT) if m in present] or [THINKING]
    return {m: _lengths(t.filter(pc.equal(t["mode"], m))) for m in modes}


def _light_table(workdir: Workdir, config: str, with_mode: bool = False):
    # ParquetFile, not read_table: the latter imports pyarrow.dataset and pandas (~0.4 s where not yet loaded).
    f = pq.ParquetFile(workdir.validated(config))
    columns = ["split", "prompt_len", "completion_len", "reasoning_len"]
    if with_mode and "mode" in f.schema_arrow.names:
        columns.append("mode")
    return f.read(columns=columns)


def _lengths(t) -> dict[str, dict[str, np.ndarray]]:
    import pyarrow.compute as pc

    out: dict[str, dict[str, np.ndarray]] = {}
    for split in ("train", "rejected"):
        s = t.filter(pc.equal(t["split"], split))
        out[split] = {k: s[f"{k}_len"].to_numpy().astype(np.int64) if s.num_rows else np.zeros(0, np.int64)
                      for k in ("prompt", "completion", "reasoning")}
    return out
