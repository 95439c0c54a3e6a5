"""Sampling on an in-process model, for the ``hf`` engine (:mod:`gigpo.rollout.engines.hf`) and the learner's
re-application of constrained decoding: Hugging Face ``generate`` with a recording logits processor, a masked
KV-cache loop for constrained decoding, and the token-set helpers both sides share."""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch

from gigpo.rollout.padding import left_pad
from gigpo.rollout.prefix_sharing import cache_of, prefill_over_prefixes
from gigpo.rollout.registry import Generation

#: Prefill each distinct prompt of a constrained batch once (see :func:`_shared_prefill`). Same results either
#: way; a switch for A/B benchmarks (benchmarks/cpu_throughput.py), not a setting.
SHARE_PREFILL = True


@torch.inference_mode()
def generate(engine: Any, prompts: list[list[int]], max_new_tokens: int, temperature: float, top_p: float,
             constraints: list[Any] | None) -> list[Generation]:
    """:meth:`gigpo.rollout.engines.hf.HFEngine.generate`: ``engine.batch_size`` prompts at a time (0: all),
    free decoding by ``model.generate`` with :class:`Sampler`, constrained by :func:`sample_constrained`."""
    if not prompts:
        return []
    step = engine.batch_size or len(prompts)
    out: list[Generation] = []
    for i in range(0, len(prompts), step):
        if constraints is not None:
            out.extend(sample_constrained(engine, prompts[i:i + step], constraints[i:i + step], max_new_tokens,
                                          temperature, top_p))
        else:
            out.extend(generate_batch(engine, prompts[i:i + step], max_new_tokens, temperature, top_p))
    return out


def generate_batch(engine: Any, prompts, max_new_tokens, temperature, top_p) -> list[Generation]:
    """Free decoding of one batch: left-padded ``model.generate`` run greedy over :class:`Sampler`'s draws."""
    from transformers import LogitsProcessorList

    engine.calls += 1
    engine.prompts_generated += len(prompts)
    ids, mask = left_pad(prompts, engine.pad_id)
    width = ids.shape[1]
    was_training = engine.model.training
    engine.model.eval()
    sampler = Sampler(temperature, top_p)
    # HF runs greedy over the sampler's one-hot choice: no HF warper can run after it (they exist only when
    # do_sample), and nothing per step is kept but the (B,) picked log-probs — output_scores kept (B, V) per
    # step, B·T·V floats (then two more copies to take the log_softmax), ~25k page faults per call on SmolLM2.
    seq = engine.model.generate(
        input_ids=ids.to(engine.device), attention_mask=mask.to(engine.device), max_new_tokens=max_new_tokens,
        do_sample=False, num_beams=1, temperature=None, top_p=None, top_k=None, pad_token_id=engine.pad_id,
        eos_token_id=engine.eos_ids, logits_processor=LogitsProcessorList([sampler]), output_scores=False,
        return_dict_in_generate=False)
    if was_training:
        engine.model.train()
    new = seq[:, width:]
    logp = (torch.stack(sampler.picked, dim=1).float().cpu() if sampler.picked
            else torch.zeros(new.shape))  # one entry per generated token
    new = new.cpu()
    # each row ends after its first EOS (HF pads rows that finished before the longest one)
    is_eos = torch.isin(new, torch.tensor(engine.eos_ids))
    lens = torch.where(is_eos.any(1), is_eos.int().argmax(1) + 1, new.shape[1]).tolist()
    toks = [row[:n] for row, n in zip(new.tolist(), lens)]
    lps = [row[:n] for row, n in zip(logp.tolist(), lens)]
    texts = engine.tokenizer.batch_decode(toks, skip_special_tokens=True)
    return [Generation(t, lp, text) for t, lp, text in zip(toks, lps, texts)]


