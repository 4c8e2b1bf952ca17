"""`kimi-data stats`, `plan` and `inspect` on the shared demo workdir, through the real CLI: the numbers they
print are checked against values recomputed here, independently, from the Parquet files and reports."""

from __future__ import annotations

import json
import math

import numpy as np
import orjson
import pyarrow.parquet as pq
import pytest

from kimi_eagle_data.sources.partitions import PARTITIONS
from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
from kimi_eagle_data.formats.kimi_k2.rules import reason_descriptions

from tests.helpers.cli import run_cli

# Student-t 0.975 quantiles (printed tables), to check the plan's 95% intervals without its own code.
T975 = {14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074,
        23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 35: 2.030,
        40: 2.021}


def rows(workdir, config, columns=None):
    """A config's rows in id order: the light columns from validated/, everything else (token ids, messages,
    tools) from the emitted shards, the only place validate + emit write them."""
    light = pq.read_table(workdir / "validated" / f"{config}.parquet").to_pylist()
    if columns is not None and set(columns) <= set(light[0] if light else columns):
        return [{k: r[k] for k in columns} for r in light]
    full = {}
    for f in sorted((workdir / "dataset" / "data" / config).glob("*.parquet")):
        for r in pq.read_table(f).to_pylist():
            full[r["id"]] = r
    assert sorted(full) == [r["id"] for r in light]
    merged = [{**r, **full[r["id"]]} for r in light]
    return merged if columns is None else [{k: r[k] for k in columns} for r in merged]


def report(workdir, config):
    return orjson.loads((workdir / "validated" / f"{config}.json").read_bytes())


def close(a, b, tol=1e-3):
    return a is not None and abs(a - b) <= tol * max(1.0, abs(b))


LIGHT = ["id", "split", "prompt_len", "completion_len", "reasoning_len", "num_tool_calls", "finish_reason", "issues"]


# -- stats ------------------------------------------------------------------------------------------

def test_stats_json_matches_the_parquet(demo_run, tmp_path):
    workdir, _ = demo_run
    proc = run_cli("stats", "--workdir", str(workdir), "--json", "--plots", str(tmp_path / "plots"))
    got = json.loads(proc.stdout)
    assert list(got["configs"]) == list(PARTITIONS)
    every = []
    for config in PARTITIONS:
        rs = rows(workdir, config, LIGHT)
        every += rs
        s = got["configs"][config]
        rep = report(workdir, config)
        assert s["counts"] == {k: rep[k] for k in s["counts"]}
        assert s["rows"] == len(rs) == rep["generated"]
        comp = np.array([r["completion_len"] for r in rs])
        prompt = np.array([r["prompt_len"] for r in rs])
        assert close(s["lengths"]["completion"]["median"], float(np.median(comp)))
        assert close(s["lengths"]["completion"]["mean"], float(comp.mean()))
        assert s["lengths"]["prompt"]["min"] == prompt.min() and s["lengths"]["prompt"]["max"] == prompt.max()
        assert close(s["lengths"]["prompt"]["p90"], float(np.percentile(prompt, 90)))
        assert close(s["lengths"]["reasoning"]["median"], float(np.median([r["reasoning_len"] for r in rs])))
        assert close(s["truncated_share"], sum(r["finish_reason"] == "length" for r in rs) / len(rs))
        assert close(s["short_share"], float((comp < 300).mean()))
        with_calls = [r for r in rs if r["num_tool_calls"] > 0]
        assert s["tool_calls"]["rows"] == len(with_calls)
        assert close(s["tool_calls"]["rate"], len(with_calls) / len(rs))
        ok = [r for r in with_calls if "args_not_json_object" not in r["issues"]]
        if with_calls:
            assert close(s["tool_calls"]["args_valid_rate"], len(ok) / len(with_calls))
        assert s["finish_reasons"] == {f: sum(r["finish_reason"] == f for r in rs)
                                       for f in sorted({r["finish_reason"] for r in rs})}
        assert s["tokens"]["total"] == int(prompt.sum() + comp.sum()) == rep["prompt_tokens"] + rep["completion_tokens"]
        assert s["tokens"]["train"] == rep["train_tokens"]
        assert s["rejection_reasons"] == rep["reasons"]
        assert (tmp_path / "plots" / f"lengths_{config}.png").stat().st_size > 1000
    o = got["overall"]
    assert o["rows"] == len(every)
    assert close(o["lengths"]["completion"]["median"], float(np.median([r["completion_len"] for r in every])))
    assert o["counts"]["generated"] == sum(report(workdir, c)["generated"] for c in PARTITIONS)
    assert close(o["tool_calls"]["rate"], sum(r["num_tool_calls"] > 0 for r in every) / len(every))
    # The local engine reports cached_tokens (0: no prefix cache), so the share is there.
    assert o["cache"] is not None and 0 <= o["cache"]["hit_share"] <= 1


