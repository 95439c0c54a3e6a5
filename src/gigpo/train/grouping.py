"""Choose the anchors fed to step grouping from a rollout batch, per ``grouping.metric``.

The rule of exact grouping (docs/configuration.md "Anchors"): a step's anchor is the env's true state
(``info["state_key"]``) when the env gives one, and the observation text the agent acted on when it does not. The
collector already stores that in the batch's ``state_key`` column (:meth:`gigpo.envs.base.Env.state_key_of`), so
``exact`` reads that column; ``observation`` keeps the text even where a state is given (the paper's anchors).
"""

from __future__ import annotations

from typing import Any

from gigpo.algo.grouping import history_anchors
from gigpo.rollout.batch import RolloutBatch

#: the metrics that group by equal keys (no threshold): exact and its old name state_key, and observation
EXACT_METRICS = ("exact", "state_key", "observation")


def anchors_for(
    batch: RolloutBatch, metric: str, threshold: float, history: int = 0
) -> tuple[Any, float | None, str]:
    """``(anchors, similarity, similarity_metric)`` for :func:`gigpo.algo.compute_advantages`.

    * ``exact`` (and ``state_key``, its old name): the env's state key where it gave one, else the observation
      text (module docstring);
    * ``observation``: the observation text the agent acted on, matched exactly;
    * ``ro`` / ``indel`` / ``minhash``: observation text grouped by similarity ≥ ``threshold``.

    ``history`` = k > 0 (``grouping.history``; exact metrics only, checked by the config): the anchor is the row's
    own key and the keys of its trajectory's k previous steps
    (:func:`gigpo.algo.grouping.history_anchors`), so two visits of a state match only after the same recent path.
    """
    if metric == "observation":
        keys: list[Any] = list(batch.observation)
    elif metric in EXACT_METRICS:
        keys = [hashable_key(k) for k in batch.state_key]
    else:
        return list(batch.observation), float(threshold), metric
    if history > 0:
        arr = batch.arrays()
        return history_anchors(arr["traj_id"], arr["step"], keys, history), None, "ro"
    return keys, None, "ro"


def state_key_fraction(batch: RolloutBatch) -> float:
    """The fraction of rows whose state key is the env's own (not the observation text the collector put in its
    place): 1.0 = every exact anchor was the env's state, 0.0 = every one was the text (``grouping/state_key_anchors``)."""
    if not len(batch):
        return 0.0
    own = sum(not (isinstance(k, str) and k == o) for k, o in zip(batch.state_key, batch.observation))
    return own / len(batch)


def hashable_key(key: Any) -> Any:
    if isinstance(key, list):
        return tuple(hashable_key(k) for k in key)
    if isinstance(key, dict):
        return tuple(sorted((k, hashable_key(v)) for k, v in key.items()))
    return key
