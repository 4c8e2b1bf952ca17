"""The `datasets` builder generates: `KimiEagleData(...).download_and_prepare()` gives the rows `kimi-data build` +
`load_dataset(dir, CONFIG)` give for the same settings (local engine and the SGLang-protocol stand-in), resumes
after a kill -9 without generating a completion twice, and keys the `datasets` cache by the settings the rows
depend on."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import run_cli
from tests.helpers.servers import TINY, Server, wait_for
from tests.helpers.workdirs import completion_stamps, failure_reasons, prepared_count

CONFIG = "B6"
# Tiny settings that still give both splits (3 train, 3 rejected with the local engine).
SETTINGS = {"profile": "tiny-kimi", "model": TINY, "samples": True, "limit": 6, "max_new_tokens": 64}


def cli_options(settings: dict) -> list[str]:
    """The builder's fields as `kimi-data` options: a field is named as its option (max_new_tokens:
    --max-new-tokens; True: a flag)."""
    out = []
    for name, value in settings.items():
        flag = "--" + name.replace("_", "-")
        out += [flag] if value is True else [flag, str(value)]
    return out


def built_rows(tmp_path, name: str, **settings) -> dict[str, list[dict]]:
    """`kimi-data build CONFIG` with these settings, loaded back as `load_dataset(dir, CONFIG)`: {split: rows}."""
    import datasets

    w = tmp_path / name
    run_cli("build", CONFIG, "--workdir", str(w), "--no-progress", *cli_options(settings))
    ds = datasets.load_dataset(str(w / "dataset"), CONFIG, cache_dir=str(tmp_path / f"{name}-hf"))
    return {split: ds[split].to_list() for split in ds}


def builder(tmp_path, **settings):
    from kimi_eagle_data.builders.kimi_eagle import KimiEagleData

    return KimiEagleData(config_name=CONFIG, cache_dir=str(tmp_path / "hf"), progress=False, **settings)


def builder_rows(b) -> dict[str, list[dict]]:
    from kimi_eagle_data.schema import features

    b.download_and_prepare()
    ds = b.as_dataset()
    assert all(ds[split].features == features() for split in ds)
    return {split: ds[split].to_list() for split in ds}


@pytest.fixture(scope="module")
def stand_in():
    """The SGLang-protocol stand-in, one request per engine batch (each completion seeded by its own id, so
    two runs give the same completions whatever their concurrency) and slow enough to be killed mid-run."""
    server = Server("--max-batch", "1", "--delay", "0.5").start()
    yield server
    server.kill()


def test_local_engine_gives_the_rows_of_build(tmp_path):
    expected = built_rows(tmp_path, "cli", **SETTINGS)
    assert set(expected) == {"train", "rejected"}, "the settings should give both splits"
    b = builder(tmp_path, workdir=str(tmp_path / "w"), **SETTINGS)
    assert builder_rows(b) == expected
    assert not (tmp_path / "w" / ".builder").exists()     # the staged rows went into the cache

    # The same settings again: a cache hit, the pipeline does not run (its workdir is not made again).
    import shutil

    shutil.rmtree(tmp_path / "w")
    again = builder(tmp_path, workdir=str(tmp_path / "w"), **SETTINGS)
    assert again.cache_dir == b.cache_dir
    assert builder_rows(again) == expected
    assert not (tmp_path / "w").exists()


def test_a_streaming_dataset_can_be_read_twice(tmp_path):
    """The table generator only reads the staged rows: a streaming dataset iterated twice gives the same rows
    twice (each iteration runs the generator again over the same files)."""
    b = builder(tmp_path, workdir=str(tmp_path / "w"), **SETTINGS)
    streamed = b.as_streaming_dataset()
    assert set(streamed) == {"train", "rejected"}
    for split in streamed:
        first = list(streamed[split])
        assert first and list(streamed[split]) == first, split


@pytest.fixture(scope="module")
def stand_in_build(stand_in, tmp_path_factory) -> dict[str, list[dict]]:
    """The uninterrupted `kimi-data build` against the stand-in."""
    return built_rows(tmp_path_factory.mktemp("stand-in-build"), "cli", engine="sglang", server=stand_in.url,
                      concurrency=6, **SETTINGS)


def test_sglang_engine_gives_the_rows_of_build(stand_in, stand_in_build, tmp_path):
    b = builder(tmp_path, workdir=str(tmp_path / "w"), engine="sglang", server=stand_in.url, concurrency=6,
                **SETTINGS)
    assert builder_rows(b) == stand_in_build


def test_killed_and_run_again_resumes_without_generating_twice(stand_in, stand_in_build, tmp_path, caplog):
    w = tmp_path / "w"
    settings = {"workdir": str(w), "engine": "sglang", "server": stand_in.url, "concurrency": 1, **SETTINGS}
    code = ("from kimi_eagle_data.builders.kimi_eagle import KimiEagleData; "
            f"KimiEagleData(config_name={CONFIG!r}, cache_dir={str(tmp_path / 'hf')!r}, progress=False, "
            f"**{settings!r}).download_and_prepare()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: completion_stamps(w), 300, "no completion committed", proc=proc)
    finally:
        proc.kill()        # SIGKILL: no cleanup runs
        proc.wait()
    before = completion_stamps(w)
    n = prepared_count(w)
    assert 0 < len(before) < n, "the builder finished before it was killed; slow the stand-in down"

    caplog.set_level(logging.INFO, logger="kimi_eagle_data")    # the library's notes are log records
    rows = builder_rows(builder(tmp_path, **settings))
    assert rows == stand_in_build
    after = completion_stamps(w)
    assert len(after) == n
    # What was committed before the kill is kept as it was (same commit time), not generated again.
    assert {i: after[i] for i in before} == before
    assert f"reusing {len(before)} completed samples from an earlier run" in caplog.text


def test_the_cache_is_keyed_by_the_settings_the_rows_depend_on(tmp_path):
    base = builder(tmp_path, workdir=str(tmp_path / "w"), **SETTINGS)
    # The same settings, given in another order, the workdir spelled another way, and how the run goes changed: one entry.
    same = builder(tmp_path, **dict(reversed(list(SETTINGS.items()))), workdir=str(tmp_path / "w" / ".." / "w"),
                   batch_size=2, workers=1)
    assert same.config_id == base.config_id and same.cache_dir == base.cache_dir
    for changed in ({"max_new_tokens": 32}, {"limit": 5}, {"workdir": str(tmp_path / "other")}):
        other = builder(tmp_path, **{"workdir": str(tmp_path / "w"), **SETTINGS, **changed})
        assert other.config_id != base.config_id and other.cache_dir != base.cache_dir, changed
        assert other.config_id.startswith(f"{CONFIG}-")


def test_bad_settings_fail_when_the_builder_is_made(tmp_path):
    from kimi_eagle_data.errors import KimiDataError

    with pytest.raises(KimiDataError, match="max_new_tokens: must be at least 1"):
        builder(tmp_path, workdir=str(tmp_path / "w"), **{**SETTINGS, "max_new_tokens": 0})
    with pytest.raises(ValueError, match="unknown config 'Z9'"):
        from kimi_eagle_data.builders.kimi_eagle import KimiEagleData

        KimiEagleData(config_name="Z9", workdir=str(tmp_path / "w"), cache_dir=str(tmp_path / "hf"))
    with pytest.raises(KimiDataError, match="needs workdir="):
        builder(tmp_path, **SETTINGS)
    assert not (tmp_path / "w").exists()


def test_failed_samples_stop_the_build_then_are_retried_into_the_rows_of_build(stand_in, stand_in_build, tmp_path,
                                                                                caplog):
    from kimi_eagle_data.builders.kimi_eagle import BuildError

    faulty = Server("--max-batch", "1", "--error-rate", "0.5", "--fault-seed", "1").start()
    w = tmp_path / "w"
    settings = {"workdir": str(w), "engine": "sglang", "concurrency": 1, "max_attempts": 1, **SETTINGS}
    b = builder(tmp_path, server=faulty.url, **settings)
    try:
        with pytest.raises(BuildError) as stopped:
            b.download_and_prepare()
    finally:
        faulty.kill()
    reasons = failure_reasons(w)
    failed, n = sum(reasons.values()), prepared_count(w)
    assert 0 < failed < n, "the injected faults should fail some samples, not all"
    assert str(stopped.value) == (
        f"{CONFIG}: {failed} samples failed ({', '.join(f'{r} {k}' for r, k in reasons.items())}), 0 pending; "
        f"the {n - failed} generated are kept in {w.resolve()}: build again with retry_failed=True once the server "
        "is healthy")
    assert not Path(b.cache_dir).exists()      # nothing incomplete was cached

    caplog.clear()
    caplog.set_level(logging.INFO, logger="kimi_eagle_data")
    rows = builder_rows(builder(tmp_path, server=stand_in.url, retry_failed=True, **settings))
    assert rows == stand_in_build
    assert f"reusing {n - failed} completed samples from an earlier run" in caplog.text


def test_a_config_file_partition_is_a_config_and_its_contents_key_the_cache(tmp_path):
    from kimi_eagle_data.builders.kimi_eagle import KimiEagleData

    (tmp_path / "chats.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    toml = tmp_path / "partitions.toml"
    toml.write_text('[partitions.C1]\nsource = "chats.jsonl"\nn = 1\n')
    first = KimiEagleData(config_name="C1", config=str(toml), workdir=str(tmp_path / "w"),
                          cache_dir=str(tmp_path / "hf"))
    assert first.config_id.startswith("C1-")
    toml.write_text('[partitions.C1]\nsource = "chats.jsonl"\nn = 2\n')
    edited = KimiEagleData(config_name="C1", config=str(toml), workdir=str(tmp_path / "w"),
                           cache_dir=str(tmp_path / "hf"))
    assert edited.config_id != first.config_id
    with pytest.raises(ValueError, match="unknown config 'C1'"):     # without the file, C1 is no partition
        KimiEagleData(config_name="C1", workdir=str(tmp_path / "w"), cache_dir=str(tmp_path / "hf"))


def test_config_fields_are_run_settings_under_their_option_names():
    """The builder declares no setting of its own: each config field is a RunSettings option's name, so a setting
    added to settings.py without a builder field (or renamed there) fails here."""
    from dataclasses import fields

    import datasets

    from kimi_eagle_data.builders.kimi_eagle import KimiEagleConfig
    from kimi_eagle_data.settings import RunSettings

    own = {f.name for f in fields(datasets.BuilderConfig)}
    options = {f.metadata["setting"].flag.split("/")[0].removeprefix("--").replace("-", "_"): f.name
               for f in fields(RunSettings) if f.metadata.get("setting") and f.metadata["setting"].flag}
    options["progress"] = options.pop("no_progress")    # --no-progress: the builder takes the positive form
    builder = {f.name for f in fields(KimiEagleConfig)} - own
    assert builder - options.keys() == set()
    # Not for a builder: a label for publishing, shards/merges of a multi-node run, the dataset version (a
    # BuilderConfig field of its own), the Hub repo.
    assert options.keys() - builder == {"model_label", "shard", "merge", "dataset_version", "repo"}
