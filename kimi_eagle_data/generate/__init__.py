"""Stage 2, generate: the prompts of the run's view (store/prompt_view.py) through an engine into the checkpoint
(`stage.py`: which prompts, the checkpoint it writes; `records.py`: the requests, and each result stored with
what follows it). Engines (engines/) only answer requests; this stage alone stores what they answer."""
