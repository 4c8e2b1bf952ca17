"""Selection, multi-turn policies, dedup, decontamination and filters, on small in-memory fixtures."""

from __future__ import annotations

import dataclasses
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kimi_eagle_data.formats.kimi_k2.tokens import K2_TOKENS
from kimi_eagle_data.sources.adapters import ADAPTERS
from kimi_eagle_data.sources.policies import adapt_row, first_user
from kimi_eagle_data.sources.rows import split_reasoning
from kimi_eagle_data.sources.partitions import PARTITIONS, POLICIES, Filters, Partition
from kimi_eagle_data.sources.decontam import DecontamError, DecontamSettings, Decontaminator, EvalSet
from kimi_eagle_data.sources.dedup import DedupSettings, MinHashDedup, exact_key, normalize
from kimi_eagle_data.sources.filters import check_content, check_language, check_tools, script_share
from kimi_eagle_data.formats.kimi_k2.format import KIMI_K2_FORMAT
from kimi_eagle_data.prompts.prepare import PrepareState, PromptModes, prepare_rows, sample_id
from kimi_eagle_data.formats.kimi_k2 import TINY_KIMI
from kimi_eagle_data.records import SourceRowError
from kimi_eagle_data.sources.selection import ScanStats, capacity_for, rank, select
from kimi_eagle_data.sources.readers import iter_jsonl

USER = Partition("C1", "c1", "test/chats", None, "train", "chat", None, "other", "first user turn", builtin=False)


def run(tok, partition, rows, *, state=None, n=None, seed=None, max_seq_len=512):
    gen = tok.encode(K2_TOKENS.generation_prompt, add_special_tokens=False)
    numbered = [(i, r) for i, r in enumerate(rows, start=1)] if rows and not isinstance(rows[0], tuple) else rows
    return prepare_rows(partition, numbered, tok, modes=PromptModes.of(TINY_KIMI, tok, KIMI_K2_FORMAT, gen),
                        max_new_tokens=64, max_seq_len=max_seq_len,
                        source_desc="test", state=state, n=n, seed=seed)


def chat_row(i, text=None, **extra):
    return {"id": f"r{i}", "messages": [{"role": "user", "content": text or f"Question {i}: how do I sort {i} items?"}],
            **extra}


# ------------------------------------------------------------------------------------ selection

def test_selection_is_the_seeded_ranking_in_order(tiny_tokenizer):
    rows = [chat_row(i) for i in range(120)]
    expected = sorted((f"r{i}" for i in range(120)), key=lambda k: rank(5, "C1", k))[:10]
    records, rejections, report = run(tiny_tokenizer, USER, rows, n=10, seed=5)
    assert [r.source_id for r in records] == expected
    assert not rejections and report.prepared == report.selected == 10 and report.scanned == 120
    # reading order does not matter; the seed does
    again, _, _ = run(tiny_tokenizer, USER, list(reversed(rows)), n=10, seed=5)
    assert [r.id for r in again] == [r.id for r in records]
    other, _, _ = run(tiny_tokenizer, USER, rows, n=10, seed=6)
    assert [r.source_id for r in other] != expected
    # a bounded heap: only ceil(n * oversample) + 16 rows are held
    stats = ScanStats()
    cands = select(USER, list(enumerate(rows, start=1)), n=10, seed=5, stats=stats)
    assert stats.capacity == len(cands) == 36
    assert [c.row_key for c in cands] == sorted((f"r{i}" for i in range(120)), key=lambda k: rank(5, "C1", k))[:36]


def test_rejected_rows_are_consumed_until_n_prompts(tiny_tokenizer):
    rows = [chat_row(i, text=" " if i % 3 == 0 else None) for i in range(60)]
    records, rejections, report = run(tiny_tokenizer, USER, rows, n=20)
    assert report.prepared == 20 and len(records) == 20
    assert report.selected == report.prepared + sum(report.rejected.values())
    assert {r.reason for r in rejections} == {"empty_user_turn"}
    assert all(r.message.startswith("C1 row ") for r in rejections)
    assert not report.exhausted
    # too little oversampling for a lossy source: fewer than n, and the report says why
    _, _, short = run(tiny_tokenizer, dataclasses.replace(USER, oversample=1.0),
                      [chat_row(i, text=" " if i % 2 else None) for i in range(200)], n=30)
    assert short.prepared < 30 and short.exhausted


