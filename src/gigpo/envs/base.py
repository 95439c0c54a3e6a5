"""The text-environment contract every gigpo env implements (docs/design.md "Rooms and arrows")."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, TypedDict


class StepInfo(TypedDict, total=False):
    """The ``info`` dict of ``reset`` and ``step`` (all keys optional to the type checker; which ones an env must
    give is in :class:`Env`'s contract). The env guard (:func:`gigpo.envs.faults.check_step`) checks the types of
    those present, so a wrong type is a clear env fault, not a silent misreading.

    ``task``: the goal/instruction text shown in every prompt (``""`` when none). ``state_key``: a hashable true
    state (the anchor of exact grouping; dicts and lists are keyed by value). ``admissible_actions``: the valid
    actions now, or None when the env cannot enumerate them. ``won``: the episode succeeded (step). ``action_valid``:
    the action was understood and applied (step). ``score``: a finite number (checked), by convention in [0, 1] (default ``float(won)``).
    ``truncated``: the episode was cut by a time/step limit — ``done`` is then True, but the state after the step
    is not terminal, so value-based estimators (GAE) bootstrap there.
    """

    task: str
    state_key: Hashable
    admissible_actions: list[str] | None
    won: bool
    action_valid: bool
    score: float
    truncated: bool


@dataclass(frozen=True)
class ActionSpec:
    """What an env's actions need, declared by the env (:meth:`Env.action_spec`) so that a run naming the env
    without a preset of its own gets settings that fit it (:mod:`gigpo.train.config.env_settings`).

    ``legal_actions``: ``info["admissible_actions"]`` lists every legal move at every step, so constrained
    decoding can be used. ``examples``: well-formed moves; the longest sets the response budget (a move of n
    characters takes at most n tokens, plus the end token). ``format_hint``: the response format in the env's own
    words (e.g. TextArena's ``'[col 4]'``), shown in the env's instructions."""

    legal_actions: bool
    examples: tuple[str, ...] = ()
    format_hint: str = ""


class EnvError(RuntimeError):
    """Raised by an env for a failure of the env itself (not of the agent's action)."""


class Env(ABC):
    """A text-in / text-out environment.

    Contract:

    * ``reset(seed) -> (observation, info)``. Envs reset with the same ``seed`` start in the identical state
      (this is what makes a GiGPO *group*). ``info`` carries at least ``task`` (str, the goal/instruction text shown
      in every prompt; may be ``""``), ``state_key`` (hashable true state) and ``admissible_actions``
      (``list[str]`` or ``None`` when the env cannot enumerate them).
    * ``step(action) -> (observation, reward, done, info)``. ``action`` is the already-parsed action text.
      ``info`` (:class:`StepInfo`) carries at least ``won`` (bool), ``action_valid`` (bool), ``state_key`` and
      ``admissible_actions``; optionally ``score`` (float in [0, 1], defaults to ``float(won)``). An invalid action
      leaves the state unchanged, returns reward 0 (the rollout adds the configured penalty) and
      ``action_valid=False``.
    * ``done`` means the episode is over: *terminated* (the task ended: won, lost, purchased) OR *truncated* (cut
      by a time/step limit). A cut sets ``info["truncated"] = True`` (gymnasium's ``terminated``/``truncated`` pair
      folded into the one ``done`` old envs return, so they keep working: an env that never sets it is read as
      terminated). The rollout's own step cap (``rollout.max_steps``) marks its cut as truncated too. GAE/PPO
      bootstrap from the value at a truncation; GiGPO/GRPO returns are the rewards received, unchanged.
    * ``instructions`` (class attribute or property): rules of the env and the action vocabulary, shown once at the
      top of every prompt.
    * ``max_steps``: the env's own step cap (the rollout also has one; the smaller wins).
    * Optional, for scripted agents (``gigpo eval --agent oracle|random``, :mod:`gigpo.train.evaluate.scripted`):
      ``oracle_action(self) -> str``, the oracle's next action text for the env's current state (called after
      ``reset`` and after every step that did not end the episode). ``--agent random`` needs no method: it picks
      uniformly (seeded) among ``info["admissible_actions"]``. An env that reports ``info["task_type"]`` or
      ``info["data_source"]`` gets its success broken down per value in evaluation tables.
    * Optional, for branch rollouts (``rollout.branch``, :mod:`gigpo.envs.restore`): ``snapshot() -> object``, the
      env's whole state now (RNG states included; picklable, for process workers), and ``restore(snapshot) ->
      (observation, info)``, which puts any instance of the same env class and options into that state and returns
      what ``reset`` would show there. Without them an env is restored by replaying its seed and actions, which
      needs it to be deterministic given both (checked before training).

    Envs know nothing about models, tokenizers or prompts.
    """

    #: Human-readable rules and action vocabulary.
    instructions: str = ""
    #: Hard step cap of the env itself.
    max_steps: int = 50

    @abstractmethod
    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        """Start a new episode deterministically from ``seed``."""

    @abstractmethod
    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        """Apply one (parsed) action."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (processes, files). Default: nothing."""

    def action_spec(self) -> ActionSpec | None:
        """What this env's actions need (:class:`ActionSpec`), called after a ``reset``; None (the default): the
        trainer reads it from the reset's ``admissible_actions`` (a listed env gets constrained decoding)."""
        return None

    @staticmethod
    def state_key_of(info: dict[str, Any], observation: str) -> Hashable:
        """The anchor key for exact grouping: the env's true state when given, else the observation text."""
        key = info.get("state_key")
        return observation if key is None else key
