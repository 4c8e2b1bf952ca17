"""The split of `--shard i/N` (store/shard_split.py): balanced, a function of the selection alone, and shards
that find every completion where it was stored after the selection or the number of shards changed."""

from __future__ import annotations

import json
import random
import re
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pyarrow.parquet as pq

from kimi_eagle_data.executors.slurm.status import shard_counts
from kimi_eagle_data.prompts.prepare import sample_id
from kimi_eagle_data.sources.partitions import DEMO_CONFIG
from kimi_eagle_data.store.shard_split import ShardSplit, deal
from kimi_eagle_data.store.workdir import Workdir
from tests.helpers.cli import run_cli
from tests.helpers.servers import TINY

SAMPLES = ["--samples", "--config", str(DEMO_CONFIG), "--profile", "tiny-kimi", "--model", TINY]


def test_the_deal_is_balanced_in_all_and_per_config_and_depends_on_the_selection_alone():
    by_config = {f"B{c}": [sample_id(f"B{c}", "src", str(k), "first_user") for k in range(20 + 7 * c)]
                 for c in range(1, 9)}
    ids = [i for v in by_config.values() for i in v]
    for n in range(1, 10):
        owner = deal(ids, n)
        counts = [list(owner.values()).count(s) for s in range(n)]
        assert sum(counts) == len(ids) and max(counts) - min(counts) <= 1, (n, counts)
        for config, own in by_config.items():
            per = [sum(owner[i] == s for i in own) for s in range(n)]
            assert max(per) - min(per) <= 1, (n, config, per)
        shuffled = ids[:]
        random.Random(n).shuffle(shuffled)
        assert deal(shuffled, n) == owner, "the split depends on the order the prompts were read in"
        splits = [ShardSplit(shuffled, (s, n)) for s in range(n)]
        assert all(sum(sp.holds(i) for sp in splits) == 1 for i in ids), "a prompt on no shard or on two"
    assert all(ShardSplit(ids, None).holds(i) for i in ids)


def test_the_bundled_samples_on_four_shards_differ_by_one_prompt_at_most(tmp_path):
    """The case the hash split made 45/49/34/51 of (179 prompts of every config, 25 source rows each): what each
    shard of `slurm status` counts."""
    w = tmp_path / "w"
    run_cli("prepare", *SAMPLES, "--limit", "25", "--workdir", str(w))
    configs = sorted(p.stem for p in (w / "prepared").glob("*.parquet"))
    counts = [c["total"] for c in shard_counts(Workdir(w), 4, configs, time.time())]
    assert sum(counts) == 179 and max(counts) - min(counts) <= 1, counts


def stored(w: Path) -> dict[str, list[str]]:
    """{checkpoint file: the ids it holds a completion of}."""
    out = {}
    for f in sorted(w.glob("generations*.sqlite")):
        with closing(sqlite3.connect(f)) as db:
            out[f.name] = [r[0] for r in db.execute("SELECT id FROM completions")]
    return out


def generate(w: Path, shard: str) -> int:
    proc = run_cli("generate", "B4", "B6", "--workdir", str(w), "--shard", shard, "--engine", "local",
                   "--no-progress")
    return int(re.search(r"generate: (\d+) completed", proc.stdout).group(1))


def test_a_grown_selection_and_another_shard_count_find_every_completion_where_it_was_stored(tmp_path):
    """A pilot on 2 shards (B6's conversations continued on the model's own turns), then a larger selection: the
    dealt split moves some conversations to the other shard; nothing is generated twice and every prompt is
    generated. Then 3 shards: every completion is found (nothing pending on any shard), nothing to generate."""
    w = tmp_path / "w"
    run_cli("prepare", "B4", "B6", *SAMPLES, "--limit", "3", "--max-new-tokens", "64", "--workdir", str(w))
    assert generate(w, "0/2") >= 3 and generate(w, "1/2") >= 3      # 3 prompts each, and B6's later turns
    pilot = stored(w)
    assert sum(map(len, pilot.values())) > 6, "no conversation went past its first turn"
    run_cli("prepare", "B4", "B6", *SAMPLES, "--limit", "6", "--max-new-tokens", "64", "--workdir", str(w))
    made = generate(w, "0/2") + generate(w, "1/2")
    after = stored(w)
    ids = [i for v in after.values() for i in v]
    assert len(ids) == len(set(ids)), "a completion was made on two shards"
    assert all(set(pilot[f]) <= set(after[f]) for f in pilot) and made == len(ids) - sum(map(len, pilot.values()))
    wd = Workdir(w)
    prepared = {i for c in ("B4", "B6") for i in pq.read_table(wd.prepared(c), columns=["id"]).column("id").to_pylist()}
    assert prepared <= set(ids)
    two = shard_counts(wd, 2, ["B4", "B6"], time.time())
    assert [c["done"] for c in two] == [c["total"] for c in two]
    assert abs(sum(prepared_on(wd, 2, 0, prepared)) - sum(prepared_on(wd, 2, 1, prepared))) <= 1
    three = shard_counts(wd, 3, ["B4", "B6"], time.time())
    assert all(c["done"] == c["total"] > 0 for c in three), three
    assert generate(w, "2/3") == 0 and not (w / "generations.shard-2-of-3.sqlite").exists()


