"""Emit benchmark: checkpoint -> Parquet, tokens/s and peak RSS, against
`datasets.Dataset.from_generator` yielding one row at a time, at several sizes.

"ours" is the real path of `kimi-data build` after generation: `emit`, which validates every completion
(Validator in --workers processes, the assistant turn decoded into `messages`) while it streams the rows
into the Hub-layout shards, then writes light columns, card, plots and manifest. The baseline only moves the
same rows (no validation, no decoding) with `Dataset.from_generator(...).to_parquet(...)`.

Each side's clock starts once its libraries are imported (`datasets` for the baseline; transformers, torch,
matplotlib and datasets for ours) and stops when its files are written; ours includes loading the tokenizer.

Peak RSS: each side runs in a fresh process started from a small parent (the fixture is built in a process
of its own), and is read from the kernel's per-process high-water mark VmHWM, which starts over at exec
(ru_maxrss does not: a child inherits the parent's high-water mark, so a baseline's figure was the parent's
floor, not its own peak). Worker processes count too: the parent samples the process tree's proportional set
size (PSS: pages forked workers share with the main process count once) every 250 ms, and the figure is the
larger of that sum and the main process's VmHWM.

Repeats: a small shared machine's speed drifts by ±20% from one run to the next, so each side runs --repeat
times, the two sides taking turns on the same fixture; the table gives the median time (and every run's),
the largest peak, and the speed-up of the medians.

    python benchmarks/bench_emit.py                      # 10M and 50M tokens, 3 runs a side
    python benchmarks/bench_emit.py --tokens 228 --repeat 1   # the full 88K-sample run's size (slow here)
    python benchmarks/bench_emit.py --workers 1          # ours in one process
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CONFIG = "B4"


def make_workdir(root: Path, million_tokens: float, seed: int = 0) -> int:
    """A workdir with prepared prompts and a checkpoint of structurally valid completions; returns tokens."""
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
    from kimi_eagle_data.prompts.prepare import PrepareReport
    from kimi_eagle_data.prompts.prepared_file import write_prepared
    from kimi_eagle_data.runs import RunSettings, open_run
    from kimi_eagle_data.records import Completion, PromptRecord
    from kimi_eagle_data.store.checkpoint import Checkpoint

    p = open_run(RunSettings(workdir=str(root), configs=[CONFIG], profile="tiny-kimi", model=str(TINY_MODEL_DIR),
                             samples=True, max_seq_len=1 << 20, progress=False))
    tok = p.tokenizer
    t = p.tokens
    head = tok.encode("<|im_user|>user<|im_middle|>", add_special_tokens=False)
    gen = p.format.generation_prompt_ids()
    text_ids = np.arange(300, min(tok.all_special_ids), dtype=np.int32)   # ordinary BPE ids, no special token
    rng = np.random.default_rng(seed)
    target = int(million_tokens * 1e6)
    ids, prompts, outputs, total = [], [], [], 0
    while total < target:
        n_prompt = int(rng.integers(50, 600))
        n_out = int(min(10240, max(8, rng.lognormal(np.log(800), 0.9))))
        prompt = np.concatenate([head, rng.choice(text_ids, n_prompt), [t.end_of_turn], gen]).astype(np.int32)
        split = int(n_out * 0.7)
        out = np.concatenate([rng.choice(text_ids, split), [t.think_close], rng.choice(text_ids, n_out - split - 2),
                              [t.end_of_turn]]).astype(np.int32)
        ids.append(f"{CONFIG}-{len(ids):016x}")
        prompts.append(prompt)
        outputs.append(out)
        total += len(prompt) + len(out)
    # Written by prepare's own writer, so the fixture has every column prepare writes.
    msgs = [{"role": "user", "content": "synthetic"}]
    records = [PromptRecord(id=i, config=CONFIG, source="synthetic", source_id=i, messages=msgs, tools=None,
                            prompt_ids=prompt.tolist(), mode="thinking", temperature=1.0, top_p=0.95)
               for i, prompt in zip(ids, prompts)]
    write_prepared(p.workdir, CONFIG, records, [],
                   PrepareReport(config=CONFIG, source="synthetic", selected=len(ids), prepared=len(ids)))
    ckpt = Checkpoint(root / "generations.sqlite")
    for i, out in zip(ids, outputs):
        ckpt.commit(CONFIG, Completion(id=i, output_ids=out, finish_reason="stop", finish_detail={"type": "stop"},
                                       prompt_tokens=None, completion_tokens=len(out), engine="synthetic"))
    ckpt.close()
    return total


def worker_ours(root: Path, workers: int | None) -> dict:
    # Libraries load before the clock starts, as `datasets` does for the baseline: AutoTokenizer pulls in torch
    # and (transformers 5 always reads the model config) the tiny model's config class; the card's features
    # come from `datasets`.
    import datasets  # noqa: F401
    import matplotlib.pyplot  # noqa: F401
    import torch  # noqa: F401
    import transformers.models.llama.configuration_llama  # noqa: F401
    from transformers import AutoConfig, AutoTokenizer  # noqa: F401

    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
    from kimi_eagle_data.runs import RunSettings, emit_dataset, open_run

    t0 = time.perf_counter()
    ctx = open_run(RunSettings(workdir=str(root), configs=[CONFIG], profile="tiny-kimi", model=str(TINY_MODEL_DIR),
                               samples=True, max_seq_len=1 << 20, progress=False, workers=workers))
    _, reports = emit_dataset(ctx)
    return {"seconds": time.perf_counter() - t0, "valid": reports[CONFIG].valid}


def worker_baseline(root: Path, workers: int | None) -> dict:
    import datasets
    import numpy as np
    import pyarrow.parquet as pq

    from kimi_eagle_data.store.checkpoint import Checkpoint

    datasets.disable_progress_bars()
    cache = root / "hf-cache"
    shutil.rmtree(cache, ignore_errors=True)   # from_generator reuses a cache of the same generator: start empty
    t0 = time.perf_counter()
    prompts = pq.read_table(root / "prepared" / f"{CONFIG}.parquet", columns=["id", "prompt_ids"])
    index = {id_: i for i, id_ in enumerate(prompts.column("id").to_pylist())}
    prompt_col = prompts.column("prompt_ids")

    def rows():
        ckpt = Checkpoint(root / "generations.sqlite")
        for c in ckpt.completions(CONFIG):
            prompt = prompt_col[index[c.id]].as_py()
            out = list(c.output_ids)
            yield {"id": c.id, "input_ids": prompt + out, "loss_mask": [0] * len(prompt) + [1] * len(out),
                   "prompt_len": len(prompt), "completion_len": len(out), "finish_reason": c.finish_reason}
        ckpt.close()

    ds = datasets.Dataset.from_generator(rows, cache_dir=str(cache))
    ds.to_parquet(str(root / "baseline.parquet"))
    del np
    return {"seconds": time.perf_counter() - t0, "valid": len(ds)}


def vm_hwm_mb(pid: int | str = "self") -> float:
    """The process's own peak resident set (VmHWM), which starts over at exec."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    """A process and its descendants, through the kernel's per-thread child lists (no scan of /proc)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def tree_pss_mb(root_pid: int) -> float:
    """Proportional set size of a process and all its descendants (pool workers): pages a forked worker
    shares with its parent count once, not once per process."""
    return sum(_pss_kb(p) for p in _descendants(root_pid)) / 1024


