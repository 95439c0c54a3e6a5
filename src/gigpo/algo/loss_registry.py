"""The policy-loss registry: an algorithm names its loss (``gigpo.train.config.algorithms.AlgoSpec.loss``, or the
config key ``algorithm.loss``) by a registered name, as it names its estimator.

A loss is a function with :func:`gigpo.algo.losses.policy_loss`'s signature::

    fn(logp, old_logp, advantages, mask, *, clip_low, clip_high, agg, agg_constant, token_weight=None)
        -> (loss: 0-dim tensor, stats: dict with at least "clip_frac" and "approx_kl")

``logp`` / ``old_logp`` / ``mask`` are (B, T) right-aligned response tokens, ``advantages`` (B,) or (B, T),
``token_weight`` (B, T) the off-policy correction (absent when ``optim.offpolicy_correction=none``); ``agg`` and
``agg_constant`` are ``optim.loss_agg`` and its constant (:func:`gigpo.algo.losses.aggregate`).

The built-in losses are registered here by ``"module:function"`` path and imported on first use, so listing
or checking losses (loading a config) imports no torch; a user's module registers a function with
:func:`register_loss` and is loaded with ``--import MODULE``, after which ``algorithm.loss=NAME`` trains with it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Loss:
    """A registered loss: ``target`` (the function, or its ``"module:function"`` path), a one-line
    ``description`` (``--help``) and ``ratio``: "token" (one importance ratio per token) or "sequence" (one per
    response, GSPO: its lower clip bound 1 − clip_low must stay positive, checked with the config)."""

    name: str
    target: Callable[..., Any] | str
    description: str
    ratio: Literal["token", "sequence"] = "token"

    def fn(self) -> Callable[..., Any]:
        """The loss function (imported on first use when registered by path)."""
        if callable(self.target):
            return self.target
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)


LOSSES: dict[str, Loss] = {}


def register_loss(name: str, fn: Callable[..., Any] | str | None = None, *, description: str,
                  ratio: Literal["token", "sequence"] = "token") -> Any:
    """Register loss ``name``: ``fn`` (a function or its ``"module:function"`` path), or, without ``fn``, a
    function decorator. A name taken by another function is a ValueError (the same function again — its module
    imported twice — replaces its entry)."""
    if ratio not in ("token", "sequence"):
        raise ValueError(f"loss {name!r}: ratio must be 'token' or 'sequence', got {ratio!r}")

    def deco(target: Callable[..., Any] | str) -> Any:
        old = LOSSES.get(name)
        if old is not None and _where(old.target) != _where(target):
            raise ValueError(f"loss {name!r} is already registered ({_where(old.target)[0]})")
        LOSSES[name] = Loss(name, target, description, ratio)
        return target

    return deco if fn is None else deco(fn)


def _where(target: Callable[..., Any] | str) -> tuple[str, str]:
    if isinstance(target, str):
        return tuple(target.partition(":")[::2])  # type: ignore[return-value]
    return getattr(target, "__module__", ""), getattr(target, "__qualname__", "")


def get_loss(name: str) -> Loss:
    """The loss registered as ``name``; ValueError naming the registered ones otherwise."""
    if name not in LOSSES:
        raise ValueError(f"{name!r} is not one of {', '.join(map(repr, LOSSES))} (a loss of your own: register_loss "
                         "in a module loaded with --import MODULE)")
    return LOSSES[name]


def registered_losses() -> dict[str, Loss]:
    """Every registered loss, in registration order (the built-ins first)."""
    return dict(LOSSES)


register_loss("ppo-clip", "gigpo.algo.losses:policy_loss",
              description="PPO's clipped surrogate per token, clip-higher (optim.clip_low/clip_high)")
register_loss("gspo", "gigpo.algo.losses:gspo_loss", ratio="sequence",
              description="GSPO: one length-normalised importance ratio per response, clipped")
