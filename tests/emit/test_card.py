"""The dataset card as a Markdown renderer reads it (markdown-it-py, CommonMark + GFM tables, as the Hub renders
cards): every table row inside its table with its header's cell count, images and relative links pointing into the
dataset tree, no template syntax left; prompts named by where they came from; no local path published; the
model named by --model-label."""

from __future__ import annotations

import json

import orjson

from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
from tests.helpers.card import card_body, check_card_markdown
from tests.helpers.cli import copy_run, run_cli, tree_hashes


def configs_table(found: dict[str, list]) -> list[str]:
    return next(t for t in found["tables"] if t[0].startswith("| config | prompts from"))


def test_demo_card_renders_with_the_totals_row_in_its_table(demo_run):
    workdir, _ = demo_run
    dataset = workdir / "dataset"
    card = (dataset / "README.md").read_text()
    found = check_card_markdown(card, dataset)
    table = configs_table(found)
    manifest = orjson.loads((dataset / "manifest.json").read_bytes())
    assert [r.split("|")[1].strip() for r in table[1:]] == [*manifest["configs"], "**all**"]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    totals = dict(zip(header, [c.strip() for c in table[-1].strip("|").split("|")]))
    train = sum(c["counts"]["valid"] for c in manifest["configs"].values())
    assert totals["train"] == str(train)
    # every plot in the tree is shown
    assert sorted(found["images"]) == sorted(p.relative_to(dataset).as_posix() for p in (dataset / "assets").glob("*.png"))
    # the demo's prompts are the bundled samples, not "public prompts" from the upstream datasets
    assert "public prompts" not in card and "bundled with kimi-eagle-data" in card
    assert all("sample rows in the schema of [" in r for r in table[1:-1])
    assert str(TINY_MODEL_DIR) not in card and str(workdir) not in card
    # B1, B6 and B7 are own_history configs (samples/demo.toml): a Conversations section with exactly them, the
    # later-turns column and the identity with later turns; the row schema lists the conversation columns
    assert "## Conversations" in card
    shape = next(t for t in found["tables"] if t[0].startswith("| config | conversations"))
    assert [r.split("|")[1].strip() for r in shape[1:]] == ["B1", "B6", "B7"]
    assert "later turns" in header
    assert "selected + later turns = rejected at prepare + train + rejected + failed + pending" in " ".join(card.split())
    schema = next(t for t in found["tables"] if t[0].startswith("| column | type"))
    assert {"conversation_id", "turn", "end_reason"} <= {r.split("|")[1].strip() for r in schema}


def rendered_card(demo_run, sources: dict[str, str], partitions: dict[str, dict], score=None) -> str:
    """The card of the demo's counts with other row sources (and partitions) than the demo's."""
    from kimi_eagle_data.cards.card import render_card
    from kimi_eagle_data.emit.writer import SplitInfo
    from kimi_eagle_data.formats import format_of
    from kimi_eagle_data.profile import get_profile
    from kimi_eagle_data.score.report import card_section

    workdir, _ = demo_run
    dataset = workdir / "dataset"
    manifest = orjson.loads((dataset / "manifest.json").read_bytes())
    summary = {}
    for config, c in manifest["configs"].items():
        report = orjson.loads((workdir / "validated" / f"{config}.json").read_bytes())
        prepared = orjson.loads((workdir / "prepared" / f"{config}.json").read_bytes())
        summary[config] = {"report": report, "partition": partitions.get(config, prepared["partition"]),
                           "source": sources.get(config, prepared["source"]),
                           "splits": {s: SplitInfo(i["rows"], i["tokens"], i["files"], 1) for s, i in c["splits"].items()}}
    plots = {f"plot {p.stem}": p.relative_to(dataset).as_posix() for p in sorted((dataset / "assets").glob("*.png"))}
    chat_format = format_of(get_profile(manifest["provenance"]["profile"]))
    return render_card(summary, chat_format=chat_format, version="1.2.3",
                       provenance={**manifest["provenance"], "model_path": "org/model"},
                       plots=plots, repo_id="org/data", score=card_section(score), manifest_sha256="0" * 64)


