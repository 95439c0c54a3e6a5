"""One ALFWorld game played by TextWorld's PDDL engine (``textworld.envs.pddl.PddlEnv`` + Fast Downward).

Both alfworld envs go through :class:`PddlGame`: the real games (``game.tw-pddl`` files from
``alfworld-download``) and the generated ones (:mod:`gigpo.envs.alfworld.pddl`). What the agent sees is what
ALFWorld gives: the engine's feedback text and its sorted admissible commands (``help`` left out, as verl-agent
does). A command that is not admissible is not sent to the engine (it would answer ``Nothing happens.`` and
change nothing); it costs no engine time.

Oracle: the game's walkthrough while the agent has followed it, else the engine's planner from the current state
(``PddlState.replan``), so the oracle recovers from any state the agent reached.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from gigpo.envs.alfworld.pddl import INSTALL_HINT
from gigpo.envs.base import EnvError

#: ALFWorld's answer to a command the engine does not accept.
NOTHING_HAPPENS = "Nothing happens."


def _textworld() -> Any:
    try:
        import textworld
        from textworld.envs.pddl import PddlEnv
    except ImportError as e:
        raise EnvError(f"the alfworld envs need textworld with its PDDL engine ({e}): {INSTALL_HINT}") from None
    return textworld, PddlEnv


class PddlGame:
    """``load(data)`` then ``reset()`` / ``step(command)``; ``namer(entity_infos)`` sets the display names."""

    def __init__(self) -> None:
        textworld, pddl_env = _textworld()
        try:
            self.env = pddl_env(textworld.EnvInfos(admissible_commands=True, won=True, facts=False))
        except ImportError as e:  # fast_downward missing or its library not built
            raise EnvError(f"the alfworld envs need fast-downward-textworld ({e}): {INSTALL_HINT}") from None
        self.walkthrough: list[str] = []
        self.on_walkthrough = True
        self.moves = 0
        self.admissible: list[str] = []
        self.won = False

    def load(self, data: dict, namer: Callable[[dict], None] | None = None) -> None:
        self.env.load(data)
        if namer is not None:
            namer(self.env._entity_infos)
        self.walkthrough = list(data.get("walkthrough") or [])

    def _update(self) -> str:
        state = self.env.state
        self.admissible = [c for c in state["admissible_commands"] if c != "help"]
        self.won = bool(state["won"])
        return str(state.feedback)

    def reset(self) -> str:
        self.env.reset()
        self.moves, self.on_walkthrough = 0, True
        return self._update()

    def step(self, command: str) -> tuple[str, bool]:
        """``(feedback, valid)``; an inadmissible command leaves the game as it was."""
        command = command.strip()
        if command not in self.admissible:
            return NOTHING_HAPPENS, False
        if self.on_walkthrough and (self.moves >= len(self.walkthrough) or self.walkthrough[self.moves] != command):
            self.on_walkthrough = False
        self.env.step(command)
        self.moves += 1
        return self._update(), True

    def state_key(self) -> str:
        """A digest of the engine's true state (every PDDL fact), equal exactly when the states are equal."""
        facts = sorted(str(f) for f in self.env._pddl_state.facts)
        return hashlib.blake2b("\n".join(facts).encode(), digest_size=12).hexdigest()

    def oracle_action(self) -> str:
        """The next walkthrough command while on it; otherwise the first command of a fresh plan."""
        if self.won:
            return "look"
        if self.on_walkthrough and self.moves < len(self.walkthrough):
            return self.walkthrough[self.moves]
        plan = self.env._pddl_state.replan(self.env._entity_infos) or []
        return plan[0] if plan else "look"