def test_stats_table_prints_the_same_numbers(demo_run):
    workdir, _ = demo_run
    proc = run_cli("stats", "--workdir", str(workdir), "--no-plots")
    lines = proc.stdout.splitlines()
    got = json.loads(run_cli("stats", "--workdir", str(workdir), "--json", "--no-plots").stdout)

    def cells(line):
        return [c.strip() for c in line.strip().strip("│").split("│")]

    # counts table: the "all" row, read by its header
    header = next(h for h in ([c.strip() for c in ln.strip().strip("┃").split("┃")] for ln in lines)
                  if h[0] == "config" and "generated" in h)
    all_row = dict(zip(header, next(cells(ln) for ln in lines if cells(ln)[0] == "all")))
    total = sum(report(workdir, c)["generated"] for c in PARTITIONS)
    assert all_row["generated"] == f"{total:,}"
    assert all_row["later turns"] == f"{sum(report(workdir, c)['later_turns'] for c in PARTITIONS):,}"
    # distribution table: each config's completion median, as printed
    current = None
    seen = 0
    for ln in lines:
        c = cells(ln)
        if len(c) == 10 and c[1] in ("prompt", "completion", "reasoning"):
            current = c[0] or current
            if c[1] == "completion" and current in PARTITIONS:
                med = float(np.median([r["completion_len"] for r in rows(workdir, current, ["completion_len"])]))
                assert c[5] == (f"{int(med):,}" if med.is_integer() else f"{med:,.1f}"), (current, c)
                seen += 1
    assert seen == len(PARTITIONS)
    assert f"{100 * got['overall']['truncated_share']:.1f}%" in proc.stdout
    # the demo's own_history configs (B1, B6, B7: samples/demo.toml) have conversation stats, the others none
    assert [c for c, s in got["configs"].items() if s["conversations"] is not None] == ["B1", "B6", "B7"]
    for c in ("B1", "B6", "B7"):
        assert got["configs"][c]["conversations"]["later_turns"] == report(workdir, c)["later_turns"] > 0
    assert "conversations (policy own_history)" in proc.stdout