def score_report(configs) -> dict:
    stats = {"samples": 5, "tokens": 500, "nats_per_token": -1.5, "top1": 0.4}
    gap = {"estimate": 0.2, "low": -0.1, "high": 0.4}
    return {"threshold_nats": 0.5, "confidence": 0.95, "limit": 200, "engine": {"engine": "local", "version": "x"},
            "configs": {c: {"upstream": stats, "own": stats, "sampled": 5, "without_answer": 1, "gap": gap,
                            "verdict": "either", "segments": {"reasoning": {"upstream": stats, "own": stats, "gap": gap},
                                                              "answer": {"upstream": stats, "own": stats, "gap": gap}}}
                        for c in configs}}


def test_card_names_where_prompts_came_from_and_renders_every_section(demo_run):
    workdir, _ = demo_run
    prepared_b8 = orjson.loads((workdir / "prepared" / "B8.json").read_bytes())["partition"]
    user = {**prepared_b8, "upstream": "trips.jsonl", "builtin": False, "license": "other",
            "prompt_rule": "first user turn | or the second"}
    card = rendered_card(demo_run, sources={"B1": "glaiveai/glaive-function-calling-v2@abc123",
                                            "B4": "open-r1/Mixture-of-Thoughts",
                                            "B2": "/home/someone/private/opencode.jsonl",
                                            "B8": "/home/someone/trips.jsonl"},
                         partitions={"B8": user}, score=score_report(["B1", "B4"]))
    found = check_card_markdown(card, workdir / "dataset")
    rows = {r.split("|")[1].strip(): r for r in configs_table(found)[1:]}
    assert "[glaiveai/glaive-function-calling-v2](https://huggingface.co/datasets/glaiveai/glaive-function-calling-v2)" \
        " at revision `abc123`" in rows["B1"]
    assert "[open-r1/Mixture-of-Thoughts](https://huggingface.co/datasets/open-r1/Mixture-of-Thoughts) (" in rows["B4"]
    assert "a local file in the schema of [nvidia/OpenCodeInstruct]" in rows["B2"]
    assert "a local file (other)" in rows["B8"] and "first user turn \\| or the second" in rows["B8"]
    assert "/home/someone" not in card and "trips.jsonl" not in card and "public prompts" not in card
    assert "prompts from Hub datasets, sample rows bundled with kimi-eagle-data and local files" in card
    assert "[org/model](https://huggingface.co/org/model)" in card
    # the score section: its table renders, and nothing points at a README the Hub reader does not have
    assert "## Where regeneration pays" in card and "README" not in card_body(card)
    score_table = next(t for t in found["tables"] if t[0].startswith("| config | segment"))
    assert len(score_table) == 1 + 2 * 3


