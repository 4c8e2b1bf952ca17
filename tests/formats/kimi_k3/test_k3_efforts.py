"""A partition's effort mix (`efforts = {max = …, high = …, low = …, off = …}`, sources/modes.py): each prompt's
effort is drawn from its id, its prompt announces that effort, its rows record it (column `effort`), the card counts
rows per effort, and an own_history conversation keeps its first turn's effort on every turn."""

from __future__ import annotations

import collections
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from kimi_eagle_data.profile import get_profile
from kimi_eagle_data.model_profile import INSTANT, THINKING
from kimi_eagle_data.prompts.tokenizer import open_tokenizer
from kimi_eagle_data.sources.config import ConfigError, load_config
from kimi_eagle_data.sources.modes import ModePlan, choose_effort, choose_mode

MIX = "efforts = { max = 0.4, high = 0.2, low = 0.2, off = 0.2 }"


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "kimi_eagle_data", *args], capture_output=True, text=True,
                          timeout=600)


def _config(tmp_path, body: str, name: str = "c.toml"):
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def _announced(tokenizer, prompt_ids) -> str | None:
    """The effort a prompt's text announces (K3's `thinking_effort=` notice), None when none."""
    text = tokenizer.decode(prompt_ids)
    found = [e for e in ("low", "high", "max", "medium") if f"thinking_effort={e}`" in text]
    assert len(found) <= 1, text[:400]
    return found[0] if found else None


# -- the table and the draw ------------------------------------------------------------------------

def test_the_table_is_the_thinking_off_share_and_the_efforts_shares(tmp_path):
    conf = load_config(_config(tmp_path, f"[partitions.B4]\n{MIX}\n"))
    plan = conf.partition("B4").modes
    assert plan.instant_share == 0.2 and plan.efforts == (("max", 0.4), ("high", 0.2), ("low", 0.2))
    assert conf.sampling_plan()["B4"]["efforts"] == {"max": 0.4, "high": 0.2, "low": 0.2}   # binds the run
    assert plan.efforts_table() == {"max": 0.4, "high": 0.2, "low": 0.2, "off": 0.2}


@pytest.mark.parametrize("body, said", [
    ("efforts = { max = 0.5, low = 0.3 }", "partitions.B4.efforts: the shares sum to 0.8, not 1"),
    ("efforts = { max = 0.7, off = 0.3 }\ninstant_share = 0.3",
     "partitions.B4.efforts: instant_share is set too, and both give the thinking-off share"),
    ("efforts = { max = \"most\", off = 0.3 }", "partitions.B4.efforts.max: expected float"),
    ("efforts = { max = 1.5 }", "partitions.B4.efforts.max: must be between 0 and 1"),
])
def test_a_bad_table_is_one_line_naming_its_key(tmp_path, body, said):
    with pytest.raises(ConfigError, match=said.replace(".", r"\.")):
        load_config(_config(tmp_path, f"[partitions.B4]\n{body}\n"))


def test_the_draw_follows_the_shares_and_the_mode_does_not_depend_on_the_efforts_split():
    mix = ModePlan(instant_share=0.2, efforts=(("max", 0.4), ("high", 0.2), ("low", 0.2)))
    other = ModePlan(instant_share=0.2, efforts=(("max", 0.1), ("high", 0.7)))
    keys = [f"B4-{i:016x}" for i in range(20000)]
    counts = collections.Counter()
    for key in keys:
        mode = choose_mode(mix, 7, key)
        assert choose_mode(other, 7, key) == mode          # another split of the thinking share: same modes
        effort = choose_effort(mix, 7, key, mode, "max")
        assert effort == choose_effort(mix, 7, key, mode, "max")    # fixed by (seed, id)
        counts[effort if mode == THINKING else "off"] += 1
        assert (effort is None) == (mode == INSTANT)
    for name, share in (("max", 0.4), ("high", 0.2), ("low", 0.2), ("off", 0.2)):
        assert abs(counts[name] / len(keys) - share) < 0.015, counts
    assert choose_effort(ModePlan(), 7, keys[0], THINKING, "max") == "max"      # no table: the profile's default
    assert choose_effort(ModePlan(), 7, keys[0], THINKING, None) is None        # a profile without efforts


