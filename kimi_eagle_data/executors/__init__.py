"""Executors: run the pipeline's stages somewhere other than this process. An executor writes and submits the jobs
that run the ordinary `kimi-data` stage commands (prepare, generate --shard, build) and watches them; it adds no
stage logic of its own (the stages stay in their packages, run by runs.py)."""
