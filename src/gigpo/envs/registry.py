"""Name -> env factory registry; `make` validates keyword arguments before constructing anything."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gigpo.envs.base import Env


@dataclass(frozen=True)
class EnvSpec:
    name: str
    #: "module.path:Attribute" of the env class or factory, imported lazily so optional deps stay optional;
    #: or the class/factory itself.
    entry_point: str | Callable[..., Env]
    description: str
    #: Keyword arguments applied before the user's (e.g. a noisy variant of a base env).
    defaults: tuple[tuple[str, Any], ...] = ()

    def load(self) -> Callable[..., Env]:
        if callable(self.entry_point):
            return self.entry_point
        module_name, _, attr = self.entry_point.partition(":")
        return getattr(importlib.import_module(module_name), attr)


_REGISTRY: dict[str, EnvSpec] = {}


def register(name: str, entry_point: str | Callable[..., Env], description: str = "", **defaults: Any) -> None:
    """Register an env under ``name``. Re-registering a name replaces it (useful in notebooks)."""
    _REGISTRY[name] = EnvSpec(name, entry_point, description, tuple(sorted(defaults.items())))


def list_envs() -> dict[str, EnvSpec]:
    _ensure_builtins()
    return dict(sorted(_REGISTRY.items()))


def get_spec(name: str) -> EnvSpec:
    _ensure_builtins()
    if name not in _REGISTRY:
        raise ValueError(f"unknown env {name!r}; available: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def env_kwargs_check(name: str, kwargs: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming any keyword the env's constructor does not accept (no env is built)."""
    spec = get_spec(name)
    factory = spec.load()
    params = inspect.signature(factory).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    allowed = {n for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    unknown = sorted(set(kwargs) - allowed)
    if unknown:
        raise ValueError(
            f"env {name!r} does not accept {', '.join(unknown)}; its options are: {', '.join(sorted(allowed)) or '(none)'}"
        )


def make(name: str, **kwargs: Any) -> Env:
    """Build the env registered as ``name`` with ``kwargs`` (registered defaults first, then yours)."""
    spec = get_spec(name)
    merged = dict(spec.defaults)
    merged.update(kwargs)
    env_kwargs_check(name, merged)
    return spec.load()(**merged)


_BUILTINS_LOADED = False


def _ensure_builtins() -> None:
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        importlib.import_module("gigpo.envs.builtin")
