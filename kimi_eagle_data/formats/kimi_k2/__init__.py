"""Kimi-K2.5's chat format, everything about it in this folder (Kimi-K2.6 speaks it too, with one template argument
more, `preserve_thinking`): its profiles as plain data (`profiles.py`; exported here for the registry,
kimi_eagle_data/profile.py), its tokens by string and their roles and those resolved to a tokenizer's ids
(`tokens.py`), the format object the stages ask (`format.py`: the
tokenizer's chat template, the completion grammar and validator), the prompt renderer (`render.py`: the chat
template with tools declared TypeScript-style by our encoder, `tool_declaration.py`, and the tokenizer's self-check
at load), the completion grammar (`grammar.py`), its
token-structure rules and reason codes (`rules.py`) and their validator (`validator.py`), an accepted turn as the
assistant message a client sends back (`messages.py`), an answer as the completion K2.5 writes (`answer.py`) and
its split of a sequence into `inspect`'s segments (`segments.py`).

Declared here for the registry (kimi_eagle_data/registry.py): the format by the name of its object's module, imported
on first use, and the profiles as plain data: the registry sits below the stages, the format object above them.
"""

from kimi_eagle_data.formats.kimi_k2.profiles import KIMI_K25, KIMI_K26, TINY_KIMI, TINY_KIMI_K26
from kimi_eagle_data.registry import Declaration

PROFILES = (KIMI_K25, TINY_KIMI, KIMI_K26, TINY_KIMI_K26)
DECLARATION = Declaration(formats={"kimi-k2": "kimi_eagle_data.formats.kimi_k2.format:KIMI_K2_FORMAT"},
                          profiles=PROFILES)
