"""No-grad and training forward passes of the policy: log-probs (env tokens masked), values, pre-update passes."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import numpy as np
import torch

from gigpo.rollout import RolloutBatch
from gigpo.train.logprobs import policy_forward
from gigpo.train.value import ValueHead


class PolicyPasses:
    """Forward passes over rollout rows for the trainer: ``logprobs`` (with grad, for the loss) and ``prepare``
    (everything computed once before the update). Holds references, not copies, of the trainer's models."""

    def __init__(self, cfg: Any, model: Any, ref_model: Any, value_head: ValueHead | None, pad_id: int,
                 device: torch.device, use_ref: bool):
        self.cfg, self.model, self.ref_model, self.value_head = cfg, model, ref_model, value_head
        self.pad_id, self.device, self.use_ref = pad_id, device, use_ref

    def logprobs(self, model, rows: list[int], batch: RolloutBatch, with_entropy: bool = False, head=None):
        """``(logp, mask, entropy, values)``; concat batches mask env tokens out of ``mask`` (and ``logp``)."""
        temp = self.cfg.rollout.temperature or 1.0
        logp, mask, ent, values = policy_forward(
            model, [batch.prompt_ids[i] for i in rows], [batch.response_ids[i] for i in rows],
            pad_id=self.pad_id, device=self.device, temperature=temp, with_entropy=with_entropy, head=head,
            allowed=[batch.allowed_tokens[i] for i in rows] if getattr(batch, "allowed_tokens", None) else None,
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
        with ctx:
            for i in range(0, len(rows_all), mbs):
                rows = rows_all[i:i + mbs]
                lp, mask, _, v = self.logprobs(model, rows, batch, head=head)
                for j, r in enumerate(rows):
                    n = len(batch.response_ids[r])
                    out[r] = lp[j, lp.shape[1] - n:].detach().cpu() if n else lp[j, :0].cpu()
                    if v is not None:
                        vals[r] = float(v[j])
        self.model.train(was)
        return (out, vals) if head is not None else out

    def prepare(self, batch: RolloutBatch) -> dict:
        """What the estimator and the update need from no-grad passes: ``rows`` (rows with a response), ``old``
        and ``ref`` log-probs, ``values`` (critic, one per row), ``kl`` (Σ_tokens old − ref, per row) and the
        sampler gap."""
        o = self.cfg.optim
        rows_all = trainable_rows(batch)
        prep: dict[str, Any] = {"rows": rows_all}
        if not rows_all:
            return prep
        values = None
        if self.value_head is not None:
            old, values = self._old_logprobs(batch, rows_all, head=self.value_head)
            prep["values"] = np.array([values.get(i, 0.0) for i in range(len(batch))])
        if o.recompute_old_logprobs:
            old = old if values is not None else self._old_logprobs(batch, rows_all)
        else:
            old = {r: torch.tensor(batch.sampling_logprobs[r]) for r in rows_all}
        prep["old"] = old
        prep["sampler_gap"] = float(np.mean([
            (old[r] - torch.tensor(batch.sampling_logprobs[r])).abs().mean().item() for r in rows_all
        ]))
        if self.use_ref:
            ref = self._old_logprobs(batch, rows_all, ref=True)
            prep["ref"] = ref if o.kl_coef > 0 else None
            prep["kl"] = np.array([float((old[i] - ref[i]).sum()) if i in ref else 0.0 for i in range(len(batch))])
        return prep


def trainable_rows(batch: RolloutBatch) -> list[int]:
    """The rows with a response: the only ones the passes and the update see."""
    return [i for i in range(len(batch)) if batch.response_ids[i]]


def right_align(seqs: list[torch.Tensor], L: int) -> torch.Tensor:
    out = torch.zeros((len(seqs), L), dtype=torch.float32)
    for i, s in enumerate(seqs):
        if len(s):
            out[i, L - len(s):] = s
    return out
