"""Token log-probs (and entropies) of responses given prompts, computing logits at response positions only."""

from __future__ import annotations

from typing import Any

import torch

from gigpo.algo.losses import entropy_from_logits
from gigpo.rollout.padding import left_pad
from gigpo.rollout.prefix_sharing import (
    PrefixCache,
    PrefixPlan,
    forward_plan,
    forward_suffixes,
    may_share,
    plan_prefix_groups,
)
from gigpo.rollout.sampling import IndexTensors, first_occurrences

#: Forward identical rows once (see :func:`policy_forward`). Same results either way; a switch for A/B benchmarks
#: (benchmarks/cpu_throughput.py), not a setting.
DEDUPE_ROWS = True


def pack_right_aligned(
    prompt_ids: list[list[int]], response_ids: list[list[int]], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Left-pad ``prompt + response`` so every sequence ends at the last column.

    Returns ``(input_ids, attention_mask, response_mask, L)`` where ``L`` is the longest response and
    ``response_mask`` is ``(B, L)``: row r's response occupies its last ``len(response_ids[r])`` columns.
    """
    ids, attn = left_pad([p + r for p, r in zip(prompt_ids, response_ids)], pad_id)
    L = max(max(len(r) for r in response_ids), 1)
    rlens = torch.tensor([len(r) for r in response_ids], dtype=torch.long)
    resp = (torch.arange(L)[None, :] >= (L - rlens)[:, None]).to(torch.float32)  # the last len(r) columns
    return ids, attn, resp, L


def policy_forward(
    model: Any,
    prompt_ids: list[list[int]],
    response_ids: list[list[int]],
    *,
    pad_id: int,
    device: torch.device,
    temperature: float = 1.0,
    with_entropy: bool = False,
    head: Any = None,
    allowed: list[list[list[int] | None] | None] | None = None,
    share_min_tokens: int = 0,
    tally: dict[str, int] | None = None,
    prefix_cache: PrefixCache | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """``(logp, response_mask, entropy, values)``: log π(y_t | x, y_<t) at ``temperature``, each ``(B, L)``,
    and with a value ``head`` (:class:`gigpo.train.update.value.ValueHead`) V(s) read from the final hidden state at
    each row's last prompt token, ``(B,)`` — one forward gives both. Without a head ``values`` is None and no
    hidden state is requested, so runs without a critic pay nothing for it.

    Only the last ``L + 1`` positions get logits (``logits_to_keep``), so the cost is B × L × V, never
    B × prompt × V. Position ids follow the attention mask, as in generation with left padding, so these
    log-probs match the sampler's. In the right-aligned packing row r's last prompt token sits at column
    ``width − len(response_r) − 1``.

    ``allowed`` (constrained decoding, :mod:`gigpo.agent.constrained`): per row, per response token, the ids the
    sampler allowed (None = free). Those positions use log_softmax over the allowed ids of logits / T — the
    distribution the sampler drew from (at top_p = 1) — for log-probs and entropy alike.

    Sharing, exact either way (autograd sums the copies' gradients, so results equal the row-by-row ones):
    identical rows (same prompt, response and allowed sets — a group's trajectories share their first prompt and
    often their first action) are forwarded once and gathered back to every copy; and with ``share_min_tokens``
    > 0, rows that begin with the same ≥ ``share_min_tokens`` tokens forward that prefix once
    (:mod:`gigpo.rollout.prefix_sharing`); a ``prefix_cache`` (no-grad passes over a batch in micro-batches) holds
    prefixes already forwarded, which rows continue instead. ``tally`` (optional) accumulates the tokens each way would forward:
    ``rows`` (every row whole), ``unique`` (identical rows once) and ``forwarded`` (what was forwarded)."""
    rows, inverse = unique_rows(prompt_ids, response_ids, allowed) if DEDUPE_ROWS else (prompt_ids, [])
    if len(rows) < len(prompt_ids):
        if tally is not None:
            tally["rows"] = tally.get("rows", 0) + sum(len(p) + len(r) for p, r in zip(prompt_ids, response_ids))
        out_u = policy_forward(model, [prompt_ids[i] for i in rows], [response_ids[i] for i in rows],
                               pad_id=pad_id, device=device, temperature=temperature, with_entropy=with_entropy,
                               head=head, allowed=[allowed[i] for i in rows] if allowed is not None else None,
                               share_min_tokens=share_min_tokens, tally=tally, prefix_cache=prefix_cache)
        if tally is not None:  # the recursive call counted the unique rows as rows too
            tally["rows"] -= sum(len(prompt_ids[i]) + len(response_ids[i]) for i in rows)
        inv = torch.tensor(inverse, device=device)
        return tuple(t[inv] if t is not None else None for t in out_u)  # type: ignore[return-value]
    L = max(max(len(r) for r in response_ids), 1)
    logits, targets, hidden = response_logits(model, prompt_ids, response_ids, L, pad_id=pad_id, device=device,
                                              want_hidden=head is not None, share_min_tokens=share_min_tokens,
                                              tally=tally, prefix_cache=prefix_cache)
    rlens = torch.tensor([len(r) for r in response_ids], dtype=torch.long)
    resp_mask = (torch.arange(L)[None, :] >= (L - rlens)[:, None]).to(torch.float32).to(device)
    if temperature and temperature != 1.0:
        logits = logits / temperature
    if allowed is not None and any(a is not None for a in allowed):
        logits = mask_disallowed(logits, response_ids, allowed)
    logp = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    ent = entropy_from_logits(logits) if with_entropy else None
    values = head(hidden) if head is not None else None
    return logp * resp_mask, resp_mask, ent, values


def response_logits(model: Any, prompt_ids: list[list[int]], response_ids: list[list[int]], L: int, *,
                    pad_id: int, device: torch.device, want_hidden: bool, share_min_tokens: int = 0,
                    tally: dict[str, int] | None = None, prefix_cache: PrefixCache | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(logits (B, L, V) float32, targets (B, L), hidden (B, H) or None)``, right-aligned: column j of row r
    holds the logits that predict ``targets[r, j]``; the last ``len(response_r)`` columns are its response.
    ``hidden``: the final hidden state at each row's last prompt token. Forwarded flat, or over shared
    prefixes where :func:`plan_prefix_groups` finds a cheaper plan; the same numbers either way."""
    seqs = [p + r for p, r in zip(prompt_ids, response_ids)]
    if prefix_cache is not None and prefix_cache.forwarded is not None:
        return _cached_logits(model, seqs, response_ids, prefix_cache, L, pad_id, device, want_hidden, tally)
    plan = None
    if share_min_tokens > 0 and may_share(model):
        plan = plan_prefix_groups(seqs, share_min_tokens, keep_tail=[len(r) + 1 for r in response_ids])
    if tally is not None:
        n = sum(len(s) for s in seqs)
        tally["rows"] = tally.get("rows", 0) + n
        tally["unique"] = tally.get("unique", 0) + n
        tally["forwarded"] = tally.get("forwarded", 0) + (plan.shared_tokens if plan is not None else n)
    if plan is not None:
        got = _shared_logits(model, seqs, response_ids, plan, L, pad_id, device, want_hidden)
        if got is not None:
            return got
        if tally is not None:  # the model turned out unsupported: everything went flat after all
            tally["forwarded"] += sum(len(s) for s in seqs) - plan.shared_tokens
    return _flat_logits(model, seqs, response_ids, L, pad_id, device, want_hidden)


def _cached_logits(model, seqs, response_ids, cache: PrefixCache, L, pad_id, device, want_hidden, tally):
    """:func:`response_logits` of rows that continue ``cache``'s prefixes (the others forwarded flat)."""
    found = [cache.match(s, len(r) + 1) for s, r in zip(seqs, response_ids)]
    grouped = [i for i, f in enumerate(found) if f is not None]
    lone = [i for i, f in enumerate(found) if f is None]
    if tally is not None:
        n = sum(len(s) for s in seqs)
        tally["rows"], tally["unique"] = tally.get("rows", 0) + n, tally.get("unique", 0) + n
        tally["forwarded"] = tally.get("forwarded", 0) + n - sum(found[i][1] for i in grouped)
    parts, order = [], []
    if grouped:
        owner = torch.tensor([found[i][0] for i in grouped], device=device)
        out, ids, _ = forward_suffixes(model, cache.forwarded, owner, [seqs[i][found[i][1]:] for i in grouped],
                                       pad_id, min_width=L + 1, logits_to_keep=L + 1,
                                       output_hidden_states=want_hidden)
        parts.append(_tail(out, ids, [response_ids[i] for i in grouped], L, want_hidden))
        order += grouped
    if lone:
        parts.append(_flat_logits(model, [seqs[i] for i in lone], [response_ids[i] for i in lone], L, pad_id,
                                  device, want_hidden))
        order += lone
    return _in_row_order(parts, order, device, want_hidden)


def _in_row_order(parts, order, device, want_hidden):
    """Concatenate ``parts`` (logits, targets, hidden) whose rows are ``order``, back into row order."""
    where = torch.empty(len(order), dtype=torch.long)
    where[torch.tensor(order)] = torch.arange(len(order))  # row -> its place in the parts' order
    where = where.to(device)
    logits, targets = (torch.cat([p[i] for p in parts])[where] for i in (0, 1))
    hidden = torch.cat([p[2] for p in parts])[where] if want_hidden else None
    return logits, targets, hidden


def _flat_logits(model, seqs, response_ids, L, pad_id, device, want_hidden):
    ids, attn = left_pad(seqs, pad_id, min_width=L + 1)  # a part of a batch may have shorter rows than L + 1
    ids, attn = ids.to(device), attn.to(device)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=attn, position_ids=pos, logits_to_keep=L + 1, use_cache=False,
                output_hidden_states=want_hidden)
    return _tail(out, ids, response_ids, L, want_hidden)


def _tail(out, ids, response_ids, L, want_hidden):
    """Logits, targets and last-prompt-token hidden states of right-aligned rows ``ids`` from ``out``."""
    logits = out.logits[:, -(L + 1):-1, :]  # position j predicts token j+1
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))  # bf16/fp16 up to float32; float64 kept
    hidden = None
    if want_hidden:
        col = torch.tensor([ids.shape[1] - len(r) - 1 for r in response_ids], device=ids.device)
        hidden = out.hidden_states[-1][torch.arange(ids.shape[0], device=ids.device), col]
    return logits, ids[:, -L:], hidden


