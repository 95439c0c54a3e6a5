"""Generation engines: the interface the collector talks to, and the Hugging Face `generate` implementation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch


@dataclass
class Generation:
    """One sampled response: its token ids (EOS included when emitted), per-token sampling log-probs, and text."""

    token_ids: list[int]
    logprobs: list[float]
    text: str


class Engine(Protocol):
    def generate(
        self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float, top_p: float
    ) -> list[Generation]:
        """Sample one response per prompt (token ids in, token ids + log-probs out)."""
        ...


class HFEngine:
    """Batched sampling with ``model.generate``: left padding, KV cache, temperature / top-p (no top-k).

    Log-probs are those of the distribution actually sampled from (after temperature and top-p), read from
    ``output_scores``. ``temperature == 0`` means greedy. ``calls`` and ``prompts_generated`` count work done
    (tests use them to check that only active envs generate).
    """

    def __init__(self, model: Any, tokenizer: Any, device: torch.device | str, batch_size: int = 0):
        self.model = model
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.batch_size = batch_size  # 0: one batch for all prompts of a turn
        self.calls = 0
        self.prompts_generated = 0
        self.eos_ids = _eos_ids(model, tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]

    @torch.no_grad()
    def generate(
        self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0
    ) -> list[Generation]:
        if not prompts:
            return []
        step = self.batch_size or len(prompts)
        out: list[Generation] = []
        for i in range(0, len(prompts), step):
            out.extend(self._generate_batch(prompts[i:i + step], max_new_tokens, temperature, top_p))
        return out

    def _generate_batch(self, prompts, max_new_tokens, temperature, top_p) -> list[Generation]:
        self.calls += 1
        self.prompts_generated += len(prompts)
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for r, p in enumerate(prompts):
            ids[r, width - len(p):] = torch.tensor(p, dtype=torch.long)
            mask[r, width - len(p):] = 1
        was_training = self.model.training
        self.model.eval()
        sampling = temperature > 0
        kwargs: dict[str, Any] = dict(
            max_new_tokens=max_new_tokens,
            do_sample=sampling,
            pad_token_id=self.pad_id,
            eos_token_id=self.eos_ids,
            output_scores=True,
            return_dict_in_generate=True,
            top_k=0 if sampling else None,
        )
        if sampling:
            kwargs.update(temperature=float(temperature), top_p=float(top_p))
        else:
            kwargs.update(temperature=None, top_p=None)
        res = self.model.generate(input_ids=ids.to(self.device), attention_mask=mask.to(self.device), **kwargs)
        if was_training:
            self.model.train()
        new = res.sequences[:, width:].cpu()
        scores = torch.stack(res.scores, dim=1).float().cpu()  # (B, T_new, V), processed (temperature, top-p)
        logp = torch.log_softmax(scores, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        eos = torch.tensor(self.eos_ids)
        out = []
        for r in range(len(prompts)):
            toks = new[r].tolist()
            n = len(toks)
            for t, tok in enumerate(toks):
                if tok in eos:
                    n = t + 1
                    break
            toks = toks[:n]
            text = self.tokenizer.decode(toks, skip_special_tokens=True)
            out.append(Generation(toks, logp[r, :n].tolist(), text))
        return out


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    ids: list[int] = []
    gen_cfg = getattr(model, "generation_config", None)
    cand = getattr(gen_cfg, "eos_token_id", None) if gen_cfg is not None else None
    for c in ([cand] if isinstance(cand, int) else list(cand or [])) + [tokenizer.eos_token_id]:
        if c is not None and c not in ids:
            ids.append(int(c))
    if not ids:
        raise ValueError("the tokenizer has no EOS token; set one before training")
    return ids