class Sampler:
    """One sampling step, as a logits processor: logits / T, log_softmax, top-p (:func:`top_p_logprobs`, the same
    nucleus as the constrained loop), then a draw; returns 0 at the drawn token and −inf elsewhere, so that
    ``generate`` run greedy emits exactly that token. ``temperature == 0``: the argmax of log_softmax(logits).

    Why not HF's own sampling: its temperature / top-k / top-p warpers run *after* any user logits processor, so
    the log-probs of what it sampled from exist only through ``output_scores``, which keeps every step's (B, V)
    scores until ``generate`` returns. Here ``picked[t]`` is the (B,) log-prob of step t's token under the
    distribution it was drawn from — rows already finished get junk, cut at their EOS."""

    def __init__(self, temperature: float, top_p: float):
        self.temperature, self.top_p = float(temperature), float(top_p)
        self.picked: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        logits = scores.float()
        if self.temperature > 0 and self.temperature != 1.0:
            logits = logits / self.temperature
        logp = torch.log_softmax(logits, dim=-1)  # a new tensor: ours to overwrite below
        if self.temperature > 0:
            logp = top_p_logprobs(logp, self.top_p)
            nxt = torch.multinomial(logp.exp(), 1)  # the same draw HF's sampler makes from softmax(scores)
        else:
            nxt = logp.argmax(-1, keepdim=True)
        self.picked.append(logp.gather(-1, nxt).squeeze(-1))
        return logp.fill_(float("-inf")).scatter_(-1, nxt, 0.0)


def sample_constrained(engine: Any, prompts, constraints, max_new_tokens: int, temperature: float,
                       top_p: float) -> list[Generation]:
    """The constrained sampling loop (one prefill, then one cached forward per token) for one batch."""
    engine.calls += 1
    engine.prompts_generated += len(prompts)
    model, dev = engine.model, engine.device
    ids, attn = left_pad(prompts, engine.pad_id)
    ids, attn = ids.to(dev), attn.to(dev)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    was_training = model.training
    model.eval()
    states = [c.start() if c is not None else None for c in constraints]
    toks: list[list[int]] = [[] for _ in prompts]
    lps: list[list[float]] = [[] for _ in prompts]
    allowed_log: list[list[list[int] | None]] = [[] for _ in prompts]
    live = [True] * len(prompts)
    logits, cache, attn, pos = _shared_prefill(model, prompts, ids, attn, pos, engine.pad_id,
                                               engine.share_prefix_min_tokens)
    for _t in range(max_new_tokens):
        logits = logits.float()
        if temperature > 0:
            logits = logits / temperature
        allowed = [c.allowed(s, max_new_tokens - _t) if c is not None and live[r] else None
                   for r, (c, s) in enumerate(zip(constraints, states))]
        logits = apply_allowed(logits, allowed)
        logp = torch.log_softmax(logits, dim=-1)
        if temperature > 0:
            logp = top_p_logprobs(logp, top_p)
            nxt = torch.multinomial(logp.exp(), 1).squeeze(-1)
        else:
            nxt = logp.argmax(-1)
        picked = logp.gather(-1, nxt.unsqueeze(-1)).squeeze(-1).tolist()
        nxt_l = nxt.tolist()
        for r in range(len(prompts)):
            if not live[r]:
                continue
            tok = nxt_l[r]
            toks[r].append(tok)
            lps[r].append(picked[r])
            allowed_log[r].append(allowed[r])
            c, s = constraints[r], states[r]
            if c is not None:
                c.advance(s, tok)
                live[r] = not s.done
            else:
                live[r] = tok not in engine.eos_ids
        if not any(live):
            break
        feed = torch.tensor([[t if live[r] else engine.pad_id] for r, t in enumerate(nxt_l)], device=dev)
        attn = torch.cat([attn, torch.ones((len(prompts), 1), dtype=attn.dtype, device=dev)], dim=1)
        pos = pos[:, -1:] + 1
        out = model(input_ids=feed, attention_mask=attn, position_ids=pos, use_cache=True, **{cache_arg(model): cache})
        logits, cache = out.logits[:, -1, :], cache_of(out)
    if was_training:
        model.train()
    gens = []
    for r in range(len(prompts)):
        c, s = constraints[r], states[r]
        action = c.finish(s) if c is not None else None
        text = engine.tokenizer.decode(toks[r], skip_special_tokens=True)
        gens.append(Generation(toks[r], lps[r], text, action=action,
                               allowed=allowed_log[r] if c is not None else None))
    return gens


def first_occurrences(keys) -> tuple[list[int], list[int]]:
    """``(rows, inverse)`` of hashable ``keys``: the index of each distinct key's first occurrence, and for every
    key the position of its distinct key in ``rows`` (so ``keys[rows][inverse] == keys``)."""
    first: dict[Any, int] = {}
    rows, inverse = [], []
    for i, key in enumerate(keys):
        j = first.setdefault(key, len(rows))
        if j == len(rows):
            rows.append(i)
        inverse.append(j)
    return rows, inverse