def test_stats_reports_the_draft_vocabulary_coverage(demo_run, tmp_path):
    """The share of the train split's loss tokens the 32,000 most frequent ids cover, per config and overall,
    against counts made here from the emitted shards; before any emit, stats says where they come from."""
    from tests.helpers.cli import copy_run

    workdir, _ = demo_run
    got = json.loads(run_cli("stats", "--workdir", str(workdir), "--json", "--no-plots").stdout)["draft_vocab"]
    assert got["top_k"] == 32000
    per_config = {}
    for config in PARTITIONS:
        counts = np.bincount(np.concatenate([np.array(r["input_ids"])[np.array(r["loss_mask"]) == 1]
                                             for r in rows(workdir, config, ["split", "input_ids", "loss_mask"])
                                             if r["split"] == "train"]))
        per_config[config] = counts
        v = got["configs"][config]
        ranked = np.sort(counts)[::-1]
        assert v["loss_tokens"] == int(counts.sum()) == sum(r["completion_len"] for r in rows(workdir, config, LIGHT)
                                                            if r["split"] == "train")
        assert v["distinct_ids"] == int(np.count_nonzero(counts))
        assert close(v["top_k_share"], ranked[:32000].sum() / counts.sum(), 1e-9)
        assert v["ids_to_cover"]["0.9"] == int(np.argmax(np.cumsum(ranked) >= 0.9 * counts.sum())) + 1
    n = max(len(c) for c in per_config.values())
    total = sum(np.pad(c, (0, n - len(c))) for c in per_config.values())
    assert got["overall"]["loss_tokens"] == int(total.sum())
    assert got["overall"]["distinct_ids"] == int(np.count_nonzero(total))
    assert close(got["overall"]["top_k_share"], np.sort(total)[::-1][:32000].sum() / total.sum(), 1e-9)

    proc = run_cli("stats", "--workdir", str(workdir), "--no-plots")
    table = proc.stdout.split("draft vocabulary", 1)[1]
    assert "top 32k cover" in table
    all_row = next(ln for ln in table.splitlines() if ln.strip("│ ").startswith("all"))
    assert f"{100 * got['overall']['top_k_share']:.2f}%" in all_row and f"{int(total.sum()):,}" in all_row

    w = copy_run(workdir, tmp_path / "not-emitted")
    run_cli("validate", "B4", "--workdir", str(w))
    assert json.loads(run_cli("stats", "--workdir", str(w), "--json", "--no-plots").stdout)["draft_vocab"] is None
    assert "draft vocabulary: – (counted by emit; run `kimi-data emit`)" in \
        run_cli("stats", "--workdir", str(w), "--no-plots").stdout


def test_stats_reports_conversations_as_their_rows_say(conversation_run):
    """own_history conversations: their number, turns per conversation, end reasons and lengths per turn
    index, against the validated rows grouped here by conversation_id; a single-turn config has none."""
    from tests.helpers.conversations import conversations_of

    workdir, build = conversation_run
    got = json.loads(run_cli("stats", "--workdir", str(workdir), "--json", "--no-plots").stdout)
    convs = conversations_of(workdir, "C1")
    rs = [r for turns in convs.values() for r in turns]
    per = [len(turns) for turns in convs.values()]
    assert max(per) > 1, "no conversation got a second turn: the case is not exercised"
    for turns in convs.values():      # one row per turn 1..k; only the last says why it ended
        assert [r["turn"] for r in turns] == list(range(1, len(turns) + 1))
        assert all(r["end_reason"] is None for r in turns[:-1])
    c = got["configs"]["C1"]["conversations"]
    rep = report(workdir, "C1")
    assert c["conversations"] == len(convs) == sum(r["turn"] == 1 for r in rs)
    assert c["rows"] == len(rs)
    assert c["later_turns"] == rep["later_turns"] == sum(r["turn"] > 1 for r in rs) == len(rs) - len(convs)
    assert c["turns_per_conversation"]["max"] == max(per)
    assert close(c["turns_per_conversation"]["mean"], float(np.mean(per)))
    assert c["turns_per_conversation"]["histogram"] == {str(k): per.count(k) for k in range(1, max(per) + 1)}
    ends = {}
    for turns in convs.values():
        if turns[-1]["end_reason"]:
            ends[turns[-1]["end_reason"]] = ends.get(turns[-1]["end_reason"], 0) + 1
    assert c["end_reasons"] == ends == rep["conversation_ends"]
    for t in range(1, max(per) + 1):
        at = [r for r in rs if r["turn"] == t]
        by = c["by_turn"][str(t)]
        assert by["rows"] == len(at)
        assert close(by["prompt"]["mean"], float(np.mean([r["prompt_len"] for r in at])))
        assert close(by["completion"]["p50"], float(np.median([r["completion_len"] for r in at])))
    cache = got["configs"]["C1"]["cache"]["by_turn"]     # the engine's cache hits per turn, from the checkpoint
    for t in range(1, max(per) + 1):
        at = [r for r in rs if r["turn"] == t]
        assert cache[str(t)]["requests"] == len(at)
        assert cache[str(t)]["prompt_tokens"] == sum(r["prompt_len"] for r in at)
        assert cache[str(t)]["cached_tokens"] == 0       # the local engine keeps no prefix cache
    assert got["configs"]["C2"]["conversations"] is None
    assert got["overall"]["conversations"]["conversations"] == len(convs)     # C2's prompts are no conversations
    counts = got["configs"]["C1"]["counts"]
    assert counts["selected"] + counts["later_turns"] == sum(counts[k] for k in ("rejected_at_prepare", "valid",
                                                                               "rejected", "failed", "pending"))
    # --split train: the lengths per turn cover the train rows, the conversations' shape every row
    train = json.loads(run_cli("stats", "C1", "--workdir", str(workdir), "--json", "--no-plots", "--split",
                               "train").stdout)["configs"]["C1"]["conversations"]
    assert train["turns_per_conversation"] == c["turns_per_conversation"]
    assert sum(v["rows"] for v in train["by_turn"].values()) == sum(r["split"] == "train" for r in rs)
    # the tables: the accounting with later turns, one conversations row for C1
    text = run_cli("stats", "--workdir", str(workdir), "--no-plots").stdout
    lines = [[x.strip() for x in ln.replace("┃", "│").strip().strip("│").split("│")] for ln in text.splitlines()]
    assert ["config", "selected", "later turns"] in [ln[:3] for ln in lines]
    assert next(ln for ln in lines if ln[0] == "C1")[2] == str(rep["later_turns"])
    start = next(i for i, ln in enumerate(lines) if ln[0] == "conversations (policy own_history)")
    end = next(i for i, ln in enumerate(lines) if ln[0] == "lengths per turn (tokens)")
    conv_rows = [ln for ln in lines[start:end] if ln[0] in ("C1", "C2")]
    assert [ln[0] for ln in conv_rows] == ["C1"] and conv_rows[0][1] == str(len(convs))
    assert conv_rows[0][6] == ", ".join(f"{k} turn{'s' if k > 1 else ''}: {per.count(k)}"
                                        for k in range(1, max(per) + 1))
    # the build said the identity with later turns
    assert "selected + later turns = rejected at prepare + train + rejected + failed + pending" in build.stdout


