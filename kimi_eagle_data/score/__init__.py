"""Where regeneration pays: the target's log-probs of upstream answers vs its own completions (`kimi-data score`)."""
