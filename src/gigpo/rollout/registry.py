"""The rollout engine contract and the engine registry (``rollout.engine`` → class). The built-in engines live
in :mod:`gigpo.rollout.engines` (one module each, registering itself), which also re-exports this module's
names: import that package to see the built-ins registered, as :mod:`gigpo.algo.estimators` for estimators.

Every generation backend is one class implementing :class:`Engine`, registered where it is defined with
:func:`register_engine` — as estimators are (:mod:`gigpo.algo.registry`); a user's engine module does the same
and is loaded with ``--import MODULE``, after which ``rollout.engine=NAME`` trains with it. The class declares
what the rest of gigpo needs to know, so nothing outside this package tests an engine's name:

- ``options``: a dataclass of its settings (``option(default, "description")`` fields), which becomes the config
  sub-section ``rollout.<section>`` (listed by ``--help``, checked by its ``check()``, saved in config.yaml and
  resumed); ``section`` defaults to the engine's name;
- ``capabilities`` (:class:`Capabilities`): the early probe before any model loads, ``rollout.async`` support
  (a worker-process copy, or the engine pinned to a weights version), data parallelism, the config key to blame;
- optional classmethods ``check_config(cfg)`` (cross-section rules: ValueError with one line) and
  ``preflight(cfg)`` (reach the backends before any model loads: EngineError).

The trainer drives every engine the same way, with no branch on "local" or "remote":

1. ``engine = create_engine(cfg, bundle, run_dir)``  (``Engine.from_config``)
2. ``engine.probe()`` then ``engine.push_weights(model, version, required=True)`` before the first rollout
3. per iteration: ``engine.generate(...)`` (the collector), the update, ``engine.push_weights(model, it)`` and
   ``engine.stats()`` into the iteration's metrics
4. ``engine.close()``

Layering: this module and the engines know models and HTTP, never :mod:`gigpo.train`; ``from_config`` reads the
``cfg.rollout`` / ``cfg.model`` / ``cfg.train`` attributes it needs by duck typing. Importing it imports no torch
(the engine modules import their heavy backends when an engine is built), so the config can list and check
engines cheaply. Failures an engine cannot recover from raise :class:`EngineError` (the trainer turns one raised
by ``probe`` or the first push into a one-line config error naming ``capabilities.blame_key``, exit 2).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from gigpo.algo.registry import NoOptions


@dataclass
class Generation:
    """One sampled response: its token ids (EOS included when emitted), per-token sampling log-probs, and text."""

    token_ids: list[int]
    logprobs: list[float]
    text: str
    #: constrained decoding: the admissible action chosen (env spelling; None when none was completed) and, per
    #: response token, the allowed token ids used (None where decoding was free) — what the learner re-applies
    action: str | None = None
    allowed: list[list[int] | None] | None = None


class EngineError(RuntimeError):
    """An engine that cannot go on: a server unreachable or unable to take weights, retries spent, a malformed
    answer, weights too stale. The message is one line that names what to change."""


# The remote engines' errors live here, beside the contract, so engines/openai.py and engines/weight_push.py (which
# pushes for it) both raise them without importing each other.
class RemoteEngineError(EngineError):
    """A generation request or weight push that failed for good (unreachable, retries spent, malformed answer)."""


class StaleWeightsError(RemoteEngineError):
    """A server answered with weights more than ``max_staleness`` versions behind the learner's."""


@runtime_checkable
class Engine(Protocol):
    """What the collector and the trainer need from a generation backend.

    Attributes: ``model`` — an object whose ``.config`` is the served model's HF config (the collector reads the
    context length from it); ``eos_ids`` — the end-of-sequence token ids; ``shares_learner_weights`` — True when
    the engine samples from the learner's own model object (nothing is pushed, nothing can be stale, so the
    trainer skips the rollout-vs-learner log-prob bookkeeping pass).
    """

    model: Any
    eos_ids: list[int]
    shares_learner_weights: bool

    @classmethod
    def from_config(cls, cfg: Any, bundle: Any, run_dir: Path) -> Engine:
        """The engine for a run: ``cfg`` is the run's config (``cfg.rollout.*``), ``bundle`` the learner's loaded
        model (``.model``, ``.tokenizer``, ``.device``, ``.dtype``), ``run_dir`` where it may write files."""
        ...

    def probe(self) -> None:
        """Before the first rollout (and, for servers, before any model loads: ``gigpo train``'s preflight):
        every backend reachable and able to receive weights the way this engine will push them. Raises
        :class:`EngineError` with one line naming the fix (e.g. the server flag to add)."""
        ...

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float, top_p: float,
                 constraints: list[Any] | None = None) -> list[Generation]:
        """One response per prompt: token ids in, token ids + per-token sampling log-probs out, in order.
        ``temperature == 0`` is greedy. ``constraints``: one :class:`gigpo.agent.constrained.ActionConstraint`
        (or None) per prompt; a constrained :class:`Generation` carries ``action`` and the per-token ``allowed``
        sets the learner re-applies, so its log-probs are those of the masked, renormalised distribution."""
        ...

    def push_weights(self, model: Any, version: int, *, required: bool = False) -> dict[str, float]:
        """Make the backend sample from ``model``'s current weights, tagged ``version`` (the number of updates
        behind them). ``required``: the push before the first rollout — any failure raises. Otherwise a failure
        may be tolerated within ``rollout.max_staleness``. Returns metrics (``weights/*``); {} when there is
        nothing to push."""
        ...

    def stats(self) -> dict[str, float]:
        """Cumulative counters for the iteration's metrics record (``rollout/*``: retries, stale generations,
        weights lag, ...); {} when the engine has none."""
        ...

    def close(self) -> None:
        """Release servers' connections, processes, temporary files. Idempotent."""
        ...


