"""The rollout engine contract and the engine registry (``rollout.engine`` → class).

Every generation backend — the in-process Hugging Face loop, OpenAI-compatible servers (`gigpo serve`, vLLM),
an in-process ``vllm.LLM``, or a new one — is one class implementing :class:`Engine`, plus one line in
:data:`ENGINES`. The trainer drives every engine the same way, with no branch on "local" or "remote":

1. ``engine = create_engine(cfg, bundle, run_dir)``  (``Engine.from_config``)
2. ``engine.probe()`` then ``engine.push_weights(model, version, required=True)`` before the first rollout
3. per iteration: ``engine.generate(...)`` (the collector), the update, ``engine.push_weights(model, it)`` and
   ``engine.stats()`` into the iteration's metrics
4. ``engine.close()``

Layering: this module and the engines know models and HTTP, never :mod:`gigpo.train`; ``from_config`` reads the
``cfg.rollout`` / ``cfg.model`` / ``cfg.train`` attributes it needs by duck typing. Failures an engine cannot
recover from raise :class:`EngineError` (the trainer turns one raised by ``probe`` or the first push into a
one-line config error, exit 2, before any rollout).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable


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


# The remote engines' errors live here, beside the contract, so engine_openai.py and engine_weights.py (which
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


#: ``rollout.engine`` name → ``"module:Class"`` of its :class:`Engine`, imported on first use (so a heavy
#: backend such as vLLM costs nothing unless chosen). A new engine is one class and one line here, plus its
#: name among ``rollout.engine``'s allowed values in ``gigpo.train.config_schema`` (a test checks the two agree);
#: :func:`register_engine` swaps the class behind a name (tests, plugins).
ENGINES: dict[str, str] = {
    "hf": "gigpo.rollout.engine:HFEngine",
    "openai": "gigpo.rollout.engine_openai:CompletionsEngine",
    "vllm": "gigpo.rollout.engine_vllm:VLLMEngine",
}


def register_engine(name: str, target: str | type) -> None:
    """Add (or replace) engine ``name``: a class, or its ``"module:Class"`` path."""
    if not isinstance(target, str):
        target = f"{target.__module__}:{target.__qualname__}"
    ENGINES[name] = target


def engine_class(name: str) -> type:
    """The class registered as ``name``; ValueError naming the registered ones otherwise."""
    try:
        target = ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown rollout.engine {name!r}; registered: {', '.join(sorted(ENGINES))}") from None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def create_engine(cfg: Any, bundle: Any, run_dir: Path) -> Engine:
    """``rollout.engine``'s class, built for this run (:meth:`Engine.from_config`)."""
    return engine_class(cfg.rollout.engine).from_config(cfg, bundle, Path(run_dir))
