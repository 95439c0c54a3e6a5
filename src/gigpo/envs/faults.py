"""What a misbehaving env becomes — :class:`EnvFault` — and the checks of env outputs against the Env contract
(:func:`check_reset`, :func:`check_step`, the typed ``info`` of :class:`gigpo.envs.base.StepInfo`); shared by the
guard (:mod:`gigpo.envs.guard`) and its worker backends (:mod:`gigpo.envs._workers`, :mod:`gigpo.envs._ray_workers`),
which import these from here, so no backend imports the guard that chooses it."""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gigpo.envs.base import Env

#: Env attributes the collector reads; snapshotted in the worker after construction and after every reset.
_ATTRS = ("instructions", "max_steps", "raw_action")


class EnvFault(Exception):
    """An env call that timed out, raised, or broke the Env contract. ``kind``: ``timeout`` | ``error`` |
    ``invalid``; ``method``: ``make`` | ``reset`` | ``step`` | ``close``."""

    def __init__(self, kind: str, method: str, message: str):
        super().__init__(f"{kind} in {method}: {message}")
        self.kind, self.method, self.message = kind, method, message


@dataclass(eq=False)  # handles are compared by identity (pool slots, discard)
class EnvHandle:
    """One env instance inside a guard's worker. ``broken``: it faulted and must not be called again."""

    name: str
    instructions: str = ""
    max_steps: int = 50
    raw_action: bool = False
    #: the env has ``snapshot()`` / ``restore(snapshot)`` (branch rollouts restore by them instead of replay)
    can_snapshot: bool = False
    broken: bool = False
    #: backend state: the Env (inline) or the process and pipe (process)
    _backend: Any = field(default=None, repr=False)

    def update(self, attrs: dict[str, Any]) -> None:
        self.instructions = str(attrs.get("instructions", "") or "")
        self.max_steps = int(attrs.get("max_steps", 0) or 0)
        self.raw_action = bool(attrs.get("raw_action", False))
        self.can_snapshot = bool(attrs.get("can_snapshot", False))
        self.name = self.name or str(attrs.get("name") or "")  # the registry name when known, else the class


def env_attrs(env: Env) -> dict[str, Any]:
    """The attributes the collector needs, read where the env lives (a property may compute them)."""
    out = {a: getattr(env, a, None) for a in _ATTRS}
    out["instructions"] = str(out["instructions"] or "")
    out["name"] = type(env).__name__
    out["can_snapshot"] = can_snapshot(env)
    return out


def can_snapshot(env: Any) -> bool:
    """Whether ``env`` has the optional ``snapshot()`` / ``restore(snapshot)`` pair (gigpo.envs.base.Env)."""
    return callable(getattr(env, "snapshot", None)) and callable(getattr(env, "restore", None))


# ------------------------------------------------------------------------------------------------- validation
def _describe(x: Any) -> str:
    text = repr(x)
    return f"{type(x).__name__} {text[:60] + '...' if len(text) > 60 else text}"


def _check_info(info: Any, method: str) -> dict[str, Any]:
    if not isinstance(info, dict):
        raise EnvFault("invalid", method, f"info must be a dict, got {_describe(info)}")
    adm = info.get("admissible_actions")
    if adm is not None and (not isinstance(adm, (list, tuple)) or not all(isinstance(a, str) for a in adm)):
        raise EnvFault("invalid", method, f"info['admissible_actions'] must be a list of str or None, got "
                                          f"{_describe(adm)}")
    if "score" in info:
        _finite(info["score"], method, "info['score']")
    for k in ("won", "action_valid", "truncated"):  # StepInfo's flags: bool (numpy's too) or an integer 0 / 1
        if k in info and not _is_flag(info[k]):
            raise EnvFault("invalid", method, f"info[{k!r}] must be a bool, got {_describe(info[k])}")
    if "task" in info and not isinstance(info["task"], str):
        raise EnvFault("invalid", method, f"info['task'] must be a str, got {_describe(info['task'])}")
    return info


def _is_flag(x: Any) -> bool:
    return type(x) is bool or (isinstance(x, (numbers.Integral, np.bool_)) and int(x) in (0, 1))


def _finite(x: Any, method: str, what: str) -> float:
    # numbers.Real covers int, float, bool and numpy's scalar types; a str like "1.0" is refused, not parsed.
    # (The exact-type test first: an ABC isinstance costs ~1 µs, and this runs on every step.)
    if type(x) is not float and not isinstance(x, numbers.Real):
        raise EnvFault("invalid", method, f"{what} must be a real number, got {_describe(x)}")
    v = float(x)
    if not math.isfinite(v):
        raise EnvFault("invalid", method, f"{what} is {v} (must be finite)")
    return v


def check_reset(out: Any) -> tuple[str, dict[str, Any]]:
    """``reset`` must return ``(observation: str, info: dict)``; anything else raises :class:`EnvFault`."""
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise EnvFault("invalid", "reset", f"must return (observation, info), got {_describe(out)}")
    obs, info = out
    if not isinstance(obs, str):
        raise EnvFault("invalid", "reset", f"observation must be a str, got {_describe(obs)}")
    return obs, _check_info(info, "reset")


def check_step(out: Any) -> tuple[str, float, bool, dict[str, Any]]:
    """``step`` must return ``(observation: str, reward: finite real, done: bool, info: dict)``; the reward comes
    back as a float and ``done`` as a bool. Anything else raises :class:`EnvFault`."""
    if not isinstance(out, (tuple, list)) or len(out) != 4:
        raise EnvFault("invalid", "step", f"must return (observation, reward, done, info), got {_describe(out)}")
    obs, reward, done, info = out
    if not isinstance(obs, str):
        raise EnvFault("invalid", "step", f"observation must be a str, got {_describe(obs)}")
    r = _finite(reward, "step", "reward")
    # bool, numpy.bool_ or an integer 0/1; a float or a string "False" is refused (bool("False") is True).
    if type(done) is bool:
        pass
    elif isinstance(done, (numbers.Integral, np.bool_)):
        if int(done) not in (0, 1):
            raise EnvFault("invalid", "step", f"done must be a bool, got {_describe(done)}")
    else:
        raise EnvFault("invalid", "step", f"done must be a bool, got {_describe(done)}")
    info = _check_info(info, "step")
    if info.get("truncated") and not done:
        raise EnvFault("invalid", "step", "info['truncated'] is true but done is false (a cut episode is done)")
    return obs, r, bool(done), info


def check_restore(out: Any) -> tuple[str, dict[str, Any]]:
    """``restore(snapshot)`` returns what ``reset`` does: ``(observation: str, info: dict)``."""
    try:
        return check_reset(out)
    except EnvFault as e:
        raise EnvFault(e.kind, "restore", e.message) from None


#: methods an env takes no argument for (the guard's backends call them as ``fn()``)
NO_ARG_METHODS = ("close", "snapshot")
_CHECKS = {"reset": check_reset, "step": check_step, "restore": check_restore, "snapshot": lambda out: out}


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def wait_time(deadline: float) -> float:
    """Seconds left until ``deadline`` (a ``time.monotonic()`` value), never negative."""
    return max(0.0, deadline - time.monotonic())
