"""The local engine: any HF causal LM through transformers, in-process, on CPU (or one GPU).

It mirrors SGLang's observable behaviour where the data contract depends on it:
- a completion that stops on a stop token ends with that token (SGLang >= 0.5.5 keeps it in
  `output_ids`);
- `max_new_tokens` is clipped to `context_length - prompt_len - 2` (SGLang's scheduler: `max_req_len
  - input_len - 1` with `max_req_len = context_len - 1`), and a `length` finish reports that value.
Requests are grouped by sampling parameters, sorted by length to limit padding, and decoded in
batches. Each request samples from a random generator of its own, seeded from its id and seed (`sample_seed`),
so its completion does not depend on the batch it lands in: a resumed run, a pilot followed by the full run, or
another --batch-size gives every sample the tokens an uninterrupted run gives it.

Log-probs, when asked (`return_logprob`, and `score`), are log_softmax of the raw logits in float32:
what SGLang reports for prefill tokens, and for sampled tokens at temperature 1 (it scales by the
temperature before the softmax and ignores top-p there).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from itertools import groupby
from typing import Iterable, Iterator

from kimi_eagle_data.records import Completion, RequestFailure
from kimi_eagle_data.engines.base import Engine, EngineError, EngineInfo, GenerationRequest, ScoreRequest, ScoreResult


def model_positions(model_path: str) -> int | None:
    """The positions a model holds (its config's max_position_embeddings), read without loading its weights;
    None: its config does not say, or cannot be read here (loading the model then says why)."""
    try:
        from transformers import AutoConfig

        cfg = AutoConfig.from_pretrained(model_path)
    except (ImportError, OSError, ValueError):
        return None
    return int(getattr(cfg, "max_position_embeddings", 0) or 0) or None


class LocalEngine(Engine):
    name = "local"
    # effective_max_new_tokens keeps 2 positions free, as SGLang does: a prompt of max_seq_len tokens needs
    # max_seq_len + 2 positions.
    context_margin = 2

    def __init__(self, model_path: str, *, batch_size: int = 16, device: str | None = None,
                 dtype: str = "float32"):
        try:
            import torch
            import transformers
            from transformers import AutoModelForCausalLM
        except ImportError as e:  # pragma: no cover - depends on the install
            raise EngineError(
                f"the local engine needs torch and transformers ({e}); install with "
                "`pip install torch==2.13.0` (CPU wheel) or the [local] extra"
            ) from e
        self._torch = torch
        self._stop = threading.Event()     # stop(): the batch being decoded ends at its next token
        transformers.logging.disable_progress_bar()   # our own progress bar is the one that matters
        self.model_path = str(model_path)
        self.batch_size = batch_size
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if self.device == "cpu" and "OMP_NUM_THREADS" not in os.environ:
            # One intra-op thread: a small model gains nothing from more, and OpenMP's spin-waiting threads
            # collapse when the cores are shared (tiny model, batch 16 on 2 busy cores: 560 tok/s with one
            # thread, 33 with two). OMP_NUM_THREADS overrides.
            torch.set_num_threads(1)
        try:
            self.model = AutoModelForCausalLM.from_pretrained(
                self.model_path, dtype=getattr(torch, dtype)).to(self.device)
        except (OSError, ValueError) as e:
            raise EngineError(f"cannot load model {self.model_path!r}: {e}") from e
        self.model.eval()
        cfg = self.model.config
        self.context_length = int(getattr(cfg, "max_position_embeddings", 0) or 0) or None
        self.pad_id = cfg.pad_token_id if cfg.pad_token_id is not None else 0
        # The ids a server for this model stops on besides a request's stop_token_ids (SGLang reads them from
        # the generation config, else the model config); this engine itself stops only on stop_token_ids.
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        eos = cfg.eos_token_id if eos is None else eos
        self.eos_token_ids = tuple(eos if isinstance(eos, (list, tuple)) else () if eos is None else (eos,))

    def info(self) -> EngineInfo:
        import torch
        import transformers

        return EngineInfo(
            engine=self.name,
            version=f"transformers {transformers.__version__}, torch {torch.__version__}",
            model_path=self.model_path,
            context_length=self.context_length,
            server_args={"batch_size": self.batch_size, "device": self.device,
                         "dtype": str(self.model.dtype).removeprefix("torch.")},
        )

    def stop(self) -> None:
        """End the batch being decoded at its next token, and every later one at once (its rows cut short: only
        for a server shutting down, whose answers are no longer sent)."""
        self._stop.set()

    def effective_max_new_tokens(self, prompt_len: int, max_new_tokens: int) -> int:
        if self.context_length is None:
            return max_new_tokens
        return max(0, min(max_new_tokens, self.context_length - prompt_len - self.context_margin))

    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Completion]:
        reqs = sorted(requests, key=lambda r: (repr(r.sampling), r.return_logprob, len(r.input_ids), r.id))
        for _, group in groupby(reqs, key=lambda r: (r.sampling, r.return_logprob)):
            group = list(group)
            for start in range(0, len(group), self.batch_size):
                yield from self._generate_batch(group[start:start + self.batch_size])

    def _generate_batch(self, batch: list[GenerationRequest]) -> list[Completion]:
        torch = self._torch
        t0 = time.perf_counter()
        sp = batch[0].sampling
        limits = [self.effective_max_new_tokens(len(r.input_ids), sp.max_new_tokens) for r in batch]
        width = max(len(r.input_ids) for r in batch)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, r in enumerate(batch):  # left padding: generation continues from the last column
            ids[i, width - len(r.input_ids):] = torch.tensor(r.input_ids, dtype=torch.long)
            mask[i, width - len(r.input_ids):] = 1
        want_lp = batch[0].return_logprob
        # Sampling is the per-request sampler's (RowSampler); generate itself then only takes its choice.
        sampler = ([RowSampler([sample_seed(r) for r in batch], sp.temperature, sp.top_p, self.device)]
                   if sp.temperature > 0 else [])
        try:
            with torch.no_grad():
                out = self.model.generate(
                    input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                    max_new_tokens=max(max(limits), 1), do_sample=False, temperature=None, top_p=None, top_k=None,
                    logits_processor=sampler, eos_token_id=list(sp.stop_token_ids), pad_token_id=self.pad_id,
                    return_dict_in_generate=True, output_logits=want_lp,
                    stopping_criteria=[_StopEvent(self._stop, torch)],
                )
        except RuntimeError as e:
            raise EngineError(f"local generation failed: {e}") from e
        seqs = out.sequences
        new = seqs[:, width:].tolist()
        lp_rows = top_rows = top_lp_rows = None
        if want_lp:   # the raw logits of each step (not the temperature/top-p warped scores)
            logits = torch.stack(out.logits, dim=1).float()              # [batch, steps, vocab]
            logp = torch.log_softmax(logits, dim=-1)
            chosen = seqs[:, width:width + logits.shape[1]].to(logp.device)
            lp_rows = logp.gather(-1, chosen.unsqueeze(-1)).squeeze(-1).tolist()
            top_rows = logits.argmax(dim=-1).tolist()
            top_lp_rows = logp.max(dim=-1).values.tolist()
        elapsed = time.perf_counter() - t0
        stops = set(sp.stop_token_ids)
        results = []
        for b, (r, limit, row) in enumerate(zip(batch, limits, new)):
            output: list[int] = []
            finish = {"type": "length", "length": limit}
            for tok in row[:limit]:
                output.append(tok)
                if tok in stops:
                    finish = {"type": "stop", "matched": tok}
                    break
            results.append(Completion(
                id=r.id, output_ids=output, finish_reason=finish["type"], finish_detail=finish,
                prompt_tokens=len(r.input_ids), completion_tokens=len(output), cached_tokens=0,
                engine=self.name, latency_s=elapsed,
                output_logprobs=lp_rows[b][:len(output)] if lp_rows is not None else None,
                output_top1_ids=top_rows[b][:len(output)] if top_rows is not None else None,
                output_top1_logprobs=top_lp_rows[b][:len(output)] if top_lp_rows is not None else None,
            ))
        return results

    # -- prefill-only scoring -------------------------------------------------------------------
    def score(self, requests: Iterable[ScoreRequest]) -> Iterator[ScoreResult | RequestFailure]:
        """log_softmax of the logits at positions start-1 .. end-2, gathered at the next token: the
        log-prob of each of input_ids[start:] given everything before it. Batched, right-padded (a causal
        model's positions before the padding do not see it), sorted by length."""
        reqs = sorted(requests, key=lambda r: (len(r.input_ids), r.id))
        for i in range(0, len(reqs), self.batch_size):
            yield from self._score_batch(reqs[i:i + self.batch_size])

    def _score_batch(self, batch: list[ScoreRequest]) -> list[ScoreResult | RequestFailure]:
        torch = self._torch
        bad = [r for r in batch if not 1 <= r.start <= len(r.input_ids)
               or (self.context_length and len(r.input_ids) > self.context_length)]
        results: list[ScoreResult | RequestFailure] = [
            RequestFailure(r.id, "bad_request", f"cannot score {len(r.input_ids)} ids from position {r.start} "
                                                f"(context {self.context_length})")
            for r in bad]
        batch = [r for r in batch if r not in bad]
        if not batch:
            return results
        width = max(len(r.input_ids) for r in batch)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, r in enumerate(batch):
            ids[i, :len(r.input_ids)] = torch.tensor(r.input_ids, dtype=torch.long)
            mask[i, :len(r.input_ids)] = 1
        try:
            with torch.no_grad():
                logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
        except RuntimeError as e:
            raise EngineError(f"local scoring failed: {e}") from e
        for i, r in enumerate(batch):
            n = len(r.input_ids)
            rows = logits[i, r.start - 1:n].float()      # predicts positions start..n-1, then the next token
            logp = torch.log_softmax(rows, dim=-1)
            target = ids[i, r.start:n].to(logp.device)
            top_lp, top_id = logp.max(dim=-1)
            results.append(ScoreResult(r.id, logprobs=logp[:-1].gather(-1, target.unsqueeze(-1)).squeeze(-1).tolist(),
                                       top1_ids=top_id[:-1].tolist(), top1_logprobs=top_lp[:-1].tolist(),
                                       next_top1=(float(top_lp[-1]), int(top_id[-1]))))
        return results


def sample_seed(request: GenerationRequest) -> int:
    """The seed of a request's own random generator: from its id and its seed, nothing else (not its batch)."""
    digest = hashlib.sha256(f"{request.id}\x1f{request.seed}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % (2 ** 63)


class RowSampler:
    """A logits processor that samples each row's next token with that row's own torch.Generator: temperature,
    then top-p (the smallest set of most likely tokens whose probability reaches top_p), as SGLang samples. It
    returns scores where only the chosen token is finite, so generate's greedy step takes it. A row's draws
    depend on its own logits and generator only: the same in any batch."""

    def __init__(self, seeds: list[int], temperature: float, top_p: float, device: str):
        import torch

        self.torch, self.temperature, self.top_p = torch, temperature, top_p
        self.generators = [torch.Generator(device=device).manual_seed(s) for s in seeds]

    def __call__(self, input_ids, scores):
        torch = self.torch
        # float64, and the draw made over the tokens in id order (the sort only decides which stay): two near-equal
        # probabilities that a batch's rounding orders the other way then change nothing but a tie at top_p.
        probs = torch.softmax(scores.double() / self.temperature, dim=-1)
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        keep_sorted = (sorted_probs.cumsum(dim=-1) - sorted_probs) < self.top_p   # the most likely always stays
        keep = torch.zeros_like(keep_sorted).scatter_(1, order, keep_sorted)
        probs = probs * keep
        chosen = torch.empty(scores.shape[0], dtype=torch.long, device=scores.device)
        for row, generator in enumerate(self.generators):
            chosen[row] = torch.multinomial(probs[row], 1, generator=generator)[0]
        out = torch.full_like(scores, float("-inf"))
        out.scatter_(1, chosen.unsqueeze(1), 0.0)
        return out


class _StopEvent:
    """A stopping criterion for `generate`: every row ends once `event` is set (LocalEngine.stop)."""

    def __init__(self, event: threading.Event, torch):
        self.event, self.torch = event, torch

    def __call__(self, input_ids, scores, **kwargs):
        return self.torch.full((input_ids.shape[0],), self.event.is_set(), dtype=self.torch.bool,
                               device=input_ids.device)
