"""Verdicts -> the Hub-layout dataset: shards, plots, manifest (the card lives in kimi_eagle_data.cards)."""