def test_top_k_share_of_a_cut_vocabulary():
    from kimi_eagle_data.emit.token_freq import coverage

    c = coverage(np.array([0, 7, 1, 2, 0, 10]), top_k=2)
    assert c == {"loss_tokens": 20, "distinct_ids": 4, "ids_to_cover": {"0.9": 3, "0.95": 3, "0.99": 4, "0.999": 4},
                 "top_k": 2, "top_k_share": 17 / 20}

def test_length_histograms_are_deterministic(demo_run, tmp_path):
    from kimi_eagle_data.emit.plots import plot_length_histograms
    from kimi_eagle_data.store.workdir import Workdir

    workdir, _ = demo_run
    a = plot_length_histograms(Workdir(workdir), ["B1"], tmp_path / "a")
    b = plot_length_histograms(Workdir(workdir), ["B1"], tmp_path / "b")
    assert a == b == {"B1 token lengths": "assets/lengths_B1.png"}
    assert (tmp_path / "a" / "lengths_B1.png").read_bytes() == (tmp_path / "b" / "lengths_B1.png").read_bytes()
    # emit puts them in the card
    card = (workdir / "dataset" / "README.md").read_text()
    assert "assets/lengths_B4.png" in card and (workdir / "dataset" / "assets" / "lengths_B4.png").exists()


# -- plan -------------------------------------------------------------------------------------------

def naive_tokens(r) -> float:
    *prompt, gen = r["messages"]
    chars = sum(len(m["content"] or "") + len(m["reasoning_content"] or "") for m in prompt)
    chars += len(gen["content"] or "") + len(gen["reasoning_content"] or "")
    chars += sum(len(c["function"]["name"] or "") + len(c["function"]["arguments"] or "")
                 for c in gen["tool_calls"] or [])
    return chars / 3.5


