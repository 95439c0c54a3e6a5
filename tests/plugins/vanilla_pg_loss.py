"""A one-file policy loss, loaded with ``--import vanilla_pg_loss`` and chosen by ``algorithm.loss=vanilla-pg``
(tests/train/test_user_plugins.py): the importance-weighted policy gradient without clipping,
L = −w · ρ · A per token, ρ = exp(logp − old_logp), aggregated by ``optim.loss_agg``."""

from __future__ import annotations

import torch

from gigpo.algo.loss_registry import register_loss
from gigpo.algo.losses import aggregate

#: calls so far (the test reads it to see that the trainer used this loss)
CALLS = [0]


@register_loss("vanilla-pg", description="policy gradient without clipping: -w * rho * A per token")
def vanilla_pg(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, agg="token-mean", agg_constant=None,
               token_weight=None):
    CALLS[0] += 1
    adv = advantages if advantages.dim() == 2 else advantages[:, None]
    log_ratio = (logp - old_logp.detach()).clamp(-20.0, 20.0)
    per_token = -torch.exp(log_ratio) * adv
    if token_weight is not None:
        per_token = per_token * token_weight
    loss = aggregate(per_token, mask, agg, agg_constant)
    with torch.no_grad():
        m = mask.bool()
        approx_kl = float((-log_ratio)[m].mean()) if bool(m.any()) else 0.0
    return loss, {"clip_frac": 0.0, "approx_kl": approx_kl}
