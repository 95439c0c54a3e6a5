"""GiGPO, GRPO and RLOO as registered estimators: :func:`gigpo.algo.compute_advantages` over a :class:`StepBatch`.

``gigpo``: A = A_E + ω A_S with the episode term ``common.episode``; ``grpo`` / ``rloo``: A = A_E of that kind,
plus ω A_S when ``common.step`` (the ``+step`` algorithms). Equations: docs/library.md.
"""

from __future__ import annotations

import numpy as np

from gigpo.algo.advantages import AdvantageOutput, compute_advantages
from gigpo.algo.registry import Common, Estimate, StepBatch, register_estimator


def group_estimate(batch: StepBatch, common: Common, episode: str, step: bool, fn=compute_advantages) -> Estimate:
    """``fn`` (:func:`compute_advantages`, or the verl-agent reproduction) with episode term ``episode`` and, when
    ``step``, GiGPO's step term."""
    out = fn(
        batch.group_id, batch.traj_id, batch.step, batch.reward, batch.anchors,
        estimator="gigpo" if step else episode, episode_estimator=episode, gamma=common.gamma,
        step_weight=common.step_weight, normalize=common.normalize, grouping=batch.grouping,
        std_ddof=common.std_ddof,
    )
    return Estimate(out.advantages, None, out.episode_advantages, out.step_advantages,
                    out.step_group_ids if step else None, grouping_stats(out))


def grouping_stats(out: AdvantageOutput) -> dict[str, float]:
    """Metrics of an :class:`AdvantageOutput`: mean |A_S| and |A_E|, and its stats under ``grouping/``."""
    stats = {"adv/abs_step_mean": float(np.abs(out.step_advantages).mean()),
             "adv/abs_episode_mean": float(np.abs(out.episode_advantages).mean())}
    stats.update({f"grouping/{k}": float(v) for k, v in out.stats.items() if isinstance(v, (int, float))})
    return stats


@register_estimator("gigpo", description="GiGPO: episode term (algorithm.episode_estimator) + step-level term",
                    step_term="always")
def gigpo_estimator(batch: StepBatch, common: Common, options: object) -> Estimate:
    return group_estimate(batch, common, common.episode, True)


@register_estimator("grpo", description="GRPO: episode return normalised within its group", step_term="optional")
def grpo_estimator(batch: StepBatch, common: Common, options: object) -> Estimate:
    return group_estimate(batch, common, "grpo", common.step)


@register_estimator("rloo", description="RLOO: leave-one-out group baseline", step_term="optional")
def rloo_estimator(batch: StepBatch, common: Common, options: object) -> Estimate:
    return group_estimate(batch, common, "rloo", common.step)
