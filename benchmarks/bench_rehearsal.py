"""Production-size rehearsal: the whole pipeline, as a user runs it, on about 100K conversations.

What it builds (in --root, kept with --keep):
- the user's own JSONL partitions U1-U8, one per built-in config's shape (B1-B8): each synthetic conversation
  copies a bundled sample conversation's turns, roles, system prompt and tool declarations, with each message's
  words replaced by random words of about the same count (so lengths, tools and the multi-turn share follow the
  samples, and no two prompts are equal); counts in the built-in defaults' proportions (10:14:8:12:10:14:12:8).
  U1, U6 and U7 continue their conversations on the model's own turns (policy own_history, up to 3 turns), as the
  demo does B1, B6 and B7; a fifth of each partition's prompts are in instant mode. A config file names them
  (`partitions.toml`, with K2.5's production lengths in `[sampling]`: max_new_tokens 10240, max_seq_len 16384);
- a zero-latency SGLang-protocol server (synthetic_server.py `--mode kimi`) whose answers are valid Kimi-K2.5
  completions, lengths drawn from each request id: lognormal, median 2,000, sigma 0.72, cut at 10,240 (measured:
  mean 2,549, p99 10,240; the seeds' run averaged 2.6K tokens per sample over 88K prompts and 228M tokens);
- then the real CLI, each command in a process of its own: prepare --config, generate --engine sglang,
  validate, emit, stats, plan, inspect (the longest sample of U1), check (the dataset), export (specforge and
  speculators), push --dry-run, slurm status (exit 1 here: a workdir not launched by `slurm submit` has no shards
  to report; its one line is in the table).

For each stage: wall time, CPU time and peak RSS (from the kernel's rusage of the finished child: CPU includes the
workers it waited for, peak RSS is the largest single process, not a sum), bytes the stage added to disk and
tokens/s. Generation is compared with a bare aiohttp client (posts the same request bodies -- every turn's prompt,
read back from the finished workdir -- with the same concurrency to the same server and keeps nothing), over
`generate`'s own reported generation time and over the whole process; emit with bench_emit's baseline,
`Dataset.from_generator` yielding the same rows one at a time (--no-baseline skips it). With --token-ms the server
answers from an emulated GPU of --slots sequences instead of at once (what a real server leaves the client). With
several sizes (--conversations 1000,10000) it also prints each stage's seconds per million tokens at each size: a
ratio over 1 means the stage scales worse than linearly.

    python benchmarks/bench_rehearsal.py --conversations 10000          # ~40M tokens, ~2 minutes on 2 cores
    python benchmarks/bench_rehearsal.py --conversations 100000 --root /tmp/rehearsal --keep   # ~390M, ~12 minutes
    python benchmarks/bench_rehearsal.py --conversations 1000,10000     # scaling
    python benchmarks/bench_rehearsal.py --conversations 10000 --token-ms 0.5 --slots 256 --no-baseline
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from synthetic_server import launch  # noqa: E402

# The built-in configs' default n (docs/choosing-prompts.md), whose shape each user partition copies.
SHAPES = {"B1": 10, "B2": 14, "B3": 8, "B4": 12, "B5": 10, "B6": 14, "B7": 12, "B8": 8}
OWN_HISTORY = {"B1", "B6", "B7"}
MEDIAN, SIGMA, MAX_NEW, MAX_SEQ = 2000, 0.72, 10240, 16384
PROFILE = "tiny-kimi"
REPO = "example-org/rehearsal"


# ---------------------------------------------------------------------------------------------------- sources

def _word_list(rng: random.Random, n: int = 4000) -> list[str]:
    syll = ["ka", "lo", "mi", "ren", "to", "sa", "vel", "dor", "in", "pa", "qu", "ex", "ul", "bri", "ton", "ar",
            "es", "fi", "gno", "ha", "ju", "ny", "op", "str", "we", "zy", "cal", "mer", "tin", "do"]
    words = {"".join(rng.choice(syll) for _ in range(rng.randint(1, 4))) for _ in range(n * 2)}
    return sorted(words)[:n]


def _shapes() -> dict[str, list[tuple[list[tuple[str, int]], list | None]]]:
    """Per built-in config, each bundled sample conversation as [(role, word count)] and its tools: the turns
    up to the first one that is not plain text (a tool call or result ends the copy)."""
    from kimi_eagle_data.sources.adapters import ADAPTERS
    from kimi_eagle_data.sources.partitions import PARTITIONS, SAMPLES_DIR
    from kimi_eagle_data.records import SourceRowError

    out = {}
    for config in SHAPES:
        p = PARTITIONS[config]
        path = next(SAMPLES_DIR.glob(f"{config}-*.jsonl"))
        shapes = []
        for line in path.read_text().splitlines():
            try:
                conv = ADAPTERS[p.adapter](json.loads(line))
            except SourceRowError:
                continue
            turns = []
            for m in conv.messages:
                if m["role"] not in ("system", "user", "assistant") or m.get("tool_calls") \
                        or not isinstance(m.get("content"), str):
                    break
                turns.append((m["role"], max(1, len(m["content"].split()))))
            while turns and turns[-1][0] != "user" and sum(r == "user" for r, _ in turns) > 1:
                turns.pop()                               # end on a user turn, as a conversation to continue
            if any(r == "user" for r, _ in turns):
                shapes.append((turns, conv.tools))
        out[config] = shapes
    return out


def make_sources(root: Path, conversations: int, seed: int = 0) -> dict[str, int]:
    """U1-U8 JSONL files and partitions.toml in `root`; returns the n of each partition."""
    rng = random.Random(seed)
    words = _word_list(rng)
    shapes = _shapes()
    total_w = sum(SHAPES.values())
    counts, toml = {}, ["# The rehearsal's partitions: the user's own JSONL files (bench_rehearsal.py).",
                        "seed = 0", "", "[sampling]", f"max_new_tokens = {MAX_NEW}", f"max_seq_len = {MAX_SEQ}", ""]
    for k, (config, weight) in enumerate(SHAPES.items(), 1):
        name = f"U{k}"
        n = max(1, round(conversations * weight / total_w))
        counts[name] = n
        with open(root / f"{name}.jsonl", "w") as f:
            for i in range(n + max(2, n // 50)):            # a few spare rows for the filters' rejects
                turns, tools = rng.choice(shapes[config])
                msgs = []
                for role, count in turns:
                    c = max(1, int(count * rng.lognormvariate(0, 0.3)))
                    msgs.append({"role": role, "content": " ".join(rng.choices(words, k=c))})
                row = {"id": f"{name}-{i}", "messages": msgs}
                if tools:
                    row["tools"] = tools
                f.write(json.dumps(row) + "\n")
        toml += [f"[partitions.{name}]", f'source = "{name}.jsonl"', f"n = {n}", "instant_share = 0.2"]
        if config in OWN_HISTORY:
            toml += ['policy = "own_history"', "max_turns = 3"]
        toml.append("")
    (root / "partitions.toml").write_text("\n".join(toml))
    return counts


# ---------------------------------------------------------------------------------------------------- stages

def du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def run_stage(args: list[str], cwd: Path | None = None, ok=(0,)) -> dict:
    """One command in a fresh process: wall, CPU (its own and the children it waited for) and peak RSS (the
    largest process's) from the kernel's rusage; stdout kept."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=out, stderr=err, cwd=cwd, env={**os.environ, "COLUMNS": "200"})
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    err.seek(0)
    stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(args[:4])} … exited {proc.returncode}:\n{stdout[-3000:]}\n{stderr[-3000:]}")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024, "stdout": stdout,
            "stderr": stderr, "rc": proc.returncode}


