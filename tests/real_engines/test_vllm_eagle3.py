"""vLLM 0.32.0 on CPU serving the tiny models' shipped EAGLE-3 drafters (`kimi-data serve --engine vllm --device cpu
--draft DIR`), against the same server without a drafter, on prompts `prepare` rendered from the bundled samples:

- all-greedy traffic: every completion equal with and without the drafter, and each answer's own verify steps;
- a greedy `build` against the drafting server equals one against the plain server, and `stats` shows the engine's
  tokens per verify step;
- mixed traffic (greedy requests in the same batches as sampled ones) and sampling (>= 200 samples a side at
  temperature 1: stop rate, length and first-token distributions, each a two-sample test at level ALPHA / 3):
  what they measure decides whether `generate` may sample against a CPU server that drafts, and the last test
  fails when engines/drafter.py's policy says otherwise.

Selected with `-m real_engine` (scripts/real_engines/run_tier.sh)."""

from __future__ import annotations

import concurrent.futures as cf
import json
import time
from collections import Counter
from pathlib import Path

import pytest
from scipy import stats

from kimi_eagle_data.engines.drafter import lossy_drafter
from kimi_eagle_data.formats import format_of
from kimi_eagle_data.profile import get_profile
from kimi_eagle_data.prompts.prepared_file import read_prepared
from kimi_eagle_data.prompts.tokenizer import open_tokenizer
from kimi_eagle_data.store.workdir import Workdir
from tests.helpers.cli import run_cli
from tests.real_engines.servers import CLI_TIMEOUT_S, RealServer, free_port, http, serve_cpu

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(3600)]

GENERATE = "/inference/v1/generate"
GREEDY_PROMPTS = 32
SAMPLED_PROMPTS = 100          # x 2 seeds: 200 samples a side
MIXED_RUNS = 3
NEW_TOKENS = 64
ALPHA = 0.01                   # the sampling comparison's level, split over its three tests
# What each profile measured, for the last test (the tier runs one process, tests in file order).
MEASURED: dict[str, dict] = {}


class Pair:
    """One profile's prompts, and its target served by vLLM without and with the shipped drafter."""

    def __init__(self, profile: str, root: Path):
        self.profile = get_profile(profile)
        self.root = root
        work = root / "prepared"
        run_cli("prepare", "--samples", "--profile", profile, "--workdir", str(work), timeout=CLI_TIMEOUT_S)
        wd = Workdir(work)
        room = self.profile.max_seq_len - NEW_TOKENS
        self.prompts = [r.prompt_ids for c in wd.prepared_configs() for r in read_prepared(wd, c)
                        if r.turn <= 1 and len(r.prompt_ids) <= room]
        assert len(self.prompts) >= SAMPLED_PROMPTS, len(self.prompts)
        self.plain = self._server(())
        self.draft = self._server(("--draft", self.profile.shipped_drafter))

    def _server(self, options: tuple[str, ...]) -> RealServer:
        port = free_port()
        warm = (GENERATE, {"token_ids": self.prompts[0], "sampling_params": {"max_tokens": 8, "temperature": 0}})
        return RealServer("vllm", serve_cpu("vllm", port, ("--profile", self.profile.name, *options), ()), port,
                          self.root / f"vllm-{port}.log", "/health", warm)

    def stop(self) -> None:
        self.plain.stop()
        self.draft.stop()


def send(server: RealServer, jobs: list[tuple[list[int], float]], stop: int) -> list[dict]:
    """Each (prompt, temperature) sent at once (up to 32 in flight), answered in order. Unseeded: vLLM 0.32.0's CPU
    worker dies on a seeded request whose prefill is split over steps ('CPU Generator does not use offset')."""
    def one(job):
        ids, temperature = job
        sp = {"max_tokens": NEW_TOKENS, "temperature": temperature, "top_p": 1.0, "stop_token_ids": [stop],
              "detokenize": False}
        status, body = http("POST", server.url + GENERATE, {"token_ids": ids, "sampling_params": sp})
        assert status == 200, body
        return body

    with cf.ThreadPoolExecutor(32) as pool:
        return list(pool.map(one, jobs))


@pytest.fixture(scope="module", params=["tiny-kimi", "tiny-kimi-k3"])
def pair(request, tmp_path_factory):
    p = Pair(request.param, tmp_path_factory.mktemp(request.param))
    try:
        p.plain.start()
        p.draft.start()
        yield p
    finally:
        p.stop()


def end_of_turn(pair: Pair) -> int:
    return format_of(pair.profile).bind(pair.profile, open_tokenizer(pair.profile.model_path)).tokens.end_of_turn


