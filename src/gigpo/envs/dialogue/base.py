"""`DialogueEnv`: the turn loop shared by the dialogue envs (one agent reply = one step; the user's reply = the
next observation), the user simulator plumbing and the bad-input handling."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gigpo.envs.base import Env
from gigpo.envs.dialogue.text import MAX_REPLY_CHARS, Intent, clean_reply, wording_rng
from gigpo.envs.dialogue.users import make_user


@dataclass
class Outcome:
    """What the env's state machine decided for one agent turn. ``convey``: the templated user reply (the rules
    user's words; the LLM user's brief). ``valid``: the reply had an intent the user could act on."""

    convey: str
    reward: float = 0.0
    done: bool = False
    won: bool = False
    score: float = 0.0
    valid: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


class DialogueEnv(Env):
    """Base of the ``dialogue-*`` envs. Subclasses implement :meth:`_new_episode` (goal from the seed, returns the
    task text), :meth:`_opening` (the user's first words), :meth:`_parse`, :meth:`_respond`, :meth:`_state_key`,
    :meth:`_persona` and :meth:`oracle_action`.

    Step contract (on top of :class:`gigpo.envs.base.Env`):

    * The agent's reply is cleaned first (:func:`gigpo.envs.dialogue.text.clean_reply`): empty →
      ``"[empty reply]"``, longer than ``max_reply_chars`` → cut, ``" [truncated]"`` appended, ``info["truncated"]``.
    * Every step uses one of ``max_turns`` turns, misunderstood ones too; out of turns → done (the user gives up).
    * A reply with no intent (rule 4 of the grammar) is ``action_valid=False``: reward 0, dialogue state unchanged.
    * ``info["state_key"]`` is the simulator's true dialogue state (never the wording);
      ``info["admissible_actions"]`` is ``None`` (replies are free text).
    * The user's wording is drawn by :func:`~gigpo.envs.dialogue.text.wording_rng` from (seed,
      ``paraphrase_seed``, the agent's replies so far).
    """

    #: Agent replies are free text: the plain/think-action formats hand the env the reply line.
    raw_action = False

    def __init__(self, *, max_turns: int, user: str = "rules", user_base_url: str | None = None,
                 user_api_key_env: str | None = None, user_timeout_s: float = 30.0, user_retries: int = 2,
                 user_temperature: float = 0.7, paraphrase_seed: int = 0,
                 max_reply_chars: int = MAX_REPLY_CHARS) -> None:
        if max_turns < 1 or max_reply_chars < 16:
            raise ValueError("max_turns must be >= 1 and max_reply_chars >= 16")
        self.max_turns = self.max_steps = int(max_turns)
        self.max_reply_chars = int(max_reply_chars)
        self.paraphrase_seed = int(paraphrase_seed)
        opts = {} if user == "rules" else {"api_key_env": user_api_key_env, "timeout_s": user_timeout_s,
                                           "retries": user_retries, "temperature": user_temperature}
        self.user = make_user(user, user_base_url, **opts)
        self._seed = 0
        self._turn = 0
        self._done = True
        self._agent_turns: list[str] = []
        self._conversation: list[tuple[str, str]] = []
        self.task = ""

    # -- subclass hooks -----------------------------------------------------------------------------------------

    @abstractmethod
    def _new_episode(self, rng: np.random.Generator) -> str:
        """Draw the goal (and database) of the episode from ``rng``; return the task text."""

    @abstractmethod
    def _opening(self, rng: np.random.Generator) -> str:
        """The user's first message."""

    @abstractmethod
    def _parse(self, text: str) -> Intent: ...

    @abstractmethod
    def _respond(self, intent: Intent, rng: np.random.Generator) -> Outcome:
        """Apply ``intent`` to the dialogue state; the user's templated reply and the step's reward."""

    @abstractmethod
    def _state_key(self) -> Hashable: ...

    @abstractmethod
    def _persona(self) -> str:
        """System prompt of an LLM user: who it is and its whole goal."""

    @abstractmethod
    def oracle_action(self) -> str:
        """The scripted oracle's next reply for the current state (``gigpo eval --agent oracle``)."""

    # -- Env API ------------------------------------------------------------------------------------------------

    def _info(self, **kw: Any) -> dict[str, Any]:
        info = {"won": False, "score": 0.0, "action_valid": True, "state_key": self._state_key(),
                "admissible_actions": None, "turn": self._turn, "user": self.user.name}
        info.update(kw)
        return info

    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        self._seed, self._turn, self._done = int(seed), 0, False
        self._agent_turns, self._conversation = [], []
        self.task = self._new_episode(np.random.default_rng([int(seed), 17]))
        opening = self._opening(wording_rng(self._seed, self.paraphrase_seed, []))
        if self.user.name != "rules":
            opening = self.user.reply(self._persona(), [], "(The assistant greets you. Open the conversation.)",
                                      opening)
        # An LLM user's history starts with a stock greeting of the assistant, so its turns alternate from the start.
        self._conversation.append(("Hello, how can I help?", opening))
        info = self._info()
        info["task"] = self.task
        return opening, info

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self._done:
            raise RuntimeError("the dialogue is over (or never started): call reset() first")
        text, truncated = clean_reply(action, self.max_reply_chars)
        self._turn += 1
        self._agent_turns.append(text)
        out = self._respond(self._parse(text), wording_rng(self._seed, self.paraphrase_seed, self._agent_turns))
        if not out.done and self._turn >= self.max_turns:
            out.done = True
            out.convey += " I have to go now, goodbye."
            out.extra["gave_up"] = "turn limit"
        self._done = out.done
        reply = out.convey
        if self.user.name != "rules":
            reply = self.user.reply(self._persona(), self._conversation, text, out.convey)
        self._conversation.append((text, reply))
        info = self._info(won=out.won, score=out.score, action_valid=out.valid, truncated=truncated, **out.extra)
        return reply, (out.reward if out.valid else 0.0), out.done, info

    def close(self) -> None:
        self.user.close()