def test_plan_projects_from_the_pilot(demo_run):
    workdir, _ = demo_run
    proc = run_cli("plan", "--workdir", str(workdir), "--json", "--counts", "B4=1000", "--counts", "B8=0",
                   "--throughput", "500", "--gpus", "8")
    got = json.loads(proc.stdout)
    assert "B8" not in got["configs"] and got["configs"]["B4"]["count"] == 1000
    # B1 not given: the demo read all its bundled B1 rows, so what they held (test_plan_table_defaults_...)
    assert got["configs"]["B1"]["count"] == json.loads((workdir / "prepared" / "B1.json").read_text())["prepared"]
    assert got["throughput"]["source"] == "given" and got["throughput"]["tokens_per_s"] == 500
    assert got["confidence"] == 0.95

    rs = rows(workdir, "B4")
    tokens = np.array([r["prompt_len"] + r["completion_len"] for r in rs], dtype=float)
    comp = np.array([r["completion_len"] for r in rs], dtype=float)
    b4 = got["configs"]["B4"]
    assert close(b4["tokens"]["estimate"], 1000 * tokens.mean())
    hw = (b4["tokens"]["high"] - b4["tokens"]["low"]) / 2
    t = T975[len(rs) - 1]
    assert close(hw, 1000 * t * tokens.std(ddof=1) / math.sqrt(len(rs)), tol=2e-3)
    assert close(b4["train_rows"]["estimate"], 1000 * sum(r["split"] == "train" for r in rs) / len(rs))
    assert close(b4["gpu_hours"]["estimate"], 1000 * comp.mean() / 500 / 3600 * 8)
    assert close(b4["naive"]["tokens"], 1000 * np.mean([naive_tokens(r) for r in rs]), tol=1e-2)

    # overall = the sum of the configs
    cfgs = got["configs"].values()
    o = got["overall"]
    assert o["count"] == sum(c["count"] for c in cfgs)
    assert close(o["tokens"]["estimate"], sum(c["tokens"]["estimate"] for c in cfgs))
    assert o["tokens"]["low"] < o["tokens"]["estimate"] < o["tokens"]["high"]
    assert close(o["gpu_hours"]["estimate"], o["completion_tokens"]["estimate"] / 500 / 3600 * 8)
    assert close(o["disk_bytes"]["estimate"], sum(c["disk_bytes"]["estimate"] for c in cfgs))
    assert 1 < b4["pilot"]["bytes_per_token"] < 100


def test_plan_table_defaults_and_throughput_warning(demo_run):
    workdir, _ = demo_run
    got = json.loads(run_cli("plan", "--workdir", str(workdir), "--json").stdout)
    # The demo read all of its bundled sources (no --limit): the run as configured makes what they held, not n.
    prepared = {c: json.loads((workdir / "prepared" / f"{c}.json").read_text())["prepared"] for c in got["configs"]}
    assert {c: v["count"] for c, v in got["configs"].items()} == prepared
    assert all(n < PARTITIONS[c].default_n for c, n in prepared.items())
    assert set(got["count_notes"]) == set(prepared) and f"--counts B4={PARTITIONS['B4'].default_n}" \
        in got["count_notes"]["B4"]
    full = json.loads(run_cli("plan", "--workdir", str(workdir), "--json",
                              *(a for p in PARTITIONS.values() for a in ("--counts", f"{p.config}={p.default_n}")
                                if p.config in prepared)).stdout)
    assert full["overall"]["count"] == sum(PARTITIONS[c].default_n for c in prepared) and not full["count_notes"]
    measured = got["throughput"]["measured"]
    assert got["throughput"]["source"] == "measured" and measured["engine"] == "local"
    assert measured["device"] == "cpu" and measured["gpus"] == 0       # the demo's pilot ran on the CPU
    proc = run_cli("plan", "--workdir", str(workdir))
    out = " ".join(proc.stdout.split())
    assert "95% intervals" in out and f"{sum(prepared.values()):,}" in out
    assert f"note: B4: its sources held {prepared['B4']:,} prompts" in out
    assert "says nothing about production speed" in out and "--throughput" in out
    # a CPU pilot's speed is not called a GPU figure
    assert "measured in the pilot on the local engine on cpu: no GPU" in out
    assert "GPU(s)" not in out and "for 8 GPUs" not in out
    assert "chars/3.5" in out
    bad = run_cli("plan", "--workdir", str(workdir), "--counts", "B4", check=False)
    assert bad.returncode == 2


