"""Completions -> verdicts: the rules of docs/token-rules.md, the verdict pool, row assembly, `check` for any data."""
