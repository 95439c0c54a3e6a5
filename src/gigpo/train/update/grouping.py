"""Choose the anchors fed to step grouping from a rollout batch, per ``grouping.metric``.

The rule of exact grouping (docs/configuration.md "Anchors"): a step's anchor is the env's true state
(``info["state_key"]``) when the env gives one, and the observation text the agent acted on when it does not. The
collector already stores that in the batch's ``state_key`` column (:meth:`gigpo.envs.base.Env.state_key_of`), so
``exact`` reads that column; ``observation`` keeps the text even where a state is given (the paper's anchors).
"""

from __future__ import annotations

from typing import Any

from gigpo.algo.grouping import GroupingSpec, history_anchors
from gigpo.rollout.batch import RolloutBatch

#: the metrics that group by equal keys (no threshold): exact and its old name state_key, and observation
EXACT_METRICS = ("exact", "state_key", "observation")


def grouping_spec(cfg: Any) -> GroupingSpec | None:
    """``grouping.metric`` / ``grouping.threshold`` as the :class:`gigpo.algo.GroupingSpec` handed to the
    estimators: None for the exact metrics (:data:`EXACT_METRICS`), else the similarity spec — whose constructor is
    the one range check of the threshold (config validation calls this first, so a bad value is a config error)."""
    g = cfg.grouping
    return None if g.metric in EXACT_METRICS else GroupingSpec(g.metric, g.threshold)


def anchors_for(batch: RolloutBatch, metric: str, spec: GroupingSpec | None, history: int = 0) -> Any:
    """The anchors fed to step grouping (:func:`gigpo.algo.compute_advantages`), by ``grouping.metric``:

    * ``exact`` (and ``state_key``, its old name): the env's state key where it gave one, else the observation
      text (module docstring);
    * ``observation``: the observation text the agent acted on, matched exactly;
    * a similarity metric (``spec`` set): the observation text, grouped by ``spec``.

    ``history`` = k > 0 (``grouping.history``; exact metrics only, checked by the config): the anchor is the row's
    own key and the keys of its trajectory's k previous steps
    (:func:`gigpo.algo.grouping.history_anchors`), so two visits of a state match only after the same recent path.
    """
    if spec is not None or metric == "observation":
        keys: list[Any] = list(batch.observation)
        if spec is not None:
            return keys
    else:
        keys = [hashable_key(k) for k in batch.state_key]
    if history > 0:
        arr = batch.arrays()
        return history_anchors(arr["traj_id"], arr["step"], keys, history)
    return keys


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
