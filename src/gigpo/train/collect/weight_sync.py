"""Compatibility names for the weight push, which now lives with the engines (:mod:`gigpo.rollout.engines.weight_push`):
an engine's ``push_weights`` is the one way to sync (the engine contract, :mod:`gigpo.rollout.engines`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gigpo.rollout.engines.weight_push import save_weights

__all__ = ["FullWeightSync", "save_weights"]


class FullWeightSync:
    """``push(version)`` = ``engine.push_weights(model, version)`` with the pushed files under ``shared_dir``."""

    def __init__(self, model: Any, engine: Any, shared_dir: str | Path):
        self.model, self.engine = model, engine
        engine.weights_dir = Path(shared_dir)

    def push(self, version: int, *, required: bool = False) -> dict[str, float]:
        return self.engine.push_weights(self.model, version, required=required)
