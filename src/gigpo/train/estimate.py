"""Per-row advantages for every ``algorithm.name``: the rollout batch as a :class:`gigpo.algo.registry.StepBatch`,
handed to the algorithm's registered estimator (:func:`gigpo.train.algorithms.resolve_estimator`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from gigpo.algo.registry import StepBatch
from gigpo.algo.similarity import grouping_quality
from gigpo.rollout.batch import RolloutBatch
from gigpo.train.algorithms import resolve_estimator
from gigpo.train.grouping import EXACT_METRICS, anchors_for, hashable_key, state_key_fraction


def step_batch(cfg: Any, batch: RolloutBatch, step_term: bool, values: Any = None, kl: Any = None) -> StepBatch:
    """The estimator's view of ``batch``: ids, steps, rewards; the anchors of ``grouping.*`` when the estimator
    uses step groups; the critic's values and KL when given; per row, whether its trajectory was won and whether
    it was truncated (cut by a step/time limit: GAE bootstraps after its last row)."""
    g = cfg.grouping
    arr = batch.arrays()
    anchors, similarity, metric = anchors_for(batch, g.metric, g.threshold, g.history) if step_term else (
        None, None, "ro")
    won, truncated = trajectory_flags(batch)
    return StepBatch(arr["group_id"], arr["traj_id"], arr["step"], arr["reward"], anchors, similarity, metric,
                     values=values, kl=kl, won=won, truncated=truncated)


def trajectory_flags(batch: RolloutBatch) -> tuple[np.ndarray, np.ndarray]:
    """Per row: its trajectory's ``won`` and ``truncated`` (False where a row's Trajectory is missing); a sorted
    lookup, no loop over rows."""
    n = len(batch)
    won, cut = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    if not batch.trajectories or n == 0:
        return won, cut
    tids = np.asarray([t.traj_id for t in batch.trajectories], dtype=np.int64)
    order = np.argsort(tids, kind="stable")
    ids = tids[order]
    rows = np.asarray(batch.traj_id, dtype=np.int64)
    pos = np.minimum(np.searchsorted(ids, rows), ids.size - 1)
    hit = ids[pos] == rows
    won[hit] = np.asarray([t.won for t in batch.trajectories], dtype=bool)[order][pos[hit]]
    cut[hit] = np.asarray([t.truncated for t in batch.trajectories], dtype=bool)[order][pos[hit]]
    return won, cut


def row_advantages(
    cfg: Any, batch: RolloutBatch, values: np.ndarray | None = None, kl: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None, dict]:
    """``(advantages, value_targets or None, stats)`` for the rows of ``batch`` by ``algorithm.name``'s estimator."""
    if len(batch) == 0:
        return np.zeros(0), None, {}
    est, common, options = resolve_estimator(cfg)
    if est.needs_values and values is None:
        raise ValueError(f"{cfg.algorithm.name} needs the critic's values")
    out = est(step_batch(cfg, batch, est.uses_step_term(common.step), values, kl), common, options)
    stats = dict(out.stats)
    if out.step_group_ids is not None:
        if cfg.grouping.metric in EXACT_METRICS and cfg.grouping.metric != "observation":
            stats["grouping/state_key_anchors"] = state_key_fraction(batch)  # which rule of exact grouping applied
        else:  # text anchors: scored against the env's states, when it reports them
            stats.update(grouping_quality_stats(batch, out.step_group_ids))
    stats["adv/mean"] = float(out.advantages.mean())
    stats["adv/std"] = float(out.advantages.std())
    return out.advantages, out.value_targets, stats


def grouping_quality_stats(batch: RolloutBatch, step_group_ids: np.ndarray) -> dict:
    """Pairwise precision/recall/F1 of the step groups against the env's true state keys — only when the env
    reports true states that differ from the anchors (e.g. under ads noise); otherwise there is nothing to score."""
    if all(k == o for k, o in zip(batch.state_key, batch.observation)):
        return {}
    q = grouping_quality(step_group_ids, [hashable_key(k) for k in batch.state_key], batch.group_id)
    return {f"grouping/{k}": float(q[k]) for k in ("precision", "recall", "f1")}
