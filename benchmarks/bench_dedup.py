"""Near-duplicate detection (MinHash + LSH) in three implementations, on the same rows, the way `prepare` uses it:
one prompt at a time, each checked against the prompts kept before it and kept when no earlier one reaches the
threshold (estimated Jaccard over 5-word shingles of the normalized user turns, 128 permutations, 16 bands of 8).

- `hand`: the numpy MinHash this project wrote first (`(a*x + b) mod (2^31 - 1)` over crc32 shingle hashes, its
  own LSH buckets), kept here as the baseline;
- `datasketch`: `datasketch.MinHash` (default SHA-1 shingle hash, affine32 permutations) + `MinHashLSH` (not a
  project dependency: `pip install datasketch` to run this column);
- `rensa`: `rensa.RMinHash` (Rust) + `RMinHashLSH`, as kimi_eagle_data/sources/dedup.py uses them.

All three shingle the same way (`kimi_eagle_data.sources.dedup.shingles`: normalized text, word shingles) and verify
the LSH candidates against the threshold with their own signatures' estimated Jaccard. Each MinHash is a
different random function, so the flagged sets differ near the threshold. Columns: seconds (shingles given;
signatures, LSH and verification timed), flagged rows; against `hand`: flagged by both, by hand only, by this
only, overlap (both / either), same kept row (of those flagged by both); `exact>=t`: flagged rows whose exact
shingle-set Jaccard with the kept row reaches the threshold; `planted`: planted variants (exact Jaccard to the row
they copy at or above the threshold, counted on the line above the table) that were flagged.

The rows: the user turns of the bundled samples (kimi_eagle_data/sources/samples/*.jsonl, read through the real adapters),
concatenated 1-12 at a time with 10% of their words swapped for others from the samples' vocabulary (a fresh
prompt), and a `--variant-share` of rows that copy an earlier row with each word edited (replaced, dropped or
a word inserted) with a probability drawn from U(0, `--max-edit`), so the pairs straddle the threshold.
Everything is drawn from `random.Random(--seed)`.

    python benchmarks/bench_dedup.py [--rows 10000 100000] [--seed 0] [--only hand,datasketch,rensa]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kimi_eagle_data.sources.partitions import PARTITIONS  # noqa: E402
from kimi_eagle_data.sources.dedup import shingles  # noqa: E402
from kimi_eagle_data.sources.filters import user_text  # noqa: E402
from kimi_eagle_data.sources.readers import iter_source  # noqa: E402
from kimi_eagle_data.sources.rows import SourceRowError  # noqa: E402
from kimi_eagle_data.sources.selection import select  # noqa: E402

THRESHOLD, SHINGLE_WORDS, NUM_PERM, BANDS = 0.85, 5, 128, 16
_PRIME = (1 << 31) - 1


# -- the rows ---------------------------------------------------------------------------------------

def sample_user_texts() -> list[str]:
    texts = []
    for partition in PARTITIONS.values():
        _, rows = iter_source(partition, samples=True)
        for cand in select(partition, rows, n=None):
            for _, item in cand.items or ():
                if not isinstance(item, SourceRowError) and (text := user_text(item.messages)):
                    texts.append(text)
    return texts


def make_rows(n: int, seed: int, variant_share: float, max_edit: float) -> tuple[list[str], list[int | None]]:
    """(rows, the row each one is a variant of or None)."""
    rng = random.Random(seed)
    bases = sample_user_texts()
    vocab = sorted({w for t in bases for w in t.split()})
    rows: list[str] = []
    parents: list[int | None] = []
    for _ in range(n):
        parent = None
        if rows and rng.random() < variant_share:
            rate = rng.uniform(0, max_edit)
            parent = rng.randrange(len(rows))
            words: list[str] = []
            for w in rows[parent].split():
                r = rng.random()
                if r >= rate:
                    words.append(w)
                elif r < rate / 3:
                    words.append(rng.choice(vocab))
                elif r < 2 * rate / 3:
                    words += [w, rng.choice(vocab)]
        else:
            words = [w if rng.random() >= 0.1 else rng.choice(vocab)
                     for t in rng.choices(bases, k=rng.randint(1, 12)) for w in t.split()]
        rows.append(" ".join(words))
        parents.append(parent)
    return rows, parents


def jaccard(a: list[str], b: list[str]) -> float:
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa or sb else 0.0


# -- the three implementations: check(i, shingles) -> (kept row, estimated Jaccard) | None; add(i) ---------

class Hand:
    """The baseline, as it was in kimi_eagle_data/sources/dedup.py."""

    def __init__(self, seed: int = 1):
        rng = np.random.Generator(np.random.PCG64(seed))
        self.a = rng.integers(1, _PRIME, size=NUM_PERM, dtype=np.uint64)
        self.b = rng.integers(0, _PRIME, size=NUM_PERM, dtype=np.uint64)
        self.rows = NUM_PERM // BANDS
        self.buckets: list[dict[bytes, list[int]]] = [{} for _ in range(BANDS)]
        self.sigs: dict[int, np.ndarray] = {}

    def check(self, i: int, sh: list[str]):
        x = np.fromiter((zlib.crc32(s.encode("utf-8", "surrogatepass")) for s in set(sh)), dtype=np.uint64)
        sig = np.full(NUM_PERM, _PRIME, dtype=np.uint64)
        for start in range(0, len(x), 2048):
            np.minimum(sig, ((x[start:start + 2048, None] * self.a + self.b) % _PRIME).min(axis=0), out=sig)
        self.sig = sig = sig.astype(np.uint32)
        self.keys = [sig[k * self.rows:(k + 1) * self.rows].tobytes() for k in range(BANDS)]
        cands: set[int] = set()
        for band, key in zip(self.buckets, self.keys):
            cands.update(band.get(key, ()))
        for j in sorted(cands):
            sim = float(np.mean(self.sigs[j] == sig))
            if sim >= THRESHOLD:
                return j, sim
        return None

    def add(self, i: int) -> None:
        self.sigs[i] = self.sig
        for band, key in zip(self.buckets, self.keys):
            band.setdefault(key, []).append(i)


class Datasketch:
    def __init__(self, seed: int = 1):
        from datasketch import MinHash, MinHashLSH
        self.MinHash = MinHash
        self.template = MinHash(num_perm=NUM_PERM, seed=seed)
        self.lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, params=(BANDS, NUM_PERM // BANDS))
        self.sigs: dict[int, object] = {}

    def check(self, i: int, sh: list[str]):
        m = self.MinHash(num_perm=NUM_PERM, permutations=self.template.permutations, scheme="affine32")
        m.update_batch([s.encode("utf-8", "surrogatepass") for s in sh])
        self.m = m
        for j in sorted(self.lsh.query(m)):
            sim = m.jaccard(self.sigs[j])
            if sim >= THRESHOLD:
                return j, sim
        return None

    def add(self, i: int) -> None:
        self.sigs[i] = self.m
        self.lsh.insert(i, self.m, check_duplication=False)


class Rensa:
    def __init__(self, seed: int = 1):
        from rensa import RMinHash, RMinHashLSH
        self.RMinHash, self.seed = RMinHash, seed
        self.lsh = RMinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, num_bands=BANDS)
        self.sigs: dict[int, object] = {}

    def check(self, i: int, sh: list[str]):
        m = self.RMinHash(num_perm=NUM_PERM, seed=self.seed)
        m.update(sh)
        self.m = m
        for j in sorted(self.lsh.query(m)):
            sim = m.jaccard(self.sigs[j])
            if sim >= THRESHOLD:
                return j, sim
        return None

    def add(self, i: int) -> None:
        self.sigs[i] = self.m
        self.lsh.insert(i, self.m)


IMPLS = {"hand": Hand, "datasketch": Datasketch, "rensa": Rensa}


def _has_datasketch() -> bool:
    import importlib.util
    return importlib.util.find_spec("datasketch") is not None


def run(impl, shingled: list[list[str]]) -> dict[int, int]:
    """{flagged row: the kept row it duplicates}."""
    flagged = {}
    for i, sh in enumerate(shingled):
        hit = impl.check(i, sh) if sh else None
        if hit:
            flagged[i] = hit[0]
        elif sh:
            impl.add(i)
    return flagged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variant-share", type=float, default=0.2)
    ap.add_argument("--max-edit", type=float, default=0.08)
    ap.add_argument("--only", help="implementations, comma-separated (default: every one that is installed)")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else [n for n in IMPLS if n != "datasketch" or _has_datasketch()]
    if "datasketch" not in names and not args.only:
        print("datasketch is not installed (pip install datasketch): its column is left out")
    print(f"threshold {THRESHOLD}, {SHINGLE_WORDS}-word shingles, {NUM_PERM} permutations, {BANDS} bands; "
          f"rows: seed {args.seed}, variant share {args.variant_share}, edit rate U(0, {args.max_edit})")
    print(f"{'rows':>8} {'impl':<11} {'seconds':>8} {'rows/s':>9} {'flagged':>8} {'both':>7} {'only hand':>10} "
          f"{'only this':>10} {'overlap':>8} {'same kept':>10} {'exact>=t':>9} {'planted':>8}")
    for n in args.rows:
        texts, parents = make_rows(n, args.seed, args.variant_share, args.max_edit)
        shingled = [shingles(t, SHINGLE_WORDS) for t in texts]
        planted = {i for i, p in enumerate(parents) if p is not None and jaccard(shingled[i], shingled[p]) >= THRESHOLD}
        print(f"{n:>8} rows: {len(planted)} planted variants with exact Jaccard >= {THRESHOLD} to the row they copy")
        results = {}
        for name in names:
            t0 = time.perf_counter()
            flagged = run(IMPLS[name](), shingled)
            seconds = time.perf_counter() - t0
            results[name] = flagged
            base = results.get("hand")
            if base is not None:
                both = base.keys() & flagged.keys()
                either = base.keys() | flagged.keys()
                same_kept = sum(base[i] == flagged[i] for i in both)
                cmp = (f"{len(both):>7} {len(base.keys() - flagged.keys()):>10} {len(flagged.keys() - base.keys()):>10} "
                       f"{len(both) / max(1, len(either)):>8.3f} {same_kept:>10}")
            else:
                cmp = f"{'-':>7} {'-':>10} {'-':>10} {'-':>8} {'-':>10}"
            exact = sum(jaccard(shingled[i], shingled[j]) >= THRESHOLD for i, j in flagged.items())
            print(f"{n:>8} {name:<11} {seconds:>8.2f} {n / seconds:>9,.0f} {len(flagged):>8} {cmp} {exact:>9} "
                  f"{len(planted & flagged.keys()):>8}", flush=True)


if __name__ == "__main__":
    main()
