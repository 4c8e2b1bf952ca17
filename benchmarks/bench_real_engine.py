"""What our scheduling, response checks and checkpoint cost against a real engine's own limit.

The same prepared prompts, with the same sampling, are sent to one real SGLang server twice:
- through `kimi-data generate` (the SGLang engine: least-busy routing, response checks, log-prob parsing,
  one SQLite transaction per completion);
- through a bare client: aiohttp with the same concurrency, posting the same request bodies and keeping
  nothing but the count of output tokens.
The server's prefix cache is flushed before each run, so neither run reuses the other's prefill. It prints
output tok/s for each and their ratio (kimi-data / bare), twice for kimi-data: over the whole process (Python
start, imports and the start-up checks included: a fixed cost of seconds, whatever the run's size) and over the
generation itself, first request to last commit, as `generate` reports it.

    bash scripts/real_engines/install_sglang_cpu.sh      # CPU here; on a GPU node: any SGLang >= 0.5.5
    python benchmarks/bench_real_engine.py --server http://127.0.0.1:30000 --limit 40 --max-new-tokens 128
    python benchmarks/bench_real_engine.py --launch-cpu ...   # start real SGLang on CPU (tiny model) itself
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

from kimi_eagle_data.engines.sglang_logprobs import LOGPROB_FIELDS
from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
from kimi_eagle_data.prompts.prepared_file import read_prepared
from kimi_eagle_data.store.workdir import Workdir


def kimi(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "kimi_eagle_data", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"kimi-data {' '.join(args[:2])} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def flush(url: str) -> None:
    """Empty the server's prefix cache (it refuses while busy: retried until idle)."""
    for _ in range(600):
        try:
            urllib.request.urlopen(urllib.request.Request(url + "/flush_cache", method="POST"), timeout=30)
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{url}/flush_cache never succeeded")


def bodies(workdir: Path, configs: list[str]) -> list[bytes]:
    """The request bodies `kimi-data generate` sends for this workdir (engines/sglang.py, generate.py)."""
    w = Workdir(workdir)
    sampling = w.settings()["sampling"]
    return [orjson.dumps({"input_ids": r.prompt_ids, "sampling_params": sampling, "rid": r.id, **LOGPROB_FIELDS})
            for c in configs for r in read_prepared(w, c)]


async def bare(url: str, payloads: list[bytes], concurrency: int) -> tuple[int, float]:
    import aiohttp

    slots = asyncio.Semaphore(concurrency)
    tokens = 0

    async def one(session, body):
        nonlocal tokens
        async with slots:
            async with session.post(url + "/generate", data=body, headers={"Content-Type": "application/json"}) as r:
                answer = orjson.loads(await r.read())
                tokens += len(answer["output_ids"])

    t0 = time.perf_counter()
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=concurrency + 8)) as s:
        await asyncio.gather(*(one(s, b) for b in payloads))
    return tokens, time.perf_counter() - t0


def through_kimi_data(url: str, workdir: Path, concurrency: int) -> tuple[int, float, float]:
    """(output tokens, seconds of the whole process, seconds of the generation as `generate` reports it)."""
    t0 = time.perf_counter()
    stdout = kimi("generate", "--workdir", str(workdir), "--engine", "sglang", "--server", url,
         "--concurrency", str(concurrency), "--no-progress")
    seconds = time.perf_counter() - t0
    reported = re.search(r"tokens? in ([0-9.]+)s", stdout)
    if reported is None:
        raise SystemExit(f"kimi-data generate printed no generation time:\n{stdout}")
    tokens = 0
    for f in workdir.glob("generations*.sqlite"):
        tokens += sqlite3.connect(f).execute("SELECT COALESCE(SUM(completion_tokens), 0) FROM completions").fetchone()[0]
    return tokens, seconds, float(reported.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", help="a running SGLang server's URL")
    ap.add_argument("--launch-cpu", action="store_true", help="launch real SGLang on CPU (tiny model) and use it")
    ap.add_argument("--model", default=str(TINY_MODEL_DIR))
    ap.add_argument("--profile", default="tiny-kimi")
    ap.add_argument("--configs", nargs="+", default=["B1", "B2", "B3", "B4", "B5", "B6", "B7", "B8"])
    ap.add_argument("--limit", type=int, default=40, help="source rows per config (bundled samples)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--concurrency", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=1, help="alternating runs of each (the median is printed)")
    args = ap.parse_args()
    server = None
    if args.launch_cpu:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.real_engines.servers import sglang_server

        server = sglang_server(Path(tempfile.mkdtemp(prefix="bench-sglang-")), "--skip-tokenizer-init").start()
        args.server = server.url
    if not args.server:
        ap.error("give --server URL or --launch-cpu")
    try:
        run(args)
    finally:
        if server is not None:
            server.stop()


def run(args) -> None:
    url = args.server.rstrip("/")
    tmp = Path(tempfile.mkdtemp(prefix="bench-real-"))
    prepared = tmp / "prepared"
    kimi("prepare", *args.configs, "--workdir", str(prepared), "--profile", args.profile, "--model", args.model,
         "--samples", "--limit", str(args.limit), "--max-new-tokens", str(args.max_new_tokens))
    payloads = bodies(prepared, args.configs)
    ours, theirs = [], []
    for i in range(args.repeats):
        w = tmp / f"run{i}"
        subprocess.run(["cp", "-r", str(prepared), str(w)], check=True)
        flush(url)
        theirs.append(asyncio.run(bare(url, payloads, args.concurrency)))
        flush(url)
        ours.append(through_kimi_data(url, w, args.concurrency))
    med = lambda xs: sorted(xs, key=lambda x: x[0] / x[-1])[len(xs) // 2]   # noqa: E731
    (bt, bs), (kt, ks, kg) = med(theirs), med(ours)
    print(f"{len(payloads)} prompts, max_new_tokens {args.max_new_tokens}, concurrency {args.concurrency}, "
          f"{url}")
    print("| client | output tokens | seconds | output tok/s |")
    print("| --- | --- | --- | --- |")
    print(f"| bare aiohttp (posts, keeps nothing) | {bt} | {bs:.1f} | {bt / bs:.0f} |")
    print(f"| kimi-data generate, the generation (first request to last commit) | {kt} | {kg:.1f} | {kt / kg:.0f} |")
    print(f"| kimi-data generate, the whole process (start-up included) | {kt} | {ks:.1f} | {kt / ks:.0f} |")
    print(f"ratio kimi-data / bare: {(kt / kg) / (bt / bs):.2f} over the generation, "
          f"{(kt / ks) / (bt / bs):.2f} over the whole process")
    print(json.dumps({"bare": [bt, bs], "kimi_data": [kt, ks, kg], "runs": {"bare": theirs, "kimi_data": ours}}))


if __name__ == "__main__":
    main()
