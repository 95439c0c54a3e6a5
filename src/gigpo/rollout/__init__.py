"""Multi-turn collection: groups of envs, one batched generation per turn for the still-active envs.

The names below load on first use (PEP 562), so importing a light part of the package — the engine registry
:mod:`gigpo.rollout.engines`, read when a config is checked — does not import torch."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "RolloutBatch": "gigpo.rollout.batch", "Trajectory": "gigpo.rollout.batch",
    "Collector": "gigpo.rollout.collector",
    "Engine": "gigpo.rollout.registry", "Generation": "gigpo.rollout.registry",
    "HFEngine": "gigpo.rollout.engines.hf",
}

__all__ = ["Collector", "Engine", "Generation", "HFEngine", "RolloutBatch", "Trajectory"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'gigpo.rollout' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
