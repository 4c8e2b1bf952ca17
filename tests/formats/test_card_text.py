"""What the dataset card says of a format (`ChatFormat.card_text`) is what the format renders: the generation prompt
each mode's rules paragraph names ends that mode's rendered prompt, and the card's own prompts are those endings."""

from __future__ import annotations

import re

import pytest

from kimi_eagle_data.formats import format_of
from kimi_eagle_data.model_profile import INSTANT, THINKING
from kimi_eagle_data.profile import get_profile
from kimi_eagle_data.prompts.tokenizer import load_tokenizer

CHAT = [{"role": "user", "content": "What is 2 + 2?"}]


@pytest.mark.parametrize("name", ["tiny-kimi", "tiny-kimi-k3"])
def test_the_rules_paragraph_names_the_prompt_ends_the_format_renders(name):
    profile = get_profile(name)
    chat_format = format_of(profile)
    tok = load_tokenizer(profile.model_path, chat_format)
    text = chat_format.card_text()
    for mode, card_prompt in ((THINKING, text.thinking_prompt), (INSTANT, text.instant_prompt)):
        rendered = chat_format.bind(profile, tok).render_text(CHAT, None, mode)
        named = re.search(rf"{mode}: (?:last token )?`([^`]+)`", text.rules)
        assert named, (mode, text.rules)
        assert rendered.endswith(named[1]), (mode, named[1], rendered[-80:])
        assert rendered.endswith(card_prompt), (mode, card_prompt, rendered[-80:])
    assert text.reasoning_end in text.rules
