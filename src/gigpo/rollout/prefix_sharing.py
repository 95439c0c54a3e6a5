"""Shared-prefix forward passes: rows that begin with the same tokens compute those tokens once.

In a step-wise agent batch almost every row starts with the same system message and task text, and a group's N
trajectories share their first prompt whole. A causal LM's hidden states at a position depend only on the tokens
up to it, so a prefix shared by n rows has the same keys and values in all n: it is forwarded once (batch 1 per
prefix), its KV cache gathered to the n rows, and only each row's own suffix is forwarded over it. Position ids
continue from the prefix's length, so every suffix token sees exactly the keys, values and rotary positions of the
flat computation: the outputs are equal up to float rounding (tested to 1e-5). With gradients the backward of
the gather sums the n rows' gradients into the one prefix computation (exact, as Prefix Grouper, arXiv
2506.05433, shows for GRPO).

The plan (:func:`plan_prefix_groups`) is a forest of at most two levels: rows sorted lexicographically, cut
wherever two neighbours share fewer than ``min_tokens`` tokens; each run of ≥ 2 rows is a group whose prefix is
the run's common prefix (in an agent batch: the rules and the task); the same rule applied to a group's rows after
that prefix gives its subgroups (a trajectory group's first prompt, a room's observation). Lone rows are forwarded
as today. A row's prefix never reaches its last ``keep_tail`` tokens (the learner keeps its last prompt token and
its response in the suffix: their logits and the value head's hidden state come from the last pass). Each level
is one batched pass, and a pass costs something whatever its size (:data:`PASS_CELLS`): a plan is used only when
it forwards fewer padded cells, that cost included, than the flat batch.

Supported caches: :class:`transformers.DynamicCache` of full-attention layers (Llama, Qwen2, Mistral without a
sliding window, SmolLM2, the tiny model, ...). Anything else (sliding windows, recurrent or quantised caches,
gradient checkpointing, which turns the cache off in training) falls back to the flat path, said once per model.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from gigpo.rollout.padding import left_pad

log = logging.getLogger(__name__)

#: models (by id) whose cache the shared path cannot use: warned once, then always flat
_UNSUPPORTED: set[int] = set()

#: The price of one more forward pass, in token cells, when a plan is weighed against the flat batch. A pass
#: reads every weight once whatever its size, so a pass over a few tokens is far from free: for SmolLM2 on a CPU a
#: pass of 2 rows × 2 tokens costs about what 64 more tokens in a larger pass do (measured on the smollm2-lock-fixed
#: update, docs/results/shared_prefix.md). A second level of the forest, or a pass of lone rows, must save more.
PASS_CELLS = 64


@dataclass(frozen=True)
class PrefixPlan:
    """Which rows share which prefix. ``groups[g]`` are row indices whose first ``prefix_lens[g]`` tokens are
    equal; ``subgroups[g]`` (the forest's second level, possibly empty) are ``(rows, extra)``: rows of group g
    that share ``extra`` more tokens after its prefix; ``lone`` rows share nothing worth sharing.
    ``flat_cells`` / ``shared_cells``: padded token cells the flat batch and the shared passes forward (the
    compute proxy the plan was chosen by, :data:`PASS_CELLS` per pass beyond the first included);
    ``flat_tokens`` / ``shared_tokens``: real (unpadded) tokens."""

    groups: list[list[int]]
    prefix_lens: list[int]
    lone: list[int]
    flat_cells: int
    shared_cells: int
    flat_tokens: int
    shared_tokens: int
    subgroups: list[list[tuple[list[int], int]]] = field(default_factory=list)


def _runs(seqs: list[list[int]], min_tokens: int, keep_tail: np.ndarray
          ) -> tuple[list[list[int]], list[int], list[int]]:
    """One level of the forest: ``(groups, prefix_lens, lone)`` — rows sorted lexicographically and cut where
    neighbours may share fewer than ``min_tokens`` tokens; a run of ≥ 2 rows shares its smallest link."""
    B = len(seqs)
    if B < 2:
        return [], [], list(range(B))
    lens = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=B)
    shareable = np.maximum(lens - np.maximum(keep_tail, 1), 0)  # the most tokens a row may put in a prefix
    order = np.array(sorted(range(B), key=seqs.__getitem__), dtype=np.int64)  # lexicographic: C-speed compares
    ids = np.full((B, int(lens.max()) + 1), -1, dtype=np.int64)  # -1 never equals a token id
    flat = np.fromiter((t for s in seqs for t in s), dtype=np.int64, count=int(lens.sum()))
    ids[np.repeat(np.arange(B), lens), np.arange(flat.size) - np.repeat(np.cumsum(lens) - lens, lens)] = flat
    lcp = (ids[order[:-1]] != ids[order[1:]]).argmax(1)  # first differing column (a pad always differs)
    link = np.minimum(lcp, np.minimum(shareable[order[:-1]], shareable[order[1:]]))  # tokens neighbours may share
    cut = np.concatenate([[True], link < min_tokens])  # a run starts where the link is too short
    run_id = np.cumsum(cut) - 1
    starts = np.flatnonzero(cut)
    sizes = np.diff(np.append(starts, B))
    link_run = np.full(len(starts), np.iinfo(np.int64).max)
    np.minimum.at(link_run, run_id[1:][~cut[1:]], link[~cut[1:]])
    shared_runs = np.flatnonzero(sizes >= 2)
    groups = [order[starts[g]:starts[g] + sizes[g]].tolist() for g in shared_runs]
    lone = order[np.isin(run_id, shared_runs, invert=True)].tolist()
    return groups, link_run[shared_runs].tolist(), sorted(lone)


def plan_prefix_groups(seqs: list[list[int]], min_tokens: int, keep_tail: list[int] | int = 1
                       ) -> PrefixPlan | None:
    """The prefix forest of ``seqs`` (two levels at most: see the module docstring), or None where it forwards no
    fewer padded cells than the flat batch. ``keep_tail``: per row (or for all), how many of its last tokens
    must stay in its suffix (≥ 1)."""
    B = len(seqs)
    if B < 2 or min_tokens < 1:
        return None
    tail = np.broadcast_to(np.asarray(keep_tail, dtype=np.int64), (B,))
    groups, prefix_lens, lone = _runs(seqs, min_tokens, tail)
    if not groups:
        return None
    lens = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=B)
    lone_cells = len(lone) * int(lens[lone].max()) + PASS_CELLS if lone else 0
    grouped = [r for g in groups for r in g]
    start = np.zeros(B, dtype=np.int64)
    for g, p in zip(groups, prefix_lens):  # per group, not per row
        start[g] = p
    one_level = len(groups) * max(prefix_lens) + len(grouped) * int((lens - start)[grouped].max()) + PASS_CELLS
    # the second level: each group's rows planned again after its prefix
    subgroups, nodes, extra_max, start2 = [], 0, 0, start.copy()
    for g, p in zip(groups, prefix_lens):
        sub, extra, direct = _runs([seqs[r][p:] for r in g], min_tokens, tail[g])
        subgroups.append([([g[i] for i in rows], e) for rows, e in zip(sub, extra)])
        nodes += len(sub) + (1 if direct else 0)  # rows without a subgroup continue an empty node
        extra_max = max([extra_max, *extra])
        for rows, e in zip(sub, extra):
            start2[[g[i] for i in rows]] = p + e
    two_level = (len(groups) * max(prefix_lens) + nodes * extra_max
                 + len(grouped) * int((lens - start2)[grouped].max()) + 2 * PASS_CELLS) if extra_max else one_level
    if two_level >= one_level:
        subgroups, start2, two_level = [[] for _ in groups], start, one_level
    if two_level + lone_cells >= B * int(lens.max()):
        return None
    shared_tokens = (sum(prefix_lens) + sum(e for sub in subgroups for _, e in sub)
                     + int((lens - start2)[grouped].sum()) + int(lens[lone].sum()))
    return PrefixPlan(groups, prefix_lens, lone, B * int(lens.max()), two_level + lone_cells, int(lens.sum()),
                      shared_tokens, subgroups)


def forward_plan(model: Any, seqs: list[list[int]], plan: PrefixPlan, pad_id: int, device: torch.device,
                 min_width: int = 0, **kwargs: Any) -> tuple[Any, torch.Tensor, torch.Tensor, list[int]] | None:
    """Forward the grouped rows of ``plan`` over their shared prefixes: ``(model output, suffix ids, attention
    mask, rows)`` with the output's rows in the order ``rows``; None where the model's cache cannot be shared.
    One pass per level: the groups' prefixes, then (if the plan has a second level) the subgroups' extra tokens
    over them — a group's rows without a subgroup continue an empty node, whose padding gets zero attention —
    then every row's own suffix. ``kwargs`` go to the last pass (``logits_to_keep``, hidden states)."""
    cached = forward_prefixes(model, [seqs[g[0]][:p] for g, p in zip(plan.groups, plan.prefix_lens)], pad_id,
                              device)
    if cached is None:
        return None
    node_rows, node_start, node_owner, node_tokens = [], [], [], []
    for g, (rows, p) in enumerate(zip(plan.groups, plan.prefix_lens)):
        subs = plan.subgroups[g] if plan.subgroups else []
        covered = {r for sub, _ in subs for r in sub}
        for sub, extra in subs:
            node_rows.append(sub), node_start.append(p + extra), node_owner.append(g)
            node_tokens.append(seqs[sub[0]][p:p + extra])
        direct = [r for r in rows if r not in covered]
        if direct:
            node_rows.append(direct), node_start.append(p), node_owner.append(g), node_tokens.append([])
    if any(node_tokens):  # the second level
        out, _, attn = forward_suffixes(model, cached, torch.tensor(node_owner, device=device), node_tokens, pad_id,
                                        logits_to_keep=1)
        cached = (cache_layers(cache_of(out)), attn, cached[2])
    order = [r for rows in node_rows for r in rows]
    owner = torch.repeat_interleave(torch.arange(len(node_rows)), torch.tensor([len(r) for r in node_rows]))
    start = [s for rows, s in zip(node_rows, node_start) for _ in rows]
    out, ids, attn = forward_suffixes(model, cached, owner.to(device), [seqs[r][s:] for r, s in zip(order, start)],
                                      pad_id, min_width, **kwargs)
    return out, ids, attn, order


def cache_of(out: Any) -> Any:
    """The KV cache of a model output (transformers ≥ 5.x names it ``cache``; older ``past_key_values``)."""
    return out.cache if "cache" in out else out.past_key_values


def cache_layers(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """``[(keys, values)]`` per layer, each ``(B, heads, T, head_dim)``, of a full-attention DynamicCache;
    None for any other cache (the caller falls back to the flat path)."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    if type(cache) is not DynamicCache:
        return None
    layers = getattr(cache, "layers", None)
    if layers is None or any(type(layer) is not DynamicLayer for layer in layers):
        return None
    return [(layer.keys, layer.values) for layer in layers]


def refuse_once(model: Any, why: str) -> None:
    if id(model) not in _UNSUPPORTED:
        _UNSUPPORTED.add(id(model))
        log.warning("shared-prefix passes are off for this model (%s): forwarding every row whole", why)


def may_share(model: Any) -> bool:
    """False once a model was found unsupported, or while gradient checkpointing turns the cache off."""
    if id(model) in _UNSUPPORTED:
        return False
    checkpointing = getattr(model, "is_activation_checkpointing", None)  # transformers >= 5.x's name
    if checkpointing is None:
        checkpointing = getattr(model, "is_gradient_checkpointing", False)
    if checkpointing and model.training:
        refuse_once(model, "gradient checkpointing disables the KV cache in training")
        return False
    return True


def forward_prefixes(model: Any, prefixes: list[list[int]], pad_id: int, device: torch.device
                     ) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor] | None:
    """Forward each prefix once (batch = number of prefixes, left-padded): ``(per-layer (keys, values),
    attention mask (G, P), the forward's name for a cache argument)``, or None (and the model marked unsupported) where the cache is not usable."""
    ids, attn = left_pad(prefixes, pad_id)
    ids, attn = ids.to(device), attn.to(device)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True, logits_to_keep=1)
    layers = cache_layers(cache_of(out))
    if layers is None:
        refuse_once(model, f"its cache is a {type(cache_of(out)).__name__}, not a full-attention DynamicCache")
        return None
    return layers, attn, "cache" if "cache" in out else "past_key_values"


def forward_suffixes(model: Any, prefixes: tuple[list, torch.Tensor, str], owner: torch.Tensor,
                     suffixes: list[list[int]], pad_id: int, min_width: int = 0, **kwargs: Any
                     ) -> tuple[Any, torch.Tensor, torch.Tensor]:
    """Forward ``suffixes`` over ``prefixes`` (what :func:`forward_prefixes` returned): row r continues prefix
    ``owner[r]``; the suffix batch is left-padded to at least ``min_width`` columns.

    Returns ``(model output, suffix ids (B, S), full attention mask (B, P + S))``. The prefix cache is gathered
    per row (``index_select``: its backward adds each row's gradient into its prefix) into a fresh cache, so the
    prefixes' own cache is never extended. Positions continue from each prefix's real length."""
    from transformers import DynamicCache

    layers, prefix_attn, cache_arg = prefixes
    dev = prefix_attn.device
    past = DynamicCache(ddp_cache_data=[(k.index_select(0, owner), v.index_select(0, owner)) for k, v in layers])
    ids, sattn = left_pad(suffixes, pad_id, min_width)
    ids, sattn = ids.to(dev), sattn.to(dev)
    pattn = prefix_attn.index_select(0, owner)
    pos = (pattn.sum(-1, keepdim=True) + sattn.cumsum(-1) - 1).clamp(min=0)
    attn = torch.cat([pattn, sattn], dim=1)
    out = model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True, **{cache_arg: past},
                **kwargs)
    return out, ids, attn


class PrefixCache:
    """Prefixes forwarded once for several later passes (the learner's no-grad passes over a whole batch, in
    micro-batches): any row that begins with one of them, leaving at least ``keep_tail`` tokens, continues its
    cache instead of forwarding those tokens again (:meth:`match`)."""

    def __init__(self, model: Any, prefixes: list[list[int]], pad_id: int, device: torch.device):
        self.forwarded = forward_prefixes(model, prefixes, pad_id, device)  # None: the model's cache is unusable
        self.index = {tuple(p): g for g, p in enumerate(prefixes)}
        self.lengths = sorted({len(p) for p in prefixes}, reverse=True)  # few distinct lengths: a dict probe each
        self.tokens = sum(len(p) for p in prefixes)

    def match(self, seq: list[int], keep_tail: int) -> tuple[int, int] | None:
        """``(prefix index, its length)`` of the longest cached prefix ``seq`` begins with, or None."""
        for n in self.lengths:
            if n <= len(seq) - keep_tail:
                g = self.index.get(tuple(seq[:n]))
                if g is not None:
                    return g, n
        return None


def prefill_over_prefixes(model: Any, prompts: list[list[int]], pad_id: int, device: torch.device,
                          min_tokens: int) -> tuple[torch.Tensor, Any, torch.Tensor] | None:
    """Generation's prefill with shared prefixes computed once: ``(last logits (B, V), cache, attention mask
    (B, W))`` ready for cached decoding (the next position of row r is ``len(prompts[r])``), or None where no
    prefix is worth sharing (the caller prefills flat). Grouped rows run prefix + suffix passes, the others one
    flat pass; the two caches are left-padded with zero keys/values (mask 0: they get zero attention weight) to
    one width and put back in row order."""
    from transformers import DynamicCache

    if not may_share(model):
        return None
    plan = plan_prefix_groups(prompts, min_tokens, 1)
    if plan is None:
        return None
    got = forward_plan(model, prompts, plan, pad_id, device, logits_to_keep=1)
    if got is None:
        return None
    out, _, attn, grouped = got
    parts = [(out.logits[:, -1, :], cache_layers(cache_of(out)), attn)]
    if plan.lone:
        ids, lattn = left_pad([prompts[r] for r in plan.lone], pad_id)
        ids, lattn = ids.to(device), lattn.to(device)
        lout = model(input_ids=ids, attention_mask=lattn, position_ids=(lattn.cumsum(-1) - 1).clamp(min=0),
                     use_cache=True, logits_to_keep=1)
        parts.append((lout.logits[:, -1, :], cache_layers(cache_of(lout)), lattn))
    width = max(p[2].shape[1] for p in parts)

    def widen(t: torch.Tensor, dim: int) -> torch.Tensor:  # left-pad dimension ``dim`` with zeros to ``width``
        pad = [0, 0] * (t.dim() - 1 - dim) + [width - t.shape[dim], 0]
        return torch.nn.functional.pad(t, pad)

    where = torch.empty(len(prompts), dtype=torch.long)
    where[torch.tensor(grouped + plan.lone)] = torch.arange(len(prompts))
    where = where.to(device)
    logits = torch.cat([p[0] for p in parts])[where]
    attn = torch.cat([widen(p[2], 1) for p in parts])[where]
    layers = [(torch.cat([widen(p[1][i][0], 2) for p in parts])[where],
               torch.cat([widen(p[1][i][1], 2) for p in parts])[where]) for i in range(len(parts[0][1]))]
    return logits, DynamicCache(ddp_cache_data=layers), attn