@dataclass(frozen=True)
class Capabilities:
    """What an engine can do, declared by its class (``capabilities = Capabilities(...)``) and read by the
    trainer and the config checks in place of its name.

    - ``early_probe``: the class has ``preflight(cfg)``, which reaches its backends before any model loads
      (``gigpo train``'s preflight: an unreachable server is one line and exit 2, not a failure at the first
      rollout).
    - ``async_rollout`` (``rollout.async=true``): "none" refuses it; "worker": the class's
      ``async_worker(model, tokenizer, threads)`` returns an engine that samples in its own process from a copy
      of the weights; "pinned": the run's own engine samples from the rollout thread, pinned to each batch's
      weights version by its ``pinned_version`` attribute (None: unpinned).
    - ``data_parallel``: one engine per rank is sound under ``torchrun`` (an engine on the rank's own model; an
      engine that pushes weights to shared backends is not — every rank would push).
    - ``blame_key``: the config key a failed probe or first push is reported against.
    """

    early_probe: bool = False
    async_rollout: Literal["none", "worker", "pinned"] = "none"
    data_parallel: bool = False
    blame_key: str = "rollout.engine"


@dataclass(frozen=True)
class EngineSpec:
    """A registered engine: its ``name`` (the value of ``rollout.engine``), its class, and the config
    sub-section ``rollout.<section>`` its options are (empty: the engine has none)."""

    name: str
    cls: type
    section: str = ""
    description: str = ""

    @property
    def options(self) -> type:
        return getattr(self.cls, "options", NoOptions)

    @property
    def capabilities(self) -> Capabilities:
        return getattr(self.cls, "capabilities", None) or Capabilities()

    def has_options(self) -> bool:
        return bool(dataclasses.fields(self.options))


#: ``rollout.engine`` name → :class:`EngineSpec`, in registration order (built-ins first).
ENGINES: dict[str, EngineSpec] = {}


def register_engine(name: str, cls: type | None = None, *, section: str = "", description: str = "") -> Any:
    """Register engine class ``cls`` as ``rollout.engine=name``; without ``cls``, a class decorator.

    The class implements :class:`Engine` and may declare ``options`` (a dataclass, the config sub-section
    ``rollout.<section>``, ``section`` defaulting to ``name``) and ``capabilities`` (:class:`Capabilities`).
    ``description`` (the ``--help`` table's line) defaults to the first line of the class's docstring.
    Registering a name twice replaces the entry only when it is the same class (its module imported again);
    another class under a taken name, or a section another engine holds, is a ValueError (a section that is a
    key of ``rollout`` itself is refused when the config is built:
    :func:`gigpo.train.config.schema_rollout.rollout_section`)."""

    def deco(klass: type) -> type:
        options = getattr(klass, "options", NoOptions)
        if not (isinstance(options, type) and dataclasses.is_dataclass(options)):
            raise TypeError(f"engine {name!r}: options must be a dataclass, got {options!r}")
        caps = getattr(klass, "capabilities", Capabilities())
        if not isinstance(caps, Capabilities):
            raise TypeError(f"engine {name!r}: capabilities must be a gigpo.rollout.engines.Capabilities")
        needed = {"from_config": True, "preflight": caps.early_probe, "async_worker": caps.async_rollout == "worker"}
        for method in [m for m, wanted in needed.items() if wanted and not callable(getattr(klass, m, None))]:
            whose = "the engine contract" if method == "from_config" else "its capabilities"
            raise TypeError(f"engine {name!r}: {klass.__qualname__} lacks {method}(), which {whose} need")
        sec = (section or name.replace("-", "_")) if dataclasses.fields(options) else ""
        if sec and not sec.isidentifier():
            raise ValueError(f"engine {name!r}: config section {sec!r} is not an identifier; pass section=")
        old = ENGINES.get(name)
        if old is not None and _where(old.cls) != _where(klass):
            raise ValueError(f"engine {name!r} is already registered (by {old.cls.__module__})")
        taken = [e.name for e in ENGINES.values() if sec and e.section == sec and e.name != name]
        if taken:
            raise ValueError(f"engine {name!r}: config section rollout.{sec} is engine {taken[0]!r}'s; "
                             "pass section=<another name>")
        doc = description or (klass.__doc__ or "").strip().split("\n")[0]
        ENGINES[name] = EngineSpec(name, klass, sec, doc)
        return klass

    return deco if cls is None else deco(cls)


def _where(cls: type) -> tuple[str, str]:
    """Where a class is defined: the same pair means the same class, its module imported again."""
    return getattr(cls, "__module__", ""), getattr(cls, "__qualname__", "")


def engine_spec(name: str) -> EngineSpec:
    """The engine registered as ``name``; ValueError naming the registered ones otherwise."""
    try:
        return ENGINES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown rollout.engine {name!r}; registered: {', '.join(ENGINES)}") from None


def engine_class(name: str) -> type:
    """The class registered as ``name`` (ValueError naming the registered ones otherwise)."""
    return engine_spec(name).cls


def registered_engines() -> dict[str, EngineSpec]:
    """Every registered engine, in registration order."""
    return dict(ENGINES)


def create_engine(cfg: Any, bundle: Any, run_dir: Path) -> Engine:
    """``rollout.engine``'s class, built for this run (:meth:`Engine.from_config`)."""
    return engine_class(cfg.rollout.engine).from_config(cfg, bundle, Path(run_dir))


