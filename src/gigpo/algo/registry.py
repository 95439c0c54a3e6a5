"""The estimator registry: every advantage estimator is one function registered where it is defined, over typed
per-step arrays (:class:`StepBatch`) and its own typed options (a dataclass, no config object).

An estimator ``fn(batch, common, options) -> Estimate`` maps the rows of a batch to per-row advantages:
``common`` (:class:`Common`) holds the keys every estimator shares (γ, ω, normalisation, the episode term),
``options`` is an instance of the estimator's own options dataclass, whose fields (with ``option(default,
"description")``) become the config sub-section ``algorithm.<section>`` and are checked by its ``check()``.

The built-in estimators live in :mod:`gigpo.algo.estimators` (each module of that package registers its own);
a user's module does the same with :func:`register_estimator` and is loaded with ``--import MODULE``, after
which ``algorithm=NAME`` trains with it. The train layer (``gigpo.train.config.algorithms``), validation, ``--help`` and
the trainer read this registry; nothing here knows of configs, models or envs.

ω (the step term's weight) is checked and applied in one place, :func:`apply_step_weight`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from gigpo.algo.grouping import GroupingSpec

EPISODE_TERMS = ("grpo", "rloo")


def option(default: Any = dataclasses.MISSING, doc: str = "", *, factory: Any = None, secret: bool = False) -> Any:
    """One estimator option: its default and its description, kept as data on the dataclass field
    (``metadata["doc"]``), read by ``--help`` and the test that every config key is documented. ``secret``: the
    value is a credential (``metadata["secret"]``), masked wherever gigpo shows or shares a config
    (gigpo.train.config.secrets)."""
    meta = {"doc": doc, "secret": True} if secret else {"doc": doc}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class StepBatch:
    """One row per agent step actually taken, in any row order (every estimator gives the same answer for any
    order). Arrays of length N: ``group_id`` (episode group), ``traj_id``, ``step`` (t within its trajectory),
    ``reward`` (r_t, penalties included); optional: ``anchors`` (step-grouping keys, or texts when
    ``grouping`` — a :class:`gigpo.algo.grouping.GroupingSpec` — is set: similarity grouping), ``values`` (the critic's V(s_t)), ``kl`` (Σ over
    the step's tokens of log π_old − log π_ref), ``won`` (the row's trajectory succeeded), ``truncated`` (the row
    is the last of a trajectory cut by a time/step limit, not ended by the env), ``bootstrap_values`` (V of the
    state after a truncated row; 0 elsewhere)."""

    group_id: Any
    traj_id: Any
    step: Any
    reward: Any
    anchors: Any = None
    grouping: GroupingSpec | None = None
    values: np.ndarray | None = None
    kl: np.ndarray | None = None
    won: np.ndarray | None = None
    truncated: np.ndarray | None = None
    bootstrap_values: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.group_id)


@dataclass(frozen=True)
class Common:
    """Keys every estimator shares (config ``algorithm.*``): ``gamma`` (γ of R_t = r_t + γ R_{t+1}),
    ``step_weight`` (ω in A = A_E + ω A_S), ``normalize`` ("mean_std" | "mean"), ``std_ddof`` (0 | 1),
    ``episode`` (the episode term: "grpo" | "rloo"), ``step`` (add GiGPO's step term, for estimators that offer it)."""

    gamma: float = 0.95
    step_weight: float = 1.0
    normalize: Literal["mean_std", "mean"] = "mean_std"
    std_ddof: int = 1
    episode: str = "grpo"
    step: bool = True

    def __post_init__(self) -> None:
        check_step_weight(self.step_weight)
        if self.episode not in EPISODE_TERMS:
            raise ValueError(f"episode term must be one of {EPISODE_TERMS}, got {self.episode!r}")


@dataclass
class Estimate:
    """An estimator's result, one entry per input row in input order: ``advantages``; ``value_targets`` (critic
    estimators, else None); the two terms and the step-group ids where the estimator has them (for metrics and
    grouping-quality scores); ``stats``: JSON-ready metrics."""

    advantages: np.ndarray
    value_targets: np.ndarray | None = None
    episode_advantages: np.ndarray | None = None
    step_advantages: np.ndarray | None = None
    step_group_ids: np.ndarray | None = None
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NoOptions:
    """An estimator without options of its own."""

    def check(self) -> None:
        return None


@dataclass(frozen=True)
class Estimator:
    """A registered estimator. ``step_term``: "never" (no step groups), "optional" (adds GiGPO's step term when
    ``common.step``: the ``+step`` algorithms) or "always" (needs anchors); ``needs_values`` (a critic's V per row,
    trains a value head whose settings are ``algorithm.ppo``'s value keys), ``needs_kl`` (per-row KL to the
    reference model, kept while the options' optional ``reads_kl()`` is true); ``options``: its options dataclass,
    exposed as config sub-section ``algorithm.<section>`` (``section`` defaults to the name, "+" spelt "p");
    ``exact_anchors``: its step groups need exact keys (no similarity grouping); ``selectable``: false for an
    estimator that is a mode of others, not an ``algorithm=`` of its own (verl-agent's, chosen by
    ``algorithm.compat``)."""

    name: str
    fn: Callable[[StepBatch, Common, Any], Estimate]
    description: str
    options: type = NoOptions
    step_term: Literal["never", "optional", "always"] = "never"
    needs_values: bool = False
    needs_kl: bool = False
    section: str = ""
    exact_anchors: bool = False
    selectable: bool = True

    def has_options(self) -> bool:
        return bool(dataclasses.fields(self.options))

    def uses_step_term(self, common_step: bool) -> bool:
        return self.step_term == "always" or (self.step_term == "optional" and common_step)

    def __call__(self, batch: StepBatch, common: Common, options: Any = None) -> Estimate:
        opts = self.options() if options is None else options
        check = getattr(opts, "check", None)
        if check is not None:
            check()
        return self.fn(batch, common, opts)


_ESTIMATORS: dict[str, Estimator] = {}


def register_estimator(
    name: str,
    *,
    description: str,
    options: type = NoOptions,
    step_term: Literal["never", "optional", "always"] = "never",
    needs_values: bool = False,
    needs_kl: bool = False,
    section: str = "",
    exact_anchors: bool = False,
    selectable: bool = True,
) -> Callable[[Callable], Callable]:
    """Decorator: register ``fn(batch: StepBatch, common: Common, options) -> Estimate`` as estimator ``name``.

    Registering a name twice replaces the entry only when it is the same function (a module imported again);
    another function under a taken name is a ValueError (two estimators would answer to one ``algorithm=``)."""
    if not dataclasses.is_dataclass(options):
        raise TypeError(f"estimator {name!r}: options must be a dataclass, got {options!r}")
    sec = section or name.replace("+", "p").replace("-", "_")
    if not sec.isidentifier():
        raise ValueError(f"estimator {name!r}: config section {sec!r} is not an identifier; pass section=")

    def deco(fn: Callable) -> Callable:
        old = _ESTIMATORS.get(name)
        if old is not None and _where(old.fn) != _where(fn):
            raise ValueError(f"estimator {name!r} is already registered (by {old.fn.__module__})")
        taken = [e.name for e in _ESTIMATORS.values() if e.section == sec and e.name != name and e.has_options()]
        if taken and dataclasses.fields(options):  # one sub-section per estimator: its options, nobody else's
            raise ValueError(f"estimator {name!r}: config section algorithm.{sec} is estimator {taken[0]!r}'s; "
                             "pass section=<another name>")
        _ESTIMATORS[name] = Estimator(name, fn, description, options, step_term, needs_values, needs_kl, sec,
                                      exact_anchors, selectable)
        return fn

    return deco


def _where(fn: Callable) -> tuple[str, str]:
    """Where a function is defined: the same pair means the same function, its module imported again."""
    return getattr(fn, "__module__", ""), getattr(fn, "__qualname__", "")


def get_estimator(name: str) -> Estimator:
    if name not in _ESTIMATORS:
        raise KeyError(f"unknown estimator {name!r}; registered: {', '.join(_ESTIMATORS)}")
    return _ESTIMATORS[name]


def registered() -> dict[str, Estimator]:
    """Every registered estimator, in registration order (import :mod:`gigpo.algo.estimators` for the built-ins)."""
    return dict(_ESTIMATORS)


def check_step_weight(step_weight: float) -> float:
    """ω must be a finite number ≥ 0 (a negative ω would push the policy away from better steps)."""
    if isinstance(step_weight, bool) or not isinstance(step_weight, (int, float, np.floating, np.integer)):
        raise ValueError(f"step_weight must be a number, got {step_weight!r}")
    if not np.isfinite(step_weight) or step_weight < 0:
        raise ValueError(f"step_weight (ω) must be a finite number >= 0, got {step_weight!r}")
    return float(step_weight)


def apply_step_weight(episode: np.ndarray, step: np.ndarray, step_weight: float) -> np.ndarray:
    """A = A_E + ω · A_S, the one place ω is applied (after :func:`check_step_weight`)."""
    w = check_step_weight(step_weight)
    if np.shape(episode) != np.shape(step):
        raise ValueError(f"length mismatch: episode term {np.shape(episode)}, step term {np.shape(step)}")
    return np.asarray(episode, dtype=np.float64) + w * np.asarray(step, dtype=np.float64)
