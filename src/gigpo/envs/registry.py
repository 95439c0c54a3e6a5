"""Name -> env factory registry; `make` validates keyword arguments before constructing anything.

Envs come from three places: the built-ins (:mod:`gigpo.envs.builtin`); installed packages that declare an entry
point in the ``gigpo.envs`` group; and modules named on the command line (``gigpo train --import my_envs``),
which call :func:`register` when imported. An entry point ``name = "pkg.module:Attr"`` registers ``Attr`` (an
Env class or factory) under ``name``, imported only when that env is made; one without an attribute
(``name = "pkg.module"``) is a module imported at once, which registers its envs itself.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gigpo.envs.base import Env

ENTRY_POINT_GROUP = "gigpo.envs"
log = logging.getLogger(__name__)


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
#: entry point name -> why it could not be loaded (reported when that env is asked for, not on every command)
_PLUGIN_ERRORS: dict[str, str] = {}


def register(name: str, entry_point: str | Callable[..., Env], description: str = "", **defaults: Any) -> None:
    """Register an env under ``name``. Re-registering a name replaces it (useful in notebooks)."""
    _REGISTRY[name] = EnvSpec(name, entry_point, description, tuple(sorted(defaults.items())))


def list_envs() -> dict[str, EnvSpec]:
    _ensure_builtins()
    return dict(sorted(_REGISTRY.items()))


@dataclass(frozen=True)
class PrefixSpec:
    """A family of envs named ``PREFIX:ID`` (``textarena:TicTacToe-v0``): one adapter, the id passed to it.

    ``resolve(id)`` (``"module:function"``, imported only when such an env is asked for) checks the id against
    the package and returns ``(entry_point, defaults)`` of the env (a ValueError naming close matches when the
    id is unknown); ``package`` is the import the adapter needs, ``extra`` the pip extra that installs it
    (empty: the package is a core dependency of gigpo)."""

    prefix: str
    resolve: str
    description: str
    package: str
    extra: str
    example: str = ""


_PREFIXES: dict[str, PrefixSpec] = {}


def install_hint(spec: PrefixSpec) -> str:
    """``pip install 'gigpo[EXTRA]'``, or ``pip install PACKAGE`` for a core dependency (no extra)."""
    return f"pip install 'gigpo[{spec.extra}]'" if spec.extra else f"pip install {spec.package}"


def register_prefix(prefix: str, resolve: str, description: str, *, package: str, extra: str,
                    example: str = "") -> None:
    """Register an adapter family: ``env=PREFIX:ID`` envs are resolved by ``resolve`` on first use."""
    _PREFIXES[prefix] = PrefixSpec(prefix, resolve, description, package, extra, example)


def list_prefixes() -> dict[str, PrefixSpec]:
    _ensure_builtins()
    return dict(sorted(_PREFIXES.items()))


def _resolve_prefixed(name: str) -> EnvSpec | None:
    """The spec of ``PREFIX:ID`` (cached in the registry once resolved), or None when ``name`` has no known
    prefix. A missing package or an unknown id is a one-line ValueError (a config error before any model)."""
    prefix, sep, ident = name.partition(":")
    spec = _PREFIXES.get(prefix) if sep else None
    if spec is None:
        return None
    if not ident:
        raise ValueError(f"env {name!r}: give an id after '{prefix}:' (e.g. {spec.example or prefix + ':ID'})")
    import importlib.util

    if importlib.util.find_spec(spec.package.split(".")[0]) is None:
        raise ValueError(f"env {name!r} needs the {spec.package!r} package: {install_hint(spec)}")
    module_name, _, attr = spec.resolve.partition(":")
    entry_point, defaults = getattr(importlib.import_module(module_name), attr)(ident)
    register(name, entry_point, f"{spec.description} ({ident})", **defaults)
    return _REGISTRY[name]


def get_spec(name: str) -> EnvSpec:
    _ensure_builtins()
    if name not in _REGISTRY and _resolve_prefixed(name) is not None:
        return _REGISTRY[name]
    if name not in _REGISTRY:
        broken = "".join(f"; plugin {k!r} failed to load: {v}" for k, v in sorted(_PLUGIN_ERRORS.items()))
        prefixed = "".join(f", {p}:ID" for p in sorted(_PREFIXES))
        raise ValueError(f"unknown env {name!r}; available: {', '.join(sorted(_REGISTRY))}{prefixed}{broken}")
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


class EnvImportError(ImportError):
    """A module named by ``--import`` could not be imported; the message is one line naming it."""


#: Seconds an ``--import`` may run before a note says it is still importing (a module that hangs, or a slow one).
IMPORT_NOTE_S = 10.0


def _import_watched(name: str) -> None:
    """Import ``name``; after ``IMPORT_NOTE_S`` a one-line note on stderr says it is still running (so a hang is
    not silent), and Ctrl-C or ``sys.exit`` inside it each become one :class:`EnvImportError` line."""
    import threading
    import time

    t0 = time.monotonic()
    note = threading.Timer(IMPORT_NOTE_S, lambda: print(
        f"gigpo: --import {name} is still importing after {IMPORT_NOTE_S:g} s (Ctrl-C to stop)",
        file=sys.stderr, flush=True))
    note.daemon = True
    note.start()
    try:
        importlib.import_module(name)
    except KeyboardInterrupt:
        raise EnvImportError(f"--import {name}: interrupted while importing it ({time.monotonic() - t0:.0f} s "
                             "in; does it wait for something at import time?)") from None
    except SystemExit as err:
        raise EnvImportError(f"--import {name}: the module called sys.exit({err.code!r}) while being imported "
                             "(a module for --import should only define and register envs)") from None
    finally:
        note.cancel()


def _module_of(given: str) -> str:
    """The module name to import for ``--import given``: ``given`` itself, or for a path (``./my_envs.py``,
    ``../x/my_envs``, a package directory) the file's name, with its directory put first on ``sys.path`` (spawned
    env workers inherit it, so they import the module by the same name)."""
    looks_like_path = given.endswith(".py") or "/" in given or os.sep in given or given.startswith(".")
    if not looks_like_path:
        return given
    path = Path(given).expanduser()
    candidates = [path] if path.suffix == ".py" else [path.with_name(path.name + ".py"), path]
    for c in candidates:
        if c.is_file() and c.suffix == ".py" or c.is_dir() and (c / "__init__.py").is_file():
            folder = str(c.resolve().parent)
            if folder not in sys.path:
                sys.path.insert(0, folder)
            return c.stem if c.is_file() else c.name
    raise EnvImportError(f"--import {given}: no file {path}{'' if path.suffix else ' or ' + str(path) + '.py'} "
                         "(--import takes a module name, e.g. my_envs, or the path of a .py file or package "
                         "directory)")


def import_env_modules(names: list[str]) -> None:
    """Import each module of ``names`` (``--import``), which registers its envs. The current directory is
    searched last, so ``--import my_envs`` finds ./my_envs.py also from the installed ``gigpo`` script.

    The built-ins are registered first, so a module's ``register("gridgoal", ...)`` replaces the built-in (as
    :func:`register` documents; logged as a warning) instead of being overwritten by them later."""
    if names and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    if names:
        _ensure_builtins()
    for given in names:
        name = _module_of(given)
        before = dict(_REGISTRY)
        estimators_before = _estimators()
        try:
            _import_watched(name)
        except EnvImportError:
            raise
        except ModuleNotFoundError as err:
            if err.name and (name == err.name or name.startswith(err.name + ".")):
                raise EnvImportError(f"--import {name}: no module named {err.name!r} (looked in sys.path and "
                                     f"the current directory; --import takes a module name, e.g. my_envs, or "
                                     f"the path of a .py file)") from None
            raise EnvImportError(f"--import {name}: it imports {err.name!r}, which is not installed") from None
        except Exception as err:  # noqa: BLE001 - any failure of user code is reported as one line
            detail = " ".join(str(err).split())
            raise EnvImportError(f"--import {name}: importing it raised {type(err).__name__}"
                                 + (f": {detail}" if detail else "")) from None
        for env_name in sorted(k for k in before if _REGISTRY.get(k) is not before[k]):
            log.warning("--import %s: env %r replaces the one registered before (%s)", name, env_name,
                        before[env_name].description or before[env_name].entry_point)
        if name not in _IMPORTED:  # what it registered: a run records the modules its env / estimator came from
            estimators = _estimators()
            _IMPORTED[name] = ({k: v for k, v in _REGISTRY.items() if before.get(k) is not v},
                               {k: v for k, v in estimators.items() if estimators_before.get(k) is not v})


#: ``--import`` module -> (the env specs, the estimators) it registered when first imported, in import order
_IMPORTED: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}


def _estimators() -> dict[str, Any]:
    """The registered estimators, without importing the estimator registry (an env-only run needs none)."""
    algo = sys.modules.get("gigpo.algo.registry")
    return dict(algo.registered()) if algo is not None else {}


def imports_for(env_name: str, algorithm: str = "") -> list[str]:
    """The ``--import`` modules of this process whose registration of ``env_name`` (or of the estimator
    ``algorithm``) is the one in force: what a run of them needs imported again to resume or be evaluated
    (recorded in its environment.json). A registration replaced since (a notebook, the tests) does not count."""
    estimators = _estimators()
    return [m for m, (envs, ests) in _IMPORTED.items()
            if (env_name in envs and _REGISTRY.get(env_name) is envs[env_name])
            or (algorithm in ests and estimators.get(algorithm) is ests[algorithm])]


def _load_entry_points() -> None:
    """Register the envs of installed packages (entry point group ``gigpo.envs``). A broken plugin is logged
    and remembered, never fatal: it must not stop training on the other envs."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            if ep.attr:
                dist = getattr(getattr(ep, "dist", None), "name", None)
                register(ep.name, f"{ep.module}:{ep.attr}", f"(from {dist})" if dist else "(plugin)")
            else:
                importlib.import_module(ep.module)
        except Exception as err:  # noqa: BLE001 - see the docstring
            _PLUGIN_ERRORS[ep.name] = f"{type(err).__name__}: {' '.join(str(err).split())}"
            log.warning("gigpo.envs entry point %r (%s) failed to load: %s", ep.name, ep.value, err)


_BUILTINS_LOADED = False


def _ensure_builtins() -> None:
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        importlib.import_module("gigpo.envs.builtin")
        importlib.import_module("gigpo.envs.adapters")  # the PREFIX:ID families (light: no package imported)
        _load_entry_points()