# -- in a run --------------------------------------------------------------------------------------

def test_each_prepared_prompt_announces_its_drawn_effort(tmp_path):
    work = tmp_path / "w"
    config = _config(tmp_path, f"[partitions.B4]\n{MIX}\n[partitions.B2]\n{MIX}\n")
    done = _cli("prepare", "B4", "B2", "--workdir", str(work), "--profile", "tiny-kimi-k3", "--samples",
                "--config", str(config))
    assert done.returncode == 0, done.stderr[-2000:]
    tok = open_tokenizer(get_profile("tiny-kimi-k3").model_path)
    seen = collections.Counter()
    for config_name in ("B4", "B2"):
        t = pq.read_table(work / "prepared" / f"{config_name}.parquet").to_pylist()
        for r in t:
            assert _announced(tok, r["prompt_ids"]) == r["effort"], (r["id"], r["mode"], r["effort"])
            assert (r["effort"] is None) == (r["mode"] == INSTANT)
            seen[r["effort"] or "off"] += 1
    assert set(seen) == {"max", "high", "low", "off"}, seen


def test_a_table_of_the_default_effort_renders_what_an_instant_share_renders(tmp_path):
    """`efforts = {max = 0.7, off = 0.3}` is `instant_share = 0.3` under K3 (its default effort is max): the same
    prompts in the same modes, id for id and token for token."""
    prepared = {}
    for name, body in (("share", "instant_share = 0.3"), ("table", "efforts = { max = 0.7, off = 0.3 }")):
        work = tmp_path / name
        done = _cli("prepare", "B4", "--workdir", str(work), "--profile", "tiny-kimi-k3", "--samples", "--config",
                    str(_config(tmp_path, f"[partitions.B4]\n{body}\n", f"{name}.toml")))
        assert done.returncode == 0, done.stderr[-2000:]
        t = pq.read_table(work / "prepared" / "B4.parquet").to_pylist()
        prepared[name] = [(r["id"], r["mode"], r["prompt_ids"]) for r in t]
    assert prepared["share"] == prepared["table"] and len(prepared["share"]) > 4


def test_a_profile_without_efforts_refuses_a_table_that_names_one(tmp_path):
    work = tmp_path / "w"
    done = _cli("prepare", "B4", "--workdir", str(work), "--profile", "tiny-kimi", "--samples", "--config",
                str(_config(tmp_path, f"[partitions.B4]\n{MIX}\n")))
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "partitions.B4.efforts: profile tiny-kimi has no thinking effort" in lines[0] \
        and "instant_share" in lines[0], done.stderr
    assert not work.exists()                     # refused before anything was written


def test_an_unknown_effort_names_the_profiles(tmp_path):
    done = _cli("prepare", "B4", "--workdir", str(tmp_path / "w"), "--profile", "tiny-kimi-k3", "--samples",
                "--config", str(_config(tmp_path, "[partitions.B4]\nefforts = { ultra = 0.5, max = 0.5 }\n")))
    assert done.returncode == 1
    assert "partitions.B4.efforts: profile tiny-kimi-k3 has no effort 'ultra'; its efforts are low, high, max, and " \
        "off for thinking off" in " ".join(done.stderr.split()), done.stderr


