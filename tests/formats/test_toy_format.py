"""A third format, registered from tests/formats/toy_format.py alone, goes through the stages: prepare renders the
bundled sample prompts in it, handcrafted completions are validated and emitted by its grammar, and `check` reads
the emitted rows back with the verdicts they record. No stage knows the format: each asks the run's
(`RunContext.format`)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from kimi_eagle_data.chat_format import ChatFormat
from kimi_eagle_data.emit.dataset import load_local
from kimi_eagle_data.formats import format_named, format_of, register_format, unregister_format
from kimi_eagle_data.formats.kimi_k2.format import KIMI_K2_FORMAT
from kimi_eagle_data.formats.kimi_k3.format import KIMI_K3_FORMAT
from kimi_eagle_data.profile import PROFILES, get_profile, unregister_profile
from kimi_eagle_data.model_profile import INSTANT, THINKING
from kimi_eagle_data.prompts.prepared_file import read_prepared
from kimi_eagle_data.prompts.tokenizer import open_tokenizer
from kimi_eagle_data.records import Completion
from kimi_eagle_data.runs import emit_dataset, open_run, prepare_prompts
from kimi_eagle_data.settings import RunSettings
from kimi_eagle_data.sources.partitions import DEMO_CONFIG
from kimi_eagle_data.store.checkpoint import Checkpoint
from kimi_eagle_data.store.prompt_hash import prompt_hash
from kimi_eagle_data.validate.check import Checker, check_dataset
from tests.formats.toy_format import END, HEADER, THINK, THINK_END, TOY_FORMAT, TOY_PROFILE, register

CONFIG = "B4"


@pytest.fixture(autouse=True)
def toy_registered():
    """The toy format and profile registered for one test, then taken out again: other tests in this process (the
    help's profile list, the tokenizer hint) see the registry as shipped."""
    register()
    yield
    unregister_profile(TOY_PROFILE.name)
    unregister_format(TOY_FORMAT.name)


def test_every_format_is_a_chat_format_and_the_registry_holds_the_toy():
    assert all(isinstance(f, ChatFormat) for f in (KIMI_K2_FORMAT, KIMI_K3_FORMAT, TOY_FORMAT))
    assert get_profile("toy-chat") is TOY_PROFILE and format_of(TOY_PROFILE) is TOY_FORMAT
    assert format_named("toy-chat") is TOY_FORMAT and register_format(TOY_FORMAT) is TOY_FORMAT   # idempotent

    class Impostor(type(TOY_FORMAT)):
        pass
    try:
        register_format(Impostor())
    except ValueError as e:
        assert "toy-chat" in str(e)
    else:
        raise AssertionError("a second format under a taken name was registered")


def test_the_toy_format_renders_validates_checks_and_emits(tmp_path):
    settings = RunSettings(workdir=str(tmp_path / "w"), profile="toy-chat", model=TOY_PROFILE.model_path, samples=True,
                           limit=4, configs=[CONFIG], config_file=str(DEMO_CONFIG), progress=False, workers=1)
    ctx = open_run(settings)
    try:
        assert type(ctx.format) is type(TOY_FORMAT) and ctx.format.bound and not TOY_FORMAT.bound
        tok = ctx.tokenizer
        reports = prepare_prompts(ctx).reports
        records = read_prepared(ctx.workdir, CONFIG)
        assert reports[CONFIG].prepared == len(records) == 4
        for r in records:          # rendered by the toy format: its headers, its generation prompt per mode
            text = tok.decode(r.prompt_ids)
            assert text.startswith(HEADER) and "<|im_user|>" not in text
            assert text.endswith(f"assistant<|end_header_id|>{THINK}" if r.mode == THINKING
                                 else "assistant<|end_header_id|>")
            assert r.prompt_ids == ctx.format.render_prompt(r.messages, r.tools, r.mode)
        assert {r.mode for r in records} <= {THINKING, INSTANT}

        # Handcrafted completions: the first one forges a turn token in its answer, the others are well formed.
        def completion(i, r):
            answer = ("Fine <|im_user|> then." if i == 0 else f"Answer {i}.") + END
            text = answer if r.mode == INSTANT else f"Thinking it over.{THINK_END}{answer}"
            return Completion(r.id, tok.encode(text, add_special_tokens=False), "stop")

        ckpt = Checkpoint(ctx.workdir.checkpoint)
        try:
            for i, r in enumerate(records):
                ckpt.commit(CONFIG, completion(i, r), prompt_hash=prompt_hash(r.prompt_ids))
        finally:
            ckpt.close()

        _, validated = emit_dataset(ctx)
        report = validated[CONFIG]
        assert (report.valid, report.rejected) == (3, 1) and report.balanced, report
        assert dict(report.reasons) == {"toy_special_token": 1}, report.reasons
    finally:
        ctx.lock.release()

    dataset = load_local(ctx.workdir.root / "dataset")
    root, shards = dataset.root, dataset.shards()
    rows = [row for shard in shards for row in pq.read_table(shard).to_pylist()]
    assert len(rows) == 4 and sorted(tuple(r["issues"]) for r in rows) == [(), (), (), ("toy_special_token",)]
    thinking = [r for r in rows if r["mode"] == THINKING]
    for r in thinking:                    # the toy grammar's reasoning: through its `</think>`
        completion = r["input_ids"][r["prompt_len"]:]
        assert completion[r["reasoning_len"] - 1] == tok.convert_tokens_to_ids(THINK_END)

    checker = Checker(TOY_PROFILE, open_tokenizer(TOY_PROFILE.model_path), chat_format=TOY_FORMAT)
    verdicts = [v for v, _ in check_dataset(checker, root, shards)]
    assert len(verdicts) == 4 and all(v.passed for v in verdicts), [v.to_json() for v in verdicts]
    assert sorted(tuple(v.issues) for v in verdicts) == [(), (), (), ("toy_special_token",)]
