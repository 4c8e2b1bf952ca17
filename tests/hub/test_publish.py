"""`kimi-data push` against a local Hub-protocol server, and `kimi-data export` (docs/reliability.md).

Every push goes through the real CLI in a subprocess whose environment points huggingface_hub at the
local server (HF_ENDPOINT, HF_TOKEN, HF_HUB_DISABLE_XET=1 set before anything is imported), and every
load is `datasets.load_dataset` in a fresh process. The token test checks where the token travelled in a push,
a refused push and a load of its own.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from tests.helpers.cli import run_cli
from tests.helpers.card import check_card_markdown
from tests.helpers.trainer_contracts import (check_speculators_dataset, specforge_prepare_prompts,
                                             speculators_build_vocab_mappings, speculators_token_freq)
from tests.hub.hub_server import HubServer

TOKEN = "hf_kimiTESTtoken_7c1e9a3f5b2d4e6f8a0b"
WRONG_TOKEN = "hf_wrongTOKEN_0000111122223333"
REPO = "kimi-org/eagle3-demo"

@pytest.fixture(scope="module")
def hub():
    with HubServer(token=TOKEN) as server:
        yield server


@pytest.fixture(scope="module")
def hf_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hf-home")


def hub_env(hub: HubServer, hf_home: Path, token: str | None = TOKEN) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(hub.client_env(token), HF_HOME=str(hf_home), COLUMNS="200")
    return env


def kd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, check=False, timeout=600, env=env)


def copy_workdir(demo_run, tmp_path_factory, name: str) -> Path:
    """A private copy of the session's demo workdir (tests here modify trees; the demo stays untouched)."""
    src, _ = demo_run
    dst = tmp_path_factory.mktemp(name) / "work"
    shutil.copytree(src, dst)
    return dst


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error:")]


def local_rows(dataset: Path, config: str, split: str = "train") -> list[dict]:
    rows = []
    for f in sorted((dataset / "data" / config).glob(f"{split}-*.parquet")):
        rows += pq.read_table(f, columns=["id", "input_ids", "loss_mask"]).to_pylist()
    return rows


LOAD_SCRIPT = """
import json, sys
from datasets import load_dataset
repo, config, revision = sys.argv[1], sys.argv[2], sys.argv[3] or None
ds = load_dataset(repo, config, revision=revision)
print(json.dumps({split: [{"id": r["id"], "input_ids": r["input_ids"], "loss_mask": r["loss_mask"]} for r in d]
                  for split, d in ds.items()}))
"""