@pytest.mark.parametrize("engine, args, said", [
    ("sglang", {"device": "cpu", "tp_size": 1, "dp_size": 1}, "the sglang engine on cpu: no GPU"),   # SGLang on CPU
    ("sglang", {"device": "cuda", "tp_size": 8, "dp_size": 1}, "the sglang engine on cuda, 8 GPUs"),
    ("sglang", {"device": "cuda", "tp_size": 8, "router": True}, "the sglang engine on cuda, GPU count unknown"),
    ("local", {"device": "cpu"}, "the local engine on cpu: no GPU"),
    ("local", {"device": "cuda:0"}, "the local engine on cuda:0, 1 GPU"),
])
def test_plan_says_what_the_pilot_ran_on(engine, args, said):
    """A pilot on the CPU is never said to have used a GPU, whatever the engine's tp_size counts."""
    from kimi_eagle_data.reports.pilot import pilot_hardware
    from kimi_eagle_data.reports.plan import measured_on

    device, gpus = pilot_hardware({"engine": engine, "server_args": {"urls": ["http://h:30000"], **args}})
    assert measured_on({"engine": engine, "device": device, "gpus": gpus}) == said


def test_plan_counts_a_user_partition_by_the_n_prepare_recorded(demo_run, tmp_path):
    """A user-defined partition has no built-in default: its count is the `n` its prepared/<CFG>.json
    records; without one, plan asks for --counts in one line."""
    import shutil

    workdir, _ = demo_run
    wd = tmp_path / "pilot"
    shutil.copytree(workdir, wd, ignore=shutil.ignore_patterns("dataset"))
    for d in ("validated", "prepared"):
        for f in (wd / d).glob("B4.*"):
            f.rename(f.with_name("C1" + f.name[2:]))
    for f in (wd / "prepared").glob("*.json"):     # a pilot with --limit: the sources may hold more than it read
        f.write_text(json.dumps({**json.loads(f.read_text()), "limit": 28}))
    report_path = wd / "prepared" / "C1.json"
    report = json.loads(report_path.read_text())
    report["n"] = 1234
    report_path.write_text(json.dumps(report))
    got = json.loads(run_cli("plan", "--workdir", str(wd), "--json").stdout)
    assert got["configs"]["C1"]["count"] == 1234
    assert got["configs"]["B1"]["count"] == PARTITIONS["B1"].default_n

    del report["n"]
    report_path.write_text(json.dumps(report))
    proc = run_cli("plan", "--workdir", str(wd), check=False)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1 and "--counts C1=N" in lines[0], proc.stderr


# -- inspect ----------------------------------------------------------------------------------------

def test_segments_rebuild_every_row(demo_run):
    """In-process over every demo row: the segments concatenate to input_ids and the boundary is prompt_len."""
    from kimi_eagle_data.formats.kimi_k2.format import KIMI_K2_FORMAT
    from kimi_eagle_data.reports.inspect import segments_of
    from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
    from kimi_eagle_data.prompts.tokenizer import open_tokenizer

    workdir, _ = demo_run
    seg = KIMI_K2_FORMAT.bind(TINY_KIMI, open_tokenizer(str(TINY_MODEL_DIR))).segmenter()
    for config in PARTITIONS:
        for r in rows(workdir, config):
            ss = segments_of(seg, r["input_ids"], r["prompt_len"])
            assert sum((s.ids for s in ss), []) == r["input_ids"]
            assert [s.start for s in ss[1:]] == [s.end for s in ss[:-1]]
            assert r["prompt_len"] in {s.start for s in ss} | {len(r["input_ids"])}
            assert [t for s in ss for t in [s.loss] * s.n_tokens] == r["loss_mask"]
            kinds = [s.kind for s in ss]
            # inspect shows the calls the validator decoded into the row's assistant turn: one grammar
            calls = [s for s in ss if s.kind == "tool_call"]
            decoded = r["messages"][-1]["tool_calls"] or []
            assert [s.label for s in calls] == [f"tool call {k}: {c['function']['name'] or 'malformed id'}"
                                                for k, c in enumerate(decoded)]
            if r["split"] == "train":
                assert len(calls) == r["num_tool_calls"]
                assert kinds[-1] == "end" and "user" in kinds and "generation_prompt" in kinds
                assert (r["tools"] != "") == ("tools" in kinds)