def kimi(*args: str) -> list[str]:
    return [sys.executable, "-m", "kimi_eagle_data", *args]


def bare_client(workdir: Path, url: str, concurrency: int, limit: int) -> None:
    """Runs in its own process: post every turn's request body (first turns from prepared/, later ones from the
    checkpoint's turns) as `generate` sends them, `limit` at most, and print tokens and seconds."""
    import aiohttp
    import numpy as np
    import orjson

    from kimi_eagle_data.engines.sglang_logprobs import LOGPROB_FIELDS
    from kimi_eagle_data.prompts.prepared_file import read_prepared
    from kimi_eagle_data.store.workdir import Workdir

    w = Workdir(workdir)
    settings = w.settings()
    sampling = dict(settings["sampling"])
    bodies = []
    for config in sorted(f.stem for f in (workdir / "prepared").glob("*.parquet")):
        for r in read_prepared(w, config):
            sampling_r = {**sampling, "temperature": r.temperature, "top_p": r.top_p,
                          "max_new_tokens": min(MAX_NEW, MAX_SEQ - len(r.prompt_ids))}
            bodies.append(orjson.dumps({"input_ids": r.prompt_ids, "sampling_params": sampling_r, "rid": r.id,
                                        **LOGPROB_FIELDS}))
    for f in sorted(workdir.glob("generations*.sqlite")):
        db = sqlite3.connect(f)
        for rid, blob, temp, top_p in db.execute("SELECT id, prompt_ids, temperature, top_p FROM turns"):
            ids = np.frombuffer(blob, dtype=np.int32).tolist()
            sampling_r = {**sampling, "temperature": temp, "top_p": top_p,
                          "max_new_tokens": min(MAX_NEW, MAX_SEQ - len(ids))}
            bodies.append(orjson.dumps({"input_ids": ids, "sampling_params": sampling_r, "rid": rid,
                                        **LOGPROB_FIELDS}))
    bodies = bodies[:limit]

    async def go():
        slots = asyncio.Semaphore(concurrency)
        tokens = 0

        async def one(session, body):
            nonlocal tokens
            async with slots:
                async with session.post(url + "/generate", data=body,
                                        headers={"Content-Type": "application/json"}) as r:
                    tokens += len(orjson.loads(await r.read())["output_ids"])

        t0 = time.perf_counter()
        conn = aiohttp.TCPConnector(limit=concurrency + 8)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None), connector=conn) as s:
            await asyncio.gather(*(one(s, b) for b in bodies))
        return tokens, time.perf_counter() - t0

    tokens, seconds = asyncio.run(go())
    print(json.dumps({"requests": len(bodies), "tokens": tokens, "seconds": seconds}))


