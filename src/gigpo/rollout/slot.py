"""One env's place in a collection: its env, the trajectory being written, the live observation and history.

Its own module so both the collector and the self-play collector (:mod:`gigpo.rollout.multiseat`) use it
without importing each other."""

from __future__ import annotations

from dataclasses import dataclass

from gigpo.envs.guard import EnvHandle
from gigpo.envs.restore import Visit
from gigpo.rollout.batch import Trajectory


@dataclass
class Slot:
    env: EnvHandle
    traj: Trajectory
    observation: str = ""
    info: dict | None = None
    history: list[tuple[str, str]] | None = None
    active: bool = True
    # concat mode: the first prompt, the token chunks after it (response + env tokens per turn), the live context
    first: list[int] | None = None
    chunks: list[list[int]] | None = None
    context: list[int] | None = None
    seat: int = 0  #: a multi-seat game's seat this slot plays (rollout/multiseat.py)
    # branch rollouts (rollout/branching.py): the actions that reached the env and the visits they led to (the
    # reset's first), what restoring this slot's state by replay needs; None when not branching
    actions: list[str] | None = None
    visits: list[Visit] | None = None