def test_repeated_rows_are_selected_once_and_counted(tiny_tokenizer):
    part = PARTITIONS["B5"]
    records, rejections, report = run(tiny_tokenizer, part, list(iter_jsonl(part.sample_file)))
    # kimi_eagle_data/sources/samples/B5-openthoughts.jsonl (scripts/make_samples.py): 30 rows, 8 of them repeats
    assert report.scanned == 30 and report.repeated_rows == 8 and report.prepared == 22
    assert len({r.source_id for r in records}) == 22 and not rejections



def test_a_repeated_id_with_other_content_is_rejected_not_dropped(tiny_tokenizer):
    """Two conversations under one id (a user's JSONL): the second is selected right after the first and rejected
    with reason repeated_id, counted with every other reject; a row repeating the first exactly stays a repeat."""
    rows = [chat_row(1), chat_row(2), chat_row(3, text="Write a haiku about rain."), chat_row(2), chat_row(4)]
    rows[2]["id"] = "r1"
    records, rejections, report = run(tiny_tokenizer, USER, rows)
    assert sorted(r.source_id for r in records) == ["r1", "r2", "r4"]
    assert [(r.source_id, r.reason) for r in rejections] == [("r1", "repeated_id")]
    assert rejections[0].message == "C1 row 3: source id 'r1' was given to row 1 too, with other content: this row " \
                                    "is not prepared; give each conversation an id of its own"
    assert report.rejected == {"repeated_id": 1} and report.repeated_rows == 1
    assert report.selected == 4 == report.prepared + sum(report.rejected.values())
    # the same answer as its first row? No matter: the upstream answer is not the prompt (OpenCodeReasoning)
    answered = [{**chat_row(1), "messages": [*chat_row(1)["messages"], {"role": "assistant", "content": a}]}
                for a in ("one answer", "another answer")]
    _, rejections, report = run(tiny_tokenizer, USER, answered)
    assert not rejections and report.repeated_rows == 1 and report.prepared == 1
    # own_history: the later turns are the conversation, the source's answers in them are not (OpenThoughts)
    own = dataclasses.replace(USER, policy="own_history")
    _, rejections, report = run(tiny_tokenizer, own, answered)
    assert not rejections and report.repeated_rows == 1
    went_on = [{**a, "messages": [*a["messages"], {"role": "user", "content": f"And then? ({i})"}]}
               for i, a in enumerate(answered)]
    _, rejections, report = run(tiny_tokenizer, own, went_on)
    assert [r.reason for r in rejections] == ["repeated_id"] and report.repeated_rows == 0


def test_a_repeated_id_row_evicted_from_the_selection_leaves_its_first_row_held():
    """A bounded selection (n=1 holds a few rows): a repeated_id row ranks with its first row, right after it, so a
    better row evicts it first; the first row stays held, and a later exact repeat of it is still counted."""
    ids, cap = [f"r{i}" for i in range(60)], capacity_for(1, USER.oversample)
    held = sorted(ids[:cap - 1], key=lambda k: rank(0, "C1", k))      # room for the repeated_id row
    first, better = held[-1], next(k for k in ids[cap:] if rank(0, "C1", k) < rank(0, "C1", held[-1]))
    rows = [chat_row(k[1:]) for k in held]
    rows += [{**chat_row(first[1:], text="another conversation")}, chat_row(better[1:]), chat_row(first[1:])]
    stats = ScanStats()
    cands = select(USER, list(enumerate(rows, start=1)), n=1, seed=0, stats=stats)
    assert len(cands) == cap and better in {c.row_key for c in cands}
    kept = [c for c in cands if c.row_key == first]
    assert [(c.row_number, c.error, c.repeats) for c in kept] == [(cap - 1, None, 1)]
    assert stats.duplicate_row_keys == 1

