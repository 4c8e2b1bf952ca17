"""The tiny Kimi-K3-format tokenizer, shipped the way Kimi-K3 ships its own (written for kimi-eagle-data).

Loaded with `AutoTokenizer.from_pretrained(dir, trust_remote_code=True)` through `auto_map` in
`tokenizer_config.json`; transformers copies this file into its module cache and imports it from there, so every
import below is absolute. The tiktoken part (ranks, reserved special ids, `encode`/`decode`, `.model`) is
kimi-eagle-data's `TiktokenKimiTokenizer`; this class adds K3's chat rendering.

Like K3's tokenizer, there is no Jinja template: `apply_chat_template` renders the conversation into XTML segments
with kimi-eagle-data's Kimi-K3 renderer (`kimi_eagle_data.formats.kimi_k3`) and encodes each segment on its own,
markers with special tokens allowed and all other text with none, so a prompt's ids are the concatenation of the
segments' ids, not the encoding of the joined text. Its arguments are K3's: `thinking` (default True; False is
K3's thinking off), `thinking_effort` (default `max`; `low`, `high`, `max`; None announces none), `tool_choice`,
`response_format`; `tokenize` defaults to False and `add_generation_prompt` to True, as in K3's tokenizer.
"""

from __future__ import annotations

from kimi_eagle_data.formats.kimi_k3.render import DEFAULT_EFFORT, joined_text, render_segments
from kimi_eagle_data.formats.kimi_k3.segment_ids import segment_ids
from kimi_eagle_data.prompts.tiktoken_tokenizer import PAT_STR, TiktokenKimiTokenizer, byte_symbols  # noqa: F401


class TinyKimiK3Tokenizer(TiktokenKimiTokenizer):

    def chat_segments(self, conversation, tools=None, add_generation_prompt=True, thinking=True, **kwargs):
        """The conversation as K3's segments (`(text, allow_special)` pairs), K3's keyword names."""
        kwargs.setdefault("thinking_effort", DEFAULT_EFFORT)
        if kwargs.pop("image_prompts", None) is not None:
            raise ValueError("tiny-kimi-k3 renders text only: image_prompts is not supported")
        return render_segments(conversation, tools, thinking=thinking, effort=kwargs.get("thinking_effort"),
                               add_generation_prompt=add_generation_prompt,
                               response_format=kwargs.get("response_format"), tool_choice=kwargs.get("tool_choice"))

    def apply_chat_template(self, conversation, tools=None, tokenize=False, add_generation_prompt=True,
                            thinking=True, padding=False, truncation=False, max_length=None, return_tensors=None,
                            return_dict=False, **kwargs):
        batched = bool(conversation) and isinstance(conversation[0], (list, tuple))
        chats = conversation if batched else [conversation]
        rendered = [self.chat_segments(list(c), tools, add_generation_prompt, thinking, **kwargs) for c in chats]
        if not tokenize:
            texts = [joined_text(s) for s in rendered]
            return texts if batched else texts[0]
        ids = [segment_ids(self.model, s) for s in rendered]
        if truncation and max_length is not None:
            ids = [i[:max_length] for i in ids]
        # As K3's tokenizer: a plain list for one chat; otherwise padded features, as a dict when asked for one
        # (one chat's dict then holds a batch of one).
        if not (batched or padding or return_tensors is not None or return_dict):
            return ids[0]
        batch = self.pad([{"input_ids": i, "attention_mask": [1] * len(i)} for i in ids], padding=padding,
                         max_length=max_length if padding else None, return_attention_mask=True,
                         return_tensors=return_tensors)
        if return_dict:
            return batch
        if batched or return_tensors is not None:
            return batch["input_ids"]
        return batch["input_ids"][0]
