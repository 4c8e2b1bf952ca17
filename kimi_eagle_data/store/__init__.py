"""Where a run's data lives on disk, and how it is written and read back.

    workdir.py     the workdir layout (every path a stage writes) and the atomic file writes (JSON, temp + rename)
    lock.py        one writer per workdir (an flock), shards side by side
    sqlite.py      the one SQLite layer: WAL and its pragmas, the meta and failures tables, one transaction
                   per record, one-line errors for a corrupt or full file
    checkpoint.py  the generation checkpoint (completions with checksums verified on read; shard files read
                   as one), on sqlite.py
    scores.py      the score checkpoint, on sqlite.py

The store sits low: it imports only the shared ground (records, errors, diskfull, run_checks), never a stage.
Records go in and come out typed (`Completion`, `RequestFailure`, `RequestStat`, `Score`).
"""
