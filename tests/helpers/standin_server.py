"""The tests' SGLang-protocol stand-in: `kimi-data serve --engine local` (the same server) with the knobs only tests
need, fault injection, SGLang's --skip-tokenizer-init and a record of what clients sent. Run from the repository's
root:

    python -m tests.helpers.standin_server --port 30001 --delay 1 --max-batch 1

It serves the embedded tiny model unless --model names another."""

from __future__ import annotations

import json

import click

from kimi_eagle_data.cli.common import friendly_errors
from kimi_eagle_data.engines.protocol_server import BAD_OUTPUT_MODES, Faults, serve_model
from kimi_eagle_data.profile import TINY_MODEL_DIR


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
                faults=faults, skip_tokenizer_init=skip_tokenizer_init, record_path=record_requests,
                print_url=lambda m: print(m, flush=True))


if __name__ == "__main__":
    main()