def from_generator(workdir: Path) -> None:
    """The baseline of validate + emit, in its own process: bench_emit's `Dataset.from_generator` yielding one
    row at a time (no validation, no decoding) over every sample of this workdir, first turns' prompts from
    prepared/, later turns' from the checkpoint."""
    import datasets
    import numpy as np
    import pyarrow.parquet as pq

    from kimi_eagle_data.store.checkpoint import Checkpoint

    datasets.disable_progress_bars()
    cache = workdir.parent / "hf-cache"
    shutil.rmtree(cache, ignore_errors=True)
    t0 = time.perf_counter()

    def rows():
        ckpt = Checkpoint(workdir / "generations.sqlite")
        later = sqlite3.connect(workdir / "generations.sqlite")
        for f in sorted((workdir / "prepared").glob("*.parquet")):
            prompts = pq.read_table(f, columns=["id", "prompt_ids"])
            index = {id_: i for i, id_ in enumerate(prompts.column("id").to_pylist())}
            col = prompts.column("prompt_ids")
            turns = dict(later.execute("SELECT id, prompt_ids FROM turns WHERE config=?", (f.stem,)))
            for c in ckpt.completions(f.stem):
                prompt = (col[index[c.id]].as_py() if c.id in index
                          else np.frombuffer(turns[c.id], dtype="<i4").tolist())
                out = list(c.output_ids)
                yield {"id": c.id, "input_ids": prompt + out, "loss_mask": [0] * len(prompt) + [1] * len(out),
                       "prompt_len": len(prompt), "completion_len": len(out), "finish_reason": c.finish_reason}
        ckpt.close()

    ds = datasets.Dataset.from_generator(rows, cache_dir=str(cache))
    ds.to_parquet(str(workdir.parent / "baseline.parquet"))
    seconds = time.perf_counter() - t0
    shutil.rmtree(cache, ignore_errors=True)
    print(json.dumps({"rows": len(ds), "seconds": seconds}))


