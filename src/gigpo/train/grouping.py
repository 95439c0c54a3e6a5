"""Choose the anchors fed to step grouping from a rollout batch, per ``grouping.metric``."""

from __future__ import annotations

from typing import Any

from gigpo.rollout.batch import RolloutBatch


def anchors_for(batch: RolloutBatch, metric: str, threshold: float) -> tuple[list[Any], float | None, str]:
    """``(anchors, similarity, similarity_metric)`` for :func:`gigpo.algo.compute_advantages`.

    * ``exact``: the observation text the agent acted on, matched exactly (the paper's default);
    * ``state_key``: the env's true state key (an upper bound on what grouping can recover under noise);
    * ``ro`` / ``indel`` / ``minhash``: observation text grouped by similarity ≥ ``threshold``.
    """
    if metric == "exact":
        return list(batch.observation), None, "ro"
    if metric == "state_key":
        return [hashable_key(k) for k in batch.state_key], None, "ro"
    return list(batch.observation), float(threshold), metric


def hashable_key(key: Any) -> Any:
    if isinstance(key, list):
        return tuple(hashable_key(k) for k in key)
    if isinstance(key, dict):
        return tuple(sorted((k, hashable_key(v)) for k, v in key.items()))
    return key
