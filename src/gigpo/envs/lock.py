"""Lock: a chain of combination-lock rooms, the credit-assignment testbed (sparse reward, recurring states)."""

from __future__ import annotations

import random
from typing import Any, Literal

from gigpo.envs.base import Env, EnvError

#: Action words, in index order (all single tokens of the tiny vocabulary: gigpo.models.vocab.ENV_WORDS).
ACTION_WORDS: tuple[str, ...] = ("up", "down", "left", "right", "north", "south", "east", "west")
TRAP_KINDS = ("reset", "back", "stay")


class LockEnv(Env):
    """``rooms`` rooms in a row; in each, one of ``actions`` action words opens the door to the next room.

    Dynamics (room r = 0 .. rooms-1; the episode is won on opening the last door):

    * the room's *correct* action: r → r + 1 (reward 1.0 and ``won`` when r + 1 == rooms);
    * a *trap* action (``traps`` of the other actions per room): ``trap="reset"`` → room 0, ``"back"`` →
      max(r − 1, 0), ``"stay"`` → r (a trap that does nothing);
    * every other action word: nothing happens (valid no-op);
    * any other text: invalid — reward 0, state unchanged, ``action_valid=False`` (it still uses a step);
    * ``slip``: with this probability the chosen (valid) action is replaced by a uniformly random action word.

    Every reward is 0 except the final door's 1.0; the episode ends on winning or after ``max_steps`` steps.

    The combination (correct and trap actions of every room) is drawn from ``random.Random(lock_seed)`` when
    ``lock_seed`` is given — one fixed lock for every task, so a policy can memorise it — or else from
    ``random.Random(seed)`` of each :meth:`reset`, different per task. ``show_code`` (default: shown iff drawn per
    task) adds the combination to the observation, so a policy can read the solution instead of memorising it.
    Slips draw from ``random.Random(f"lock-slip-{seed}")``: envs reset with one seed and given the same actions
    follow the same path (the group contract).

    Observation: ``"room R"`` (R = ``rooms`` after the last door opened) (plus ``"\\ncode W0 W1 ..."`` when shown) — a pure function of (room, combination),
    so the same room recurs across a group's trajectories and within one trajectory after a trap. ``state_key`` =
    ``(room, combination)``; :meth:`oracle_action` is the room's correct word.
    """

    def __init__(
        self,
        *,
        rooms: int = 5,
        actions: int = 4,
        traps: int = 1,
        trap: Literal["reset", "back", "stay"] = "reset",
        slip: float = 0.0,
        max_steps: int = 15,
        lock_seed: int | None = None,
        show_code: bool | None = None,
    ) -> None:
        if rooms < 1:
            raise ValueError(f"lock rooms must be >= 1, got {rooms}")
        if not 2 <= actions <= len(ACTION_WORDS):
            raise ValueError(f"lock actions must be in [2, {len(ACTION_WORDS)}], got {actions}")
        if not 0 <= traps <= actions - 1:
            raise ValueError(f"lock traps must be in [0, actions - 1 = {actions - 1}], got {traps}")
        if trap not in TRAP_KINDS:
            raise ValueError(f"lock trap must be one of {TRAP_KINDS}, got {trap!r}")
        if not 0.0 <= slip <= 1.0:
            raise ValueError(f"lock slip must be a probability in [0, 1], got {slip}")
        if max_steps < 1:
            raise ValueError(f"lock max_steps must be >= 1, got {max_steps}")
        self.rooms, self.n_actions, self.traps, self.trap = rooms, actions, traps, trap
        self.slip, self.max_steps, self.lock_seed = float(slip), max_steps, lock_seed
        self.show_code = (lock_seed is None) if show_code is None else bool(show_code)
        self.words = ACTION_WORDS[:actions]
        self.instructions = (
            f"You are in room 0 of {rooms} locked rooms. In each room one of the words {', '.join(self.words)} "
            "opens the door to the next room; some words send you back. Open the last door. Answer one word."
        )
        self.task = "Open every door."
        self._fixed = None if lock_seed is None else self._draw(random.Random(int(lock_seed)))
        self._code: tuple[int, ...] = ()
        self._trap_sets: tuple[frozenset[int], ...] = ()
        self._room = 0
        self._steps = 0
        self._done = True
        self._slip_rng = random.Random(0)

    def _draw(self, rng: random.Random) -> tuple[tuple[int, ...], tuple[frozenset[int], ...]]:
        code, trap_sets = [], []
        for _ in range(self.rooms):
            correct = rng.randrange(self.n_actions)
            others = [a for a in range(self.n_actions) if a != correct]
            code.append(correct)
            trap_sets.append(frozenset(rng.sample(others, self.traps)))
        return tuple(code), tuple(trap_sets)

    @property
    def state_key(self) -> tuple[int, tuple[int, ...]]:
        return (self._room, self._code)

    def render(self) -> str:
        obs = f"room {self._room}"
        if self.show_code:
            obs += "\ncode " + " ".join(self.words[a] for a in self._code)
        return obs

    def oracle_action(self) -> str:
        """The action word that opens the current room's door (what an agent that knows the lock answers)."""
        if self._done:
            raise EnvError("lock: oracle_action() after the episode ended (or before reset())")
        return self.words[self._code[self._room]]

    def _info(self, won: bool, valid: bool) -> dict[str, Any]:
        return {
            "task": self.task,
            "won": won,
            "action_valid": valid,
            "state_key": self.state_key,
            "admissible_actions": list(self.words),
            "score": float(won),
            "room": self._room,
        }

    def snapshot(self) -> tuple:
        """The whole state (branch rollouts restore it into another instance: :mod:`gigpo.envs.restore`)."""
        return (self._code, self._trap_sets, self._room, self._steps, self._done, self._slip_rng.getstate())

    def restore(self, snapshot: tuple) -> tuple[str, dict[str, Any]]:
        """Put this env into ``snapshot``'s state; returns what ``reset`` shows there."""
        self._code, self._trap_sets, self._room, self._steps, self._done, rng_state = snapshot
        self._slip_rng = random.Random()
        self._slip_rng.setstate(rng_state)
        return self.render(), self._shown_info()

    def _shown_info(self) -> dict[str, Any]:
        info = self._info(False, True)
        del info["won"], info["action_valid"], info["score"]
        return info

    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        seed = int(seed)
        self._code, self._trap_sets = self._fixed if self._fixed is not None else self._draw(random.Random(seed))
        self._slip_rng = random.Random(f"lock-slip-{seed}")
        self._room, self._steps, self._done = 0, 0, False
        return self.render(), self._shown_info()

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self._done:
            raise EnvError("lock: step() after the episode ended (or before reset())")
        self._steps += 1
        word = action.strip().lower() if isinstance(action, str) else None
        valid = word in self.words
        won = False
        if valid:
            a = self.words.index(word)
            if self.slip > 0 and self._slip_rng.random() < self.slip:
                a = self._slip_rng.randrange(self.n_actions)
            if a == self._code[self._room]:
                self._room += 1
                won = self._room == self.rooms
            elif a in self._trap_sets[self._room]:
                if self.trap == "reset":
                    self._room = 0
                elif self.trap == "back":
                    self._room = max(self._room - 1, 0)
        self._done = won or self._steps >= self.max_steps
        info = self._info(won, valid)
        info["truncated"] = self._done and not won  # cut by max_steps, not ended (Env contract)
        return self.render(), (1.0 if won else 0.0), self._done, info
