"""The tiny Kimi-format tokenizer, shipped the way Kimi-K2.5 ships its own (written for kimi-eagle-data).

Loaded with `AutoTokenizer.from_pretrained(dir, trust_remote_code=True)` through `auto_map` in
`tokenizer_config.json`; transformers copies this file into its module cache and imports it from there, so every
import below is absolute. The tiktoken part, as K2.5's `TikTokenTokenizer` has it (ranks from `tiktoken.model`,
Kimi's pre-tokenizer regex, 256 reserved special ids, `encode(text)` with every special-token string allowed,
`.model`), is kimi-eagle-data's `TiktokenKimiTokenizer`; this class adds K2.5's chat rendering:

- `apply_chat_template` sorts every dict in `tools` by key, recursively, then computes `tools_ts_str` (the
  TypeScript-style declaration K2.5's template renders) with kimi-eagle-data's encoder and passes it to the
  template. Like K2.5's, a schema the encoder cannot render leaves the template to declare the tools as JSON,
  with a warning; the data pipeline never gets there (it computes `tools_ts_str` itself and rejects the row).
"""

from __future__ import annotations

import logging

# transformers checks a remote-code file's own imports before it runs it: named here, a missing tiktoken is its
# one "pip install tiktoken" line rather than an error from inside kimi-eagle-data.
import tiktoken  # noqa: F401

from kimi_eagle_data.chat_format import ToolSchemaUnsupported
from kimi_eagle_data.formats.kimi_k2.tool_declaration import deep_sort, encode_tools
from kimi_eagle_data.prompts.tiktoken_tokenizer import PAT_STR, TiktokenKimiTokenizer, byte_symbols  # noqa: F401

logger = logging.getLogger(__name__)


class TinyKimiTokenizer(TiktokenKimiTokenizer):

    # -- chat template: sorted tools and their TypeScript declaration, as K2.5's class does -----------------

    def apply_chat_template(self, conversation, tools=None, tokenize=True, add_generation_prompt=False, **kwargs):
        tools = deep_sort(tools)
        if tools and "tools_ts_str" not in kwargs:
            try:
                kwargs["tools_ts_str"] = encode_tools(tools)
            except ToolSchemaUnsupported as e:
                logger.warning("tiny-kimi: tools rendered as JSON, the TypeScript encoder refused them: %s", e)
        return super().apply_chat_template(conversation, tools=tools, tokenize=tokenize,
                                           add_generation_prompt=add_generation_prompt, **kwargs)
