"""Pure math on flat per-step arrays: returns, anchor grouping, advantages (GiGPO/GRPO/RLOO) and PPO losses."""

from gigpo.algo.advantages import AdvantageOutput, compute_advantages, group_normalize
from gigpo.algo.grouping import group_exact, group_similar, step_group_stats
from gigpo.algo.losses import aggregate, entropy_from_logits, kl_penalty, masked_mean, policy_loss
from gigpo.algo.returns import discounted_returns

__all__ = [
    "AdvantageOutput",
    "aggregate",
    "compute_advantages",
    "discounted_returns",
    "entropy_from_logits",
    "group_exact",
    "group_normalize",
    "group_similar",
    "kl_penalty",
    "masked_mean",
    "policy_loss",
    "step_group_stats",
]
