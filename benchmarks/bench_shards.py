"""Scale-out of `--shard i/N` (and `kimi-data slurm submit --nodes N`): how evenly the split spreads a run's
prompts over its shards. With every request taking the same time (the Slurm tier's stand-ins), a run ends when
its largest shard does, so max shard / mean shard is the scale-out's excess over ideal.

The dealt split (store/shard_split.py: the conversations sorted by id, dealt round-robin) against the hash of
each id modulo N (the split before it), on the prompts `prepare` makes from the bundled samples of every config
(the demo's partition config, the tiny model's tokenizer), or on a prepared workdir's.

    python benchmarks/bench_shards.py [--limit 25] [--shards 2 3 4 8] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR  # noqa: E402
from kimi_eagle_data.sources.partitions import DEMO_CONFIG  # noqa: E402
from kimi_eagle_data.store.shard_split import deal  # noqa: E402


def hashed(conversations: list[str], shards: int) -> dict[str, int]:
    """The split before: each id's sha256 modulo N."""
    return {c: int(hashlib.sha256(c.encode()).hexdigest()[:12], 16) % shards for c in conversations}


def prepare(workdir: Path, limit: int | None) -> None:
    args = [sys.executable, "-m", "kimi_eagle_data", "prepare", "--samples", "--config", str(DEMO_CONFIG),
            "--profile", "tiny-kimi", "--model", str(TINY_MODEL_DIR), "--workdir", str(workdir)]
    subprocess.run(args + (["--limit", str(limit)] if limit else []), check=True, capture_output=True)


def prepared_ids(workdir: Path) -> dict[str, list[str]]:
    return {p.stem: pq.read_table(p, columns=["id"]).column("id").to_pylist()
            for p in sorted((workdir / "prepared").glob("*.parquet"))}


def sizes(owner: dict[str, int], shards: int) -> list[int]:
    counts = [0] * shards
    for s in owner.values():
        counts[s] += 1
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, help="source rows per config (default: every bundled sample)")
    ap.add_argument("--shards", type=int, nargs="+", default=[2, 3, 4, 8])
    ap.add_argument("--workdir", type=Path, help="a prepared workdir to read instead of preparing the samples")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir
        if workdir is None:
            workdir = Path(tmp) / "w"
            prepare(workdir, args.limit)
        by_config = prepared_ids(workdir)
    conversations = [c for ids in by_config.values() for c in ids]
    print(f"{len(conversations)} prompts of {len(by_config)} configs ({', '.join(by_config)})")
    print("\n| shards | split | prompts per shard | largest / mean |\n|---:|---|---|---:|")
    for n in args.shards:
        mean = len(conversations) / n
        for name, owner in (("hash of id", hashed(conversations, n)), ("dealt (kimi-data)", deal(conversations, n))):
            counts = sizes(owner, n)
            print(f"| {n} | {name} | {'/'.join(map(str, counts))} | {max(counts) / mean:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
