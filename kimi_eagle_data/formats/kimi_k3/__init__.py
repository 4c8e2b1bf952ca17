"""Kimi-K3's chat format (XTML), everything about it in this folder.

Its facts as plain data (`facts.py`: tokens, generation prompts, efforts, serve flags) and its profiles built from
them (`profiles.py`, exported here for the registry, kimi_eagle_data/profile.py); the conversation put as K3's
tokenizer reads it (`normalize.py`), the renderer (`render.py`) and per-segment token ids (`segment_ids.py`); the
completion grammar and its reason codes (`grammar.py`); the format object the stages ask (`format.py`), its
validator (`validator.py`), its split of a sequence into `inspect`'s segments (`segments.py`) and the check of a
checkpoint's own chat code (`checkpoint.py`).

Written for kimi-eagle-data from the format K3's launch tokenizer renders; Moonshot's encoder is not in this
repository, it is the oracle the golden files (tests/golden/k3/) and the differential fuzz
(scripts/k3_render_fuzz.py) were checked against (docs/kimi-k3.md).

Declared here for the registry (kimi_eagle_data/registry.py): the format by the name of its object's module, imported
on first use (K3's renderer and grammar load only for a K3 run), and the profiles as plain data.
"""

from kimi_eagle_data.formats.kimi_k3.profiles import KIMI_K3, TINY_KIMI_K3
from kimi_eagle_data.registry import Declaration

PROFILES = (KIMI_K3, TINY_KIMI_K3)
DECLARATION = Declaration(formats={"kimi-k3": "kimi_eagle_data.formats.kimi_k3.format:KIMI_K3_FORMAT"},
                          profiles=PROFILES)
