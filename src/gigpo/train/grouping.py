"""Choose the anchors fed to step grouping from a rollout batch, per ``grouping.metric``."""

from __future__ import annotations

from typing import Any

import numpy as np

from gigpo.algo.grouping import history_anchors
from gigpo.rollout.batch import RolloutBatch


def anchors_for(
    batch: RolloutBatch, metric: str, threshold: float, history: int = 0
) -> tuple[Any, float | None, str]:
    """``(anchors, similarity, similarity_metric)`` for :func:`gigpo.algo.compute_advantages`.

    * ``exact``: the observation text the agent acted on, matched exactly (the paper's default);
    * ``state_key``: the env's true state key (an upper bound on what grouping can recover under noise);
    * ``ro`` / ``indel`` / ``minhash``: observation text grouped by similarity ≥ ``threshold``.

    ``history`` = k > 0 (``grouping.history``; exact and state_key only, checked by the config): the anchor is the
    row's own key and the keys of its trajectory's k previous steps
    (:func:`gigpo.algo.grouping.history_anchors`), so two visits of a state match only after the same recent path.
    """
    if metric == "exact":
        keys: list[Any] = list(batch.observation)
    elif metric == "state_key":
        keys = [hashable_key(k) for k in batch.state_key]
    else:
        return list(batch.observation), float(threshold), metric
    if history > 0:
        arr = batch.arrays()
        return history_anchors(arr["traj_id"], arr["step"], keys, history), None, "ro"
    return keys, None, "ro"


def hashable_key(key: Any) -> Any:
    if isinstance(key, list):
        return tuple(hashable_key(k) for k in key)
    if isinstance(key, dict):
        return tuple(sorted((k, hashable_key(v)) for k, v in key.items()))
    return key


def hgpo_group_advantages(cfg: Any, batch: RolloutBatch, values: Any = None, kl: Any = None):
    """hgpo: :func:`gigpo.algo.hgpo.hgpo_advantages` over the batch's exact / state-key anchors, K =
    ``algorithm.hgpo_levels``, α = ``algorithm.hgpo_alpha``, episode term ``algorithm.episode_estimator`` (none when
    ``algorithm.hgpo_episode`` is false), ``algorithm.normalize`` / ``std_ddof`` / ``gamma`` / ``step_weight``."""
    from gigpo.algo.hgpo import hgpo_advantages

    a, g = cfg.algorithm, cfg.grouping
    arr = batch.arrays()
    anchors, _, _ = anchors_for(batch, g.metric, g.threshold)
    out = hgpo_advantages(
        arr["group_id"], arr["traj_id"], arr["step"], arr["reward"], anchors, levels=a.hgpo_levels,
        alpha=a.hgpo_alpha, gamma=a.gamma, normalize=a.normalize, std_ddof=a.std_ddof,
        episode=a.episode_estimator if a.hgpo_episode else None, step_weight=a.step_weight,
    )
    stats = {f"grouping/{k}": float(v) for k, v in out.stats.items() if isinstance(v, (int, float))}
    stats["adv/abs_step_mean"] = float(np.abs(out.step_advantages).mean())
    stats["adv/abs_episode_mean"] = float(np.abs(out.episode_advantages).mean())
    return out.advantages, None, stats
