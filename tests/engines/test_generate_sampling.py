"""Each prompt is generated with its own sampling (its mode's and its partition's mix, sources/modes.py)."""

from __future__ import annotations

from kimi_eagle_data.engines.base import SamplingParams
from kimi_eagle_data.generate.records import logprob_stats, record_sampling
from kimi_eagle_data.records import Completion, PromptRecord

RUN = SamplingParams(max_new_tokens=64, temperature=1.0, top_p=0.95, stop_token_ids=(7,))


def _record(**kw) -> PromptRecord:
    return PromptRecord("B6-0123456789abcdef", "B6", "src", "s1", [{"role": "user", "content": "hi"}], None, [1, 2],
                        **kw)


def test_a_prompt_is_requested_with_its_own_temperature_and_top_p():
    got = record_sampling(RUN, _record(mode="instant", temperature=0.6, top_p=0.9))
    assert (got.temperature, got.top_p, got.max_new_tokens, got.stop_token_ids) == (0.6, 0.9, 64, (7,))
    assert got.to_sglang()["temperature"] == 0.6


def test_a_prompt_prepared_before_modes_takes_the_runs_sampling():
    assert record_sampling(RUN, _record()) is RUN
    assert record_sampling(RUN, _record(temperature=1.0, top_p=0.95)) == RUN     # equal: one batch group


def test_an_instant_completion_has_no_reasoning_in_its_logprob_sums():
    c = Completion("B6-0123456789abcdef", [5, 6, 7], "stop", output_logprobs=[-1.0, -2.0, -0.5])
    thinking = logprob_stats(c, lambda ids: 2)
    instant = logprob_stats(c, None)          # generate_records passes no boundary for instant prompts
    assert thinking["reasoning_n"] == 2 and thinking["reasoning_sum"] == -3.0
    assert instant["reasoning_n"] == 0 and instant["reasoning_sum"] == 0.0 and instant["sum"] == -3.5
