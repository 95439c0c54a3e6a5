"""Held-out evaluation that means held out: is the env's start a function of the seed?

Held-out episodes use seeds no training task uses (:func:`gigpo.train.compose.eval_seeds`), but an env whose
start ignores the seed (TextArena's TowerOfHanoi, gymnasium's FrozenLake-v1 and CliffWalking with their fixed maps)
replays the training start in every held-out episode. Before a run or an evaluation, one env is reset with two seeds
(:data:`SEEDS`: consecutive, so seat-by-parity games differ) and their first observations and state keys compared;
identical ones are one warning at start, and evaluation tables say "held-out (same start as training)".
"""

from __future__ import annotations

import warnings
from typing import Any

#: the two reset seeds compared: held-out seeds (never training tasks), consecutive
SEEDS = (2**30, 2**30 + 1)
#: the heading evaluation tables carry for such an env
SAME_START = "held-out (same start as training)"


class SameStartWarning(UserWarning):
    """The env's first observation and state do not depend on the seed (module docstring)."""


def same_start(env: Any) -> bool:
    """Whether ``env`` (built, not yet reset) starts identically from the two :data:`SEEDS`; False when its reset
    raises or hangs (:mod:`gigpo.train.preflight.env_probe`: the rollout reports such an env)."""
    from gigpo.envs.base import Env
    from gigpo.train.preflight.env_probe import probe

    def starts() -> list[tuple[str, str, str]]:
        out = []
        for seed in SEEDS:
            obs, info = env.reset(seed)
            info = info if isinstance(info, dict) else {}
            out.append((str(obs), repr(Env.state_key_of(info, obs)), str(info.get("task", ""))))
        return out

    ok, pair = probe(starts)
    return bool(ok) and pair[0] == pair[1]


def warn_same_start(env_name: str) -> None:
    warnings.warn(f"env {env_name!r} starts the same for every seed (seeds {SEEDS[0]} and {SEEDS[1]} gave the same "
                  "first observation and state): held-out evaluation replays the training start, so its success "
                  f"is labelled {SAME_START!r}; an env option that varies the start (a map, a size, a seeded "
                  "layout) makes it held out", SameStartWarning, stacklevel=2)
