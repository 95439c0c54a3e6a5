"""Learning-rate schedule over iterations (a pure function of the iteration, so resumes need no state)."""

from __future__ import annotations

import math

from gigpo.train.config import Config


def lr_at(cfg: Config, it: int) -> float:
    """Learning rate of iteration ``it`` (1-based): linear warm-up over ``optim.warmup_iterations``, then
    ``constant``, or ``linear`` / ``cosine`` decay from ``optim.lr`` to ``optim.lr · optim.min_lr_ratio`` at the
    last iteration."""
    o = cfg.optim
    if o.warmup_iterations and it <= o.warmup_iterations:
        return o.lr * it / o.warmup_iterations
    if o.lr_schedule == "constant":
        return o.lr
    span = max(cfg.train.iterations - o.warmup_iterations, 1)
    frac = min(max(it - o.warmup_iterations, 0) / span, 1.0)
    decay = 1 - frac if o.lr_schedule == "linear" else 0.5 * (1 + math.cos(math.pi * frac))
    return o.lr * (o.min_lr_ratio + (1 - o.min_lr_ratio) * decay)
