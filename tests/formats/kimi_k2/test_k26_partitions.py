"""Kimi-K2.6's `preserve_thinking` as a partition setting: a partition of the config file sets it over the run's
(`--preserve-thinking`, else the profile's default), its prompts render so, run.json binds the plan (`template_plan`),
the card says per config how the history's reasoning is rendered where configs differ, and a profile whose template
does not take it refuses the file in one line. `prepare` runs as the CLI in a process of its own."""

from __future__ import annotations

import json
import textwrap

import pyarrow.parquet as pq

from kimi_eagle_data.cards.card import _history_reasoning
from kimi_eagle_data.formats import format_of
from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI_K26
from kimi_eagle_data.sources.config import load_config
from tests.formats.kimi_k2.test_conversation_messages import TOK
from tests.helpers.cli import run_cli

ROWS = [{"conv_id": f"c{i}", "messages": [
    {"role": "user", "content": f"Question {i}?"},
    {"role": "assistant", "content": f"<think>thought number {i}</think>Answer {i}."},
    {"role": "user", "content": f"And question {i} again?"}]} for i in range(3)]


def project(root, on: str = "true") -> str:
    (root / "chats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    cfg = root / "cfg.toml"
    cfg.write_text(textwrap.dedent(f"""
        [dedup]
        across_configs = false          # both partitions read the same rows
        [partitions.KEEP]
        source = "chats.jsonl"
        policy = "every_user_prefix"
        id_field = "conv_id"
        preserve_thinking = {on}
        [partitions.PLAIN]
        source = "chats.jsonl"
        policy = "every_user_prefix"
        id_field = "conv_id"
        """))
    return str(cfg)


def prompts(workdir, config) -> list[str]:
    rows = pq.read_table(workdir / "prepared" / f"{config}.parquet", columns=["prompt_ids"]).to_pylist()
    return [TOK.decode(r["prompt_ids"], skip_special_tokens=False) for r in rows]


def prepare(cfg: str, workdir, profile: str = "tiny-kimi-k2.6", check: bool = True):
    return run_cli("prepare", "--config", cfg, "--workdir", str(workdir), "--profile", profile, check=check)


def test_a_partition_s_preserve_thinking_renders_its_prompts_and_binds_the_run(tmp_path):
    cfg = project(tmp_path)
    w = tmp_path / "w"
    prepare(cfg, w)
    keep, plain = prompts(w, "KEEP"), prompts(w, "PLAIN")
    assert sum("<think>thought number" in p for p in keep) == len(ROWS)      # every second-turn prompt keeps it
    assert not any("thought number" in p for p in plain)
    assert sum("Answer 0.<|im_end|>" in p and "<think></think>Answer 0." in p for p in plain) == 1
    run = json.loads((w / "run.json").read_text())
    assert run["template_plan"] == {"KEEP": {"preserve_thinking": True}}
    assert run["template_options"] == {"preserve_thinking": False}        # the run's own: the profile's default
    report = json.loads((w / "prepared" / "KEEP.json").read_text())
    assert report["partition"]["template_options"] == {"preserve_thinking": True}
    # The run-wide option is the partitions' default; a partition's own value wins over it.
    w2 = tmp_path / "w2"
    run_cli("prepare", "--config", project(tmp_path, on="false"), "--workdir", str(w2), "--profile",
            "tiny-kimi-k2.6", "--preserve-thinking")
    assert not any("thought number" in p for p in prompts(w2, "KEEP"))
    assert sum("<think>thought number" in p for p in prompts(w2, "PLAIN")) == len(ROWS)
    # Another plan is refused by the workdir, in one line naming it.
    refused = prepare(project(tmp_path, on="false"), w, check=False)
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 1 and len(lines) == 1 and "template_plan['KEEP']" in lines[0], refused.stderr


def test_a_profile_whose_template_takes_no_such_argument_refuses_the_partition(tmp_path):
    cfg = project(tmp_path)
    refused = prepare(cfg, tmp_path / "w", profile="tiny-kimi", check=False)
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 1 and len(lines) == 1, refused.stderr
    assert (f"{cfg}: partitions.KEEP.preserve_thinking: profile tiny-kimi's chat template takes no such argument; "
            "profiles whose template does: kimi-k2.6, tiny-kimi-k2.6") in lines[0]
    assert not (tmp_path / "w").exists()
    assert load_config(cfg).partitions["KEEP"].template_options == {"preserve_thinking": True}


def test_the_card_says_per_config_how_history_reasoning_is_rendered_when_configs_differ():
    fmt = format_of(TINY_KIMI_K26).with_template_options(TINY_KIMI_K26.template_options)
    on = {"partition": {"template_options": {"preserve_thinking": True}}}
    same = _history_reasoning({"B4": {}, "B6": {}}, fmt)
    assert same == fmt.card_text().history_reasoning and "dropped" in same
    mixed = _history_reasoning({"B4": on, "B6": {}, "C1": on}, fmt)
    assert mixed.startswith("it depends on the config: in B4, C1, every earlier assistant turn keeps its reasoning")
    assert "; in B6, an earlier assistant turn up to the last one without tool calls renders `<think></think>`" in mixed


def test_an_own_history_partition_s_setting_renders_its_later_turns():
    """The run's format leaves the history's reasoning out; the partition's (config C1) keeps it: C1's next turn
    carries the model's own reasoning."""
    from kimi_eagle_data.conversation.next_turn import NextTurn
    from kimi_eagle_data.records import PromptRecord
    from tests.conversation.test_next_turn import CHAT, CHAT_SCRIPT, CONV, OWN, completed, first_turn

    base = format_of(TINY_KIMI_K26).with_template_options(TINY_KIMI_K26.template_options).bind(TINY_KIMI_K26, TOK)
    on = base.with_template_options({"preserve_thinking": True})
    validator = base.validator(TINY_KIMI_K26.max_seq_len)
    for formats, kept in (({"C1": on}, True), ({}, False)):
        step = NextTurn(validator, max_new_tokens=64, max_seq_len=TINY_KIMI_K26.max_seq_len,
                        max_turns={"C1": 4}, scripts={CONV: CHAT_SCRIPT}, chat_format=base, config_formats=formats)
        first = first_turn(CHAT)
        assert first.config == "C1"
        nxt = step(first, completed(first, OWN))
        assert isinstance(nxt, PromptRecord)
        shown = TOK.decode(nxt.prompt_ids, skip_special_tokens=False)
        assert (f"<think>{OWN['reasoning_content']}</think>{OWN['content']}" in shown) is kept
