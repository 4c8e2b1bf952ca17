"""The engine a run's settings name (`--engine local|sglang|vllm`), checked against what it serves: the model and
its tokens (`check_served_model`) and a context length that holds every prompt prepare accepts."""

from __future__ import annotations

from kimi_eagle_data.engines.base import Engine, EngineError
from kimi_eagle_data.engines.http_client import RetryPolicy
from kimi_eagle_data.engines.local import LocalEngine, model_positions
from kimi_eagle_data.engines.sglang import SGLangEngine
from kimi_eagle_data.engines.vllm import VLLMEngine
from kimi_eagle_data.settings import RunSettings


def make_engine(settings: RunSettings, tokens, *, vocab_size: int, max_seq_len: int) -> Engine:
    """`tokens`: the run's format's tokens (`chat_format.FormatTokens`); `vocab_size`: token ids a completion may
    hold are below it."""
    if settings.engine == "local":
        engine = LocalEngine(settings.model_path, batch_size=settings.batch_size)
        check_model_positions(engine.context_length, max_seq_len, settings.model_path)
        return engine
    if settings.engine in ("sglang", "vllm"):
        ServerEngine = SGLangEngine if settings.engine == "sglang" else VLLMEngine
        engine = ServerEngine(
            settings.servers, concurrency=settings.concurrency, health_timeout_s=settings.health_timeout,
            retry=RetryPolicy(max_attempts=settings.max_attempts, backoff_s=settings.retry_backoff,
                              request_timeout_s=settings.request_timeout),
            allow_old_server=settings.allow_old_server, vocab_size=vocab_size)
        engine.check_served_model(settings.model_path, tokens)
        ctx = engine.info().context_length
        need = max_seq_len + engine.context_margin     # a prompt prepare accepted must fit
        if ctx and ctx < need:
            raise EngineError(f"the server's context length {ctx} is below the {need} tokens max_seq_len "
                              f"{max_seq_len} needs on {engine.name}; relaunch with {engine.context_flag} "
                              f"{need} or more, or lower --max-seq-len")
        return engine
    raise EngineError(f"unknown engine {settings.engine!r}; use local, sglang or vllm")


def check_model_positions(positions: int | None, max_seq_len: int, model: str) -> None:
    """The local engine decodes within its model's positions, as a server within its context: a max_seq_len
    beyond them would let prepare accept prompts the model cannot hold, each answered with no token."""
    most = (positions or 0) - LocalEngine.context_margin
    if positions and max_seq_len > most:
        raise EngineError(f"the local engine's model {model} holds {positions:,} positions (max_position_embeddings), "
                          f"below the {max_seq_len + LocalEngine.context_margin:,} that max_seq_len {max_seq_len:,} "
                          f"needs; use --max-seq-len {most:,} or less (in a new workdir once run.json binds it), or "
                          "a server engine whose context holds it")


def check_local_model(settings: RunSettings, max_seq_len: int) -> None:
    """Before anything is written (a first build's workdir, generate's checkpoint): with the local engine, the
    model's positions checked from its config alone, without loading it."""
    if settings.engine == "local":
        check_model_positions(model_positions(settings.model_path), max_seq_len, settings.model_path)


def run_engine(ctx) -> Engine:
    """The engine of a run's context (run_context.RunContext): the one it connected to first, or a new one."""
    return ctx.connected.take() or make_engine(ctx.settings, ctx.tokens, vocab_size=ctx.vocab_size(),
                                               max_seq_len=ctx.max_seq_len)
