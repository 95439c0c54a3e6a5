"""The estimators ``gigpo audit`` scores: each a registered estimator of :mod:`gigpo.algo` run on the audit's
rows under the checkpoint's own config, with only the algorithm (and, for similarity grouping, the anchor
metric) changed — so γ, normalisation, ω and the grouping settings are the run's."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from gigpo.rollout.batch import RolloutBatch
from gigpo.train.config.algorithms import resolve_estimator
from gigpo.train.update.estimate import step_batch
from gigpo.train.update.grouping import grouping_spec


@dataclass(frozen=True)
class Arm:
    """One row of the audit table: ``algorithm`` (an ``algorithm.name``), optional grouping changes, and whether
    it is scored on the branched collection (``branched``)."""

    label: str
    algorithm: str
    grouping: tuple[tuple[str, Any], ...] = ()
    branched: bool = False


#: the audit's estimators, by their ``--estimators`` names
ARMS: dict[str, Arm] = {
    "grpo": Arm("GRPO", "grpo"),
    "rloo": Arm("RLOO", "rloo"),
    "gigpo": Arm("GiGPO exact", "gigpo", (("metric", "exact"),)),
    "gigpo-similarity": Arm("GiGPO similarity (ro >= 0.9)", "gigpo", (("metric", "ro"), ("threshold", 0.9))),
    "hgpo": Arm("HGPO", "hgpo"),
    "graphgpo": Arm("GraphGPO", "graphgpo"),
    "gigpo-branched": Arm("GiGPO, branched rollouts", "gigpo", (("metric", "exact"),), branched=True),
}


def arm_config(cfg: Any, arm: Arm) -> Any:
    """The run's config with the arm's algorithm and grouping (a copy; the run's config is untouched)."""
    out = copy.deepcopy(cfg)
    out.algorithm.name = arm.algorithm
    for key, value in arm.grouping:
        setattr(out.grouping, key, value)
    out.grouping.history = 0
    return out


def arm_advantages(cfg: Any, arm: Arm, batch: RolloutBatch) -> tuple[np.ndarray, np.ndarray | None]:
    """Per row of ``batch``: the arm's advantage and its step-level term (None: the estimator has none)."""
    c = arm_config(cfg, arm)
    est, common, options = resolve_estimator(c)
    if est.needs_values:
        raise ValueError(f"estimator {arm.algorithm!r} needs a critic; the audit scores critic-free estimators")
    out = est(step_batch(c, batch, grouping_spec(c), est.uses_step_term(common.step)), common, options)
    return np.asarray(out.advantages, dtype=np.float64), (
        None if out.step_advantages is None else np.asarray(out.step_advantages, dtype=np.float64))
