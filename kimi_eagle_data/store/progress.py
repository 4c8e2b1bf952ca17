"""How far generation has come, per config, from what prepare wrote and the checkpoints hold: the accounting
identity before validation (docs/reliability.md),

    selected + later turns = rejected at prepare + generated + failed + pending

`generate` prints it when it ends; `stats`, `inspect` and `plan` show it while a workdir has nothing validated
yet (a first `generate` under way), reading the checkpoints read-only, as a run commits them.
"""

from __future__ import annotations

from typing import Iterable

import pyarrow.parquet as pq

from kimi_eagle_data.errors import MissingInputError
from kimi_eagle_data.store.checkpoint_set import CheckpointSet
from kimi_eagle_data.store.prompt_view import ConfigPrompts
from kimi_eagle_data.store.workdir import Workdir, read_json

PROGRESS_KEYS = ("selected", "later_turns", "rejected_at_prepare", "generated", "failed", "pending")


def prepared_ids(workdir: Workdir, config: str) -> list[str]:
    """The ids of a config's prepared prompts (only that column is read)."""
    path = workdir.prepared(config)
    if not path.exists():
        raise MissingInputError(f"{path} is missing; run `kimi-data prepare {config} --workdir {workdir.root}` first")
    return pq.read_table(path, columns=["id"]).column("id").to_pylist()


def generation_progress(workdir: Workdir, configs: Iterable[str], checkpoints: CheckpointSet
                        ) -> dict[str, dict[str, int]]:
    """{config: {selected, later_turns, rejected_at_prepare, generated, failed, pending}} over the config's view
    (store/prompt_view.py). Later turns are those of the selection's conversations continued on the model's own
    turns (policy own_history); a failure that a later success replaced counts as generated; a completion that
    answered an earlier version of its prompt is pending."""
    failed = checkpoints.failures()
    table = {}
    for c in configs:
        prep = read_json(workdir.prepare_report(c))
        view = ConfigPrompts.read(workdir, c, checkpoints)
        ids = view.ids()
        generated = len(view.done)
        n_failed = sum(i in failed and i not in view.done for i in ids)
        table[c] = {"selected": prep["selected"], "later_turns": len(view.later),
                    "rejected_at_prepare": prep["rejected_total"], "generated": generated, "failed": n_failed,
                    "pending": len(ids) - generated - n_failed}
    return table
