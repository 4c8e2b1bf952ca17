"""Plots for the dataset card (matplotlib, Agg, deterministic PNGs)."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow.parquet as pq

from kimi_eagle_data.workdir import Workdir, atomic_path


def plot_lengths(workdir: Workdir, configs: list[str], out_dir: Path) -> dict[str, str]:
    """Completion-length histograms per config (train vs rejected). Returns {title: relative path}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(4, max(1, len(configs)))
    rows = math.ceil(len(configs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    for ax in axes.flat[len(configs):]:
        ax.axis("off")
    for ax, config in zip(axes.flat, configs):
        t = pq.read_table(workdir.validated(config), columns=["completion_len", "split"]).to_pydict()
        train = [n for n, s in zip(t["completion_len"], t["split"]) if s == "train"]
        rejected = [n for n, s in zip(t["completion_len"], t["split"]) if s != "train"]
        top = max(train + rejected, default=1)
        bins = [i * max(1, math.ceil(top / 30)) for i in range(32)]
        ax.hist([train, rejected], bins=bins, stacked=True, label=["train", "rejected"],
                color=["#4C72B0", "#DD8452"])
        ax.set_title(f"{config}  (n={len(train) + len(rejected)})", fontsize=9)
        ax.set_xlabel("completion tokens", fontsize=8)
        ax.tick_params(labelsize=7)
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("Completion length per config", fontsize=10)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "completion_lengths.png"
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return {"Completion length per config": "assets/completion_lengths.png"}


LENGTH_PANELS = (("prompt", "prompt tokens"), ("completion", "completion tokens"), ("reasoning", "reasoning tokens"))


def plot_length_histograms(workdir: Workdir, configs: list[str], out_dir: Path, *,
                           prefix: str = "assets") -> dict[str, str]:
    """One PNG per config: prompt / completion / reasoning length histograms (train and rejected stacked,
    median marked). Written to `out_dir/lengths_<CFG>.png`; returns {title: f"{prefix}/lengths_<CFG>.png"}.

    Deterministic: same workdir, same bytes (Agg backend, no Software/date metadata)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    for config in configs:
        data = config_lengths(workdir, config)
        n = sum(len(data[s]["completion"]) for s in data)
        fig, axes = plt.subplots(1, len(LENGTH_PANELS), figsize=(10.5, 2.8), squeeze=False)
        for ax, (kind, label) in zip(axes.flat, LENGTH_PANELS):
            train, rejected = data["train"][kind], data["rejected"][kind]
            both = np.concatenate([train, rejected])
            top = int(both.max()) if both.size else 1
            width = max(1, math.ceil((top + 1) / 30))
            bins = [i * width for i in range(32)]
            ax.hist([train, rejected], bins=bins, stacked=True, label=["train", "rejected"],
                    color=["#4C72B0", "#DD8452"])
            if both.size:
                med = float(np.median(both))
                ax.axvline(med, color="black", linestyle="--", linewidth=0.8, label=f"median {med:g}")
            ax.set_xlabel(label, fontsize=8)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=6)
        axes.flat[0].set_ylabel("samples", fontsize=8)
        fig.suptitle(f"{config}: token lengths (n={n})", fontsize=10)
        fig.tight_layout()
        name = f"lengths_{config}.png"
        with atomic_path(out_dir / name) as tmp:
            fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
        plt.close(fig)
        written[f"{config} token lengths"] = f"{prefix}/{name}"
    return written


def config_lengths(workdir: Workdir, config: str) -> dict[str, dict[str, "np.ndarray"]]:
    """{"train"|"rejected": {"prompt"|"completion"|"reasoning": lengths}} from validated/'s light columns."""
    import numpy as np
    import pyarrow.compute as pc

    t = pq.read_table(workdir.validated(config), columns=["split", "prompt_len", "completion_len", "reasoning_len"])
    out: dict[str, dict[str, np.ndarray]] = {}
    for split in ("train", "rejected"):
        s = t.filter(pc.equal(t["split"], split))
        out[split] = {k: s[f"{k}_len"].to_numpy().astype(np.int64) if s.num_rows else np.zeros(0, np.int64)
                      for k in ("prompt", "completion", "reasoning")}
    return out