def kimi_ids(path: Path) -> None:
    """The profile's ids and a tokenized English text for the server's answers (synthetic_server --kimi-ids)."""
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
    from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS
    from kimi_eagle_data.prompts.tokenizer import open_tokenizer

    tok = open_tokenizer(str(TINY_MODEL_DIR))
    text = (Path(__file__).read_text() + (HERE / "synthetic_server.py").read_text())
    text = "".join(ch for ch in text if ch.isascii() and ch not in "<>|\\")
    ids = {k: tok.convert_tokens_to_ids(getattr(K2_TOKENS, k)) for k in ("think_open", "think_close", "end_of_turn")}
    ids["words"] = tok.encode(text, add_special_tokens=False)
    path.write_text(json.dumps(ids))


def rehearse(root: Path, conversations: int, concurrency: int, bare_limit: int, baseline: bool,
             server_args: list[str]) -> dict:
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

    shutil.rmtree(root, ignore_errors=True)       # a fresh run, never one resumed from an earlier one
    root.mkdir(parents=True)
    src, w = root / "sources", root / "work"
    src.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    counts = make_sources(src, conversations)
    print(f"  sources: {sum(counts.values()):,} conversations in {time.perf_counter() - t0:.1f} s "
          f"({du(src) / 1e6:.0f} MB)", file=sys.stderr)
    ids_file = root / "kimi-ids.json"
    subprocess.run([sys.executable, __file__, "--kimi-ids", str(ids_file)], check=True)
    server, url = launch("kimi", "--kimi-ids", str(ids_file), "--median", str(MEDIAN), "--sigma", str(SIGMA),
                         "--max-len", str(MAX_NEW), "--model-path", str(TINY_MODEL_DIR), *server_args)
    stages: dict[str, dict] = {}

    def stage(name: str, args: list[str], size_of: Path | None = None, ok=(0,)) -> dict:
        before = du(size_of) if size_of else 0
        r = run_stage(args, ok=ok)
        r["disk"] = (du(size_of) - before) if size_of else 0
        stages[name] = r
        print(f"  {name}: {r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU, {r['rss_mb']:.0f} MB "
              f"(load {os.getloadavg()[0]:.1f})", file=sys.stderr)
        return r

    try:
        stage("prepare", kimi("prepare", "--config", str(src / "partitions.toml"), "--workdir", str(w),
                              "--profile", PROFILE), w)
        g = stage("generate", kimi("generate", "--workdir", str(w), "--engine", "sglang", "--server", url,
                                   "--concurrency", str(concurrency), "--no-progress"), w)
        found = re.search(r"tokens?\s+in\s+([0-9.]+)s", g["stdout"] + g["stderr"])   # rich may wrap the line
        g["generation_s"] = float(found.group(1)) if found else None
        b = run_stage([sys.executable, __file__, "--bare", str(w), "--url", url, "--concurrency",
                       str(concurrency), "--limit", str(bare_limit)])
        stages["bare"] = {**b, **json.loads(b["stdout"].strip().splitlines()[-1]), "disk": 0}
        stage("validate", kimi("validate", "--workdir", str(w)), w / "validated")
        stage("emit", kimi("emit", "--workdir", str(w), "--repo", REPO), w / "dataset")
        if baseline:
            stage("from_generator", [sys.executable, __file__, "--from-generator", str(w)], root / "baseline.parquet")
        st = stage("stats", kimi("stats", "--workdir", str(w), "--json", "--no-plots"))
        stage("plan", kimi("plan", "--workdir", str(w), "--json"))
        first = next(iter(counts))
        stage("inspect", kimi("inspect", str(w), first, "--longest", "--max-chars", "200"))
        stage("check", kimi("check", str(w / "dataset"), "--no-progress"))
        stage("export specforge", kimi("export", str(w), "--format", "specforge", "--out",
                                       str(root / "specforge.jsonl")), root / "specforge.jsonl")
        stage("export speculators", kimi("export", str(w), "--format", "speculators", "--out",
                                         str(root / "speculators")), root / "speculators")
        stage("push --dry-run", kimi("push", str(w), "--repo", REPO, "--dry-run"))
        stage("slurm status", kimi("slurm", "status", "--workdir", str(w)), ok=(0, 1, 2))
    finally:
        server.terminate()
        server.wait()
    stats = json.loads(st["stdout"])
    return {"conversations": sum(counts.values()), "stats": stats, "stages": stages,
            "checkpoint_bytes": sum(du(f) for f in w.glob("generations*.sqlite*")), "workdir": str(w)}