def test_model_label_names_the_model_and_a_local_path_is_never_published(demo_run, tmp_path):
    workdir, _ = demo_run
    data = {k: v for k, v in tree_hashes(workdir / "dataset").items() if k.startswith("data/")}

    labelled = copy_run(workdir, tmp_path / "labelled")
    proc = run_cli("emit", "--workdir", str(labelled), "--model-label", "org/tiny-kimi")
    assert "warning" not in proc.stderr
    card = (labelled / "dataset" / "README.md").read_text()
    manifest = orjson.loads((labelled / "dataset" / "manifest.json").read_bytes())
    assert manifest["provenance"]["model_path"] == manifest["provenance"]["tokenizer_path"] == "org/tiny-kimi"
    assert "**[org/tiny-kimi](https://huggingface.co/org/tiny-kimi)**" in card
    # the workdir remembers the label; the run stays bound to the model it loaded
    run = json.loads((labelled / "run.json").read_text())
    assert run["options"]["model_label"] == "org/tiny-kimi" and run["model"] == str(TINY_MODEL_DIR)
    run_cli("emit", "--workdir", str(labelled))
    assert orjson.loads((labelled / "dataset" / "manifest.json").read_bytes())["provenance"]["model_path"] == \
        "org/tiny-kimi"

    unlabelled = copy_run(workdir, tmp_path / "unlabelled")
    run_json = unlabelled / "run.json"
    run = json.loads(run_json.read_text())
    run["options"]["model_label"] = None         # as `build --model LOCAL_DIR` without --model-label leaves it
    run_json.write_text(json.dumps(run))
    proc = run_cli("emit", "--workdir", str(unlabelled))
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "--model-label" in warnings[0] and str(TINY_MODEL_DIR) in warnings[0]
    dataset = unlabelled / "dataset"
    for name in ("README.md", "manifest.json"):
        assert str(TINY_MODEL_DIR) not in (dataset / name).read_text()
    assert orjson.loads((dataset / "manifest.json").read_bytes())["provenance"]["model_path"] == \
        "a local model (path not published)"
    check_card_markdown((dataset / "README.md").read_text(), dataset)
    for emitted in (labelled, unlabelled):     # only the card and manifest differ from the demo's
        assert {k: v for k, v in tree_hashes(emitted / "dataset").items() if k.startswith("data/")} == data


def test_published_names_never_take_a_local_path(tmp_path):
    from kimi_eagle_data.emit.model_name import LOCAL_MODEL, LOCAL_TOKENIZER, published_names

    local = tmp_path / "ckpt"
    local.mkdir()
    hub = published_names("moonshotai/Kimi-K2.5", None, None)
    assert (hub.model, hub.tokenizer, hub.warning) == ("moonshotai/Kimi-K2.5", "moonshotai/Kimi-K2.5", None)
    for path in (str(local), "./ckpt", "~/ckpt", "models/org/name"):
        names = published_names(path, None, None)
        assert names.model == names.tokenizer == LOCAL_MODEL and "--model-label" in names.warning, path
    labelled = published_names(str(local), str(local), "org/name")
    assert (labelled.model, labelled.tokenizer, labelled.warning) == ("org/name", LOCAL_TOKENIZER, None)
    assert published_names(str(local), "org/tok", None).tokenizer == "org/tok"


def test_the_model_label_hint_names_the_profile_s_model(tmp_path):
    """The warning's example is the run's profile's model, never one fixed model; a profile whose model is a local
    path (a test model) gives none."""
    from kimi_eagle_data.emit.model_name import published_names

    local = tmp_path / "ckpt"
    local.mkdir()
    k3 = published_names(str(local), None, None, "moonshotai/Kimi-K3").warning
    assert "--model-label HUB_ID (e.g. moonshotai/Kimi-K3)" in k3 and "K2.5" not in k3
    tiny = published_names(str(local), None, None, str(local)).warning
    assert "--model-label HUB_ID to name" in tiny and "e.g." not in tiny


