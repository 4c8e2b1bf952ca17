"""`kimi-data serve`: launch SGLang or vLLM for the profile's model, or serve a local model over SGLang's
protocol (registered at the end of cli/main.py)."""

from __future__ import annotations

import sys

import click

from rich.markup import escape

from kimi_eagle_data.cli.common import SERVES, UserError, console, friendly_errors, out
from kimi_eagle_data.cli.options import ProfileChoice
from kimi_eagle_data.profile import demo_profiles, get_profile
from kimi_eagle_data.settings import DEFAULT_PROFILE, PROFILE_HELP
from kimi_eagle_data.engines.drafter import SGLANG_CPU_DRAFTING, SGLANG_CPU_DRAFT_START, VLLM_CPU_EAGLE3_SAMPLED


@click.command()
@click.option("--engine", type=click.Choice(["sglang", "vllm", "local"]), default="sglang", show_default=True,
              help="sglang: launch SGLang (GPU). vllm: launch vLLM (GPU) with its token-in endpoint. local: serve any "
                   "HF model over SGLang's /generate protocol on CPU.")
@click.option("--device", type=click.Choice(["gpu", "cpu"]), default="gpu", show_default=True,
              help="sglang, vllm: cpu runs the engine's measured CPU recipe (a venv of its own, built by "
                   "install_ENGINE_cpu.sh, which ships in the package) for the tiny model: trying the pipeline on a laptop.")
@click.option("--venv", type=click.Path(file_okay=False), metavar="DIR",
              help="--device cpu: the engine's venv (default: the one its install script builds).")
@click.option("--profile", type=ProfileChoice(),
              help=f"{PROFILE_HELP} Its launch flags and tokens. [default: {DEFAULT_PROFILE}; {demo_profiles()[0]} with "
                   "--device cpu]")
