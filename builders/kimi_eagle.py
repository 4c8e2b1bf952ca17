"""`KimiEagleData`: the `datasets` builder that generates the data, one config (partition) at a time.

`download_and_prepare()` runs prepare -> generate -> validate for its config through the project's stages (runs.py),
against the engine the config names, in `workdir` (where the resumable checkpoint lives: kill it, run it again,
and no completion is generated twice); the table generator then streams the validated rows, `train` and
`rejected` when there are any. The rows are those `kimi-data build CONFIG` writes with the same settings
(`load_dataset(<its dataset dir>, CONFIG)`):

    from kimi_eagle_data.builders.kimi_eagle import KimiEagleData
    b = KimiEagleData(config_name="B4", engine="sglang", server="http://node1:30000", workdir="runs/b4")
    b.download_and_prepare(); ds = b.as_dataset()          # DatasetDict: train (+ rejected)

Config fields are the run settings under their CLI option's name (`server`, `source`, `config` for --server,
--source, --config; the others as `max_new_tokens` is for --max-new-tokens); None means the run's default.
The `datasets` cache is keyed by what the rows depend on: the workdir and every setting except those that only
steer how the run goes (RUN_ONLY), so the same settings are a cache hit and a changed one is another entry.

The run prints nothing: its notes ("reusing N completed samples …") and warnings are `logging` records of the
`kimi_eagle_data` loggers, its progress INFO records of `kimi_eagle_data.progress` (none with progress=False), for
the caller to route or silence.
"""

from __future__ import annotations

import shutil
from contextlib import suppress
from dataclasses import dataclass, fields
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
from datasets.fingerprint import Hasher

try:
    from datasets.builder import Key
except ImportError:  # datasets < 4.1 used plain keys
    def Key(shard, i):  # noqa: N802
        return i

from kimi_eagle_data import __version__
from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.run_checks import SettingError
from kimi_eagle_data.schema import features, row_schema
from kimi_eagle_data.store.workdir import file_sha256
from kimi_eagle_data.settings import RunSettings
from kimi_eagle_data.emit.rows import RowBlocks
from kimi_eagle_data.emit.writer import ConfigShards
from kimi_eagle_data.runs import check_validated, load_partitions, open_run, prepare_prompts
from kimi_eagle_data.validate.stage import validate
from kimi_eagle_data.formats import format_of
from kimi_eagle_data.generate.stage import generate

BATCH_ROWS = 1024
STAGING = ".builder"    # <workdir>/.builder/<CONFIG>/: the validated rows, until download_and_prepare has cached them
# Settings that change how the run goes, never which rows it gives: not part of the cache key.
RUN_ONLY = ("engine", "server", "concurrency", "max_attempts", "retry_backoff", "request_timeout", "health_timeout",
            "allow_old_server", "retry_failed", "batch_size", "workers", "progress")


class BuildError(KimiDataError, RuntimeError):
    pass


@dataclass
class KimiEagleConfig(datasets.BuilderConfig):
    workdir: str | None = None              # required: the run's directory (checkpoint, prepared prompts)
    engine: str | None = None               # local | sglang | vllm
    server: str | list[str] | None = None
    model: str | None = None
    tokenizer: str | None = None
    profile: str | None = None
    preserve_thinking: bool | None = None   # the chat template's argument (kimi-k2.6); None: the profile's default
    samples: bool | None = None
    source: str | None = None               # this config's rows from a local file (--source CONFIG=PATH)
    config: str | None = None               # partition config file (TOML): user partitions, sampling, filters
    revision: str | None = None
    limit: int | None = None
    max_new_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_seq_len: int | None = None
    keep_truncated: bool | None = None
    retry_failed: bool | None = None
    batch_size: int | None = None
    concurrency: int | None = None
    max_attempts: int | None = None
    retry_backoff: float | None = None
    request_timeout: float | None = None
    health_timeout: float | None = None
    allow_old_server: bool | None = None
    workers: int | None = None
    progress: bool | None = None

    def __post_init__(self):
        super().__post_init__()
        if not self.workdir:
            raise SettingError("workdir: KimiEagleData needs workdir=<the run's directory>, where its checkpoint "
                               "makes the run resumable")

        load_partitions(_run_settings(self))   # unknown partition, setting out of range: one line now, not after
        #                                        loading a model

    def run_fields(self) -> dict:
        """The fields set on this config, beyond datasets' own (name, version, data_dir, …)."""
        own = {f.name for f in fields(datasets.BuilderConfig)}
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in own
                and getattr(self, f.name) is not None}

    def create_config_id(self, config_kwargs: dict, custom_features=None) -> str:
        key = {k: v for k, v in self.run_fields().items() if k not in RUN_ONLY}
        key["workdir"] = str(Path(self.workdir).resolve())
        if "config" in key:                 # the files' contents change the rows: the config file by its hash,
            key["config"] = file_sha256(Path(key["config"]))
        if "source" in key and Path(key["source"]).is_file():    # a source (maybe large) by size and mtime
            st = Path(key["source"]).stat()
            key["source"] = [str(Path(key["source"]).resolve()), st.st_size, st.st_mtime_ns]
        return f"{self.name}-{Hasher.hash({**key, 'project_version': __version__})}"