def _shared_logits(model, seqs, response_ids, plan: PrefixPlan, L, pad_id, device, want_hidden):
    """:func:`response_logits` over ``plan``: one pass per level of its forest (:func:`forward_plan`) and one
    flat pass of the lone rows; None where the model's cache cannot be shared."""
    got = forward_plan(model, seqs, plan, pad_id, device, min_width=L + 1, logits_to_keep=L + 1,
                       output_hidden_states=want_hidden)
    if got is None:
        return None
    out, ids, _, grouped = got
    parts = [_tail(out, ids, [response_ids[r] for r in grouped], L, want_hidden)]
    if plan.lone:
        parts.append(_flat_logits(model, [seqs[r] for r in plan.lone], [response_ids[r] for r in plan.lone], L,
                                  pad_id, device, want_hidden))
    return _in_row_order(parts, grouped + plan.lone, device, want_hidden)


def unique_rows(prompt_ids: list[list[int]], response_ids: list[list[int]],
                allowed: list[list[list[int] | None] | None] | None) -> tuple[list[int], list[int]]:
    """``(rows, inverse)`` of the distinct (prompt, response, allowed) rows (see ``first_occurrences``)."""
    # Each distinct allowed set becomes a small int (equal contents, equal int), converted once per list object:
    # rows share a free-text slot's ~vocabulary-size set, which must not be re-hashed per row and position.
    by_content: dict[tuple[int, ...], int] = {}
    by_object: dict[int, int] = {}

    def freeze(t: list[int]) -> int:
        if id(t) not in by_object:
            by_object[id(t)] = by_content.setdefault(tuple(t), len(by_content))
        return by_object[id(t)]

    def key(i: int) -> tuple:
        a = allowed[i] if allowed is not None else None
        frozen = None if a is None else tuple(None if t is None else freeze(t) for t in a)
        return tuple(prompt_ids[i]), tuple(response_ids[i]), frozen

    return first_occurrences(key(i) for i in range(len(prompt_ids)))


def mask_disallowed(logits: torch.Tensor, response_ids: list[list[int]],
                    allowed: list[list[list[int] | None] | None]) -> torch.Tensor:
    """``logits`` (B, L, V) with −inf outside the allowed ids at constrained positions (right-aligned rows)."""
    L = logits.shape[1]
    cells: list[tuple[int, int, list[int]]] = []
    for r, (resp, per_tok) in enumerate(zip(response_ids, allowed)):
        if per_tok is None:
            continue
        off = L - len(resp)
        cells += [(r, off + t, a) for t, a in enumerate(per_tok) if a is not None]
    if not cells:
        return logits
    keep = torch.ones(logits.shape, dtype=torch.bool, device=logits.device)
    as_tensor = IndexTensors(logits.device)
    for r, c, a in cells:
        keep[r, c] = False
        keep[r, c, as_tensor(a)] = True
    return logits.masked_fill(~keep, float("-inf"))