def test_inspect_json_tool_call_sample(demo_run):
    workdir, _ = demo_run
    r = next(r for r in rows(workdir, "B1") if r["num_tool_calls"] > 0 and r["split"] == "train")
    got = json.loads(run_cli("inspect", str(workdir), "B1", r["id"], "--json").stdout)
    assert got["id"] == r["id"] and got["split"] == "train" and got["issues"] == []
    assert sum((s["ids"] for s in got["segments"]), []) == r["input_ids"]
    assert got["loss_boundary"] == r["prompt_len"] == got["prompt_len"]
    assert next(s["start"] for s in got["segments"] if s["loss"] == 1) == r["prompt_len"]
    kinds = [s["kind"] for s in got["segments"]]
    assert kinds[:1] == ["tools"] and "user" in kinds and kinds[-1] == "end"
    # tools are declared as the real model sees them: TypeScript, one `type NAME = …` per declared tool
    from kimi_eagle_data.formats.kimi_k2.tool_declaration import encode_tools
    declared = got["segments"][0]["text"]
    assert encode_tools(json.loads(r["tools"])) in declared and "namespace functions {" in declared
    assert '"parameters"' not in declared
    calls = [s for s in got["segments"] if s["kind"] == "tool_call"]
    assert len(calls) == r["num_tool_calls"]
    names = [c["function"]["name"] for c in r["messages"][-1]["tool_calls"]]
    assert [c["label"] for c in calls] == [f"tool call {i}: {n}" for i, n in enumerate(names)]
    reasoning = next(s for s in got["segments"] if s["kind"] == "reasoning")
    assert reasoning["n_tokens"] == r["reasoning_len"] + 1       # + </think>


def test_inspect_text_and_dataset_dir(demo_run):
    workdir, _ = demo_run
    rs = rows(workdir, "B4", ["id", "completion_len", "prompt_len", "mode"])
    shortest = min(rs, key=lambda r: (r["completion_len"], r["id"]))
    proc = run_cli("inspect", str(workdir / "dataset"), "B4", "--shortest", "--raw")
    out = " ".join(proc.stdout.split())
    assert shortest["id"] in out and f"{shortest['mode']} mode" in out
    assert f"loss-mask boundary at position {shortest['prompt_len']}" in out
    assert "end of turn · 1 token ·" in out and " 1 tokens" not in out      # one <|im_end|>: singular
    # each mode's parts: thinking reasoning + </think> then the answer; instant the answer right after
    # the instant generation prompt
    for mode, labels in (("thinking", ("generation prompt", "reasoning + </think>")),
                         ("instant", ("generation prompt (instant mode)",))):
        row = min((r for r in rs if r["mode"] == mode), key=lambda r: (r["completion_len"], r["id"]))
        out = " ".join(run_cli("inspect", str(workdir / "dataset"), "B4", row["id"], "--raw").stdout.split())
        for label in ("user", *labels, "answer", "end of turn"):
            assert label in out, (mode, label)
        assert ("reasoning + </think>" in out) == (mode == "thinking") and f"{mode} mode" in out
    longest = max(rs, key=lambda r: r["completion_len"])
    got = json.loads(run_cli("inspect", str(workdir), "B4", "--longest", "--json").stdout)
    assert got["completion_len"] == longest["completion_len"]


