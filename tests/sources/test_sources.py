"""Source readers, the malformed-input suite, Hub loading (against local files), and the config file."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS
from kimi_eagle_data.sources.partitions import PARTITIONS, Filters, Partition
from kimi_eagle_data.sources.config import DEFAULT, ConfigError, load_config
from kimi_eagle_data.formats.kimi_k2.format import KIMI_K2_FORMAT
from kimi_eagle_data.prompts.prepare import PromptModes, prepare_rows
from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
from kimi_eagle_data.sources.readers import SourceFileError, iter_hub, iter_source

ROOT = Path(__file__).resolve().parents[2]

B6 = PARTITIONS["B6"]


def prep(tok, partition, rows):
    gen = tok.encode(K2_TOKENS.generation_prompt, add_special_tokens=False)
    return prepare_rows(partition, rows, tok, modes=PromptModes.of(TINY_KIMI, tok, KIMI_K2_FORMAT, gen),
                        max_new_tokens=64, max_seq_len=512,
                        source_desc="test")


def ultrachat(i, content="How do I bake bread?"):
    return {"prompt": str(content), "prompt_id": f"p{i}", "messages": [{"role": "user", "content": content}]}


# ------------------------------------------------------------------------------------ malformed rows

def test_malformed_jsonl_rows_each_get_a_reason_and_the_run_continues(tiny_tokenizer, tmp_path):
    lines = [
        json.dumps(ultrachat(1)),                                              # fine
        json.dumps({"prompt": "x", "prompt_id": "p2"}),                        # missing messages
        json.dumps({"prompt_id": "p3", "messages": "hello"}),                  # wrong type
        json.dumps(ultrachat(4, content=42)),                                  # non-string content
        json.dumps({"prompt_id": "p5", "messages": [{"role": "user"}]}),       # message without content
        '{"prompt_id": "p6", "messages": [{"role": "user", "content": "cut',  # broken JSON
        "[1, 2, 3]",                                                           # not an object
        "null",
        "",                                                                    # blank line: skipped
        json.dumps(ultrachat(7, content="")),                                  # empty user turn
        json.dumps({"prompt_id": 8, "messages": [[1, 2]]}),                    # wrong type in the list
        json.dumps(ultrachat(9, content="What is the capital of France?")),   # fine
    ]
    path = tmp_path / "rows.jsonl"
    path.write_bytes("\n".join(lines).encode() + b"\n\xff\xfe not utf-8 \xc3\n")   # a bad line at the end
    desc, rows = iter_source(B6, str(path))
    records, rejections, report = prep(tiny_tokenizer, B6, rows)
    assert sorted(r.source_id for r in records) == ["p1", "p9"]
    assert report.rejected == {"missing_field": 2, "wrong_type": 5, "malformed_json": 2, "empty_user_turn": 1}
    assert report.selected == report.prepared + sum(report.rejected.values()) == 12
    for r in rejections:
        assert r.message.startswith("B6 row ") and "\n" not in r.message and r.reason
    broken = next(r for r in rejections if r.reason == "malformed_json" and "rows.jsonl:6" in r.message)
    assert broken.source_id == "row:6" and "fix or delete the line" in broken.message


def test_malformed_parquet_rows(tiny_tokenizer, tmp_path):
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({
        "prompt_id": ["a", "b", None, "d"],
        "messages": [[{"role": "user", "content": "Explain recursion."}], [], [{"role": "user", "content": "q"}],
                     [{"role": "assistant", "content": "hi"}]],
    }), path)
    _, rows = iter_source(B6, str(path))
    records, _, report = prep(tiny_tokenizer, B6, rows)
    # a null prompt_id falls back to the content hash (Mixture-of-Thoughts rows have no id at all)
    assert sorted(r.source_id for r in records) == sorted(["a", hashlib.sha1(b"q").hexdigest()[:16]])
    assert report.rejected == {"no_user_turn": 1, "starts_with_assistant": 1}
    assert report.selected == report.prepared + sum(report.rejected.values()) == 4


def _whole_file_error(partition, path) -> str:
    with pytest.raises(SourceFileError) as info:
        _, rows = iter_source(partition, str(path))
        list(rows)
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg
    return msg


def test_unreadable_files_are_one_clear_error(tmp_path):
    rnd = random.Random(0)
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(bytes(rnd.randrange(256) for _ in range(4096)))
    assert "binary" in _whole_file_error(B6, garbage)
    no_nul = tmp_path / "garbage2.jsonl"
    no_nul.write_bytes(bytes(rnd.randrange(1, 256) for _ in range(4096)))
    assert "not UTF-8 text" in _whole_file_error(B6, no_nul)
    not_parquet = tmp_path / "fake.parquet"
    not_parquet.write_text('{"prompt_id": "x"}\n')
    assert "not a readable Parquet file" in _whole_file_error(B6, not_parquet)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert "has no rows" in _whole_file_error(B6, empty)
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n\n  \n")
    assert "has no rows" in _whole_file_error(B6, blank)
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"prompt_id": [f"p{i}" for i in range(5000)],
                             "prompt": [f"text {i} " * 20 for i in range(5000)]}), good, row_group_size=500)
    cut = tmp_path / "cut.parquet"
    data = good.read_bytes()
    cut.write_bytes(data[: len(data) // 2] + data[-2000:])
    _whole_file_error(B6, cut)
    renamed = tmp_path / "actually.jsonl"
    renamed.write_bytes(data)
    assert "name it *.parquet" in _whole_file_error(B6, renamed)
    gz = tmp_path / "rows.jsonl"
    gz.write_bytes(b"\x1f\x8b\x08\x00" + bytes(100))
    assert "compressed" in _whole_file_error(B6, gz)
    assert "does not exist" in _whole_file_error(B6, tmp_path / "missing.jsonl")
    (tmp_path / "dir.jsonl").mkdir()
    assert "directory" in _whole_file_error(B6, tmp_path / "dir.jsonl")


def test_json_array_files_are_read(tiny_tokenizer, tmp_path):
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps([{"id": "s1", "conversations": [{"from": "human", "value": "Hi there, who are you?"}]},
                                "junk"]))
    _, rows = iter_source(PARTITIONS["B7"], str(path))
    records, rejections, _ = prep(tiny_tokenizer, PARTITIONS["B7"], rows)
    assert [r.source_id for r in records] == ["s1"] and rejections[0].reason == "wrong_type"


def test_limit_and_scan_limit(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(ultrachat(i)) + "\n" for i in range(10)))
    assert len(list(iter_source(B6, str(path), limit=4)[1])) == 4
    assert len(list(iter_source(dataclasses.replace(B6, scan_limit=3), str(path), limit=4)[1])) == 3


# ------------------------------------------------------------------------------------ Hub path

def test_hub_loading_goes_through_datasets(tmp_path, tiny_tokenizer):
    """`iter_hub` is the real `datasets.load_dataset(..., streaming=True)` call, pointed at a local folder."""
    folder = tmp_path / "hub_copy"
    folder.mkdir()
    pq.write_table(pa.table({"prompt": ["q1", "q2"], "prompt_id": ["h1", "h2"],
                             "messages": [[{"content": "What is a monad?", "role": "user"}],
                                          [{"content": "Define entropy.", "role": "user"}]]}),
                   folder / "train-00000-of-00001.parquet")
    part = dataclasses.replace(B6, upstream=str(folder), upstream_config=None, upstream_split="train")
    desc, rows = iter_source(part)
    assert desc == str(folder)
    records, _, _ = prep(tiny_tokenizer, part, rows)
    assert sorted(r.source_id for r in records) == ["h1", "h2"]
    missing = dataclasses.replace(B6, upstream="no-such-org/no-such-dataset-xyz")
    with pytest.raises(SourceFileError) as info:
        list(iter_hub(missing, "v1"))
    assert "no-such-org/no-such-dataset-xyz@v1" in str(info.value) and "\n" not in str(info.value)


def test_source_precedence(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(ultrachat(1)) + "\n")
    assert iter_source(B6, samples=True)[0].startswith("bundled samples")
    assert iter_source(B6, str(path), samples=True)[0] == str(path)
    assert iter_source(dataclasses.replace(B6, source=str(path)))[0] == str(path)
    assert iter_source(dataclasses.replace(B6, source=str(path)), samples=True)[0].startswith("bundled")
    user = Partition("C1", "c1", "x", None, "train", "chat", None, "other", "r", source=str(path), builtin=False)
    assert iter_source(user, samples=True)[0] == str(path)
    assert iter_source(B6, revision="abc")[0] == "HuggingFaceH4/ultrachat_200k@abc"


# ------------------------------------------------------------------------------------ config file

def write(tmp_path, text: str):
    p = tmp_path / "cfg.toml"
    p.write_text(text)
    return p


def test_example_config_is_the_builtin_defaults():
    conf = load_config(ROOT / "examples" / "partitions.toml")
    assert conf.partitions == DEFAULT.partitions and conf.configs == tuple(PARTITIONS)
    # default_n of each partition in sources/partitions.py (88,000 prompts in all, as the README says)
    assert [p.n for p in conf.partitions.values()] == [10_000, 14_000, 8_000, 12_000, 10_000, 14_000, 12_000, 8_000]
    assert sum(p.n for p in conf.partitions.values()) == 88_000
    assert load_config(None) is DEFAULT


def test_config_overrides_and_user_partitions(tmp_path):
    (tmp_path / "data").mkdir()
    conf = load_config(write(tmp_path, """