def prepared_on(wd: Workdir, n: int, i: int, prepared: set[str]) -> list[bool]:
    split = ShardSplit(prepared, (i, n))
    return [split.holds(c) for c in prepared]


def test_a_conversation_dealt_to_another_shard_after_its_later_turn_was_edited_is_continued_there(tmp_path):
    """A pilot on 2 shards, then a B6 conversation's second user turn edited in place and a larger selection that
    deals that conversation to the other shard. Its old shard runs first and deletes the turns and the end that
    followed the earlier version from its own file; the new owner, which never saw them, still continues the
    conversation from its answered first turn (nothing of the view follows it): the rows are a one-process run's."""
    from kimi_eagle_data.sources.partitions import SAMPLES_DIR
    from kimi_eagle_data.store.checkpoint_set import open_workdir_checkpoints
    from kimi_eagle_data.store.prompt_view import read_views

    source = tmp_path / "B6.jsonl"
    source.write_bytes((SAMPLES_DIR / "B6-ultrachat.jsonl").read_bytes())
    config = tmp_path / "mine.toml"
    config.write_text(f'[partitions.B6]\nsource = "{source}"\npolicy = "own_history"\nmax_turns = 3\n')
    own = ["--config", str(config), "--profile", "tiny-kimi", "--model", TINY, "--max-new-tokens", "160"]

    def prepare(w: Path, limit: int) -> list[dict]:
        run_cli("prepare", "B6", *own, "--limit", str(limit), "--workdir", str(w))
        return pq.read_table(Workdir(w).prepared("B6"), columns=["id", "source_id"]).to_pylist()

    def generate_b6(w: Path, shard: str | None) -> None:
        run_cli("generate", "B6", "--workdir", str(w), "--engine", "local", "--no-progress",
                *(["--shard", shard] if shard else []))

    def view(w: Path):
        seen = open_workdir_checkpoints(Workdir(w))
        try:
            return read_views(Workdir(w), ["B6"], seen)["B6"]
        finally:
            seen.close()

    w = tmp_path / "w"
    pilot = prepare(w, 8)
    generate_b6(w, "0/2")
    generate_b6(w, "1/2")
    before = deal([r["id"] for r in pilot], 2)
    continued = {t.conversation for t in view(w).later.values()}
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    # every row's sample id (a prompt's id does not depend on its text; --limit N reads the first N rows), to
    # find the larger selection that deals a continued conversation to the other shard
    ids = {r["source_id"]: r["id"] for r in prepare(tmp_path / "ids", len(rows))}

    def selection(n: int) -> list[str]:       # a row prepare rejects has no id
        return [ids[r["prompt_id"]] for r in rows[:n] if r["prompt_id"] in ids]

    limit = next(n for n in range(9, len(rows) + 1) if any(deal(selection(n), 2)[c] != before[c] for c in continued))
    after = deal(selection(limit), 2)
    moved = sorted(c for c in continued if after[c] != before[c])[0]
    row = next(r for r in rows if ids.get(r["prompt_id"]) == moved)
    users = [m for m in row["messages"] if m["role"] == "user"]
    users[1]["content"] += " And why?"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))

    assert {r["id"] for r in prepare(w, limit)} == set(after)
    old, new = before[moved], after[moved]
    generate_b6(w, f"{old}/2")          # deletes what followed the earlier version from its own file
    assert (moved, moved) in view(w).to_continue()
    waiting = shard_counts(Workdir(w), 2, ["B6"], time.time())[new]
    assert waiting["done"] < waiting["total"], "slurm status would call the new owner's shard done"
    generate_b6(w, f"{new}/2")
    v = view(w)
    assert v.to_continue() == [] and set(v.ends) == set(v.first), "a conversation was left without its end"
    assert all(c["done"] == c["total"] for c in shard_counts(Workdir(w), 2, ["B6"], time.time()))

    one = tmp_path / "one-process"
    prepare(one, limit)
    generate_b6(one, None)
    reference = view(one)
    assert sorted(v.done) == sorted(reference.done) == v.ids() == reference.ids()
    assert {k: e.reason for k, e in v.ends.items()} == {k: e.reason for k, e in reference.ends.items()}
    assert any(t.conversation == moved for t in v.later.values())

