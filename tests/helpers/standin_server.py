"""The tests' SGLang-protocol stand-in: `kimi-data serve --engine local` (the same server, engines/protocol_server.py)
with the knobs only tests need: fault injection (a subclass, `FaultyServer`, through the server's hooks), SGLang's
--skip-tokenizer-init and a record of what clients sent. Run from the repository's root:

    python -m tests.helpers.standin_server --port 30001 --delay 1 --max-batch 1

It serves the embedded tiny model unless --model names another."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass
from typing import Any

import click
import orjson
from aiohttp import web

from kimi_eagle_data.cli.common import friendly_errors
from kimi_eagle_data.engines.protocol_server import ProtocolServer, serve_model
from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR


@dataclass
class Faults:
    error_rate: float = 0.0        # share of /generate answered with HTTP 500
    drop_rate: float = 0.0         # share of /generate whose connection is closed without an answer
    delay_s: float = 0.0           # added latency per /generate, spent as a running request (abortable by rid)
    # Every /generate answer malformed, in these ways (BAD_OUTPUT_MODES) taken in turn, answer by answer.
    bad_output: tuple[str, ...] = ()
    # The first this many rids are taken as still running from a client killed mid-request: answered as SGLang
    # answers a rid it is running (HTTP 400, "Duplicate request ID detected") until `/abort_request` aborts them.
    stale_rids: int = 0
    seed: int = 0
    # Launch arguments /server_info reports besides the engine's own, as an SGLang launched with them would (a
    # drafter the stand-in does not run: what a client makes of one).
    reported_args: tuple[tuple[str, Any], ...] = ()


# Malformed `/generate` answers a broken server could send; the client must refuse each one.
BAD_OUTPUT_MODES = {
    "non_int": "one output id is the string \"x\"",
    "bool": "one output id is `true`",
    "out_of_vocab": "one output id equals the vocabulary size",
    "huge_int": "one output id is 2**70 (beyond int64)",
    "too_long": "max_new_tokens + 1 output ids",
    "meta_mismatch": "meta_info.completion_tokens one more than len(output_ids)",
}


def corrupt(answer: dict[str, Any], mode: str, *, max_new_tokens: int, vocab_size: int) -> None:
    """Make one answer malformed in place (`mode` from BAD_OUTPUT_MODES)."""
    ids, meta = answer["output_ids"], answer["meta_info"]
    first = ids[0] if ids else 0
    if mode == "non_int":
        ids[:1] = ["x"]
    elif mode == "bool":
        ids[:1] = [True]
    elif mode == "out_of_vocab":
        ids[:1] = [vocab_size]
    elif mode == "huge_int":
        ids[:1] = [2 ** 70]
    elif mode == "too_long":
        ids[:] = (ids + [first] * (max_new_tokens + 1))[:max_new_tokens + 1]
    elif mode == "meta_mismatch":
        meta["completion_tokens"] = len(ids) + 1
        return
    else:
        raise ValueError(f"unknown bad_output mode {mode!r}; known: {', '.join(BAD_OUTPUT_MODES)}")
    meta["completion_tokens"] = len(ids)


class FaultyServer(ProtocolServer):
    """The shipped server with `faults` injected, and every /generate body appended to `record_path` (one JSON
    line each: tests check what a client sent)."""

    def __init__(self, *args, faults: Faults | None = None, record_path: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.faults = faults or Faults()
        self.rng = random.Random(self.faults.seed)
        self.record_path = record_path
        self.bad_answers = 0           # answers malformed so far (Faults.bad_output)
        self.stale: set[str] = set()   # rids taken as still running from an earlier client (Faults.stale_rids)
        self.stale_taken = 0

    def before_generate(self, request: web.Request) -> web.StreamResponse | None:
        f = self.faults
        if f.drop_rate and self.rng.random() < f.drop_rate:
            request.transport.close()     # the client sees a dropped connection
            raise web.HTTPInternalServerError()
        if f.error_rate and self.rng.random() < f.error_rate:
            return web.json_response({"error": {"message": "injected fault"}}, status=500)
        return None

    def received(self, raw: bytes) -> None:
        if self.record_path:
            with open(self.record_path, "ab") as record:
                record.write(raw.replace(b"\n", b" ") + b"\n")

    def still_running(self, rid: str | None) -> bool:
        if rid and self.stale_taken < self.faults.stale_rids:
            self.stale.add(rid)
            self.stale_taken += 1
        return rid in self.stale or super().still_running(rid)

    def aborting(self, rid: str, abort_all: bool) -> None:
        self.stale = {r for r in self.stale if not (abort_all or r.startswith(rid))}

    async def before_work(self) -> None:
        if self.faults.delay_s:
            await asyncio.sleep(self.faults.delay_s)

    def answering(self, answer: dict[str, Any], max_new_tokens: int) -> None:
        modes = self.faults.bad_output
        if modes:
            vocab = len(self.tokenizer) if self.tokenizer is not None else 1 << 31
            mode = modes[self.bad_answers % len(modes)]
            self.bad_answers += 1
            corrupt(answer, mode, max_new_tokens=max_new_tokens, vocab_size=vocab)

    def answer_response(self, body: Any) -> web.Response:
        try:
            data = orjson.dumps(body)
        except TypeError:          # an integer beyond 64 bits (huge_int), which orjson refuses
            data = json.dumps(body).encode()
        return web.Response(body=data, content_type="application/json")

    def more_server_info(self) -> dict[str, Any]:
        return {"bad_answers": self.bad_answers, **dict(self.faults.reported_args)}


@click.command()
@click.option("--model", default=str(TINY_MODEL_DIR), show_default=True, help="Model path or Hub id.")
@click.option("--tokenizer", help="Tokenizer for /tokenize and `text` (default: --model).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=30000, show_default=True, type=int)
@click.option("--max-batch", default=16, show_default=True, help="Requests decoded together.")
@click.option("--context-length", type=click.IntRange(min=1),
              help="As SGLang's: reported in /server_info and bounding every request.")
@click.option("--error-rate", default=0.0, type=click.FloatRange(0, 1), help="Share of /generate answered 500.")
@click.option("--drop-rate", default=0.0, type=click.FloatRange(0, 1),
              help="Share of /generate whose connection is dropped.")
@click.option("--delay", default=0.0, type=click.FloatRange(min=0),
              help="Seconds added to each /generate, spent as a running request (abortable by rid).")
@click.option("--fault-seed", default=0, type=int, help="Seed of the fault injection.")
@click.option("--bad-output", type=click.Choice(list(BAD_OUTPUT_MODES)), multiple=True,
              help="Answer every /generate malformed this way (tests the client's response checks); repeated: the "
                   "ways in turn, answer by answer.")
@click.option("--stale-rids", default=0, type=click.IntRange(min=0), metavar="N",
              help="Take the first N request ids as still running from a killed client (HTTP 400 \"Duplicate "
                   "request ID detected\", as SGLang) until /abort_request aborts them.")
@click.option("--skip-tokenizer-init", is_flag=True,
              help="As SGLang's flag: token ids only (answers carry no `text`, /tokenize fails).")
@click.option("--record-requests", type=click.Path(dir_okay=False), metavar="FILE",
              help="Append every /generate body received to FILE, one JSON line each.")
@click.option("--report-arg", "report_args", multiple=True, metavar="KEY=JSON",
              help="Report this launch argument in /server_info, as SGLang launched with it would (e.g. "
                   "speculative_algorithm='\"EAGLE3\"': a drafter it does not run); repeatable.")
@friendly_errors
def main(model, tokenizer, host, port, max_batch, context_length, error_rate, drop_rate, delay, fault_seed, bad_output,
         stale_rids, skip_tokenizer_init, record_requests, report_args):
    """Serve a model over SGLang's protocol with fault injection (tests only)."""
    reported = tuple((k, json.loads(v)) for k, v in (a.split("=", 1) for a in report_args))
    faults = Faults(error_rate=error_rate, drop_rate=drop_rate, delay_s=delay, seed=fault_seed,
                    bad_output=tuple(bad_output), stale_rids=stale_rids, reported_args=reported)
    serve_model(model, host=host, port=port, tokenizer=tokenizer, max_batch=max_batch, context_length=context_length,
                skip_tokenizer_init=skip_tokenizer_init, server_class=FaultyServer, faults=faults,
                record_path=record_requests,
                print_url=lambda m: print(m, flush=True))


if __name__ == "__main__":
    main()