def test_card_counts_conversations_as_their_rows_say(conversation_run):
    """The Conversations section of an own_history config: conversations, later turns and turns per conversation
    from its rows grouped here, every end reason with its meaning and its count; the single-turn config is not in
    it; the configs table counts later turns and says the identity with them."""
    from kimi_eagle_data.records import END_REASONS
    from tests.helpers.conversations import conversations_of

    workdir, _ = conversation_run
    dataset = workdir / "dataset"
    card = (dataset / "README.md").read_text()
    found = check_card_markdown(card, dataset)
    convs = conversations_of(workdir, "C1")
    per = [len(t) for t in convs.values()]
    assert max(per) > 1, "no conversation got a second turn: the case is not exercised"
    report = orjson.loads((workdir / "validated" / "C1.json").read_bytes())
    assert "## Conversations" in card and "C1 holds conversations regenerated turn by turn" in card

    def cells(row):
        return [c.strip() for c in row.strip().strip("|").split("|")]

    shape = next(t for t in found["tables"] if t[0].startswith("| config | conversations"))
    assert [cells(r)[0] for r in shape[1:]] == ["C1"]
    assert cells(shape[1]) == ["C1", str(len(convs)), str(sum(per) - len(per)), f"{sum(per) / len(per):.2f}",
                               str(max(per)), ", ".join(f"{k}: {per.count(k)}" for k in range(1, max(per) + 1))]
    assert report["later_turns"] == sum(per) - len(per)
    ends = next(t for t in found["tables"] if t[0].startswith("| end reason | meaning"))
    assert cells(ends[0])[2:] == ["C1"]
    got = {cells(r)[0].strip("`"): cells(r)[1:] for r in ends[1:]}
    assert list(got) == list(END_REASONS)
    for reason, meaning in END_REASONS.items():
        n = sum(t[-1]["end_reason"] == reason for t in convs.values())
        assert got[reason] == [meaning, str(n)], reason
    assert sum(int(v[1]) for v in got.values()) == sum(bool(t[-1]["end_reason"]) for t in convs.values())
    table = configs_table(found)
    header = cells(table[0])
    assert header[3:5] == ["selected", "later turns"]
    rows = {cells(r)[0]: cells(r) for r in table[1:]}
    assert rows["C1"][4] == str(report["later_turns"]) and rows["C2"][4] == "0"
    assert "selected + later turns = rejected at prepare + train + rejected + failed + pending" in " ".join(card.split())


def test_card_states_each_modes_prompt_end_as_the_rows_have_it(demo_run, tiny_tokenizer):
    """The rules sentence names both modes' prompt ends from the profile, and the train rows end so: a thinking
    row's prompt with `<think>`, an instant row's with `<think></think>` (a card saying every prompt's last token
    is `<think>` would be wrong for the instant rows)."""
    import pyarrow.parquet as pq

    from kimi_eagle_data.formats import format_of
    from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS
    from kimi_eagle_data.profile import get_profile

    workdir, _ = demo_run
    profile = get_profile("tiny-kimi")
    card = (workdir / "dataset" / "README.md").read_text()
    assert (f"thinking: last token `{K2_TOKENS.think_open}`; instant: `{K2_TOKENS.think_open}{K2_TOKENS.think_close}`"
            in card), card
    bound = format_of(profile).bind(profile, tiny_tokenizer)
    ends = {m: bound.generation_prompt_ids(m) for m in ("thinking", "instant")}
    seen = set()
    for f in sorted((workdir / "dataset" / "data").glob("*/train-*.parquet")):
        for row in pq.read_table(f, columns=["input_ids", "prompt_len", "mode"]).to_pylist():
            prompt = row["input_ids"][:row["prompt_len"]]
            assert prompt[-len(ends[row["mode"]]):] == ends[row["mode"]]
            seen.add(row["mode"])
    assert seen == {"thinking", "instant"}


def test_length_plots_keep_the_modes_apart(demo_run):
    """The per-config histograms are drawn per mode: instant rows have no reasoning (all 0), so they are not
    mixed into the thinking rows' reasoning lengths; the modes together are every row."""
    import pyarrow.parquet as pq

    from kimi_eagle_data.emit.plots import config_lengths, config_lengths_by_mode
    from kimi_eagle_data.store.workdir import Workdir

    workdir, _ = demo_run
    wd = Workdir(workdir)
    for config in wd.validated_configs():
        modes = pq.read_table(wd.validated(config), columns=["mode"])["mode"].to_pylist()
        by_mode = config_lengths_by_mode(wd, config)
        assert list(by_mode) == [m for m in ("thinking", "instant") if m in modes]
        for mode, data in by_mode.items():
            assert sum(len(data[s]["reasoning"]) for s in data) == modes.count(mode)
        if "instant" in by_mode:
            assert not any(by_mode["instant"][s]["reasoning"].any() for s in ("train", "rejected"))
        whole = config_lengths(wd, config)
        assert sum(len(whole[s]["completion"]) for s in whole) == len(modes)
