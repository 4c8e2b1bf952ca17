"""Kimi-K3's chat format (XTML): the renderer (`render.py`), per-segment token ids (`segment_ids.py`).

Written for kimi-eagle-data from the format K3's launch tokenizer renders; Moonshot's encoder is not in this
repository, it is the oracle the golden files (tests/golden/k3/) and the differential fuzz
(scripts/k3_render_fuzz.py) were checked against (docs/kimi-k3.md)."""