def run_worker(kind: str, root: Path, workers: int | None) -> dict:
    """One side in a fresh process; its peak is the larger of its own VmHWM and the sampled tree PSS."""
    cmd = [sys.executable, __file__, "--worker", kind, "--workdir", str(root)]
    if workers:
        cmd += ["--workers", str(workers)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, tree_pss_mb(proc.pid))
        # Sampling costs CPU the measured side then lacks (2 cores here): reading smaps_rollup takes ~3 ms
        # per process of this size, so every 50 ms over three processes took ~18% of a core; every 250 ms
        # takes ~4%. Memory in these runs rises over seconds (VmHWM bounds the main process exactly anyway).
        time.sleep(0.25)
    out, err = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"{kind} worker failed:\n{err}")
    result = json.loads(out.strip().splitlines()[-1])
    result["peak_rss_mb"] = max(result["peak_rss_mb"], peak)
    return result


def make_fixture(root: Path, size: float) -> int:
    """Built in a process of its own: the parent stays small, so nothing it holds is inherited."""
    out = subprocess.run([sys.executable, __file__, "--make", str(size), "--workdir", str(root)],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", default="10,50", help="sizes in millions of tokens, comma-separated")
    ap.add_argument("--workers", type=int, help="ours: validation processes (default: the machine's cores)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side, taking turns (median reported)")
    ap.add_argument("--worker", choices=["ours", "baseline"], help=argparse.SUPPRESS)
    ap.add_argument("--make", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.make:
        print(make_workdir(Path(args.workdir), args.make))
        return
    if args.worker:
        result = (worker_ours if args.worker == "ours" else worker_baseline)(Path(args.workdir), args.workers)
        result["peak_rss_mb"] = vm_hwm_mb()
        print(json.dumps(result))
        return
    rows = []
    for size in (float(x) for x in args.tokens.split(",")):
        root = Path(tempfile.mkdtemp(prefix=f"bench-emit-{size:g}M-"))
        try:
            tokens = make_fixture(root, size)
            runs: dict[str, list[dict]] = {"ours": [], "baseline": []}
            for _ in range(args.repeat):
                for kind in runs:
                    r = run_worker(kind, root, args.workers)
                    runs[kind].append(r)
                    print(f"  {size:g}M {kind}: {r['seconds']:.1f} s, peak RSS {r['peak_rss_mb']:.0f} MB",
                          file=sys.stderr)
            for kind, rs in runs.items():
                secs = [r["seconds"] for r in rs]
                rows.append((f"{size:g}M", kind, tokens, statistics.median(secs), secs,
                             max(r["peak_rss_mb"] for r in rs)))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\n| {'size':>6} | {'path':<36} | {'tokens':>12} | {'seconds (median)':>16} | {'tokens/s':>12} "
          f"| {'peak RSS MB':>11} | runs (s) |")
    print(f"|{'-' * 8}|{'-' * 38}|{'-' * 14}|{'-' * 18}|{'-' * 14}|{'-' * 13}|{'-' * 10}|")
    names = {"ours": "kimi-data emit (validates + writes)", "baseline": "Dataset.from_generator per row"}
    for size, kind, tokens, sec, secs, rss in rows:
        print(f"| {size:>6} | {names[kind]:<36} | {tokens:>12,} | {sec:16.2f} | {tokens / sec:12,.0f} "
              f"| {rss:11.0f} | {' / '.join(f'{x:.2f}' for x in secs)} |")
    by = {(s, k): sec for s, k, _, sec, _, _ in rows}
    for size in dict.fromkeys(s for s, *_ in rows):
        print(f"speed-up at {size} (medians): {by[(size, 'baseline')] / by[(size, 'ours')]:.1f}x")


if __name__ == "__main__":
    main()