def test_all_greedy_outputs_are_equal_with_and_without_the_drafter(pair):
    stop = end_of_turn(pair)
    jobs = [(ids, 0.0) for ids in pair.prompts[:: max(1, len(pair.prompts) // GREEDY_PROMPTS)][:GREEDY_PROMPTS]]
    plain = [b["choices"][0]["token_ids"] for b in send(pair.plain, jobs, stop)]
    for attempt in range(2):
        answers = send(pair.draft, jobs, stop)
        drafted = [b["choices"][0]["token_ids"] for b in answers]
        assert sum(a == b for a, b in zip(plain, drafted)) == len(jobs), f"run {attempt}: outputs differ"
        spec = [b["metrics"]["speculative_decoding"] for b in answers]
        steps = sum(s["num_spec_steps"] for s in spec)
        accepted = sum(s["num_accepted_draft_tokens"] for s in spec)
        assert steps > 0 and accepted > 0, spec[:2]
    acceptance = 1 + accepted / steps
    print(f"{pair.profile.name}: {len(jobs)} greedy prompts equal with and without the drafter; "
          f"{sum(map(len, plain))} tokens; acceptance {acceptance:.3f} (1 + {accepted}/{steps})")
    MEASURED.setdefault(pair.profile.name, {})["greedy_acceptance"] = round(acceptance, 3)


def test_a_greedy_build_against_the_drafting_server_equals_one_without_it(pair, tmp_path):
    walls = {}

    def build(server: RealServer, name: str) -> Path:
        work = tmp_path / name
        t0 = time.monotonic()
        run_cli("build", "B4", "--samples", "--limit", "6", "--profile", pair.profile.name, "--engine", "vllm",
                "--server", server.url, "--temperature", "0", "--max-new-tokens", str(NEW_TOKENS), "--workdir",
                str(work), "--no-progress", timeout=CLI_TIMEOUT_S)
        walls[name] = time.monotonic() - t0
        return work

    def rows(work: Path) -> dict[str, list[int]]:
        import pyarrow.parquet as pq

        out = {}
        for f in sorted((work / "dataset" / "data" / "B4").glob("*.parquet")):
            t = pq.read_table(f, columns=["id", "input_ids"]).to_pylist()
            out.update((r["id"], r["input_ids"]) for r in t)
        return out

    plain, drafted = build(pair.plain, "plain"), build(pair.draft, "draft")
    assert rows(plain) == rows(drafted) and rows(plain)
    drafter = json.loads(run_cli("plan", "--workdir", str(drafted), "--json").stdout)["drafter"]
    assert drafter["tokens_per_verify_step"] > 1 and "num_spec_steps" in drafter["measured_by"], drafter
    assert json.loads(run_cli("plan", "--workdir", str(plain), "--json").stdout)["drafter"] is None
    assert json.loads(run_cli("stats", "--workdir", str(drafted), "--json").stdout)["drafter"] == drafter
    print(f"{pair.profile.name}: build with the drafter equals the build without; {drafter}; build wall "
          f"{walls['plain']:.1f} s without the drafter, {walls['draft']:.1f} s with it")


def test_mixed_and_sampled_traffic_measured(pair):
    """Greedy requests in the same batches as sampled ones, MIXED_RUNS times; then 200 samples a side at
    temperature 1 compared on stop rate, length and first token. Figures kept for the last test."""
    stop = end_of_turn(pair)
    greedy = [(ids, 0.0) for ids in pair.prompts[:GREEDY_PROMPTS]]
    sampled = [(ids, 1.0) for ids in pair.prompts[:SAMPLED_PROMPTS] for _ in range(2)]
    plain_greedy = [b["choices"][0]["token_ids"] for b in send(pair.plain, greedy, stop)]

    def mixed(server: RealServer) -> int:
        answers = send(server, [*greedy, *sampled[:2 * GREEDY_PROMPTS]], stop)[:len(greedy)]
        return sum(a == b["choices"][0]["token_ids"] for a, b in zip(plain_greedy, answers))

    # the control: the plain server's greedy answers in the same mixed traffic (batch composition alone)
    control = [mixed(pair.plain) for _ in range(MIXED_RUNS)]
    equal = [mixed(pair.draft) for _ in range(MIXED_RUNS)]

    a, b = ([b["choices"][0]["token_ids"] for b in send(server, sampled, stop)] for server in (pair.plain, pair.draft))
    stops = [sum(x[-1] == stop for x in side) for side in (a, b)]
    p_stop = stats.fisher_exact([[stops[0], len(a) - stops[0]], [stops[1], len(b) - stops[1]]])[1]
    p_len = stats.mannwhitneyu([len(x) for x in a], [len(x) for x in b]).pvalue
    firsts = [Counter(x[0] for x in side) for side in (a, b)]
    common = [t for t in set(firsts[0]) | set(firsts[1]) if firsts[0][t] + firsts[1][t] >= 10]
    table = [[f[t] for t in common] + [sum(f.values()) - sum(f[t] for t in common)] for f in firsts]
    table = [[x for x, keep in zip(row, map(any, zip(*table))) if keep] for row in table]
    p_first = stats.chi2_contingency(table)[1] if len(table[0]) > 1 else 1.0
    m = {"mixed_equal": equal, "mixed_equal_without_drafter": control, "of": len(greedy), "samples": len(a), "stops": stops,
         "mean_length": [round(sum(map(len, s)) / len(s), 1) for s in (a, b)],
         "p_stop": round(float(p_stop), 4), "p_length": round(float(p_len), 4), "p_first": round(float(p_first), 4)}
    print(f"{pair.profile.name}: {json.dumps(m)}")
    MEASURED.setdefault(pair.profile.name, {}).update(m)


def test_the_cpu_refusal_of_sampling_stands_on_what_was_measured():
    """generate refuses a sampling run against a CPU vLLM that drafts with EAGLE-3 (engines/drafter.py) exactly when
    some profile's mixed or sampled traffic measured a difference: a refusal stands only on a measurement."""
    assert set(MEASURED) == {"tiny-kimi", "tiny-kimi-k3"}, MEASURED
    lossy = [name for name, m in MEASURED.items()
             if min(m["mixed_equal"]) < m["of"] or min(m["p_stop"], m["p_length"], m["p_first"]) < ALPHA / 3]
    on_cpu = {"urls": ["u"], "speculative_config": {"method": "eagle3", "device": "cpu"}}
    refused = lossy_drafter("vllm", on_cpu, 1.0) is not None
    assert refused == bool(lossy), (f"measured {json.dumps(MEASURED)}: engines/drafter.py "
                                    f"{'refuses' if refused else 'allows'} sampling with a CPU drafter; change it "
                                    "and VLLM_CPU_EAGLE3_SAMPLED to what this measured")
