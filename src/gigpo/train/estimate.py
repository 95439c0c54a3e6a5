"""Per-row advantages for every ``algorithm.name``: group estimators, GAE (+ step term) and REINFORCE++.

Which function an algorithm uses is its ``advantage`` entry in :data:`gigpo.train.algorithms.SPECS`."""

from __future__ import annotations

from typing import Any

import numpy as np

from gigpo.algo import compute_advantages
from gigpo.algo.estimators import gae, ppo_step_combine, reinforce_pp, whiten
from gigpo.algo.similarity import grouping_quality
from gigpo.rollout.batch import RolloutBatch
from gigpo.train.algorithms import spec_of
from gigpo.train.grouping import anchors_for, hashable_key


def estimator_args(cfg: Any) -> dict:
    """Map ``algorithm.name`` onto :func:`gigpo.algo.compute_advantages` arguments (its group/step part)."""
    a = cfg.algorithm
    spec = spec_of(a.name)
    return dict(
        estimator=spec.estimator, episode_estimator=spec.episode or a.episode_estimator, gamma=a.gamma,
        step_weight=a.step_weight, normalize=a.normalize, compat=a.compat, std_ddof=a.std_ddof,
    )


def row_advantages(
    cfg: Any, batch: RolloutBatch, values: np.ndarray | None = None, kl: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None, dict]:
    """``(advantages, value_targets or None, stats)`` for the rows of ``batch``, by the advantage function of
    ``algorithm.name``'s entry in :data:`gigpo.train.algorithms.SPECS` (one of the three below)."""
    if len(batch) == 0:
        return np.zeros(0), None, {}
    adv, targets, stats = spec_of(cfg.algorithm.name).advantage_fn(cfg, batch, values, kl)
    stats["adv/mean"] = float(adv.mean())
    stats["adv/std"] = float(adv.std())
    return adv, targets, stats


def _group_part(cfg: Any, batch: RolloutBatch, stats: dict) -> Any:
    """:func:`compute_advantages` over ``batch`` (episode term, plus the step term for ``+step``/gigpo), its
    grouping stats added to ``stats``."""
    g = cfg.grouping
    arr = batch.arrays()
    anchors, similarity, metric = anchors_for(batch, g.metric, g.threshold, g.history)
    out = compute_advantages(
        arr["group_id"], arr["traj_id"], arr["step"], arr["reward"], anchors,
        similarity=similarity, similarity_metric=metric, **estimator_args(cfg),
    )
    stats["adv/abs_step_mean"] = float(np.abs(out.step_advantages).mean())
    stats["adv/abs_episode_mean"] = float(np.abs(out.episode_advantages).mean())
    for k, v in out.stats.items():
        if isinstance(v, (int, float)):
            stats[f"grouping/{k}"] = float(v)
    if spec_of(cfg.algorithm.name).step_level and g.metric != "state_key":
        stats.update(grouping_quality_stats(batch, out.step_group_ids))
    return out


def group_advantages(cfg: Any, batch: RolloutBatch, values: Any = None, kl: Any = None):
    """gigpo, grpo, rloo, dapo, gspo and their ``+step``: :func:`compute_advantages` (no critic, no KL)."""
    stats: dict[str, float] = {}
    return _group_part(cfg, batch, stats).advantages, None, stats


def gae_advantages(cfg: Any, batch: RolloutBatch, values: np.ndarray | None, kl: Any = None):
    """ppo: GAE(γ, λ) with the critic's ``values`` (one per row), whitened over the batch; ppo+step:
    :func:`gigpo.algo.estimators.ppo_step_combine` (whiten(A_GAE) + ω · A_S). Also returns the value targets."""
    a = cfg.algorithm
    if values is None:
        raise ValueError(f"{a.name} needs the critic's values")
    stats: dict[str, float] = {}
    step = _group_part(cfg, batch, stats) if spec_of(a.name).step_level else None
    arr = batch.arrays()
    raw, targets = gae(arr["traj_id"], arr["step"], arr["reward"], values, a.gamma, a.gae_lambda)
    adv = ppo_step_combine(raw, step.step_advantages, a.step_weight) if step is not None else whiten(raw)
    var = float(np.var(targets))
    stats["value/explained_variance"] = 1.0 - float(np.var(targets - values)) / var if var > 0 else 0.0
    stats["value/target_mean"] = float(targets.mean())
    return adv, targets, stats


def reinforce_pp_advantages(cfg: Any, batch: RolloutBatch, values: Any = None, kl: np.ndarray | None = None):
    """reinforce++: :func:`gigpo.algo.estimators.reinforce_pp` with ``kl`` (Σ log π_old − log π_ref per row)."""
    a = cfg.algorithm
    arr = batch.arrays()
    kl = np.zeros(len(batch)) if kl is None else kl
    adv, _ = reinforce_pp(arr["traj_id"], arr["step"], arr["reward"], kl, a.gamma, a.kl_reward_coef)
    return adv, None, {"reinforce++/kl_mean": float(np.mean(kl))}


def grouping_quality_stats(batch: RolloutBatch, step_group_ids: np.ndarray) -> dict:
    """Pairwise precision/recall/F1 of the step groups against the env's true state keys — only when the env
    reports true states that differ from the anchors (e.g. under ads noise); otherwise there is nothing to score."""
    if all(k == o for k, o in zip(batch.state_key, batch.observation)):
        return {}
    q = grouping_quality(step_group_ids, [hashable_key(k) for k in batch.state_key], batch.group_id)
    return {f"grouping/{k}": float(q[k]) for k in ("precision", "recall", "f1")}
