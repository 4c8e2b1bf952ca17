"""Which shard of `--shard i/N` generates each conversation (generate, and the Slurm status that counts each
shard's share).

The run's conversations (every prompt prepare selected, of every config of the run: a conversation's id is its
first turn's) are sorted by id and dealt round-robin: conversation k of that order goes to shard k mod N. So the
shards differ by at most one conversation in all, and by at most one in each config (ids start with their
config's name), where a hash of each id left them uneven (200 prompts on 4 shards: 46/53/54/47). The split is a
function of the selection and N alone: the same prompts prepared again (a resubmit, a requeued task, another
node) give every conversation the same shard; every shard of a run must therefore be run on the same configs
and selection (the same command). A conversation's later turns go where its first turn went.

Another selection (a pilot, then the full run) or another N deals the conversations anew, so some move to
another shard. Nothing is lost or made twice: every shard reads every shard's checkpoint file
(store/checkpoint_set.py), so a completion counts as done wherever it was stored, and a conversation that moved
continues from the turns its old shard stored.
"""

from __future__ import annotations

import hashlib
from typing import Iterable


def deal(conversations: Iterable[str], shards: int) -> dict[str, int]:
    """{conversation: its shard}: the conversations sorted by id, dealt round-robin over `shards`."""
    return {c: k % shards for k, c in enumerate(sorted(set(conversations)))}


class ShardSplit:
    """One shard's share of a run's conversations (shard None: the whole run, no split)."""

    def __init__(self, conversations: Iterable[str], shard: tuple[int, int] | None):
        self.shard = shard
        self.owner = deal(conversations, shard[1]) if shard is not None else {}

    def holds(self, conversation: str) -> bool:
        """Whether this shard generates `conversation` (a conversation the selection does not hold, which no
        shard generates, falls to one shard by a hash of its id)."""
        if self.shard is None:
            return True
        i, n = self.shard
        owner = self.owner.get(conversation)
        if owner is None:
            owner = int(hashlib.sha256(conversation.encode()).hexdigest()[:12], 16) % n
        return owner == i
