"""The trainer's side of the engine contract (:mod:`gigpo.rollout.engines`): start, and the per-iteration
weight push + metrics — the same calls for every ``rollout.engine``, local or remote.

:func:`start_engine` probes the engine and pushes the learner's weights before the first rollout (an engine that
cannot take them is a ConfigError: one line and exit 2 from ``gigpo train``); :func:`after_update` pushes them
after each update and returns the iteration's engine metrics: ``weights/*`` from the push, ``rollout/*`` from
``engine.stats()``, and, for an engine that samples from a copy of the weights, the rollout-vs-learner log-prob
gap of the batch (``prep.old``: the learner's log-probs before the update). An engine pinned to a version
(``engine.pinned_version`` set: ``rollout.async``, :mod:`gigpo.train.async_rollout`) is pushed by its rollout
thread, between batches, never here: a push after the update would change the weights under a batch in flight.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from gigpo.rollout.engines import EngineError, engine_spec

log = logging.getLogger(__name__)


def logprob_gap(old: dict[int, Any], sampling: list[list[float]]) -> tuple[float, float]:
    """``(mean, max)`` over response tokens of |learner log-prob − rollout log-prob|, ``old`` per row."""
    diffs = [np.abs(np.asarray(old[r], dtype=np.float64) - np.asarray(sampling[r], dtype=np.float64))
             for r in old if len(sampling[r])]
    if not diffs:
        return 0.0, 0.0
    flat = np.concatenate(diffs)
    return float(flat.mean()), float(flat.max())


def start_engine(engine: Any, model: Any, version: int) -> None:
    """Before the first rollout: the engine reachable and sampling from the learner's weights (``version``)."""
    from gigpo.train.config.error import ConfigError

    try:
        engine.probe()
        engine.push_weights(model, version, required=True)
    except EngineError as e:
        key = getattr(getattr(engine, "capabilities", None), "blame_key", "rollout.engine")
        raise ConfigError(f"{key}: {' '.join(str(e).split())}") from None


def after_update(engine: Any, model: Any, it: int, batch: Any, prep: Any) -> dict[str, float]:
    """Push the updated weights (version ``it``) and the iteration's engine metrics (see the module docstring)."""
    rec: dict[str, float] = {}
    if not engine.shares_learner_weights and prep is not None and prep.old:  # prep: passes.PassResults
        mean, mx = logprob_gap(prep.old, batch.sampling_logprobs)
        rec.update({"rollout/logprob_gap_mean": mean, "rollout/logprob_gap_max": mx})
    rec.update(engine.stats())
    if getattr(engine, "pinned_version", None) is None:
        rec.update(engine.push_weights(model, it))
    return rec


def preflight_engine(cfg: Any) -> None:
    """Before any model loads: an engine that declares ``capabilities.early_probe`` reaches its backends (its
    class's ``preflight(cfg)``); an unreachable one is a ConfigError naming ``capabilities.blame_key``."""
    spec = engine_spec(cfg.rollout.engine)
    if not spec.capabilities.early_probe:
        return
    from gigpo.train.config.error import ConfigError

    try:
        spec.cls.preflight(cfg)
    except EngineError as e:
        raise ConfigError(f"{spec.capabilities.blame_key}: {' '.join(str(e).split())}") from None