def test_ids_stay_stable_for_the_default_policy(tiny_tokenizer):
    part = PARTITIONS["B6"]
    records, _, _ = run(tiny_tokenizer, part, list(iter_jsonl(part.sample_file)))
    for r in records:
        assert r.id == sample_id("B6", part.upstream, r.source_id, part.prompt_rule)


# ------------------------------------------------------------------------------------ policies

@pytest.mark.parametrize("config", sorted(PARTITIONS))
def test_every_user_prefix_starts_with_the_first_user_prompt(config):
    part = PARTITIONS[config]
    multi = 0
    for row in (json.loads(line) for line in part.sample_file.read_text().splitlines()):
        try:
            first = first_user(ADAPTERS[part.adapter](row))
        except SourceRowError as e:
            with pytest.raises(SourceRowError) as info:
                adapt_row(part.adapter, row, "every_user_prefix")
            assert info.value.code == e.code
            continue
        base, items = adapt_row(part.adapter, row, "every_user_prefix")
        assert base == first.source_id
        sid0, sp0 = items[0]
        assert sid0 == f"{base}#u0" and sp0.messages == first.messages and sp0.tools == first.tools
        for k, (sid, sp) in enumerate(items):
            assert sid == f"{base}#u{k}"
            if not isinstance(sp, SourceRowError):
                assert sp.messages[-1]["role"] == "user"
                assert sum(m["role"] == "user" for m in sp.messages) == k + 1
        multi += len(items) > 1
    if config in ("B1", "B6", "B7"):
        assert multi, f"{config} samples have no multi-turn conversation"


