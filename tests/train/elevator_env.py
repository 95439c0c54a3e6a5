"""A user's own env, as the README's "bring your env" reader writes it (imported by tests with ``--import``):
an elevator that must reach a target floor. Its observation says "wrong floor." after a move that does not arrive,
so one state (floor, target) has two observation texts — exact grouping must still put them in one step group."""

from __future__ import annotations

import random

from gigpo.envs import register
from gigpo.envs.base import Env


class Elevator(Env):
    instructions = "Move the elevator to the target floor: answer up or down."
    max_steps = 6

    def __init__(self, floors: int = 5):
        self.floors = floors

    def _obs(self, prefix: str = "") -> tuple[str, dict]:
        text = f"{prefix}floor {self.floor} target {self.target}"
        return text, {"task": "", "state_key": (self.floor, self.target), "admissible_actions": ["up", "down"]}

    def reset(self, seed: int):
        rng = random.Random(seed)
        self.floor, self.target = rng.sample(range(self.floors), 2)
        return self._obs()

    def step(self, action: str):
        move = {"up": 1, "down": -1}.get(action.strip())
        if move is not None:
            self.floor = min(max(self.floor + move, 0), self.floors - 1)
        won = self.floor == self.target
        text, info = self._obs("" if won else "wrong floor. ")
        info.update(won=won, action_valid=move is not None, score=float(won))
        return text, float(won), won, info


register("elevator-test", Elevator, "the README reader's own env (tests)")