def hub_load(env: dict[str, str], repo: str, config: str, revision: str | None) -> dict[str, list[dict]]:
    proc = subprocess.run([sys.executable, "-c", LOAD_SCRIPT, repo, config, revision or ""], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def published(demo_run, tmp_path_factory, hub, hf_home):
    """The demo dataset pushed once, as `kimi-data emit --repo` + `kimi-data push` would do it."""
    work = copy_workdir(demo_run, tmp_path_factory, "pub")
    env = hub_env(hub, hf_home)
    emitted = kd(env, "emit", "--workdir", str(work), "--repo", REPO)
    assert emitted.returncode == 0, emitted.stderr
    proc = kd(env, "push", str(work), "--repo", REPO)
    return work, proc, emitted


def test_push_creates_tagged_commit_that_load_dataset_reads(published, hub, hf_home):
    work, proc, emitted = published
    assert proc.returncode == 0, proc.stderr
    repo = hub.repos[("dataset", REPO)]
    tag_commit = repo.tags["v0.1.0"]
    assert repo.branches["main"] == tag_commit
    assert f"/datasets/{REPO}/commit/{tag_commit}" in proc.stdout
    assert f'load_dataset("{REPO}", "B4", revision="v0.1.0")' in proc.stdout
    assert "note:" not in proc.stderr                       # the card already names the repo
    # emit and push count the same files, manifest.json included, and say what they are
    emitted = re.search(r"^emitted (\d+ files \(.*\)) to ", emitted.stdout, re.MULTILINE)
    pushed = re.search(r"^pushed (\d+ files \(.*\)), .* to ", proc.stdout, re.MULTILINE)
    assert emitted and pushed and emitted.group(1) == pushed.group(1)
    n_files = sum(1 for p in (work / "dataset").rglob("*") if p.is_file())
    assert emitted.group(1).startswith(f"{n_files} files (") and "manifest.json" in emitted.group(1)

    # One commit on top of the repo's initial one, with the version in its message; bytes equal the local tree.
    commit = repo.commits[tag_commit]
    assert "0.1.0" in commit.title and repo.commits[commit.parent].parent is None
    dataset = work / "dataset"
    local = {p.relative_to(dataset).as_posix(): p.read_bytes() for p in dataset.rglob("*") if p.is_file()}
    remote = hub.files_at(REPO, "v0.1.0")
    assert remote.pop(".gitattributes")
    assert remote == local
    card = local["README.md"].decode()
    assert f'load_dataset("{REPO}", "B4", revision="v0.1.0")' in card
    check_card_markdown(card, dataset)
    # Parquet and PNG went through the git-LFS batch endpoint with PUT uploads.
    assert any(r.method == "POST" and r.target.endswith(".git/info/lfs/objects/batch") for r in hub.requests)
    assert any(r.method == "PUT" and r.target.startswith("/lfs/objects/") for r in hub.requests)

    env = hub_env(hub, hf_home)
    want = local_rows(dataset, "B4")
    assert want
    for revision in ("v0.1.0", None):
        got = hub_load(env, REPO, "B4", revision)
        assert got["train"] == want
    # a config with both splits (which one depends on the demo's completions)
    both = next(c for c in ("B1", "B2", "B4", "B6", "B7", "B8") if any((dataset / "data" / c).glob("rejected-*")))
    got = hub_load(env, REPO, both, "v0.1.0")
    assert got["train"] == local_rows(dataset, both) and got["rejected"] == local_rows(dataset, both, "rejected")


def test_pushing_the_same_version_again_is_a_no_op(published, hub, hf_home):
    work, _, _ = published
    repo = hub.repos[("dataset", REPO)]
    commits, n_requests = len(repo.commits), len(hub.requests)
    proc = kd(hub_env(hub, hf_home), "push", str(work / "dataset"), "--repo", REPO)
    assert proc.returncode == 0, proc.stderr
    assert "already published" in proc.stdout
    assert len(repo.commits) == commits
    assert not any("/commit/" in r.target or "lfs" in r.target for r in hub.requests[n_requests:])


def test_other_content_under_a_published_version_is_refused(published, demo_run, tmp_path_factory, hub, hf_home):
    env = hub_env(hub, hf_home)
    repo = hub.repos[("dataset", REPO)]
    before = (dict(repo.tags), dict(repo.branches), len(repo.commits))
    # The same data emitted with another card (no --repo) is other content under the same version.
    other = copy_workdir(demo_run, tmp_path_factory, "other")
    proc = kd(env, "push", str(other), "--repo", REPO)
    assert proc.returncode == 1
    lines = error_lines(proc)
    assert len(lines) == 1 and "v0.1.0" in lines[0] and "immutable" in lines[0] and "--dataset-version" in lines[0]
    assert "Traceback" not in proc.stderr
    assert (dict(repo.tags), dict(repo.branches), len(repo.commits)) == before

    # A new version is the way: emit 0.1.1 for the repo and push it; v0.1.0 keeps pointing at its commit.
    assert kd(env, "emit", "--workdir", str(other), "--dataset-version", "0.1.1", "--repo", REPO).returncode == 0
    proc = kd(env, "push", str(other), "--repo", REPO)
    assert proc.returncode == 0, proc.stderr
    assert repo.tags["v0.1.0"] == before[0]["v0.1.0"]
    assert repo.tags["v0.1.1"] == repo.branches["main"] != repo.tags["v0.1.0"]
    assert json.loads(hub.files_at(REPO, "v0.1.1")["manifest.json"])["version"] == "0.1.1"
    assert json.loads(hub.files_at(REPO, "v0.1.0")["manifest.json"])["version"] == "0.1.0"


def test_files_gone_from_the_tree_are_deleted_on_the_hub(published, demo_run, tmp_path_factory, hub, hf_home):
    """A shard the new version no longer has must not survive on main (it would match the split's glob)."""
    work = copy_workdir(demo_run, tmp_path_factory, "shrunk")
    env = hub_env(hub, hf_home)
    emitted = kd(env, "emit", *(f"B{i}" for i in range(1, 8)), "--workdir", str(work), "--dataset-version", "0.2.0",
                 "--repo", REPO)
    assert emitted.returncode == 0, emitted.stderr
    assert not (work / "dataset" / "data" / "B8").exists()
    assert not (work / "dataset" / "assets" / "lengths_B8.png").exists()     # nor its plot
    proc = kd(env, "push", str(work), "--repo", REPO)
    assert proc.returncode == 0, proc.stderr
    files = hub.files_at(REPO, "v0.2.0")
    assert not any(p.startswith("data/B8/") for p in files) and "data/B4/train-00000-of-00001.parquet" in files
    assert "assets/lengths_B8.png" not in files
    assert any(p.startswith("data/B8/") for p in hub.files_at(REPO, "v0.1.0"))


def test_a_tampered_tree_is_refused_before_anything_is_sent(demo_run, tmp_path_factory, hub, hf_home):
    env = hub_env(hub, hf_home)
    work = copy_workdir(demo_run, tmp_path_factory, "tampered")
    shard = work / "dataset" / "data" / "B4" / "train-00000-of-00001.parquet"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    n_requests = len(hub.requests)
    proc = kd(env, "push", str(work), "--repo", "kimi-org/tampered")
    assert proc.returncode == 1
    lines = error_lines(proc)
    assert len(lines) == 1 and "train-00000-of-00001.parquet" in lines[0] and "manifest.json" in lines[0]
    assert len(hub.requests) == n_requests

    shutil.copyfile(demo_run[0] / "dataset" / "data" / "B4" / "train-00000-of-00001.parquet", shard)
    (work / "dataset" / "data" / "B4" / "train-extra.parquet").write_bytes(b"PAR1")
    proc = kd(env, "push", str(work), "--repo", "kimi-org/tampered", "--dry-run")
    assert proc.returncode == 1 and "train-extra.parquet is not listed in manifest.json" in proc.stderr
    assert len(hub.requests) == n_requests


def test_dry_run_sends_nothing_and_private_creates_a_private_repo(demo_run, hub, hf_home):
    env = hub_env(hub, hf_home)
    n_requests = len(hub.requests)
    proc = kd(env, "push", str(demo_run[0]), "--repo", "kimi-org/private-demo", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "dry run" in proc.stdout and "v0.1.0" in proc.stdout
    assert "note:" in proc.stderr and "--repo kimi-org/private-demo" in proc.stderr   # the card names no repo
    assert len(hub.requests) == n_requests

    proc = kd(env, "push", str(demo_run[0]), "--repo", "kimi-org/private-demo", "--private")
    assert proc.returncode == 0, proc.stderr
    repo = hub.repos[("dataset", "kimi-org/private-demo")]
    assert repo.private and "v0.1.0" in repo.tags


def test_bad_or_missing_token_is_one_clean_line(demo_run, hub, hf_home, tmp_path):
    env = hub_env(hub, hf_home, token=WRONG_TOKEN)
    proc = kd(env, "push", str(demo_run[0]), "--repo", "kimi-org/denied")
    assert proc.returncode == 1
    lines = error_lines(proc)
    assert len(lines) == 1 and "401" in lines[0] and "token" in lines[0]
    assert WRONG_TOKEN not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    assert ("dataset", "kimi-org/denied") not in hub.repos

    env = hub_env(hub, tmp_path / "empty-hf-home", token=None)
    proc = kd(env, "push", str(demo_run[0]), "--repo", "kimi-org/denied")
    assert proc.returncode == 1 and len(error_lines(proc)) == 1 and "no Hub token" in proc.stderr

    proc = kd({**env, "KIMI_HUB_TOKEN": TOKEN}, "push", str(demo_run[0]), "--repo", "not-a-repo-id")
    assert proc.returncode == 2 and "ORG/NAME" in proc.stderr          # a usage error


def test_a_named_token_variable_that_is_unset_is_an_error(demo_run, hub, hf_home):
    """HF_TOKEN holds a valid token, but --token-env names another variable: never fall back to HF_TOKEN."""
    env = hub_env(hub, hf_home)
    assert env["HF_TOKEN"] == TOKEN
    n_requests = len(hub.requests)
    for extra, state in (({}, "is not set"), ({"KIMI_NOPE": "  "}, "is empty")):
        for dry in ((), ("--dry-run",)):
            proc = kd({**env, **extra}, "push", str(demo_run[0]), "--repo", "kimi-org/nope", "--token-env", "KIMI_NOPE",
                      *dry)
            lines = error_lines(proc)
            assert proc.returncode == 1 and len(lines) == 1, proc.stderr
            assert "KIMI_NOPE" in lines[0] and state in lines[0] and "Traceback" not in proc.stderr
    assert len(hub.requests) == n_requests and ("dataset", "kimi-org/nope") not in hub.repos
    proc = kd({**env, "KIMI_NOPE": TOKEN}, "push", str(demo_run[0]), "--repo", "kimi-org/nope", "--token-env",
              "KIMI_NOPE")
    assert proc.returncode == 0, proc.stderr
    assert "v0.1.0" in hub.repos[("dataset", "kimi-org/nope")].tags


def test_a_manifest_edited_after_emit_is_refused(demo_run, tmp_path_factory, hub, hf_home):
    """manifest.json is not among its own hashes: the card records its sha256, and push checks it."""
    env = hub_env(hub, hf_home)
    work = copy_workdir(demo_run, tmp_path_factory, "edited")
    path = work / "dataset" / "manifest.json"
    original = path.read_bytes()
    n_requests = len(hub.requests)

    manifest = json.loads(original)
    manifest["version"] = "9.9.9"                       # would be tagged v9.9.9 over a card that says 0.1.0
    path.write_text(json.dumps(manifest, indent=2))
    proc = kd(env, "push", str(work), "--repo", "kimi-org/edited")
    lines = error_lines(proc)
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert "9.9.9" in lines[0] and "0.1.0" in lines[0] and "kimi-data emit" in lines[0] and "manifest.json" in lines[0]

    manifest = json.loads(original)
    manifest["configs"]["B4"]["counts"]["valid"] += 1  # any other value: the hash differs
    path.write_text(json.dumps(manifest))
    proc = kd(env, "push", str(work), "--repo", "kimi-org/edited", "--dry-run")
    lines = error_lines(proc)
    assert proc.returncode == 1 and len(lines) == 1 and "sha256" in lines[0] and "kimi-data emit" in lines[0]
    assert len(hub.requests) == n_requests and ("dataset", "kimi-org/edited") not in hub.repos

    path.write_text(json.dumps(json.loads(original), indent=4, sort_keys=False))   # reformatted, same content
    proc = kd(env, "push", str(work), "--repo", "kimi-org/edited", "--dry-run")
    assert proc.returncode == 0, proc.stderr


def test_export_specforge_rows_equal_the_parquet(demo_run, tmp_path):
    work, _ = demo_run
    dataset = work / "dataset"
    out = tmp_path / "sf" / "train.jsonl"
    proc = kd(dict(os.environ), "export", str(work), "--format", "specforge", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    manifest = json.loads((dataset / "manifest.json").read_text())
    configs = list(manifest["configs"])
    want = [r for c in configs for r in local_rows(dataset, c)]
    assert len(rows) == sum(c["splits"]["train"]["rows"] for c in manifest["configs"].values()) == len(want)
    assert rows == want                                      # same order, ids, tokens and masks
    assert all(set(r) == {"id", "input_ids", "loss_mask"} for r in rows)
    # SpecForge's pre-tokenized reader keeps every row as it is (each has a loss token)
    assert [p["payload"] for p in specforge_prepare_prompts(out, max_length=1 << 20)] == [
        {"input_ids": r["input_ids"], "loss_mask": r["loss_mask"]} for r in rows]
    assert not list(out.parent.glob(".*"))                   # no temp file left behind

    proc = kd(dict(os.environ), "export", str(dataset), "--configs", "B4,B1", "--split", "rejected",
              "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert rows == local_rows(dataset, "B4", "rejected") + local_rows(dataset, "B1", "rejected")

    proc = kd(dict(os.environ), "export", str(dataset), "--configs", "B9", "--out", str(out))
    assert proc.returncode == 1 and len(error_lines(proc)) == 1 and "B9" in proc.stderr


def test_export_speculators_matches_speculators_prepare_data(demo_run, tmp_path):
    """The saved dataset against speculators' loader contract (tests/helpers/trainer_contracts.py)."""
    from datasets import load_from_disk

    work, _ = demo_run
    out = tmp_path / "spec"
    proc = kd(dict(os.environ), "export", str(work), "--format", "speculators", "--configs", "B1",
              "--configs", "B4", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    want = local_rows(work / "dataset", "B1") + local_rows(work / "dataset", "B4")
    check_speculators_dataset(load_from_disk(str(out)), want)


def test_export_speculators_writes_the_token_freq_its_trainer_reads(demo_run, tmp_path):
    import torch
    from datasets import load_from_disk

    work, _ = demo_run
    out = tmp_path / "spec"
    proc = kd(dict(os.environ), "export", str(work), "--format", "speculators", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out / 'token_freq.pt'}" in proc.stdout
    # scripts/train.py parse_vocab_mappings: `data_path / "token_freq.pt"`, `torch.load(..., weights_only=True)`
    freq = torch.load(out / "token_freq.pt", weights_only=True)
    assert type(freq) is dict and all(type(k) is int and type(v) is int and v > 0 for k, v in freq.items())
    assert freq == speculators_token_freq(load_from_disk(str(out)))     # what prepare_data would have saved
    # ... the sum of the dataset's own counts (token_freq/<CFG>.parquet, train split) over every config
    total = sum(pq.read_table(p)["count"].to_numpy() for p in sorted((work / "dataset" / "token_freq").glob("*")))
    assert freq == {i: int(total[i]) for i in range(len(total)) if total[i]}
    d2t, t2d = speculators_build_vocab_mappings(freq, 64, len(total))
    assert d2t.shape == (64,) and int(t2d.sum()) == 64
    assert not [p.name for p in out.parent.iterdir() if p.name.startswith(".")]


def specforge_process_token_dict_to_mappings(token_dict, draft_vocab_size, target_vocab_size):
    """SpecForge's own mapping, sgl-project/SpecForge@a6b6b0230009d15ec2a97a57384e6f53f0f96946
    specforge/data/preprocessing.py `process_token_dict_to_mappings` (its prints left out): the main suite's fast
    restatement; the trainer tier (tests/trainers/) runs SpecForge 0.2.0's own."""
    import torch

    if len(token_dict) < draft_vocab_size:
        existing_tokens = set(token_dict.keys())
        missing_tokens = set(range(draft_vocab_size)) - existing_tokens
        for token in missing_tokens:
            token_dict[token] = 0
            if len(token_dict) >= draft_vocab_size:
                break
    top_N = token_dict.most_common(draft_vocab_size)
    used_tokens = [key for key, freq in top_N]
    used_tokens.sort()
    d2t = [used_tokens[i] - i for i in range(len(used_tokens))]
    t2d = [i in used_tokens for i in range(target_vocab_size)]
    return torch.tensor(d2t), torch.tensor(t2d)


def specforge_token_dict(jsonl_rows):
    """SpecForge's counting in `generate_vocab_mapping_file` (same file): `input_ids[loss_mask == 1]`,
    `unique(return_counts=True)`, a Counter updated row by row, in the dataset's order."""
    from collections import Counter

    import torch

    token_dict = Counter()
    for r in jsonl_rows:
        input_ids, loss_mask = torch.tensor(r["input_ids"]), torch.tensor(r["loss_mask"])
        unique_ids, counts = input_ids[loss_mask == 1].unique(return_counts=True)
        token_dict.update(dict(zip(unique_ids.tolist(), counts.tolist())))
    return token_dict


@pytest.mark.parametrize("draft_vocab_size,shuffle", [(100, False), (100, True), (2000, False)])
def test_export_specforge_writes_the_vocab_mapping_specforge_loads(demo_run, tmp_path, draft_vocab_size, shuffle):
    """100: a cut through the counted ids, ties at it broken as SpecForge breaks them (its Counter's first-seen
    order over the file's rows, shuffled or not); 2000: more than the demo's distinct loss ids, so padded as
    SpecForge pads. The real SpecForge runs on these files in the trainer tier (tests/trainers/)."""
    import torch

    work, _ = demo_run
    out = tmp_path / "sf" / "train.jsonl"
    proc = kd(dict(os.environ), "export", str(work), "--format", "specforge", "--out", str(out),
              "--draft-vocab-size", str(draft_vocab_size), *(["--shuffle", "--seed", "3"] if shuffle else []))
    assert proc.returncode == 0, proc.stderr
    path = out.parent / "vocab_mapping.pt"
    assert f"wrote {path}" in proc.stdout
    vocab = pq.ParquetFile(work / "dataset" / "token_freq" / "B1.parquet").metadata.num_rows
    # specforge/modeling/draft/llama3_eagle.py registers the buffers (t2d: ones(vocab_size, bool), d2t:
    # zeros(draft_vocab_size, int64)); base.py `load_vocab_mapping` fills them with `torch.load(file_path)`.
    t2d, d2t = torch.ones(vocab, dtype=torch.bool), torch.zeros(draft_vocab_size, dtype=torch.int64)
    mapping = torch.load(path)
    assert set(mapping) == {"d2t", "t2d"}
    assert mapping["t2d"].dtype == t2d.dtype and mapping["t2d"].shape == t2d.shape
    assert mapping["d2t"].dtype == d2t.dtype and mapping["d2t"].shape == d2t.shape
    t2d.copy_(mapping["t2d"])
    d2t.copy_(mapping["d2t"])
    # specforge/core/compact_teacher.py `validate_vocab_mapping_consistency`: nonzero(t2d) == d2t + arange
    assert torch.equal(torch.nonzero(t2d).flatten(), d2t + torch.arange(draft_vocab_size))

    rows = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    token_dict = specforge_token_dict(rows)
    want_d2t, want_t2d = specforge_process_token_dict_to_mappings(token_dict.copy(), draft_vocab_size, vocab)
    assert torch.equal(d2t, want_d2t) and torch.equal(t2d, want_t2d)
    if draft_vocab_size < len(token_dict):      # the cut falls inside a tie, so the tie-break is what is tested
        ours = torch.nonzero(t2d).flatten().tolist()
        cut = min(token_dict[i] for i in ours)
        assert sum(1 for c in token_dict.values() if c == cut) > sum(1 for i in ours if token_dict[i] == cut)
        by_id = sorted(token_dict, key=lambda tid: (-token_dict[tid], tid))[:draft_vocab_size]
        assert sorted(by_id) != ours     # the lowest-id rule would pick other ids


def test_export_shuffle_mixes_configs_in_one_seeded_order(demo_run, tmp_path):
    import torch
    from datasets import load_from_disk

    work, _ = demo_run
    env = dict(os.environ)

    def specforge(name: str, *extra: str) -> tuple[bytes, list[dict], str]:
        out = tmp_path / name / "train.jsonl"
        proc = kd(env, "export", str(work), "--format", "specforge", "--out", str(out), *extra)
        assert proc.returncode == 0, proc.stderr
        return out.read_bytes(), [orjson.loads(x) for x in out.read_bytes().splitlines()], proc.stdout

    plain, plain_rows, _ = specforge("plain")
    raw, rows, printed = specforge("a", "--shuffle", "--seed", "7")
    assert "shuffled with seed 7" in printed
    assert sorted(map(orjson.dumps, rows)) == sorted(map(orjson.dumps, plain_rows)) and rows != plain_rows
    first_tenth = {r["id"].split("-")[0] for r in rows[:len(rows) // 10]}
    assert len(first_tenth) > 2                         # configs are mixed, not one after another
    assert specforge("b", "--shuffle", "--seed", "7")[0] == raw     # same seed, same bytes
    assert specforge("c", "--shuffle", "--seed", "8")[1] != rows
    assert specforge("d", "--shuffle")[1] == specforge("e", "--shuffle", "--seed", "0")[1]

    out = tmp_path / "spec"
    proc = kd(env, "export", str(work), "--format", "speculators", "--out", str(out), "--shuffle", "--seed", "7")
    assert proc.returncode == 0, proc.stderr
    ds = load_from_disk(str(out))
    assert ds.format["type"] == "torch" and len(ds) == len(rows)
    for i in (0, len(rows) // 2, len(rows) - 1):        # the same order as the JSONL's
        assert torch.equal(ds[i]["input_ids"], torch.tensor(rows[i]["input_ids"]))


def test_export_prints_the_longest_row(demo_run, tmp_path):
    work, _ = demo_run
    out = tmp_path / "train.jsonl"
    proc = kd(dict(os.environ), "export", str(work), "--format", "specforge", "--configs", "B1,B5", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    longest = max(rows, key=lambda r: len(r["input_ids"]))
    m = re.search(r"longest row: ([\d,]+) tokens \((B\d) (\S+)\)", proc.stdout)
    assert m, proc.stdout
    assert int(m.group(1).replace(",", "")) == len(longest["input_ids"]) and m.group(3) == longest["id"]
    over = sum(len(r["input_ids"]) > 2048 for r in rows)
    assert ("exceed SpecForge's default data.max_length of 2,048" in proc.stdout) == (over > 0)


def test_export_vocabulary_options_are_checked(demo_run, tmp_path):
    work, _ = demo_run
    env = dict(os.environ)
    proc = kd(env, "export", str(work), "--format", "speculators", "--out", str(tmp_path / "s"),
              "--draft-vocab-size", "64")
    assert proc.returncode == 2 and "--draft-vocab-size" in proc.stderr
    proc = kd(env, "export", str(work), "--out", str(tmp_path / "a.jsonl"), "--seed", "3")
    assert proc.returncode == 2 and "--shuffle" in proc.stderr
    proc = kd(env, "export", str(work), "--out", str(tmp_path / "a.jsonl"), "--draft-vocab-size", "999999")
    assert proc.returncode == 1 and len(error_lines(proc)) == 1 and "at most" in proc.stderr
    assert not (tmp_path / "a.jsonl").exists()


HUB_API_SCRIPT = """
import io, sys
from huggingface_hub import HfApi
from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError
api = HfApi()
repo = "kimi-org/api-check"
api.create_repo(repo, repo_type="dataset")
api.create_repo(repo, repo_type="dataset", exist_ok=True)
c1 = api.upload_file(path_or_fileobj=b"hello", path_in_repo="a/b.txt", repo_id=repo, repo_type="dataset",
                     commit_message="one")
c2 = api.upload_file(path_or_fileobj=io.BytesIO(b"PAR1" + bytes(range(256))), path_in_repo="a/c.parquet",
                     repo_id=repo, repo_type="dataset", commit_message="two")
api.create_tag(repo, tag="v1", revision=c1.oid, repo_type="dataset")
refs = api.list_repo_refs(repo, repo_type="dataset")
assert [t.name for t in refs.tags] == ["v1"] and refs.branches[0].target_commit == c2.oid
assert sorted(api.list_repo_files(repo, repo_type="dataset")) == [".gitattributes", "a/b.txt", "a/c.parquet"]
assert sorted(api.list_repo_files(repo, repo_type="dataset", revision="v1")) == [".gitattributes", "a/b.txt"]
top = {e.path: type(e).__name__ for e in api.list_repo_tree(repo, repo_type="dataset")}
assert top == {".gitattributes": "RepoFile", "a": "RepoFolder"}, top
try:
    list(api.list_repo_tree(repo, "missing", repo_type="dataset"))
    raise SystemExit("no 404 for a missing folder")
except EntryNotFoundError:
    pass
info = {e.path: e for e in api.get_paths_info(repo, ["a/c.parquet", "a", "nope"], repo_type="dataset")}
assert set(info) == {"a/c.parquet", "a"} and info["a/c.parquet"].lfs.size == 260   # the 4 + 256 bytes uploaded
assert api.dataset_info(repo, revision="v1").sha == c1.oid
assert api.file_exists(repo, "a/b.txt", repo_type="dataset", revision="v1")
assert not api.file_exists(repo, "a/c.parquet", repo_type="dataset", revision="v1")
assert [c.title for c in api.list_repo_commits(repo, repo_type="dataset")][:2] == ["two", "one"]
path = api.hf_hub_download(repo, "a/c.parquet", repo_type="dataset", revision=c2.oid)
assert open(path, "rb").read()[:4] == b"PAR1"
for call in (lambda: api.dataset_info(repo, revision="v9"), lambda: api.dataset_info("kimi-org/nothing")):
    try:
        call()
        raise SystemExit("no 404")
    except (RevisionNotFoundError, RepositoryNotFoundError):
        pass
api.delete_tag(repo, tag="v1", repo_type="dataset")
assert not api.list_repo_refs(repo, repo_type="dataset").tags
print("ok")
"""


def test_hub_server_speaks_the_hub_api(hub, hf_home):
    proc = subprocess.run([sys.executable, "-c", HUB_API_SCRIPT], capture_output=True, text=True,
                          env=hub_env(hub, hf_home), timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


@pytest.fixture
def token_traffic(demo_run, tmp_path):
    """What a push, a push with a wrong token and a load_dataset leave, against a Hub of their own: (everything
    the processes printed, every directory they could write to, the Hub's requests)."""
    home, work = tmp_path / "hf-home", tmp_path / "work"
    home.mkdir()
    shutil.copytree(demo_run[0], work)
    with HubServer(token=TOKEN) as hub:
        env, outputs = hub_env(hub, home), []
        for run_env, args in ((env, ("push", str(work), "--repo", REPO)),
                              (hub_env(hub, home, WRONG_TOKEN), ("push", str(work), "--repo", "kimi-org/denied"))):
            proc = kd(run_env, *args)
            outputs += [proc.stdout, proc.stderr]
        assert "v0.1.0" in hub.repos[("dataset", REPO)].tags and "401" in outputs[-1]
        assert hub_load(env, REPO, "B4", "v0.1.0")["train"]
        yield outputs, [home, work, hub.root], hub.requests


def test_the_token_never_leaves_the_authorization_header(token_traffic):
    """Every CLI output, every file a pushing or loading process could write, every request the Hub saw."""
    outputs, dirs, requests = token_traffic
    for text in outputs:
        assert TOKEN not in text and WRONG_TOKEN not in text
    secrets = (TOKEN.encode(), WRONG_TOKEN.encode())
    for root in dirs:
        for f in Path(root).rglob("*"):
            if f.is_file() and not f.is_symlink():
                data = f.read_bytes()
                assert not any(s in data for s in secrets), f
    carried = 0
    for r in requests:
        assert not any(s in r.body for s in secrets), r.target
        assert TOKEN not in r.target and WRONG_TOKEN not in r.target
        for name, value in r.headers:
            if TOKEN in value or WRONG_TOKEN in value:
                assert name.lower() == "authorization", name
                carried += 1
            assert TOKEN not in name
    assert carried > 10


@pytest.mark.parametrize("sig, code, by", [(signal.SIGINT, 130, ""), (signal.SIGTERM, 143, " by SIGTERM")],
                         ids=["ctrl-c", "sigterm"])
def test_push_stopped_mid_upload_says_what_is_true(sig, code, by, emitted_b6, tmp_path, hf_home):
    """Stopped while the Hub holds its commit request: push says nothing counts as published before the tag, and
    the rerun (the server answering again) publishes the version. No word of a checkpoint (push has none)."""
    work = tmp_path / "w"
    shutil.copytree(emitted_b6, work)
    with HubServer(token=TOKEN, hold=r"^/api/datasets/.+/commit/") as hub:
        env = hub_env(hub, hf_home)
        proc = subprocess.Popen([sys.executable, "-m", "kimi_eagle_data", "push", str(work), "--repo", REPO],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            if not hub.held.wait(600):
                proc.kill()
                raise AssertionError(f"push never sent its commit: {proc.communicate()}")
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == code, (proc.returncode, err)
        assert "Traceback" not in err and "checkpoint" not in err and TOKEN not in err, err
        assert f"interrupted{by}: nothing counts as published until the version's tag is on the Hub; rerun the " \
               "same command to finish (it checks the tag first)" in " ".join(err.split()), err
        assert not hub.repos[("dataset", REPO)].tags
        hub.release()
        again = kd(env, "push", str(work), "--repo", REPO)
        assert again.returncode == 0, again.stderr
        assert "v0.1.0" in hub.repos[("dataset", REPO)].tags