def _shared_prefill(model, prompts, ids, attn, pos, pad_id: int, min_tokens: int):
    """The prefill forward: ``(last logits (B, V), cache, attention mask, position ids (B, 1) of each row's last
    prompt token)``. Each distinct prompt is computed once (a group's N trajectories start from the same prompt,
    and often meet the same one again: its cache rows are copied, ``Cache.batch_select_indices``), and with
    ``min_tokens`` > 0 prompts that begin alike compute their shared prefix once
    (:func:`gigpo.rollout.prefix_sharing.prefill_over_prefixes`) — the same numbers up to float rounding."""
    rows, inverse = first_occurrences(tuple(p) for p in prompts)
    if not SHARE_PREFILL:
        rows, inverse = list(range(len(prompts))), list(range(len(prompts)))
    last_pos = torch.tensor([[len(p) - 1] for p in prompts], device=ids.device)
    shared = prefill_over_prefixes(model, [prompts[i] for i in rows], pad_id, ids.device, min_tokens) \
        if min_tokens > 0 else None
    if shared is not None:
        logits, cache, u_attn = shared
    else:
        sel = torch.tensor(rows, device=ids.device)
        out = model(input_ids=ids[sel], attention_mask=attn[sel], position_ids=pos[sel], use_cache=True,
                    logits_to_keep=1)
        logits, cache, u_attn = out.logits[:, -1, :], cache_of(out), attn[sel]
    if len(rows) == len(prompts):
        return logits, cache, u_attn, last_pos
    inv = torch.tensor(inverse, device=ids.device)
    cache.batch_select_indices(inv)
    return logits[inv], cache, u_attn[inv], last_pos


def cache_arg(model) -> str:
    """The name a model's forward takes its KV cache by: transformers >= 5.x ``cache``, older
    ``past_key_values``; read off the base model's signature (a peft wrapper passes either through as kwargs)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return _cache_arg_of(type(base))


@functools.cache
def _cache_arg_of(model_type: type) -> str:
    return "cache" if "cache" in inspect.signature(model_type.forward).parameters else "past_key_values"


class IndexTensors:
    """Allowed-id lists as index tensors, each list object converted once: rows share list objects (a free-text
    slot's set is nearly the whole vocabulary, and every row writing a query records that same list)."""

    def __init__(self, device: Any):
        self.device, self._by_id = device, {}

    def __call__(self, ids: list[int]) -> torch.Tensor:
        if id(ids) not in self._by_id:  # the caller holds the lists for the object's whole life: ids stay unique
            self._by_id[id(ids)] = torch.tensor(ids, dtype=torch.long, device=self.device)
        return self._by_id[id(ids)]


def apply_allowed(logits: torch.Tensor, allowed: list[list[int] | None]) -> torch.Tensor:
    """``logits`` (B, V) with −inf outside each row's allowed ids; rows whose entry is None are left free."""
    rows = [r for r, a in enumerate(allowed) if a is not None]
    if not rows:
        return logits
    keep = torch.zeros((len(rows), logits.shape[-1]), dtype=torch.bool, device=logits.device)
    as_tensor = IndexTensors(logits.device)
    for j, r in enumerate(rows):
        keep[j, as_tensor(allowed[r])] = True
    out = logits.clone()
    idx = torch.tensor(rows, device=logits.device)
    out[idx] = logits[idx].masked_fill(~keep, float("-inf"))
    return out


def top_p_logprobs(logp: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus filtering of log-probs (B, V): keep the smallest most-probable set with mass ≥ ``top_p`` (the
    first token always), renormalised; others −inf. ``top_p >= 1`` returns ``logp`` unchanged."""
    if top_p >= 1.0:
        return logp
    sorted_lp, order = logp.sort(dim=-1, descending=True)
    before = sorted_lp.exp().cumsum(-1) - sorted_lp.exp()  # mass strictly before each token
    drop_sorted = before >= top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return torch.log_softmax(logp.masked_fill(drop, float("-inf")), dim=-1)


def eos_ids(model: Any, tokenizer: Any) -> list[int]:
    ids: list[int] = []
    gen_cfg = getattr(model, "generation_config", None)
    cand = getattr(gen_cfg, "eos_token_id", None) if gen_cfg is not None else None
    for c in ([cand] if isinstance(cand, int) else list(cand or [])) + [tokenizer.eos_token_id]:
        if c is not None and c not in ids:
            ids.append(int(c))
    if not ids:
        raise ValueError("the tokenizer has no EOS token; set one before training")
    return ids