def test_inspect_browse_rejected_and_random(demo_run):
    workdir, _ = demo_run
    rejected = [(c, r) for c in PARTITIONS for r in rows(workdir, c, LIGHT) if r["split"] == "rejected"]
    if not rejected:
        pytest.skip("the demo rejected nothing")
    config, row = rejected[0]
    reason = row["issues"][0]
    with_reason = {r["id"] for c, r in rejected if c == config and reason in r["issues"]}
    args = ("inspect", str(workdir), config, "--rejected", reason, "--random", "--seed", "3", "--json")
    a, b = (json.loads(run_cli(*args).stdout) for _ in range(2))
    assert a["id"] == b["id"] and a["id"] in with_reason
    assert reason in [i["code"] for i in a["issues"]] and a["split"] == "rejected"
    for i in a["issues"]:
        assert i["description"] == reason_descriptions()[i["code"]]
    assert a["picked"].startswith(f"rejected for {reason}; random pick of {len(with_reason)}")


def test_inspect_unknown_id_is_one_line(demo_run):
    workdir, _ = demo_run
    proc = run_cli("inspect", str(workdir), "B4", "B4-0000000000000000", check=False)
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "B4-0000000000000000" in lines[0], proc.stderr
    proc = run_cli("inspect", str(workdir), "B4", "--rejected", "no_such_reason", check=False)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1


def test_inspect_shows_the_conversation_around_a_turn(conversation_run):
    from kimi_eagle_data.records import END_REASONS
    from tests.helpers.conversations import conversations_of

    workdir, _ = conversation_run
    turns = max(conversations_of(workdir, "C1").values(), key=len)
    assert len(turns) > 1, "no conversation got a second turn: the case is not exercised"
    second = turns[1]
    for where in (workdir, workdir / "dataset"):
        got = json.loads(run_cli("inspect", str(where), "C1", second["id"], "--json").stdout)
        assert (got["conversation_id"], got["turn"]) == (turns[0]["id"], 2) == (second["conversation_id"], 2)
        conv = got["conversation"]
        assert conv["id"] == turns[0]["id"]
        assert [(t["turn"], t["id"], t["split"], t["prompt_len"], t["completion_len"], t["end_reason"])
                for t in conv["turns"]] == [(r["turn"], r["id"], r["split"], r["prompt_len"], r["completion_len"],
                                             r["end_reason"]) for r in turns]
        assert [t["this"] for t in conv["turns"]] == [r["id"] == second["id"] for r in turns]
    # the later turn's prompt holds the model's own first turn: a past assistant turn before the generation prompt
    assert "assistant" in [s["kind"] for s in got["segments"] if s["loss"] == 0]
    text = run_cli("inspect", str(workdir), "C1", second["id"], "--max-chars", "20").stdout
    assert f"conversation {turns[0]['id']}: turn 2 of {len(turns)} turns" in text
    marked = [ln for ln in text.splitlines() if "▶" in ln]
    assert len(marked) == 1 and second["id"] in marked[0]
    last = turns[-1]["end_reason"]
    if last:
        assert f"ended: {last} — {END_REASONS[last]}" in " ".join(text.split())
    assert f"inspect another turn: kimi-data inspect {workdir} C1 ID" in text
    # a single-turn prompt (C2) shows no conversation
    c2 = pq.read_table(workdir / "validated" / "C2.parquet", columns=["id"])["id"][0].as_py()
    got = json.loads(run_cli("inspect", str(workdir), "C2", c2, "--json").stdout)
    assert got["conversation"] is None and (got["turn"], got["end_reason"]) == (1, None)
    assert "conversation" not in run_cli("inspect", str(workdir), "C2", c2).stdout


def test_plan_throughput_counts_busy_time_not_idle_gaps_between_sessions():
    import numpy as np

    from kimi_eagle_data.reports.pilot import busy_seconds

    # two overlapping requests, then a resumed session an hour later
    starts, ends = np.array([0.0, 5.0, 3600.0]), np.array([10.0, 12.0, 3610.0])
    assert busy_seconds(starts, ends) == 22.0          # busy 0-12 s, then 3600-3610 s
    assert busy_seconds(np.array([1.0]), np.array([1.0])) == 0.0
