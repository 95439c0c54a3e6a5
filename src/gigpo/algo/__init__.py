"""Pure math on flat per-step arrays: returns, anchor grouping, advantages (GiGPO/GRPO/RLOO) and PPO losses.

``import gigpo.algo`` needs numpy only. The torch losses (``policy_loss``, ``kl_penalty``, ...) load on first
access, and the similarity engine (``gigpo.algo.similarity``, optional numba / rapidfuzz) only when a batch is
grouped by similarity.
"""

from typing import Any

from gigpo.algo.advantages import AdvantageOutput, compute_advantages, group_normalize
from gigpo.algo.grouping import GroupingSpec, group_exact, group_similar, step_group_stats
from gigpo.algo.returns import discounted_returns

# Names served by gigpo.algo.losses, imported (with torch) the first time one of them is used.
_LOSSES = ("aggregate", "entropy_from_logits", "kl_penalty", "masked_mean", "policy_loss")

__all__ = [
    "AdvantageOutput",
    "GroupingSpec",
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


def __getattr__(name: str) -> Any:
    if name in _LOSSES:
        from gigpo.algo import losses

        return getattr(losses, name)
    raise AttributeError(f"module 'gigpo.algo' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