seed = 3
configs = ["B4", "C1"]
[sampling]
max_new_tokens = 2048
temperature = 0.6
[filters]
scripts = ["latin"]
[dedup]
near = true
[decontam]
ngram = 10
[[decontam.sets]]
name = "gsm8k"
path = "evals/gsm8k.jsonl"
field = "question"
[partitions.B4]
n = 50
seed = 9
revision = "abc123"
filters = { scripts = [] }
[partitions.B1]
policy = "after_tool_result"
n = "all"
[partitions.C1]
source = "data/chats.jsonl"
n = 20
policy = "every_user_prefix"
id_field = "conv"
license = "cc-by-4.0"
"""))
    b4, b1, c1, b6 = (conf.partitions[c] for c in ("B4", "B1", "C1", "B6"))
    assert (b4.n, b4.seed, b4.revision, b4.filters.scripts) == (50, 9, "abc123", ())
    assert b4.upstream == PARTITIONS["B4"].upstream and b4.adapter == "messages"
    assert (b6.seed, b6.filters.scripts, b6.n) == (3, ("latin",), 14_000)
    assert b1.policy == "after_tool_result" and b1.n is None and b1.id_rule != PARTITIONS["B1"].prompt_rule
    assert not c1.builtin and c1.adapter == "chat" and c1.source == str(tmp_path / "data" / "chats.jsonl")
    assert (c1.n, c1.policy, c1.id_field, c1.license, c1.upstream) == (20, "every_user_prefix", "conv", "cc-by-4.0",
                                                                       "chats.jsonl")
    assert conf.configs == ("B4", "C1") and conf.sampling == {"max_new_tokens": 2048, "temperature": 0.6}
    assert conf.dedup.near and conf.decontam.ngram == 10
    assert conf.decontam.sets[0].path == str(tmp_path / "evals" / "gsm8k.jsonl")
    assert conf.decontam.sets[0].fields == ("question",) and len(conf.sha256) == 64


@pytest.mark.parametrize("text, where", [
    ("sed = 1", "sed: unknown key"),
    ("seed = '1'", "seed: expected int"),
    ("[partitions.B4]\nnn = 3", "partitions.B4.nn: unknown key"),
    ("[partitions.B4]\nn = 0", "partitions.B4.n: must be at least 1"),
    ("[partitions.B4]\nn = 'many'", "partitions.B4.n"),
    ("[partitions.B4]\npolicy = 'after_tool_result'", "glaive adapter only"),
    ("[partitions.B4]\npolicy = 'random'", "unknown policy"),
    ("[partitions.B4.sampling]\ntemperature = 0.5", "partitions.B4.sampling.temperature: unknown key"),
    ("[partitions.B4]\ninstant_share = 1.5", "partitions.B4.instant_share: must be between 0 and 1"),
    ("[partitions.B4.sampling]\ninstant = { temp = 0.5 }", "partitions.B4.sampling.instant.temp: unknown key"),
    ("[partitions.B4.sampling]\nthinking = { top_p = 0 }", "partitions.B4.sampling.thinking.top_p"),
    ("[partitions.B4.sampling]\nmix = [{ share = 0.5 }, { share = 0.3 }]", "the shares sum to 0.8, not 1"),
    ("[partitions.B4.sampling]\nmix = [{ temperature = 0.5 }]", "mix[0].share: is required"),
    ("[partitions.B4.sampling]\nmix = [1]", "partitions.B4.sampling.mix[0]"),
    ("[partitions.C1]\nn = 3", "needs `source`"),
    ("[partitions.C1]\nsource = 'x.jsonl'\nadapter = 'magic'", "unknown adapter"),
    ("[partitions.'C 1']\nsource = 'x.jsonl'", "a config name is"),
    ("[filters]\nscripts = ['klingon']", "unknown script"),
    ("[filters]\nmin_script_share = 2.0", "between 0 and 1"),
    ("[dedup]\nnear_threshold = 0", "must be in (0, 1]"),
    ("[[decontam.sets]]\nname = 'x'", "path: is required"),
    ("configs = ['B9']", "'B9' is neither a built-in config nor defined by a [partitions.B9] table; the configs are B1, "),
    ("[sampling]\ntemperature = 'hot'", "sampling.temperature"),
    ("seed = = 1", "not valid TOML"),
])
def test_config_errors_name_the_file_and_key(tmp_path, text, where):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    msg = str(info.value)
    assert msg.startswith(str(path)) and where in msg and "\n" not in msg


def test_run_settings_use_the_config_file(tmp_path):
    from kimi_eagle_data.runs import RunSettings, load_partitions

    path = write(tmp_path, "configs = ['B6']\n[sampling]\nmax_new_tokens = 99\ntop_p = 0.5\n"
                           "[partitions.C1]\nsource = 'x.jsonl'\n")
    s, partitions = load_partitions(RunSettings(workdir=str(tmp_path / "w"), config_file=str(path), top_p=0.9))
    assert s.configs == ["B6"] and s.max_new_tokens == 99 and s.top_p == 0.9      # an explicit value wins
    assert s.options()["config_file"] == str(path) and "C1" in partitions.partitions
    s, _ = load_partitions(RunSettings(workdir=str(tmp_path / "w"), config_file=str(path), configs=["C1"]))
    assert s.configs == ["C1"]
    with pytest.raises(ValueError):
        load_partitions(RunSettings(workdir=str(tmp_path / "w"), configs=["C1"]))
    assert load_partitions(RunSettings(workdir=str(tmp_path / "w")))[0].configs == list(PARTITIONS)


def test_filters_dataclass_defaults():
    assert Filters() == Filters(validate_tools=True, scripts=(), min_script_share=0.5, max_chars=None)
    assert os.environ.get("HF_DATASETS_OFFLINE") == "1"


def test_partition_modes_and_sampling_mix(tmp_path):
    from kimi_eagle_data.formats.kimi_k2 import KIMI_K25
    from kimi_eagle_data.sources.modes import ModePlan, choose_mode, choose_sampling

    conf = load_config(write(tmp_path, """
