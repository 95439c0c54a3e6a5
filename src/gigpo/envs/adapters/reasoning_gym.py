"""``env=reasoning-gym:DATASET``: a reasoning-gym procedural dataset (``reasoning-gym`` 0.1.25) as a multi-turn env.

* **Task**: item 0 of ``create_dataset(DATASET, seed=<reset seed>, size=1, **options)``; reasoning-gym generates
  an item from its seed alone, so envs reset with one seed get the same question (the group). Every other
  ``env.KEY=VALUE`` is a field of the dataset's config (its difficulty knobs: ``env.max_terms=2``), checked
  against the config's fields at construction (an unknown one is an error naming the fields).
* **Turns**: the agent answers (the response's first line, or its ``<action>``; an ``<answer>...</answer>``
  wrapper is removed); the dataset's own ``score_answer`` judges it. A score below 1 returns its feedback (the
  answer given and its score) and another attempt, up to ``max_attempts``; the episode ends at a correct answer
  or when the attempts are used up (``info["truncated"]`` then: the attempt limit, not a terminal state).
* **Reward** = ``score * attempt_discount ** (attempt - 1)`` of the last attempt, at the step that ends the episode
  (0 on the steps before); ``won`` = score >= 1; ``score`` = the judged score of the last attempt.
* **state_key**: (question seed, attempt number, the answers given so far): attempts recur across a group when
  its trajectories answer alike. Free-text actions: ``admissible_actions`` is None (free decoding); the reset
  info's ``random_actions`` (the answers of the next 4 items of the dataset) are what ``gigpo eval --agent
  random`` picks from: a chance baseline in the dataset's own answer space.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any

from gigpo.envs.adapters._common import check_state_key, unknown_id
from gigpo.envs.base import ActionSpec, Env, EnvError

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


def _datasets() -> dict[str, Any]:
    from reasoning_gym.factory import DATASETS

    return DATASETS


def resolve(ident: str) -> tuple[str, dict[str, Any]]:
    if ident not in _datasets():
        raise unknown_id("reasoning-gym dataset", ident, _datasets(), "reasoning-gym")
    return "gigpo.envs.adapters.reasoning_gym:ReasoningGymEnv", {"dataset": ident}


@functools.lru_cache(maxsize=256)
def _item(dataset: str, seed: int, options: tuple[tuple[str, Any], ...]) -> tuple[Any, dict[str, Any]]:
    """(dataset object, its item) for one seed; shared by a group's envs in one process."""
    import reasoning_gym

    ds = reasoning_gym.create_dataset(dataset, seed=seed, size=1, **dict(options))
    return ds, ds[0]


class ReasoningGymEnv(Env):
    """See the module docstring. ``dataset``: a reasoning-gym dataset name; ``max_attempts`` >= 1;
    ``attempt_discount`` in (0, 1]; ``**options``: the dataset config's fields."""

    def __init__(self, dataset: str, *, max_attempts: int = 3, attempt_discount: float = 0.5,
                 state_key: str = "auto", **options: Any):
        if dataset not in _datasets():
            raise unknown_id("reasoning-gym dataset", dataset, _datasets(), "reasoning-gym")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        if not 0.0 < attempt_discount <= 1.0:
            raise ValueError(f"attempt_discount must be in (0, 1], got {attempt_discount}")
        config_cls = _datasets()[dataset][1]
        fields = {f.name for f in dataclasses.fields(config_cls)} - {"seed", "size"}
        unknown = sorted(set(options) - fields)
        if unknown:
            raise ValueError(f"reasoning-gym:{dataset} has no option {', '.join(unknown)}; its options: "
                             f"{', '.join(sorted(fields))}")
        try:  # the config's own validation, once, before any episode
            _item(dataset, 0, tuple(sorted((k, _hashable(v)) for k, v in options.items())))
        except (AssertionError, ValueError, TypeError) as err:
            raise ValueError(f"reasoning-gym:{dataset}: {' '.join(str(err).split()) or type(err).__name__}") from None
        self.dataset, self.options = dataset, tuple(sorted((k, _hashable(v)) for k, v in options.items()))
        self.max_attempts, self.attempt_discount = max_attempts, attempt_discount
        self.state_key_mode = check_state_key(state_key)
        self.max_steps = max_attempts
        self.instructions = (f"reasoning-gym {dataset}. Answer the question; give only the final answer on the "
                             f"first line. A wrong answer gets feedback and another try ({max_attempts} in all); "
                             f"each extra attempt multiplies the reward by {attempt_discount}.")
        self._ds: Any = None
        self._entry: dict[str, Any] = {}
        self._seed = 0
        self._answers: list[str] = []
        self._random_actions: list[str] = []
        self._done = True

    def _info(self, text: str) -> dict[str, Any]:
        key = (self._seed, len(self._answers), tuple(self._answers)) if self.state_key_mode == "auto" else text
        return {"task": str(self._entry.get("question", "")), "state_key": key, "admissible_actions": None,
                "data_source": self.dataset, "random_actions": self._random_actions}

    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        self._seed = int(seed)
        self._ds, self._entry = _item(self.dataset, self._seed, self.options)
        self._answers, self._done = [], False
        text = f"Attempt 1 of {self.max_attempts}. Your answer:"
        # candidates for `gigpo eval --agent random` only (never shown to a model): the answers of the next
        # items, i.e. answers drawn from the dataset's own answer distribution, right by chance alone
        self._random_actions = list(dict.fromkeys(
            str(_item(self.dataset, (self._seed + k) % 2**31, self.options)[1]["answer"]) for k in range(1, 5)))
        return text, self._info(text)

    def action_spec(self) -> ActionSpec:
        """Free text (no list of answers); the examples are the answers of this item and the next 4, so the
        response budget fits the dataset's answers (a budget far above them lets a small model ramble)."""
        answers = [str(self._entry.get("answer", "")), *self._random_actions]
        examples = tuple(a for a in dict.fromkeys(answers) if a)
        return ActionSpec(legal_actions=False, examples=examples,
                          format_hint=f"the final answer only, e.g. {examples[0]}" if examples else "")

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self._done:
            raise EnvError(f"reasoning-gym:{self.dataset}: step() after the episode ended (or before reset())")
        answer = str(action)
        m = _ANSWER.search(answer)
        answer = (m.group(1) if m else answer).strip()
        score = float(self._ds.score_answer(answer, self._entry))
        score = min(max(score, 0.0), 1.0)
        self._answers.append(answer)
        attempt = len(self._answers)
        won = score >= 1.0
        truncated = not won and attempt >= self.max_attempts
        self._done = won or truncated
        reward = score * self.attempt_discount ** (attempt - 1) if self._done else 0.0
        if won:
            text = f"Correct: {answer!r} (attempt {attempt})."
        elif truncated:
            text = f"{answer!r} scored {score:.2f}: not correct. No attempts left."
        else:
            text = (f"{answer!r} scored {score:.2f}: not correct. Attempt {attempt + 1} of {self.max_attempts}. "
                    "Your answer:")
        info = self._info(text)
        info.update(won=won, action_valid=True, score=score, truncated=truncated)
        return text, reward, self._done, info


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
