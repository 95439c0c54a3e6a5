"""The verl-agent reproduction as its own estimator: GiGPO / GRPO / RLOO with the official code's numerics
(episode statistics over step rows, a one-row group keeps its raw score, ``to_hashable`` anchor keys, difflib
similarity in batch order; :func:`gigpo.algo.compat.verl_agent_advantages`, docs/library.md). ``algorithm.compat=verl-agent``
selects it for gigpo, grpo, rloo and their ``+step`` / dapo / gspo variants."""

from __future__ import annotations

from gigpo.algo.compat import verl_agent_advantages
from gigpo.algo.estimators.group import group_estimate
from gigpo.algo.registry import Common, Estimate, StepBatch, register_estimator


@register_estimator("verl-agent", description="GiGPO/GRPO/RLOO as verl-agent's code computes them (order-dependent)",
                    step_term="optional", selectable=False)  # reached by algorithm.compat=verl-agent
def verl_agent_estimator(batch: StepBatch, common: Common, options: object) -> Estimate:
    return group_estimate(batch, common, common.episode, common.step, fn=verl_agent_advantages)
