"""Completions -> verdicts: the SPEC §5 rules, the verdict pool, assembling rows, `check` for any data."""
