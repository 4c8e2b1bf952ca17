"""Several generation checkpoint files read as one (store/checkpoint.py): a workdir's shards, and the workdirs
`--merge` names. A sample completed in more than one file counts once (the first)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

from kimi_eagle_data.records import Completion, ConversationEnd, PromptRecord, RequestFailure
from kimi_eagle_data.store.checkpoint import Checkpoint, CompletionBatch, KeepRow, RequestStat, StoredTurn


class CheckpointSet:
    """Several checkpoint files (shards, merged workdirs) read as one."""

    def __init__(self, paths: Iterable[Path], readonly: bool = False):
        self.parts = [Checkpoint(p, readonly=readonly) for p in paths]
        self.duplicates = 0   # ids completed in more than one file (overlapping shards); the first wins

    def close(self) -> None:
        for p in self.parts:
            p.close()

    def done_ids(self) -> set[str]:
        return set().union(*(p.done_ids() for p in self.parts)) if self.parts else set()

    def failures(self, config: str | None = None) -> dict[str, RequestFailure]:
        merged: dict[str, RequestFailure] = {}
        for p in self.parts:
            merged.update(p.failures(config))
        return merged

    def batches(self, config: str, rows: int = 1024, keep: KeepRow | None = None) -> Iterator[CompletionBatch]:
        """As Checkpoint.batches over every file; an id completed in several files counts once (the first that
        `keep` keeps)."""
        if len(self.parts) == 1:
            yield from self.parts[0].batches(config, rows, keep)
            return
        import heapq

        def records(part):
            for b in part.batches(config, rows, keep):
                for i in range(len(b)):
                    yield b.row(i)

        last, pending = None, []
        for r in heapq.merge(*(records(p) for p in self.parts), key=lambda r: r.id):
            if r.id == last:
                self.duplicates += 1
                continue
            last = r.id
            pending.append(r)
            if len(pending) == rows:
                yield CompletionBatch.from_rows(pending)
                pending = []
        if pending:
            yield CompletionBatch.from_rows(pending)

    def completions(self, config: str) -> Iterator[Completion]:
        """Whole completions of one config (score reads their log-prob sums); an id completed in several
        files counts once (the first)."""
        seen: set[str] = set()
        for p in self.parts:
            for c in p.completions(config):
                if c.id not in seen:
                    seen.add(c.id)
                    yield c

    def completions_of(self, ids: Iterable[str]) -> dict[str, Completion]:
        """As Checkpoint.completions_of over every file; the first file's where several hold one."""
        ids = list(ids)
        found: dict[str, Completion] = {}
        for p in self.parts:
            for k, c in p.completions_of(i for i in ids if i not in found).items():
                found.setdefault(k, c)
        return found

    def completion_hashes(self, config: str | None = None) -> list[dict[str, str | None]]:
        """Checkpoint.completion_hashes of each file (a sample may be stored in several, for different prompts)."""
        return [p.completion_hashes(config) for p in self.parts]

    def turn_index(self, config: str) -> list[StoredTurn]:
        """Checkpoint.turn_index of every file, one after the other (a turn may be stored in several)."""
        return [t for p in self.parts for t in p.turn_index(config)]

    def end_rows(self, config: str | None = None) -> list[tuple[ConversationEnd, str | None]]:
        return [e for p in self.parts for e in p.end_rows(config)]

    def request_stats(self) -> list[RequestStat]:
        """As Checkpoint.request_stats over every file; a sample in two files counts once (the first)."""
        rows: dict[str, RequestStat] = {}
        for p in self.parts:
            for r in p.request_stats():
                rows.setdefault(r.id, r)
        return [rows[k] for k in sorted(rows)]

    def finish_detail(self, id_: str) -> dict | None:
        return next((d for d in (p.finish_detail(id_) for p in self.parts) if d is not None), None)

    def get_meta(self, key: str):
        for p in self.parts:
            v = p.get_meta(key)
            if v is not None:
                return v
        return None

    def meta_values(self, key: str) -> list:
        """`key`'s value in every file that has it (shards counted apart: each its own server's counters)."""
        return [v for v in (p.get_meta(key) for p in self.parts) if v is not None]

    def time_range(self) -> tuple[float, float] | None:
        spans = [s for s in (p.time_range() for p in self.parts) if s]
        return (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None

    def turn_records(self, config: str | None = None, ids: Iterable[str] | None = None,
                     origins: dict[str, str] | None = None) -> list[PromptRecord]:
        """As Checkpoint.turn_records over every file; a turn stored in several files counts once (the first)."""
        found: dict[str, PromptRecord] = {}
        ids = None if ids is None else list(ids)
        for p in self.parts:
            for r in p.turn_records(config, ids, origins):
                found.setdefault(r.id, r)
        return [found[k] for k in sorted(found)]

    def turn_ids(self, config: str | None = None, answered: bool = False) -> set[str]:
        return set().union(*(p.turn_ids(config, answered) for p in self.parts)) if self.parts else set()

    def turn_conversations(self, config: str | None = None) -> dict[str, str]:
        merged: dict[str, str] = {}
        for p in self.parts:
            merged.update(p.turn_conversations(config))
        return merged

    def conversation_ends(self, config: str | None = None) -> dict[str, ConversationEnd]:
        ends: dict[str, ConversationEnd] = {}
        for p in self.parts:
            for k, v in p.conversation_ends(config).items():
                ends.setdefault(k, v)
        return ends


def open_workdir_checkpoints(workdir, readonly: bool = True) -> CheckpointSet | None:
    """A workdir's checkpoint files (main and shards) read as one; None when generate never ran there."""
    paths = workdir.checkpoint_paths()
    return CheckpointSet(paths, readonly=readonly) if paths else None
