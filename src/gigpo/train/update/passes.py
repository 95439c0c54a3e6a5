"""No-grad and training forward passes of the policy: log-probs (env tokens masked), values, pre-update passes."""

from __future__ import annotations

import logging
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from gigpo.rollout import RolloutBatch
from gigpo.rollout.prefix_sharing import PrefixCache, may_share, plan_prefix_groups
from gigpo.rollout.sampling import first_occurrences
from gigpo.train.update.logprobs import policy_forward, unique_rows
from gigpo.train.update.value import ValueHead

log = logging.getLogger(__name__)


class PolicyPasses:
    """Forward passes over rollout rows for the trainer: ``logprobs`` (with grad, for the loss) and ``prepare``
    (everything computed once before the update). Holds references, not copies, of the trainer's models."""

    def __init__(self, cfg: Any, model: Any, ref_model: Any, value_head: ValueHead | None, pad_id: int,
                 device: torch.device, use_ref: bool, distributed: bool = False):
        self.cfg, self.model, self.ref_model, self.value_head = cfg, model, ref_model, value_head
        self.pad_id, self.device, self.use_ref = pad_id, device, use_ref
        # optim.shared_prefix: off under DDP / FSDP, whose wrappers expect one forward per backward (the shared
        # path makes two); said once, here
        share = cfg.optim.shared_prefix == "auto"
        if share and distributed:
            log.info("optim.shared_prefix: off with several processes (DDP/FSDP take one forward per backward)")
        self.share_min_tokens = cfg.optim.shared_prefix_min_tokens if share and not distributed else 0
        #: tokens the passes forwarded since the last :meth:`take_tally` (see :func:`policy_forward`)
        self.tally: dict[str, int] = {}

    def take_tally(self) -> dict[str, float]:
        """``update/tokens_{rows,unique_rows,forwarded}``: tokens every pass of the iteration would forward with
        each row whole, with identical rows once, and what it forwarded (shared prefixes once); then reset."""
        t, self.tally = self.tally, {}
        return {"update/tokens_rows": float(t.get("rows", 0)), "update/tokens_unique_rows": float(t.get("unique", 0)),
                "update/tokens_forwarded": float(t.get("forwarded", 0))}

    def logprobs(self, model, rows: list[int], batch: RolloutBatch, with_entropy: bool = False, head=None,
                 prefix_cache: PrefixCache | None = None):
        """``(logp, mask, entropy, values)``; concat batches mask env tokens out of ``mask`` (and ``logp``)."""
        temp = self.cfg.rollout.temperature or 1.0
        logp, mask, ent, values = policy_forward(
            model, [batch.prompt_ids[i] for i in rows], [batch.response_ids[i] for i in rows],
            pad_id=self.pad_id, device=self.device, temperature=temp, with_entropy=with_entropy, head=head,
            allowed=[batch.allowed_tokens[i] for i in rows] if getattr(batch, "allowed_tokens", None) else None,
            share_min_tokens=self.share_min_tokens, tally=self.tally, prefix_cache=prefix_cache,
        )
        loss_mask = getattr(batch, "loss_mask", None)
        if loss_mask is not None:
            mask = mask * right_align([torch.tensor(loss_mask[i], dtype=torch.float32) for i in rows],
                                      mask.shape[1]).to(mask.device)
            logp = logp * mask
        return logp, mask, ent, values

    @torch.no_grad()
    def _old_logprobs(self, batch: RolloutBatch, rows_all: list[int], ref: bool = False, head=None):
        """Per-row log-probs before the update (policy or reference), and per-row values when ``head`` is given,
        computed in micro-batches."""
        out: dict[int, torch.Tensor] = {}
        vals: dict[int, float] = {}
        mbs = self.cfg.optim.micro_batch_size
        model = self.ref_model if ref and self.ref_model is not None else self.model
        ctx = self.model.disable_adapter() if ref and self.ref_model is None else nullcontext()
        was = self.model.training
        self.model.eval()
        # length-bucketed micro-batches (little compute on padding); results are keyed by row, order-free
        rows_all = sorted(rows_all, key=lambda r: len(batch.prompt_ids[r]) + len(batch.response_ids[r]))
        copies: dict[int, int] = {}
        if self.share_min_tokens:  # one set of weights: a row's duplicates anywhere in the batch reuse its result
            allowed = getattr(batch, "allowed_tokens", None) or None
            distinct, inverse = unique_rows([batch.prompt_ids[r] for r in rows_all],
                                            [batch.response_ids[r] for r in rows_all],
                                            [allowed[r] for r in rows_all] if allowed else None)
            copies = {r: rows_all[distinct[j]] for r, j in zip(rows_all, inverse)}
            self.tally["rows"] = self.tally.get("rows", 0) + sum(  # the copies' tokens: counted, not forwarded
                len(batch.prompt_ids[r]) + len(batch.response_ids[r]) for r, first in copies.items() if r != first)
            rows_all = [rows_all[i] for i in distinct]
        with ctx:
            cache = self._prefix_cache(model, batch, rows_all)
            for i in range(0, len(rows_all), mbs):
                rows = rows_all[i:i + mbs]
                lp, mask, _, v = self.logprobs(model, rows, batch, head=head, prefix_cache=cache)
                for j, r in enumerate(rows):
                    n = len(batch.response_ids[r])
                    out[r] = lp[j, lp.shape[1] - n:].detach().cpu() if n else lp[j, :0].cpu()
                    if v is not None:
                        vals[r] = float(v[j])
        self.model.train(was)
        for r, first in copies.items():
            out[r] = out[first]
            if first in vals:
                vals[r] = vals[first]
        return (out, vals) if head is not None else out

    def _prefix_cache(self, model, batch: RolloutBatch, rows: list[int]) -> PrefixCache | None:
        """No-grad passes see one set of weights: the batch's shared prefixes are forwarded once for all its
        micro-batches (the update, whose weights change per mini-batch, plans per micro-batch instead)."""
        if not self.share_min_tokens or not may_share(model):
            return None
        seqs = [batch.prompt_ids[r] + batch.response_ids[r] for r in rows]
        keep = [len(batch.response_ids[r]) + 1 for r in rows]
        distinct, _ = first_occurrences(tuple(s) for s in seqs)
        plan = plan_prefix_groups([seqs[i] for i in distinct], self.share_min_tokens, [keep[i] for i in distinct])
        if plan is None:
            return None
        cache = PrefixCache(model, [seqs[distinct[g[0]]][:n] for g, n in zip(plan.groups, plan.prefix_lens)],
                            self.pad_id, self.device)
        self.tally["forwarded"] = self.tally.get("forwarded", 0) + cache.tokens
        return cache

    def prepare(self, batch: RolloutBatch) -> PassResults:
        """What the estimator and the update need from no-grad passes over ``batch`` (:class:`PassResults`)."""
        o = self.cfg.optim
        rows_all = trainable_rows(batch)
        out = PassResults(rows_all)
        if not rows_all:
            return out
        values = None
        if self.value_head is not None:
            old, values = self._old_logprobs(batch, rows_all, head=self.value_head)
            out.values = np.array([values.get(i, 0.0) for i in range(len(batch))])
        if o.recompute_old_logprobs:
            old = old if values is not None else self._old_logprobs(batch, rows_all)
        else:
            old = {r: torch.tensor(batch.sampling_logprobs[r]) for r in rows_all}
        out.old = old
        out.sampler_gap = float(np.mean([
            (old[r] - torch.tensor(batch.sampling_logprobs[r])).abs().mean().item() for r in rows_all
        ]))
        if self.use_ref:
            ref = self._old_logprobs(batch, rows_all, ref=True)
            out.ref = ref if o.kl_coef > 0 else None
            out.kl = np.array([float((old[i] - ref[i]).sum()) if i in ref else 0.0 for i in range(len(batch))])
        return out


@dataclass
class PassResults:
    """The no-grad passes' results over one batch, between the rollout and the update (:meth:`PolicyPasses.prepare`):
    ``rows`` (rows with a response), the policy's pre-update log-probs ``old`` and the reference's ``ref`` per row
    (``ref`` None without a KL loss term), the critic's ``values`` (one per row of the batch), the per-row
    ``kl`` = Σ_tokens (old − ref) (KL reward), and ``sampler_gap``: mean |old − sampling log-prob|."""

    rows: list[int]
    old: dict[int, torch.Tensor] = field(default_factory=dict)
    ref: dict[int, torch.Tensor] | None = None
    values: np.ndarray | None = None
    kl: np.ndarray | None = None
    sampler_gap: float = 0.0


def trainable_rows(batch: RolloutBatch) -> list[int]:
    """The rows with a response: the only ones the passes and the update see."""
    return [i for i in range(len(batch)) if batch.response_ids[i]]


def right_align(seqs: list[torch.Tensor], L: int) -> torch.Tensor:
    out = torch.zeros((len(seqs), L), dtype=torch.float32)
    for i, s in enumerate(seqs):
        if len(s):
            out[i, L - len(s):] = s
    return out