def test_glaive_prefixes_carry_tool_calls_and_results():
    chat = ("USER: Play Rock 'n' roll.\n\n\nASSISTANT: <functioncall> {\"name\": \"play_music\", \"arguments\": "
            "'{\"song\": \"Rock 'n' roll\"}'} <|endoftext|>\n\n\nFUNCTION RESPONSE: {\"ok\": true}\n\n\n"
            "ASSISTANT: Playing. <|endoftext|>\n\n\nUSER: Now something calmer.\n\n\n")
    row = {"system": "SYSTEM: You are a helpful assistant with access to the following functions. Use them if "
                     "required -\n" + json.dumps({"name": "play_music", "description": "Play",
                                                  "parameters": {"type": "object", "properties": {}}}),
           "chat": chat}
    base, items = adapt_row("glaive", row, "every_user_prefix")
    assert len(items) == 2
    second = items[1][1]
    assert [m["role"] for m in second.messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert json.loads(second.messages[1]["tool_calls"][0]["function"]["arguments"]) == {"song": "Rock 'n' roll"}
    assert second.tools[0]["function"]["name"] == "play_music"


def test_prefix_policy_gives_other_stable_ids(tiny_tokenizer):
    part = dataclasses.replace(PARTITIONS["B6"], policy="every_user_prefix")
    rows = list(iter_jsonl(part.sample_file))
    a, rej, rep = run(tiny_tokenizer, part, rows)
    b, _, _ = run(tiny_tokenizer, part, rows)
    assert [r.id for r in a] == [r.id for r in b]
    assert rep.prepared > 27 and all("#u" in r.source_id for r in a)
    first, _, _ = run(tiny_tokenizer, PARTITIONS["B6"], rows)
    assert not {r.id for r in a} & {r.id for r in first}


def test_split_reasoning():
    assert split_reasoning("<think>hmm</think>\n\nThe answer is 4.") == {
        "role": "assistant", "content": "The answer is 4.", "reasoning_content": "hmm"}
    ot = "<|begin_of_thought|>\nthink\n<|end_of_thought|>\n\n<|begin_of_solution|>\n42\n<|end_of_solution|>"
    assert split_reasoning(ot) == {"role": "assistant", "content": "42", "reasoning_content": "think"}
    assert split_reasoning("plain") == {"role": "assistant", "content": "plain"}


def test_chat_adapter_shapes():
    sharegpt = {"conversations": [{"from": "system", "value": "Be terse."}, {"from": "human", "value": "hi"},
                                  {"from": "gpt", "value": "hello"}, {"from": "human", "value": "bye"}]}
    base, items = adapt_row("chat", sharegpt, "every_user_prefix")
    assert [len(sp.messages) for _, sp in items] == [2, 4]
    assert adapt_row("chat", sharegpt)[1][0][1].messages == [{"role": "system", "content": "Be terse."},
                                                            {"role": "user", "content": "hi"}]
    tools = [{"name": "f", "description": "d", "parameters": {}}]
    _, items = adapt_row("chat", {"id": 7, "system": "S", "tools": json.dumps(tools),
                                  "messages": [{"role": "user", "content": "call f"}]})
    sid, sp = items[0]
    assert sid == "7" and sp.messages[0] == {"role": "system", "content": "S"}
    assert sp.tools == [{"type": "function", "function": {"name": "f", "description": "d",
                                                          "parameters": {"type": "object", "properties": {}}}}]
    assert adapt_row("chat", {"conv": 1, "messages": [{"role": "user", "content": "x"}]}, id_field="conv")[0] == "1"
    for bad, code in (({"text": "x"}, "missing_field"), ({"messages": "x"}, "wrong_type"),
                      ({"messages": [{"role": "gpt", "content": "x"}]}, "starts_with_assistant"),
                      ({"messages": [{"role": "alien", "content": "x"}]}, "unknown_role"),
                      ({"messages": [{"role": "user", "content": 3}]}, "wrong_type"),
                      ({"tools": "{not json", "messages": [{"role": "user", "content": "x"}]}, "bad_tool_json")):
        with pytest.raises(SourceRowError) as info:
            adapt_row("chat", bad)
        assert info.value.code == code, bad


# ------------------------------------------------------------------------------------ dedup

def test_normalization():
    assert normalize("  Ｗｈａｔ\u00a0is\t2+2?\n") == normalize("what is 2+2?") == "what is 2+2?"
    assert normalize("Straße") == normalize("STRASSE")
    a = exact_key([{"role": "user", "content": "Hello  World"}], None)
    assert a == exact_key([{"role": "user", "content": "hello world"}], None)
    assert a != exact_key([{"role": "system", "content": "hello world"}], None)
    assert a != exact_key([{"role": "user", "content": "hello world"}], [{"type": "function", "function": {}}])


def test_exact_dedup_within_and_across_configs(tiny_tokenizer):
    rows = [chat_row(1, "What is 2+2?"), chat_row(2, "what   is 2+2?"), chat_row(3, "ＷＨＡＴ is 2+2?"),
            chat_row(4, "What is 3+3?")]
    state = PrepareState()
    records, rejections, report = run(tiny_tokenizer, USER, rows, state=state)
    assert report.prepared == 2 and report.rejected == {"duplicate_prompt": 2}
    kept = {r.source_id: r.id for r in records}
    kept_22 = next(r.id for r in records if normalize(r.messages[0]["content"]) == "what is 2+2?")
    assert all(r.reason == "duplicate_prompt" and r.message.endswith(f"same prompt (normalized) as {kept_22}")
               for r in rejections)
    # the same prompt in a later config is a duplicate of the earlier config's id
    c2 = dataclasses.replace(USER, config="C2")
    rec2, rej2, _ = run(tiny_tokenizer, c2, [chat_row(9, "what is 3+3 ?".replace(" ?", "?"))], state=state)
    assert not rec2 and rej2[0].reason == "duplicate_prompt" and rej2[0].message.endswith(kept["r4"])
    # unless dedup is per config
    alone = PrepareState(DedupSettings(across_configs=False))
    run(tiny_tokenizer, USER, rows, state=alone)
    rec3, _, _ = run(tiny_tokenizer, c2, [chat_row(9, "What is 3+3?")], state=alone)
    assert len(rec3) == 1


LONG = ("The quarterly report shows that revenue in the northern region grew by twelve percent while costs in the "
        "southern warehouses stayed flat because the new routing software reduced the number of empty truck "
        "trips between the two main distribution centres and the port")


def test_near_dedup_is_opt_in(tiny_tokenizer):
    rows = [chat_row(1, LONG), chat_row(2, LONG.replace("twelve", "eleven")), chat_row(3, LONG[::-1])]
    _, _, off = run(tiny_tokenizer, USER, rows)
    assert off.prepared == 3
    state = PrepareState(DedupSettings(near=True, near_threshold=0.7))
    records, rejections, on = run(tiny_tokenizer, USER, rows, state=state)
    assert on.prepared == 2 and [r.reason for r in rejections] == ["near_duplicate"]
    assert "estimated Jaccard" in rejections[0].message
    # per-partition switch
    _, _, part_off = run(tiny_tokenizer, dataclasses.replace(USER, near_dedup=False), rows,
                         state=PrepareState(DedupSettings(near=True, near_threshold=0.7)))
    assert part_off.prepared == 3


def test_minhash_is_deterministic_and_estimates_jaccard():
    a, b = MinHashDedup(0.8), MinHashDedup(0.8)
    assert a.signature(LONG).digest() == b.signature(LONG).digest()
    assert (a.bands, a.rows) == (16, 8)
    s1, s2 = a.signature(LONG), a.signature(LONG.replace("twelve", "eleven"))
    assert 0.6 < s1.jaccard(s2) < 1.0
    assert a.signature("") is None
    # a lone surrogate (JSON can carry one) is no word: it never reaches the hash
    assert a.signature(LONG + " \ud800").digest() == s1.digest()


def test_minhash_signatures_are_the_pinned_releases():
    """Recorded with rensa 0.5.0 (R-MinHash algorithm version 2), the range pyproject.toml pins. A release whose
    signatures differ flags other rows for the same input: move the pin deliberately, with these values."""
    sig = MinHashDedup().signature("The quick brown fox jumps over the lazy dog")
    assert sig.digest()[:4] == [3745571858, 3298934994, 3190686803, 3448217988]


# Rows for the determinism check: variants of LONG with 0-8 words edited, some near the 0.85 threshold.
NEAR_ROWS = """
import json, random, sys
from kimi_eagle_data.sources.dedup import MinHashDedup
rng = random.Random(7)
words = sys.argv[1].split()
rows = []
for i in range(60):
    w = list(words)
    for _ in range(rng.randint(0, 8)):
        w[rng.randrange(len(w))] = rng.choice(["alpha", "beta", "gamma", "delta", str(rng.randrange(100))])
    rows.append(" ".join(w))
near = MinHashDedup(0.85)
flagged = []
for i, text in enumerate(rows):
    sig = near.signature(text)
    hit = near.check("C1", sig)
    if hit:
        flagged.append([i, hit[0], hit[1]])
    else:
        near.add("C1", sig, f"id{i}")
print(json.dumps(flagged))
"""


def test_near_dedup_flags_the_same_rows_in_every_process():
    """Same input, same flags, same kept ids and estimates: across processes with different string-hash seeds
    (a MinHash keyed on Python's `hash` would differ between them)."""
    import os
    import subprocess
    import sys
    runs = []
    for hash_seed in ("1", "2", "random"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        proc = subprocess.run([sys.executable, "-c", NEAR_ROWS, LONG], env=env, capture_output=True, text=True,
                              check=True)
        runs.append(json.loads(proc.stdout))
    assert runs[0] == runs[1] == runs[2]
    flagged = {i for i, _, _ in runs[0]}
    assert 0 < len(flagged) < 59            # some rows near-duplicates, some kept: the threshold decides


# ------------------------------------------------------------------------------------ decontamination

GSM = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
       "How many clips did Natalia sell altogether in April and May?")
MT = "Compose an engaging travel blog post about a recent trip to Hawaii, highlighting cultural experiences."


@pytest.fixture()
def eval_sets(tmp_path):
    gsm = tmp_path / "gsm8k.jsonl"
    gsm.write_text(json.dumps({"question": GSM, "answer": "72"}) + "\n"
                   + json.dumps({"question": "Tiny question here?"}) + "\n"
                   + json.dumps({"question": "Compute the sum of the first nine odd numbers please"}) + "\n")
    mt = tmp_path / "mt_bench.jsonl"
    mt.write_text(json.dumps({"question_id": 81, "turns": [MT, "Rewrite your previous response."]}) + "\n")
    he = tmp_path / "humaneval.parquet"
    pq.write_table(pa.table({"task_id": ["HumanEval/0"], "prompt": [
        'def has_close_elements(numbers, threshold):\n    """Check if in given list of numbers, are any two numbers '
        'closer to each other than given threshold."""\n']}), he)
    return DecontamSettings(sets=(EvalSet("gsm8k", str(gsm), ("question",)), EvalSet("mt-bench", str(mt)),
                                  EvalSet("humaneval", str(he), ("prompt",))))


def test_decontamination_drops_overlaps_and_reports_them(tiny_tokenizer, eval_sets):
    rows = [chat_row(1, "Solve this: " + GSM.upper().replace(",", " ;")),           # case/punctuation hidden
            chat_row(2, "Natalia sold clips to 48 of her friends in April."),       # 10 words only: kept
            chat_row(3, MT + " Thanks!"),
            chat_row(4, "Please: compute the SUM of the first nine odd numbers, please!"),  # short eval text, whole
            chat_row(5, "Complete: def has_close_elements(numbers, threshold): Check if in given list of numbers, "
                        "are any two numbers closer to each other than given threshold."),
            chat_row(6, "Write a haiku about autumn leaves.")]
    state = PrepareState(decontam=eval_sets)
    records, rejections, report = run(tiny_tokenizer, USER, rows, state=state)
    assert sorted(r.source_id for r in records) == ["r2", "r6"]
    assert report.contaminated_by == {"gsm8k": 2, "mt-bench": 1, "humaneval": 1}
    assert {r.reason for r in rejections} == {"contaminated"}
    msg = next(r.message for r in rejections if r.source_id == "r1")
    assert "eval set gsm8k row 1" in msg and "13 words" in msg
    stats = state.decontam.summary()
    assert stats["gsm8k"]["ignored_short"] == 1 and stats["mt-bench"]["texts"] == 2


def test_decontamination_errors(tmp_path):
    with pytest.raises(DecontamError, match="does not exist"):
        Decontaminator(DecontamSettings(sets=(EvalSet("x", str(tmp_path / "missing.jsonl")),)))
    f = tmp_path / "e.jsonl"
    f.write_text(json.dumps({"q": "something"}) + "\n")
    with pytest.raises(DecontamError, match="no text found"):
        Decontaminator(DecontamSettings(sets=(EvalSet("x", str(f)),)))
    assert not PrepareState().decontam


# ------------------------------------------------------------------------------------ filters

TOOL = {"type": "function", "function": {"name": "get_weather", "description": "d",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                        "required": ["city"]}}}