# Stages whose rate is over every token of the dataset (prompt + completion).
ALL_TOKENS = ("validate", "emit", "from_generator", "check", "export specforge", "export speculators")
READERS = ("stats", "plan", "inspect", "slurm status", "push --dry-run")


def stage_tokens(r: dict, name: str) -> int | None:
    tokens = r["stats"]["overall"]["tokens"]
    if name == "prepare":
        return r["stats"]["overall"]["cache"]["by_turn"]["1"]["prompt_tokens"]
    if name == "generate":
        return tokens["completion"]
    if name == "bare":
        return r["stages"]["bare"]["tokens"]
    return tokens["total"] if name in ALL_TOKENS else None


def table(r: dict) -> str:
    st, tokens = r["stages"], r["stats"]["overall"]["tokens"]
    g, b = st["generate"], st["bare"]
    rows = r["stats"]["overall"]["rows"]
    lines = [f"{r['conversations']:,} conversations, {rows:,} samples (turns), {tokens['total'] / 1e6:.1f}M tokens "
             f"({tokens['prompt'] / 1e6:.1f}M prompt, {tokens['completion'] / 1e6:.1f}M completion; completion "
             f"mean {r['stats']['overall']['lengths']['completion']['mean']:,.0f}, p99 "
             f"{r['stats']['overall']['lengths']['completion']['p99']:,.0f}); load average {r['load']}",
             "", "| stage | wall s | CPU s | peak RSS MB | disk MB | tokens | tokens/s | note |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for name, s in st.items():
        n = stage_tokens(r, name)
        note = ""
        if name == "prepare":
            note = f"{r['conversations'] / s['wall']:,.0f} conversations/s"
        elif name == "generate":
            note = (f"generation alone {g['generation_s']:.1f} s: {n / g['generation_s']:,.0f} tok/s; checkpoint "
                    f"{r['checkpoint_bytes'] / 1e6:,.0f} MB, {r['checkpoint_bytes'] / tokens['completion']:.2f} B per "
                    f"generated token") if g.get("generation_s") else ""
        elif name == "bare":
            note = f"bare aiohttp client, {b['requests']:,} requests (posts, keeps nothing): {b['seconds']:.1f} s"
            s = {**s, "wall": b["seconds"]}
        elif name == "from_generator":
            note = "baseline of validate + emit: `Dataset.from_generator` per row, no validation (bench_emit's)"
        elif name == "slurm status":
            note = f"exit {s['rc']}: " + (s["stdout"] + s["stderr"]).strip().splitlines()[-1][:90]
        rate, count = (f"{n / s['wall']:,.0f}", f"{n:,}") if n else ("", "")
        lines.append(f"| {name} | {s['wall']:.1f} | {s['cpu']:.1f} | {s['rss_mb']:,.0f} | {s['disk'] / 1e6:,.1f} "
                     f"| {count} | {rate} | {note} |")
    bare_rate = b["tokens"] / b["seconds"]
    over_generation = (f"{tokens['completion'] / g['generation_s'] / bare_rate:.2f}" if g.get("generation_s")
                       else "(generate printed no generation time)")
    lines.append(f"\ngenerate / bare client: {over_generation} over the generation, "
                 f"{tokens['completion'] / g['wall'] / bare_rate:.2f} over the whole process (start-up included)")
    ve = st["validate"]["wall"] + st["emit"]["wall"]
    if "from_generator" in st:
        fg = st["from_generator"]["wall"]
        lines.append(f"Dataset.from_generator / emit (which validates as it writes): {fg / st['emit']['wall']:.2f}x; "
                     f"/ validate then emit: {fg / ve:.2f}x")
    lines.append(f"validate + emit: {ve:.1f} s, {tokens['total'] / ve:,.0f} tok/s; readers (stats, plan, inspect, "
                 f"slurm status): {max(st[k]['wall'] for k in READERS if k != 'push --dry-run'):.1f} s at most")
    return "\n".join(lines)


def scaling(results: list[dict]) -> str:
    """Seconds per million tokens of each stage at each size, and the largest size's over the smallest's."""
    small, big = results[0], results[-1]
    lines = ["", "| stage | " + " | ".join(f"s/M tokens at {r['conversations']:,}" for r in results)
             + " | largest / smallest |", "|---|" + "---:|" * (len(results) + 1)]
    for name in (n for n in big["stages"] if all(n in r["stages"] for r in results)):
        per = []
        for r in results:
            total = r["stats"]["overall"]["tokens"]["total"] / 1e6
            wall = r["stages"][name]["seconds" if name == "bare" else "wall"]
            per.append(wall / total)
        lines.append(f"| {name} | " + " | ".join(f"{x:.3f}" for x in per) + f" | {per[-1] / per[0]:.2f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conversations", default="100000", help="sizes, comma-separated (each a run of its own)")
    ap.add_argument("--concurrency", type=int, default=256, help="requests in flight (generate and the bare client)")
    ap.add_argument("--bare-limit", type=int, default=20000, help="requests the bare client posts at most")
    ap.add_argument("--token-ms", type=float, default=0.0,
                    help="the server's time per output token on an emulated GPU of --slots (default 0: zero latency)")
    ap.add_argument("--slots", type=int, default=256,
                    help="with --token-ms: sequences the emulated GPU decodes at once")
    ap.add_argument("--no-baseline", action="store_true", help="skip the Dataset.from_generator baseline")
    ap.add_argument("--root", help="where the runs go (default: a temporary folder, removed unless --keep)")
    ap.add_argument("--keep", action="store_true", help="keep the sources and workdirs")
    ap.add_argument("--bare", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--limit", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--kimi-ids", help=argparse.SUPPRESS)
    ap.add_argument("--from-generator", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.bare:
        return bare_client(Path(args.bare), args.url, args.concurrency, args.limit)
    if args.from_generator:
        return from_generator(Path(args.from_generator))
    if args.kimi_ids:
        return kimi_ids(Path(args.kimi_ids))
    root = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="bench-rehearsal-"))
    results = []
    try:
        for size in (int(x) for x in args.conversations.split(",")):
            load0 = os.getloadavg()[0]
            server_args = ["--kimi-token-ms", str(args.token_ms), "--slots", str(args.slots)]
            r = rehearse(root / f"{size}", size, args.concurrency, args.bare_limit, not args.no_baseline, server_args)
            r["load"] = f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
            results.append(r)
            (root / f"{size}.json").write_text(json.dumps(r, default=str))
            print("\n" + table(r), flush=True)
        if len(results) > 1:
            print(scaling(results))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
