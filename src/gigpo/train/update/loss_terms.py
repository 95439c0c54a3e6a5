"""The loss of one micro-batch, before the trainer weights it into the mini-batch's gradient:

    L = L_policy(ratio clip, optim.loss_agg) − c_ent · H + c_KL · KL(π ‖ π_ref)

with the token weights of ``optim.offpolicy_correction``; and the critic's value loss (a mean over rows). Pure
tensor math on the rows' log-probs: no optimizer, no collectives (those stay in :mod:`gigpo.train.trainer`)."""

from __future__ import annotations

from typing import Any

import torch

from gigpo.algo import kl_penalty
from gigpo.algo.losses import aggregate, value_loss
from gigpo.rollout.batch import RolloutBatch
from gigpo.train.update.passes import right_align


def policy_terms(cfg: Any, loss_fn: Any, batch: Any, rows: list[int], logp: torch.Tensor, mask: torch.Tensor,
                 ent: torch.Tensor, old: dict, ref: dict | None, adv_t: torch.Tensor
                 ) -> tuple[torch.Tensor, list[tuple[str, float]]]:
    """``(L, logs)`` of ``rows``: ``old`` / ``ref`` are the rows' pre-update and reference log-probs (``ref``
    None: no KL term), ``adv_t`` the advantages of every row of ``batch``."""
    o = cfg.optim
    L = logp.shape[1]
    old_lp = right_align([old[r] for r in rows], L).to(logp.device)
    adv = adv_t[rows].to(logp.device)
    # seq-sum-over-constant: Σ_t / max_response_tokens per row, averaged over rows (Dr. GRPO).
    const = float(cfg.rollout.max_response_tokens * len(rows))
    # optim.offpolicy_correction: a token weight from the learner's over the sampler's log-probs
    w, ost = correction_weight(o, batch, rows, old_lp, mask)
    pg, st = loss_fn(
        logp, old_lp, adv, mask, clip_low=o.clip_low, clip_high=o.clip_high, agg=o.loss_agg,
        agg_constant=const, **({"token_weight": w} if w is not None else {}),
    )
    loss = pg
    ent_mean = aggregate(ent, mask, o.loss_agg, const)
    if o.entropy_coef:
        loss = loss - o.entropy_coef * ent_mean
    kl_val = torch.zeros(())
    if ref is not None:
        ref_lp = right_align([ref[r] for r in rows], L).to(logp.device)
        kl_val = aggregate(kl_penalty(logp, ref_lp, o.kl_kind), mask, o.loss_agg, const)
        loss = loss + o.kl_coef * kl_val
    logs = [("loss/policy", pg.item()), ("loss/entropy", ent_mean.item()), ("loss/kl", kl_val.item()),
            ("loss/clip_frac", st["clip_frac"]), ("loss/approx_kl", st["approx_kl"]), *ost.items()]
    return loss, logs


def value_terms(cfg: Any, values: torch.Tensor, critic: tuple[torch.Tensor, torch.Tensor], rows: list[int]
                ) -> tuple[torch.Tensor, list[tuple[str, float]]]:
    """``(value loss, logs)`` of ``rows``; ``critic`` = (old values, targets) of every row. The value head's
    settings are ``algorithm.ppo``'s for every critic estimator (:data:`gigpo.train.config.algorithms.VALUE_HEAD_SECTION`)."""
    vl, vst = value_loss(values, critic[0][rows].to(values.device), critic[1][rows].to(values.device),
                         cfg.algorithm.ppo.value_clip)
    return vl, [("loss/value", vl.item()), ("value/clip_frac", vst["vf_clip_frac"]), ("value/mean", vst["value_mean"])]


def correction_weight(optim: Any, batch: RolloutBatch, rows: list[int], learner_lp: torch.Tensor,
                      mask: torch.Tensor) -> tuple[torch.Tensor | None, dict[str, float]]:
    """``optim.offpolicy_correction``'s token weight for ``rows`` (None for "none") and its ``offpolicy/*``
    stats: :func:`gigpo.algo.losses.offpolicy_weight` of the learner's pre-update log-probs ``learner_lp``
    (B, L, right-aligned) over the sampler's recorded ones."""
    if optim.offpolicy_correction == "none":
        return None, {}
    from gigpo.algo.losses import offpolicy_weight
    from gigpo.train.update.passes import right_align

    sampler = right_align([torch.as_tensor(batch.sampling_logprobs[r], dtype=torch.float32) for r in rows],
                          learner_lp.shape[1]).to(learner_lp.device)
    w, st = offpolicy_weight(learner_lp, sampler, mask, optim.offpolicy_correction, optim.offpolicy_cap)
    return w, {f"offpolicy/{k}": v for k, v in st.items()}
