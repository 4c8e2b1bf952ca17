"""The local engine: any HF causal LM through transformers, in-process, on CPU (or one GPU).

It mirrors SGLang's observable behaviour where the data contract depends on it:
- a completion that stops on a stop token ends with that token (SGLang >= 0.5.5 keeps it in
  `output_ids`);
- `max_new_tokens` is clipped to `context_length - prompt_len - 2` (SGLang's scheduler: `max_req_len
  - input_len - 1` with `max_req_len = context_len - 1`), and a `length` finish reports that value.
Requests are grouped by sampling parameters, sorted by length to limit padding, and decoded in
batches; each batch is seeded from its request ids so a rerun reproduces it.
"""

from __future__ import annotations

import hashlib
import time
from itertools import groupby
from typing import Iterable, Iterator

from ..records import Completion
from .base import Engine, EngineError, EngineInfo, GenerationRequest


class LocalEngine(Engine):
    name = "local"

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
        transformers.logging.disable_progress_bar()   # our own progress bar is the one that matters
        self.model_path = str(model_path)
        self.batch_size = batch_size
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            self.model = AutoModelForCausalLM.from_pretrained(
                self.model_path, dtype=getattr(torch, dtype)).to(self.device)
        except (OSError, ValueError) as e:
            raise EngineError(f"cannot load model {self.model_path!r}: {e}") from e
        self.model.eval()
        cfg = self.model.config
        self.context_length = int(getattr(cfg, "max_position_embeddings", 0) or 0) or None
        self.pad_id = cfg.pad_token_id if cfg.pad_token_id is not None else 0

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

    def effective_max_new_tokens(self, prompt_len: int, max_new_tokens: int) -> int:
        if self.context_length is None:
            return max_new_tokens
        return max(0, min(max_new_tokens, self.context_length - prompt_len - 2))

    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Completion]:
        reqs = sorted(requests, key=lambda r: (repr(r.sampling), len(r.input_ids), r.id))
        for _, group in groupby(reqs, key=lambda r: r.sampling):
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
        seed = int.from_bytes(hashlib.sha256("|".join(r.id + str(r.seed) for r in batch).encode()).digest()[:8], "little")
        torch.manual_seed(seed % (2**63))
        do_sample = sp.temperature > 0
        try:
            with torch.no_grad():
                out = self.model.generate(
                    input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                    max_new_tokens=max(max(limits), 1), do_sample=do_sample,
                    temperature=sp.temperature if do_sample else None,
                    top_p=sp.top_p if do_sample else None, top_k=0 if do_sample else None,
                    eos_token_id=list(sp.stop_token_ids), pad_token_id=self.pad_id,
                )
        except RuntimeError as e:
            raise EngineError(f"local generation failed: {e}") from e
        new = out[:, width:].tolist()
        elapsed = time.perf_counter() - t0
        stops = set(sp.stop_token_ids)
        results = []
        for r, limit, row in zip(batch, limits, new):
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
            ))
        return results
