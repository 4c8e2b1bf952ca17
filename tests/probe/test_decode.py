"""The in-process speculative decoder's invariants, on the embedded tiny target (no speculators needed): its output
is plain greedy decoding's token for token whatever the drafter proposes; a drafter proposing the target's own next
tokens reaches k+1 tokens per verify step; a random drafter stays near 1."""

from __future__ import annotations

import random

import pytest
import torch

from kimi_eagle_data.probe.decode import DraftState, Target, greedy, speculative

K = 4


@pytest.fixture(scope="module")
def target():
    from transformers import AutoModelForCausalLM

    from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR

    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(str(TINY_MODEL_DIR), dtype=torch.float32).eval()
    return Target(model, aux_layers=(1, 2, 3))


def prompts(n: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(1792) for _ in range(rng.randrange(5, 40))] for _ in range(n)]


class Oracle:
    """Proposes the target's own greedy continuation (known from a plain greedy run)."""

    def __init__(self, prompt: list[int], reference: list[int]):
        self.prompt, self.reference = prompt, reference

    def propose(self, state: DraftState, k: int) -> list[int]:
        assert state.aux.shape[0] == len(state.ids) - 1       # hidden states of all committed ids but the last
        done = len(state.ids) - len(self.prompt)
        return self.reference[done:done + k]


class RandomDrafter:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def propose(self, state: DraftState, k: int) -> list[int]:
        return [self.rng.randrange(2048) for _ in range(k)]


class Wrong:
    """Proposes the target's token at the first draft, then garbage: partial acceptance on every step."""

    def __init__(self, prompt, reference):
        self.oracle = Oracle(prompt, reference)

    def propose(self, state, k):
        right = self.oracle.propose(state, 1)
        return right + [(t + 1) % 2048 for t in self.oracle.propose(state, k)[1:]]


def test_output_is_plain_greedy_token_for_token(target):
    for i, p in enumerate(prompts(6)):
        ref = greedy(target, p, 48)
        for drafter in (Oracle(p, ref), RandomDrafter(i), Wrong(p, ref)):
            got = speculative(target, drafter, p, K, 48)
            assert got.output == ref, type(drafter).__name__
            assert got.tokens == len(ref) - 1          # every token after the prefill's came from a verify step


def test_the_targets_own_tokens_reach_k_plus_one(target):
    tokens = steps = 0
    for p in prompts(6, seed=1):
        max_new = 1 + 8 * (K + 1)                      # the prefill's token, then eight full verify steps
        ref = greedy(target, p, max_new)
        got = speculative(target, Oracle(p, ref), p, K, max_new)
        assert got.step_tokens == [d + 1 for d in got.step_drafted]      # every draft accepted
        tokens, steps = tokens + got.tokens, steps + got.steps
    assert tokens / steps == K + 1


def test_a_random_drafter_stays_near_one(target):
    tokens = steps = 0
    for i, p in enumerate(prompts(6, seed=2)):
        got = speculative(target, RandomDrafter(i), p, K, 40)
        tokens, steps = tokens + got.tokens, steps + got.steps
    assert 1.0 <= tokens / steps < 1.1


def test_a_stop_token_ends_the_output_as_in_greedy(target):
    p = prompts(1, seed=3)[0]
    ref = greedy(target, p, 40)
    stop = ref[5]
    cut = ref[:ref.index(stop) + 1]
    assert greedy(target, p, 40, stop_ids=(stop,)) == cut
    assert speculative(target, Oracle(p, ref), p, K, 40, stop_ids=(stop,)).output == cut
