"""A run's context: everything a stage needs that does not change while the run goes, made once from the options,
the workdir and the partition config file (runs.open_run) and immutable from then on.

Every stage is a function of the context and of what the stage before it wrote into the workdir:

    ctx = open_run(settings)                 # runs.py: reads the config file, the tokenizer, binds run.json
    prepare(ctx); generate(ctx); emit(ctx)   # prompts/stage.py, generate/stage.py, emit/stage.py
    score_run(ctx, ["B4"])                   # score/report.py

It imports no stage: the stages import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kimi_eagle_data.chat_format import ChatFormat, FormatTokens, with_partition_options
from kimi_eagle_data.errors import MissingInputError
from kimi_eagle_data.progress import Progress
from kimi_eagle_data.settings import RunSettings
from kimi_eagle_data.store.checkpoint_set import CheckpointSet
from kimi_eagle_data.store.workdir import Workdir
from kimi_eagle_data.model_profile import model_vocab_size


class EngineHandoff:
    """The engine a run connected to before it bound its workdir (build's `server_first`), handed to the first
    stage that asks for one, once. The context stays immutable; this is the one thing passed on through it."""

    def __init__(self, engine: Any = None):
        self._engine = engine

    def take(self) -> Any:
        engine, self._engine = self._engine, None
        return engine


def merged_checkpoint_paths(merge: list[str]) -> list[Path]:
    """The checkpoint files of the --merge workdirs; one without any is one error line (open_run checks it before
    the workdir is made)."""
    paths = []
    for other in merge:
        found = Workdir(Path(other).resolve()).checkpoint_paths()
        if not found:
            raise MissingInputError(f"--merge {other}: no generations*.sqlite there; is it a kimi-data workdir?")
        paths += found
    return paths


@dataclass(frozen=True)
class RunContext:
    settings: RunSettings            # resolved against the config file (runs.load_partitions)
    partitions: Any                  # sources/config.PrepareConfig: the partition config, read once
    workdir: Workdir
    profile: Any                     # model_profile.ModelProfile
    tokenizer: Any
    sampling: Any                    # engines/base.SamplingParams: the run's request
    max_seq_len: int
    run: dict[str, Any]              # run.json as bound (read only: stages never change it)
    lock: Any                        # store/lock.WorkdirLock, held while the context lives
    progress: Progress
    # The profile's chat format (formats.format_of) bound to this profile and tokenizer (`ChatFormat.bind`): what
    # stages ask for everything format-specific (renderer, generation prompts, validator, special-token text); set
    # by runs.open_run (stages never import formats/).
    format: ChatFormat
    connected: EngineHandoff = field(default_factory=EngineHandoff)

    @property
    def tokens(self) -> FormatTokens:
        """The format's tokens of the tokenizer (`ChatFormat.tokens`: the stop id, the ids the server must agree on)."""
        return self.format.tokens

    @property
    def configs(self) -> list[str]:
        return list(self.settings.configs)

    def config_format(self, config: str) -> ChatFormat:
        """The format a config's prompts render with: the run's, passing its partition's template arguments (its
        `preserve_thinking`) over the run's where it sets any."""
        return with_partition_options(self.format, self.partitions.partition(config).template_options)

    def checkpoint_paths(self) -> list[Path]:
        """Every checkpoint file the reading stages read: this workdir's shards and those of --merge workdirs."""
        return self.workdir.checkpoint_paths() + merged_checkpoint_paths(self.settings.merge)

    def checkpoints(self) -> CheckpointSet:
        """Those files read as one, each opened read-only: what a stage only reads it never writes, locks or
        migrates (a --merge workdir's files are another run's, maybe on a read-only mount; another shard's file
        is its generate's). Only generate opens a file to write: its own shard's."""
        return CheckpointSet(self.checkpoint_paths(), readonly=True)

    def vocab_size(self) -> int:
        """Token ids a prompt or completion may hold are below this (model_profile.model_vocab_size)."""
        return model_vocab_size(self.profile, self.tokenizer)