def _fn(**kw):
    return [{"type": "function", "function": {**TOOL["function"], **kw}}]


@pytest.mark.parametrize("tools", [
    [], "x", [1], [{"type": "retrieval"}], [{"type": "function"}], _fn(name=""), _fn(name="get weather"),
    _fn(name=3), [TOOL, TOOL], _fn(parameters=[]), _fn(parameters={"type": "string"}), _fn(parameters=None),
    _fn(parameters={"type": "object", "properties": []}), _fn(parameters={"type": "object", "required": "city"}),
    _fn(parameters={"type": "object", "properties": {"a": "string"}}), _fn(description=5),
])
def test_invalid_tool_schemas(tools):
    code, msg = check_tools(tools)
    assert code == "invalid_tool_schema" and msg


def test_valid_tools_pass_and_invalid_ones_are_rejected_in_prepare(tiny_tokenizer):
    assert check_tools(None) is None and check_tools([TOOL]) is None
    rows = [chat_row(1, "weather?", tools=[TOOL]), chat_row(2, "weather!", tools=_fn(parameters={"type": "array"}))]
    records, rejections, _ = run(tiny_tokenizer, USER, rows)
    assert [r.source_id for r in records] == ["r1"]
    assert [(r.source_id, r.reason) for r in rejections] == [("r2", "invalid_tool_schema")]