def _run_settings(config: KimiEagleConfig):
    """The one place the builder makes its RunSettings: the config's fields under their setting names."""
    given = config.run_fields()
    given.update(workdir=str(config.workdir), configs=[config.name])
    if "server" in given:
        server = given.pop("server")
        given["servers"] = [server] if isinstance(server, str) else list(server)
    if "source" in given:
        given["sources"] = {config.name: str(given.pop("source"))}
    if "config" in given:
        given["config_file"] = str(Path(given.pop("config")).resolve())
    return RunSettings(**given)


def _validate_into(ctx, config: str, out_dir: Path):
    """Validate `config`'s completions, streaming its rows into Parquet shards in `out_dir` (emit's rows and writer,
    without the card): (the validation report, {split: its shards}, only the splits with rows)."""
    shutil.rmtree(out_dir, ignore_errors=True)     # what a stopped run left
    sink = ConfigShards(out_dir, schema=row_schema(bool(ctx.format.efforts)))
    try:
        reports = validate(ctx, {config: RowBlocks(sink)})
        report = reports[config]
        check_validated(reports)       # the accounting identity, as build checks it
        return report, sink.finish()
    except BaseException:
        sink.abort()
        raise


class KimiEagleData(datasets.ArrowBasedBuilder):
    """Config names are the partitions (B1-B8, and those a `config=` file defines), so none is declared here."""

    BUILDER_CONFIG_CLASS = KimiEagleConfig

    def _info(self) -> datasets.DatasetInfo:
        efforts = format_of(_run_settings(self.config).model_profile).efforts   # K3's rows carry their effort
        return datasets.DatasetInfo(features=features(row_schema(bool(efforts))))

    def _split_generators(self, dl_manager):
        name = self.config.name
        ctx = open_run(_run_settings(self.config), server_first=True)
        try:
            prepared = prepare_prompts(ctx, reuse=True)
            generate(ctx, pilot_limit=prepared.pilot_limit)
            staging = ctx.workdir.root / STAGING / name
            report, splits = _validate_into(ctx, name, staging)
        finally:
            ctx.lock.release()
        if report.failed or report.pending:   # as `build` exits 3: nothing incomplete goes into the cache
            reasons = ", ".join(f"{r} {n}" for r, n in report.failure_reasons.items())
            raise BuildError(f"{name}: {report.failed} samples failed ({reasons}), {report.pending} pending; the "
                             f"{report.generated} generated are kept in {ctx.workdir.root}: build again with "
                             "retry_failed=True once the server is healthy")
        return [datasets.SplitGenerator(name=split, gen_kwargs={"files": [staging / f for f in info.files]})
                for split, info in splits.items()]

    def _download_and_prepare(self, dl_manager, verification_mode, **prepare_split_kwargs):
        super()._download_and_prepare(dl_manager, verification_mode, **prepare_split_kwargs)
        # The rows are in the cache now: the staged copy goes. (A streaming dataset reads the staged files each
        # time it is iterated; they stay until the next run of the pipeline replaces them.)
        staging = Path(self.config.workdir).resolve() / STAGING
        shutil.rmtree(staging / self.config.name, ignore_errors=True)
        with suppress(OSError):
            staging.rmdir()

    def _generate_tables(self, files: list[Path]):
        """The staged rows, read and never changed: every iteration (a streaming dataset's too) reads them whole."""
        for shard, path in enumerate(files):
            with pq.ParquetFile(path) as f:
                for i, batch in enumerate(f.iter_batches(batch_size=BATCH_ROWS)):
                    yield Key(shard, i), pa.Table.from_batches([batch])
