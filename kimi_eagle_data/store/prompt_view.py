"""One view of a config's prompts: every turn of every conversation of the current selection, whichever store
holds it, and which stored completions answer them.

A config's prompts live in two stores: turn 1 of every conversation (every prompt of the other policies) in
`prepared/<CFG>.parquet`, what prepare selected; the later turns of conversations continued on the model's own
turns (policy own_history) in the checkpoint, stored with the completion they follow from. This module is the one
place that joins them; generate, validate/emit, score, the progress table and the Slurm status read it.

The rules (docs/reliability.md):

- A stored later turn belongs to the view only when its conversation is in the selection (its first turn is
  prepared now) and it was derived from the conversation as prepared now (its `origin`, store/prompt_hash.py,
  equals the first prompt's and script's hash now; a turn stored before origins were is kept as it is). The later
  turns of conversations the selection no longer holds (a pilot's, after a smaller selection) stay in the
  checkpoint, counted as "kept, not in this selection": never generated further, never emitted. A larger
  selection that takes them again finds them there.
- A stored completion answers a prompt of the view only when its prompt hash equals the hash of that prompt's
  ids now (a completion stored before prompt hashes were is kept as it is). One that answered an earlier version
  (a source row edited in place under the same id, an edited later user turn) is not the prompt's: generate
  makes it again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import pyarrow.parquet as pq

from kimi_eagle_data.errors import MissingInputError
from kimi_eagle_data.records import ConversationEnd
from kimi_eagle_data.store.checkpoint import StoredTurn
from kimi_eagle_data.store.checkpoint_set import CheckpointSet
from kimi_eagle_data.store.prompt_hash import conversation_origin, prompt_hash
from kimi_eagle_data.store.workdir import Workdir


@dataclass
class PreparedIndex:
    """A config's prepared prompts by id, without their text: each prompt's hash and (own_history) script."""

    hashes: dict[str, str]                     # id -> prompt_hash of its prompt ids
    scripts: dict[str, str]                    # id -> its script's JSON text, where it has one

    @classmethod
    def read(cls, workdir: Workdir, config: str) -> "PreparedIndex":
        path = workdir.prepared(config)
        if not path.exists():
            raise MissingInputError(f"{path} is missing; run `kimi-data prepare {config} --workdir {workdir.root}` "
                                    "first")
        f = pq.ParquetFile(path)
        columns = ["id", "prompt_ids"] + (["script"] if "script" in f.schema_arrow.names else [])
        hashes: dict[str, str] = {}
        scripts: dict[str, str] = {}
        for batch in f.iter_batches(batch_size=1 << 14, columns=columns):
            ids = batch.column(0).to_pylist()
            col = batch.column(1)
            offsets = col.offsets.to_numpy()
            values = col.values.to_numpy(zero_copy_only=False).astype("<i4", copy=False)
            for k, id_ in enumerate(ids):
                hashes[id_] = prompt_hash(values[offsets[k]:offsets[k + 1]].tobytes())
            if len(columns) == 3:
                scripts.update((i, s) for i, s in zip(ids, batch.column(2).to_pylist()) if s)
        return cls(hashes, scripts)

    def origin(self, conversation: str) -> str:
        return conversation_origin(self.hashes[conversation], self.scripts.get(conversation))


@dataclass
class ConfigPrompts:
    """The view of one config (see the module's rules). Ids are sample ids; a conversation's id is its first
    turn's."""

    config: str
    first: dict[str, str]                      # turn 1 (every prepared prompt): id -> its prompt hash now
    origins: dict[str, str]                    # conversation -> its origin now (own_history's, and any with
                                               # stored turns or ends)
    later: dict[str, StoredTurn]               # the later turns of the view: id -> the stored turn
    ends: dict[str, ConversationEnd]           # conversation -> its stored end, where it is the view's
    kept_not_selected: int = 0                 # stored later turns of conversations not in this selection
    completions_not_selected: int = 0          # stored completions of samples not in this selection
    stale_turns: dict[str, str] = field(default_factory=dict)    # stored later turns derived from an earlier
                                                                 # origin: id -> conversation
    continued: set[str] = field(default_factory=set)  # conversations continued on the model's own turns
                                                      # (own_history: prepared with a script)
    done: set[str] = field(default_factory=set)      # ids of the view with a completion that answers them
    stale_done: set[str] = field(default_factory=set)    # ids of the view whose stored completions answered an
                                                         # earlier version of their prompt only

    @classmethod
    def read(cls, workdir: Workdir, config: str, checkpoint: CheckpointSet | None) -> "ConfigPrompts":
        prepared = PreparedIndex.read(workdir, config)
        if checkpoint is None:
            return cls(config, prepared.hashes, {}, {}, {}, continued=set(prepared.scripts))
        turns, ends = checkpoint.turn_index(config), checkpoint.end_rows(config)
        wanted = {t.conversation for t in turns} | {e.conversation_id for e, _ in ends} | prepared.scripts.keys()
        origins = {c: prepared.origin(c) for c in wanted if c in prepared.hashes}
        view = cls(config, prepared.hashes, origins, {}, {}, continued=set(prepared.scripts))
        view._sort_turns(turns)
        for end, origin in ends:
            conv = end.conversation_id
            if conv not in origins:
                continue
            if origin is None or origin == origins[conv]:
                view.ends.setdefault(conv, end)
        view._sort_completions(checkpoint.completion_hashes(config))
        return view

    def _sort_turns(self, turns: Iterable[StoredTurn]) -> None:
        unselected: set[str] = set()
        for t in turns:
            if t.conversation not in self.origins:
                unselected.add(t.id)
            elif t.origin is None or t.origin == self.origins[t.conversation]:
                self.later.setdefault(t.id, t)
            else:
                self.stale_turns[t.id] = t.conversation
        for id_ in self.later.keys() & self.stale_turns.keys():     # a current version in another file wins
            del self.stale_turns[id_]
        self.kept_not_selected = len(unselected)

    def _sort_completions(self, per_file: list[dict[str, str | None]]) -> None:
        stored: set[str] = set()
        elsewhere: set[str] = set()
        for hashes in per_file:
            for id_, h in hashes.items():
                want = self.prompt_hash(id_)
                if want is None:
                    if id_ not in self.stale_turns:
                        elsewhere.add(id_)
                    continue
                stored.add(id_)
                if h is None or h == want:
                    self.done.add(id_)
        self.stale_done = stored - self.done
        self.completions_not_selected = len(elsewhere)

    # -- what readers ask ------------------------------------------------------------------------
    def prompt_hash(self, id_: str) -> str | None:
        """The hash of the prompt of `id_` now (None: not a prompt of the view)."""
        h = self.first.get(id_)
        if h is None and (t := self.later.get(id_)) is not None:
            h = t.prompt_hash
        return h

    def answers(self, id_: str, stored_hash: str | None) -> bool:
        """Whether a completion stored for `id_` with `stored_hash` is a row of the view (None: stored before
        prompt hashes were, kept as it is)."""
        want = self.prompt_hash(id_)
        return want is not None and (stored_hash is None or stored_hash == want)

    def ids(self) -> list[str]:
        """Every prompt of the view (turn 1 and later turns), sorted."""
        return sorted(self.first.keys() | self.later.keys())

    def conversation(self, id_: str) -> str:
        t = self.later.get(id_)
        return t.conversation if t is not None else id_

    def to_continue(self) -> list[tuple[str, str]]:
        """(conversation, id of its last turn of the view) of each conversation continued on the model's own turns
        whose last turn of the view is answered and followed by nothing of the view: neither its next turn nor its
        end. Generate computes that follow now. A conversation comes to this when its source changed after that
        turn (what followed was derived from an earlier version: not the view's), also when the shard that held
        those earlier rows deleted them before this run read them (another shard's file, after the selection
        was dealt anew), or a run stopped between deleting them and storing the new follow. Every other answered
        turn has its follow, stored in the same transaction as its completion."""
        last: dict[str, StoredTurn] = {}
        for t in self.later.values():
            if t.conversation not in last or last[t.conversation].turn < t.turn:
                last[t.conversation] = t
        out = []
        for conv in sorted(self.continued - self.ends.keys()):
            tid = last[conv].id if conv in last else conv
            if tid in self.done:
                out.append((conv, tid))
        return out


def read_views(workdir: Workdir, configs: Iterable[str], checkpoint: CheckpointSet | None
               ) -> dict[str, ConfigPrompts]:
    return {c: ConfigPrompts.read(workdir, c, checkpoint) for c in configs}