[partitions.B4]
instant_share = 0.25
[partitions.B4.sampling]
thinking = { temperature = 0.9 }
instant = { top_p = 0.8 }
mix = [{ share = 0.5, temperature = 0.7 }, { share = 0.5 }]
"""))
    plan = conf.partition("B4").modes
    assert conf.partition("B6").modes.is_default and not plan.is_default
    assert conf.sampling_plan() == {"B4": {"instant_share": 0.25, "thinking": {"temperature": 0.9},
                                           "instant": {"top_p": 0.8},
                                           "mix": [{"share": 0.5, "temperature": 0.7}, {"share": 0.5}]}}
    assert load_config(None).sampling_plan() is None
    keys = [f"B4-{i:016x}" for i in range(2000)]
    modes = [choose_mode(plan, 0, k) for k in keys]
    assert 0.2 < modes.count("instant") / len(keys) < 0.3            # the share, drawn per prompt
    assert modes == [choose_mode(plan, 0, k) for k in keys] != [choose_mode(plan, 1, k) for k in keys]
    got = [choose_sampling(plan, 0, k, m, KIMI_K25, {}) for k, m in zip(keys, modes)]
    thinking = {(g["temperature"], g["top_p"]) for g, m in zip(got, modes) if m == "thinking"}
    instant = {(g["temperature"], g["top_p"]) for g, m in zip(got, modes) if m == "instant"}
    # profile default -> partition's per-mode override -> the mix entry drawn
    assert thinking == {(0.7, 0.95), (0.9, 0.95)} and instant == {(0.7, 0.8), (0.6, 0.8)}
    share = sum(g["temperature"] == 0.7 for g in got) / len(got)
    assert 0.45 < share < 0.55
    # the run-wide settings apply to every mode, under the partition's
    assert choose_sampling(ModePlan(), 0, keys[0], "instant", KIMI_K25, {"temperature": 0.3, "top_p": None}) == \
        {"temperature": 0.3, "top_p": 0.95}