def test_medium_is_refused_with_why_wherever_it_is_named(tmp_path):
    """`medium` is in K3's announcement text, so a user tries it: the partition config and `render --effort` both
    say why it is refused (K3's launch encoder has none), not only that it is not a choice."""
    why = ("K3's launch encoder has no medium effort: the effort announcement's text names `medium`, but the encoder "
           "asserts low, high or max")
    done = _cli("prepare", "B4", "--workdir", str(tmp_path / "w"), "--profile", "tiny-kimi-k3", "--samples",
                "--config", str(_config(tmp_path, "[partitions.B4]\nefforts = { medium = 0.5, max = 0.5 }\n")))
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert f"partitions.B4.efforts: profile tiny-kimi-k3 has no effort 'medium' ({why}); its efforts are low, " \
        "high, max, and off for thinking off" in lines[0], lines
    assert not (tmp_path / "w").exists()
    row = tmp_path / "row.json"
    row.write_text('{"messages": [{"role": "user", "content": "hi"}]}', encoding="utf-8")
    rendered = _cli("render", str(row), "--profile", "tiny-kimi-k3", "--effort", "medium")
    assert rendered.returncode == 2, rendered.stderr
    assert f"'medium' is refused: {why}; choose from low, high, max" in " ".join(rendered.stderr.split())


def test_conversations_keep_their_first_turns_effort_and_the_card_counts_efforts(tmp_path):
    work = tmp_path / "w"
    config = _config(tmp_path, "[partitions.B6]\npolicy = \"own_history\"\nmax_turns = 3\n"
                               "efforts = { high = 0.5, low = 0.5 }\n")
    built = _cli("build", "B6", "--workdir", str(work), "--profile", "tiny-kimi-k3", "--samples", "--limit", "6",
                 "--engine", "local", "--config", str(config), "--no-progress")
    assert built.returncode == 0, built.stderr[-2000:]
    tok = open_tokenizer(get_profile("tiny-kimi-k3").model_path)
    rows = [r for f in sorted((work / "dataset" / "data" / "B6").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    by_conversation = collections.defaultdict(set)
    for r in rows:
        assert _announced(tok, r["input_ids"][:r["prompt_len"]]) == r["effort"] in ("high", "low")
        by_conversation[r["conversation_id"]].add(r["effort"])
    assert max(r["turn"] for r in rows) > 1, "no conversation went past its first turn"
    assert all(len(efforts) == 1 for efforts in by_conversation.values()), by_conversation
    report = json.loads((work / "validated" / "B6.json").read_text(encoding="utf-8"))
    counted = {e: n["valid"] + n["rejected"] for e, n in report["efforts"].items()}
    assert counted == collections.Counter(r["effort"] for r in rows)
    card = (work / "dataset" / "README.md").read_text(encoding="utf-8")
    table = card[card.index("Thinking rows per config and effort"):]
    header = table.splitlines()[2]
    assert header.startswith("| config |") and {"high", "low"} <= set(header.replace("|", " ").split())


def test_a_per_row_thinking_effort_is_warned_not_silently_dropped(tmp_path):
    """A row's `thinking_effort` is not read (the partition's `efforts` table and render's --effort set the
    effort): render and prepare each say so, and where the effort is set instead."""
    row = tmp_path / "row.json"
    row.write_text('{"messages": [{"role": "user", "content": "hi"}], "thinking_effort": "low"}', encoding="utf-8")
    rendered = _cli("render", str(row), "--profile", "tiny-kimi-k3")
    assert rendered.returncode == 0, rendered.stderr
    assert f"warning: {row}: key(s) thinking_effort not read (the prompt is rendered from messages and tools " \
           "only); give --effort instead" in " ".join(rendered.stderr.split())
    assert "thinking_effort=max" in rendered.stdout              # the default, not the row's low
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"hello number {i}"}],
                                        "thinking_effort": "low"}) + "\n" for i in range(3)), encoding="utf-8")
    prepared = _cli("prepare", "B4", "--source", f"B4={rows}", "--profile", "tiny-kimi-k3", "--dry-run",
                    "--workdir", str(tmp_path / "w"))
    said = " ".join(prepared.stderr.split())
    assert prepared.returncode == 0, prepared.stderr
    assert "column(s) thinking_effort" in said and "the partition sets a prompt's effort (its `efforts` table), " \
        "not its row" in said, said
