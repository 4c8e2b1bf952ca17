"""The Slurm executor: `kimi-data slurm submit` and `kimi-data slurm status` (docs/production.md).

Three jobs over one shared workdir: prepare (once, no GPU), generate (a job array, one task per node and shard,
each task starting its engine unless --server names running ones; requeued on preemption, resuming where it
stopped), and finalize (after every shard succeeded and nothing is pending: emit, which validates, and card,
optionally push; never prepare or generate). layout.py says where their files live, jobs.py writes and submits
them from templates/, task.py is what a job records about itself (markers, events), scheduler.py talks to Slurm's
commands and status.py reads how far the run is.
"""