@click.option("--model", help="Model path or Hub id (default: the profile's model).")
@click.option("--tokenizer", help="Tokenizer for /tokenize and `text` (local engine; default: --model).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=30000, show_default=True, type=int)
@click.option("--tp", default=8, show_default=True, type=click.IntRange(min=1),
              help="Tensor parallel GPUs (sglang, vllm; none on CPU).")
@click.option("--context-length", type=click.IntRange(min=1), help="SGLang --context-length; vLLM --max-model-len; local: as SGLang's.")
@click.option("--mem-fraction-static", type=click.FloatRange(0, 1),
              help="SGLang --mem-fraction-static (default 0.85); vLLM --gpu-memory-utilization (default vLLM's).")
@click.option("--no-metrics", is_flag=True, help="SGLang: do not pass --enable-metrics (vLLM always serves /metrics).")
@click.option("--draft", metavar="MODEL",
              help="sglang, vllm: run this EAGLE-3 drafter (path or Hub id; for Kimi-K2.5 e.g. "
                   "lightseekorg/kimi-k2.5-eagle3) for speculative decoding, with the profile's draft steps, top-k "
                   "and draft tokens. On GPUs the samples stay the target's (each token accepted by rejection "
                   "sampling against the target's distribution). With --device cpu: vLLM only, and greedy runs only "
                   "(it keeps greedy outputs there, not samples; SGLang cannot start with one on CPU).")
@click.option("--extra", "extra", multiple=True, metavar="ARG",
              help="Extra argument passed to SGLang or vLLM (repeatable).")
@click.option("--health-timeout", default=1800.0, show_default=True, help="Seconds to wait for the server to load.")
@click.option("--dry-run", is_flag=True,
              help="Print the command a launch would run and exit: SGLang's (or, with --engine vllm, vLLM's; "
                   "--device cpu: also when the engine's venv is not installed yet, with the step that installs "
                   "it), or with --engine local this command with every value resolved.")
@click.option("--max-batch", default=16, show_default=True, help="local: requests decoded together.")
@friendly_errors(interrupted=SERVES)
def serve(engine, device, venv, profile, model, tokenizer, host, port, tp, context_length, mem_fraction_static, no_metrics,
          draft, extra, health_timeout, dry_run, max_batch):
    """Launch SGLang or vLLM for Kimi-K2.5 (or serve a local model over SGLang's protocol).

    \b
    Production, one 8-GPU node:
      kimi-data serve --tp 8 --context-length 32768
      kimi-data build --engine sglang --server http://127.0.0.1:30000 --workdir run1
    The same with vLLM:
      kimi-data serve --engine vllm --tp 8 --context-length 32768
      kimi-data build --engine vllm --server http://127.0.0.1:30000 --workdir run1
    The real engines on CPU, serving the tiny model (the tier's recipe; the first run without its venv prints
    the one command that installs it):
      kimi-data serve --engine sglang --device cpu
      kimi-data build B4 --samples --profile tiny-kimi --engine sglang --server http://127.0.0.1:30000 --workdir run1
    With a drafter (speculative decoding; the data is the same target's samples):
      kimi-data serve --tp 8 --context-length 32768 --draft lightseekorg/kimi-k2.5-eagle3
    Any HF model on this CPU, over SGLang's protocol (the demo's tiny model: --profile tiny-kimi):
      kimi-data serve --engine local --profile tiny-kimi --port 30001
    """
    import shlex

    # lazy: keeps urllib.request, http.client and ssl (the launcher's health checks) out of every CLI start
    from kimi_eagle_data.engines.serve import SGLangLaunch, VLLMLaunch, locate_cpu_venv, run_server

    cpu = device == "cpu" and engine in ("sglang", "vllm")
    if venv and not cpu:
        raise click.BadParameter("names the venv of an engine's CPU recipe: use it with --device cpu and --engine "
                                 "sglang or vllm", param_hint="--venv")
    if draft and engine == "local":
        raise click.BadParameter("a drafter runs in SGLang or vLLM: use it with --engine sglang or vllm",
                                 param_hint="--draft")
    if draft and cpu and engine == "sglang":
        raise UserError(f"--draft with --engine sglang --device cpu: {SGLANG_CPU_DRAFTING}, so the samples would "
                        f"not be the target's; and {SGLANG_CPU_DRAFT_START}; serve it on GPUs, or without --draft")
    if draft and cpu:
        # stderr: a dry run's stdout stays the command alone
        console.print(f"[yellow]note:[/] vLLM on CPU keeps greedy outputs with an EAGLE-3 drafter, not samples "
                      f"({escape(VLLM_CPU_EAGLE3_SAMPLED)}): `generate` refuses a run that samples against it",
                      highlight=False, soft_wrap=True)
    prof = get_profile(profile or (demo_profiles()[0] if cpu else DEFAULT_PROFILE))
    model = model or prof.model_path
    if engine == "local" and dry_run:
        # The local server runs in this process: what would run is this command, its defaults resolved.
        shown = ["kimi-data", "serve", "--engine", "local", "--model", model, "--tokenizer", tokenizer or model,
                 "--host", host, "--port", str(port), "--max-batch", str(max_batch),
                 *(["--context-length", str(context_length)] if context_length else [])]
        out.print(shlex.join(shown), highlight=False, soft_wrap=True)
        return
    if engine in ("sglang", "vllm"):
        engine_venv, missing = locate_cpu_venv(engine, venv) if cpu else (None, None)
        if missing and not dry_run:
            raise UserError(missing)
        if engine == "vllm":
            launch = VLLMLaunch(model=model, tp=tp, host=host, port=port, max_model_len=context_length,
                                gpu_memory_utilization=mem_fraction_static, extra=list(extra), venv=engine_venv,
                                draft=draft)
        else:
            # On CPU the KV cache is bounded by the recipe's --max-total-tokens, not a share of GPU memory.
            mem = mem_fraction_static if cpu or mem_fraction_static is not None else 0.85
            launch = SGLangLaunch(model=model, tp=tp, host=host, port=port, context_length=context_length,
                                  mem_fraction_static=mem, metrics=not no_metrics, extra=list(extra), venv=engine_venv,
                                  draft=draft)
        if dry_run:
            out.print(shlex.join(launch.shown(prof)), highlight=False, soft_wrap=True)
            if missing:
                # stderr: stdout stays the command alone, for a script to read
                console.print(f"[yellow]note:[/] {escape(missing)}; a launch needs it, a dry run does not",
                              highlight=False, soft_wrap=True)
            return
        try:
            sys.exit(run_server(launch, prof, health_timeout_s=health_timeout, echo=out.print))
        except (RuntimeError, TimeoutError) as e:
            raise UserError(f"{launch.display_name} did not start: {e}") from e
    # lazy: keeps aiohttp (the stand-in server) out of every CLI start
    from kimi_eagle_data.engines.protocol_server import serve_model

    serve_model(model, host=host, port=port, tokenizer=tokenizer, max_batch=max_batch, context_length=context_length,
                print_url=lambda m: out.print(m, highlight=False))
