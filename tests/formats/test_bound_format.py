"""A format bound once to a profile and tokenizer (`ChatFormat.bind`): the registry holds the unbound object, a bound
copy answers every member without being handed either, the formats' tokens have one shape, and a minimal format
writes the core only (tests/formats/toy_format.py)."""

from __future__ import annotations

import pytest

from kimi_eagle_data.chat_format import ChatFormat, FormatNotBound, FormatTokens
from kimi_eagle_data.formats import format_of, register_format
from kimi_eagle_data.formats.kimi_k2.format import KIMI_K2_FORMAT
from kimi_eagle_data.model_profile import INSTANT, THINKING
from kimi_eagle_data.profile import get_profile
from kimi_eagle_data.prompts.tokenizer import open_tokenizer
from tests.formats.toy_format import TOY_FORMAT, TOY_PROFILE, ToyFormat

CHAT = [{"role": "user", "content": "What is 2 + 2?"}]
# What a format must write: everything else has a default in ChatFormat.
CORE = {"name", "tool_encoder_version", "reason_descriptions", "card_text", "resolve_tokens", "render_prompt",
        "render_text", "validator", "reasoning_length", "render_answer", "assistant_message"}


@pytest.fixture(scope="module")
def bound():
    out = {}
    for name in ("tiny-kimi", "tiny-kimi-k3"):
        profile = get_profile(name)
        out[name] = format_of(profile).bind(profile, open_tokenizer(profile.model_path))
    return out


def test_the_registry_holds_the_unbound_format_and_bind_gives_a_bound_copy(bound):
    fmt = bound["tiny-kimi"]
    assert format_of(get_profile("tiny-kimi")) is KIMI_K2_FORMAT and not KIMI_K2_FORMAT.bound
    assert fmt is not KIMI_K2_FORMAT and fmt.bound and fmt.profile is get_profile("tiny-kimi")
    assert fmt.bind(fmt.profile, fmt.tokenizer) is fmt            # bound to those already: itself
    with pytest.raises(FormatNotBound, match="'kimi-k2' is not bound to a profile and tokenizer; call its bind"):
        KIMI_K2_FORMAT.render_prompt(CHAT, None)
    with pytest.raises(FormatNotBound):
        KIMI_K2_FORMAT.tokens                                     # noqa: B018 - the property raises


def test_template_options_keep_the_binding(bound):
    fmt = bound["tiny-kimi"]
    on = fmt.with_template_options({"preserve_thinking": True})
    assert on.bound and on.tokens is fmt.tokens and on.template_options == {"preserve_thinking": True}
    assert fmt.template_options == {} and on.render_prompt(CHAT, None) == fmt.render_prompt(CHAT, None)


@pytest.mark.parametrize("name", ["tiny-kimi", "tiny-kimi-k3"])
def test_every_format_s_tokens_have_one_shape(bound, name):
    fmt = bound[name]
    tokens = fmt.tokens
    assert type(tokens) is FormatTokens and tokens.end_of_turn == tokens.roles["end_of_turn"]
    assert tokens.token_name(tokens.end_of_turn) in tokens.ids
    for mode in (THINKING, INSTANT):
        ends = fmt.generation_prompt_ids(mode)
        assert ends == list(tokens.generation_prompts[mode]) and ends
        assert fmt.render_prompt(CHAT, None, mode)[-len(ends):] == ends


def test_the_minimal_format_writes_the_core_only():
    written = {k for k in vars(ToyFormat) if not k.startswith("_")}
    assert written == CORE, sorted(written ^ CORE)
    tok = open_tokenizer(TOY_PROFILE.model_path)
    toy = TOY_FORMAT.bind(TOY_PROFILE, tok)
    # The optional members answer with their defaults.
    assert (toy.special_text(), toy.declared_tools([1, 2]), toy.fingerprint(), toy.history_notes(CHAT)) == \
        (None, None, {}, set())
    assert toy.efforts == () and toy.default_effort is None and toy.check_renderer([], "here") is None
    with pytest.raises(NotImplementedError, match="'toy-chat' has no segmenter: `inspect` cannot show its rows"):
        toy.segmenter()


def test_the_registry_refuses_what_is_no_format_and_a_bound_one(bound):
    class Half(ChatFormat):
        name = "half"
    with pytest.raises(TypeError, match="Can't instantiate abstract class Half"):
        Half()
    with pytest.raises(TypeError, match="is no kimi_eagle_data.chat_format.ChatFormat"):
        register_format(object())
    with pytest.raises(TypeError, match="bound to a profile and tokenizer: register it unbound"):
        register_format(bound["tiny-kimi"])

    class Unversioned(ToyFormat):
        name, tool_encoder_version = "unversioned", ""
    with pytest.raises(TypeError, match="names no `name` or no `tool_encoder_version`"):
        register_format(Unversioned())
