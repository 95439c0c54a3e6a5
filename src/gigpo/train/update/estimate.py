"""Per-row advantages for every ``algorithm.name``: the rollout batch as a :class:`gigpo.algo.registry.StepBatch`,
handed to the algorithm's registered estimator (:func:`gigpo.train.config.algorithms.resolve_estimator`)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from gigpo.algo.grouping import GroupingSpec
from gigpo.algo.registry import StepBatch
from gigpo.algo.similarity import grouping_quality
from gigpo.rollout.batch import RolloutBatch
from gigpo.train.config.algorithms import resolve_estimator
from gigpo.train.update.grouping import anchors_for, hashable_key, state_key_fraction


def step_batch(cfg: Any, batch: RolloutBatch, grouping: GroupingSpec | None, step_term: bool, values: Any = None,
               kl: Any = None) -> StepBatch:
    """The estimator's view of ``batch``: ids, steps, rewards; the anchors of ``grouping.*`` and the similarity
    ``grouping`` (:func:`gigpo.train.update.grouping.grouping_spec`) when the estimator uses step groups; the critic's
    values and KL when given; per row, whether its trajectory was won and whether it was truncated (cut by a
    step/time limit: GAE bootstraps after its last row)."""
    arr = batch.arrays()
    anchors = anchors_for(batch, cfg.grouping.metric, grouping, cfg.grouping.history) if step_term else None
    won, truncated = trajectory_flags(batch)
    return StepBatch(arr["group_id"], arr["traj_id"], arr["step"], arr["reward"], anchors,
                     grouping if step_term else None, values=values, kl=kl, won=won, truncated=truncated)


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


class Advantages(NamedTuple):
    """The advantage phase's result, per row of the batch: ``advantages``, the critic's ``value_targets`` (None
    without a critic) and the iteration's ``adv/*`` and ``grouping/*`` metrics (``stats``)."""

    advantages: np.ndarray
    value_targets: np.ndarray | None
    stats: dict


def row_advantages(cfg: Any, batch: RolloutBatch, grouping: GroupingSpec | None, values: np.ndarray | None = None,
                   kl: np.ndarray | None = None) -> Advantages:
    """:class:`Advantages` for the rows of ``batch`` by ``algorithm.name``'s estimator, step groups by
    ``grouping`` (built once per run: :func:`gigpo.train.update.grouping.grouping_spec`)."""
    if len(batch) == 0:
        return Advantages(np.zeros(0), None, {})
    est, common, options = resolve_estimator(cfg)
    if est.needs_values and values is None:
        raise ValueError(f"{cfg.algorithm.name} needs the critic's values")
    out = est(step_batch(cfg, batch, grouping, est.uses_step_term(common.step), values, kl), common, options)
    stats = dict(out.stats)
    if out.step_group_ids is not None:
        if grouping is None and cfg.grouping.metric != "observation":
            stats["grouping/state_key_anchors"] = state_key_fraction(batch)  # which rule of exact grouping applied
        else:  # text anchors: scored against the env's states, when it reports them
            stats.update(grouping_quality_stats(batch, out.step_group_ids))
    stats["adv/mean"] = float(out.advantages.mean())
    stats["adv/std"] = float(out.advantages.std())
    return Advantages(out.advantages, out.value_targets, stats)


def grouping_quality_stats(batch: RolloutBatch, step_group_ids: np.ndarray) -> dict:
    """Pairwise precision/recall/F1 of the step groups against the env's true state keys — only when the env
    reports true states that differ from the anchors (e.g. under ads noise); otherwise there is nothing to score."""
    if all(k == o for k, o in zip(batch.state_key, batch.observation)):
        return {}
    q = grouping_quality(step_group_ids, [hashable_key(k) for k in batch.state_key], batch.group_id)
    return {f"grouping/{k}": float(q[k]) for k in ("precision", "recall", "f1")}