def test_language_filter(tiny_tokenizer):
    latin = Filters(scripts=("latin",))
    assert check_language([{"role": "user", "content": "Привет, как дела?"}], latin)[0] == "language"
    assert check_language([{"role": "user", "content": "for i in range(10): print(i*2)"}], latin) is None
    assert check_language([{"role": "user", "content": "1 + 2 = ?"}], latin) is None          # no letters
    assert check_language([{"role": "user", "content": "Привет"}], Filters()) is None         # off by default
    assert check_language([{"role": "user", "content": "日本語の質問です"}], Filters(scripts=("japanese",))) is None
    share, letters = script_share("Hello мир", ("latin",))
    assert letters == 8 and share == pytest.approx(5 / 8)
    rows = [chat_row(1, "Как отсортировать список?"), chat_row(2, "How do I sort a list?")]
    records, rejections, report = run(tiny_tokenizer, dataclasses.replace(USER, filters=latin), rows)
    assert [r.source_id for r in records] == ["r2"] and report.rejected == {"language": 1}


def test_content_and_char_filters(tiny_tokenizer):
    assert check_content([{"role": "user", "content": "a\x00b"}])[0] == "non_text_content"
    assert check_content([{"role": "user", "content": "\ud800 broken"}])[0] == "non_text_content"
    assert check_content([{"role": "user", "content": "\x01\x02\x03\x04 x"}])[0] == "non_text_content"
    assert check_content([{"role": "user", "content": ["x"]}])[0] == "non_text_content"
    assert check_content([{"role": "system", "content": "s"}, {"role": "user", "content": " "}])[0] == "empty_prompt"
    assert check_content([{"role": "user", "content": "tab\tand\nnewline"}]) is None
    rows = [chat_row(1, "x" * 300), chat_row(2, "short one")]
    records, _, report = run(tiny_tokenizer, dataclasses.replace(USER, filters=Filters(max_chars=200)), rows)
    assert [r.source_id for r in records] == ["r2"] and report.rejected == {"too_many_chars": 1}


def test_policies_are_the_partition_policies_and_roles_must_be_strings():
    row = {"id": "r", "conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"}]}
    for policy in POLICIES:
        adapter = "glaive" if policy == "after_tool_result" else "sharegpt"
        with pytest.raises(SourceRowError):          # every declared policy is implemented (no ValueError)
            adapt_row(adapter, {"system": "SYSTEM: x", "chat": "USER: q\n"} if adapter == "glaive" else {}, policy)
    assert adapt_row("sharegpt", row)[1][0][1].answer == {"reasoning": None, "content": "Hello"}
    with pytest.raises(ValueError):
        adapt_row("sharegpt", row, "last_user")
    for adapter, col, key in (("messages", "messages", "role"), ("sharegpt", "conversations", "from"),
                              ("openthoughts", "conversations", "from")):
        bad = {"id": "r", col: [{key: ["user"], "value": "x", "content": "x"}]}
        with pytest.raises(SourceRowError) as info:       # an unhashable role once raised TypeError
            adapt_row(adapter, bad)
        assert info.value.code == "unknown_role", adapter
