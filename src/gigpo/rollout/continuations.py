"""Continuations: play on from recorded states of a collection, K copies each, with the collector's own policy —
the Monte-Carlo estimates of Q and V that ``gigpo audit`` compares every estimator's credit with.

A :class:`State` is a slot as it stood before one of its steps (taken by the collector's ``on_step`` hook while
``record_paths`` is on): the seed, the actions that reached the env and the visits they led to (what a verified
replay needs, :mod:`gigpo.envs.restore`), the observation, info and history the prompt is built from, and the
step (turns taken: the episode cap counts from it). :func:`continue_from` restores ``copies`` fresh envs per
state by replay — every replayed visit checked, a mismatch is :class:`gigpo.envs.restore.ReplayDivergence` — and
plays them to the end of their episodes through :meth:`gigpo.rollout.Collector.run_turns`, so prompts, parsing,
the invalid-action penalty and the step cap are exactly the collection's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gigpo.envs.guard import EnvFault
from gigpo.rollout.batch import RolloutBatch, Trajectory
from gigpo.rollout.branching import restore_by_replay
from gigpo.rollout.slot import Slot


@dataclass(frozen=True)
class State:
    """A recorded state: before step ``step`` of a trajectory of ``seed`` (see the module docstring)."""

    seed: int
    step: int
    task: str
    observation: str
    info: dict = field(hash=False)
    history: tuple = ()
    actions: tuple = ()
    visits: tuple = ()

    @staticmethod
    def of(slot: Slot, step: int) -> State:
        """The state ``slot`` stands in before ``step`` (its path must be recorded: ``record_paths``)."""
        if slot.actions is None or slot.visits is None:
            raise ValueError("a state needs its recorded path: set collector.record_paths before collecting")
        return State(slot.traj.seed, step, slot.traj.task, slot.observation, dict(slot.info or {}),
                     tuple(slot.history or ()), tuple(slot.actions), tuple(slot.visits))


def continue_from(collector, states: list[State], copies: int, temperature: float | None = None) -> RolloutBatch:
    """Play ``copies`` continuations of every state to the end of its episode (trajectory ``i * copies + c`` is
    copy ``c`` of ``states[i]``, its ``group_id`` = i, ``branch_step`` = the state's step; its rows start there).
    Trajectories whose env faulted are dropped, as in a collection."""
    if collector.mode != "step":
        raise ValueError("continuations need rollout.mode=step (a concatenated trajectory has no mid-episode start)")
    temperature = collector.temperature if temperature is None else temperature
    n = len(states) * copies
    collector._logged = 0
    handles = collector._envs(n)
    batch = RolloutBatch()
    slots = []
    for i, st in enumerate(states):
        for c in range(copies):
            t = Trajectory(traj_id=i * copies + c, group_id=i, seed=st.seed, task=st.task, branch_step=st.step,
                           length=st.step)
            slots.append(Slot(handles[i * copies + c], t, observation=st.observation, info=dict(st.info),
                              history=list(st.history), actions=list(st.actions), visits=list(st.visits)))
    batch.trajectories = [s.traj for s in slots]
    name = collector._guard.name or "env"
    jobs = [(s.env, s.traj.seed, s.actions, s.visits) for s in slots]
    for s, res in zip(slots, restore_by_replay(collector._guard, jobs, name)):
        if isinstance(res, EnvFault):
            collector._fail(s, f"restoring step {s.traj.branch_step}", res)
    collector.run_turns(slots, batch, temperature)
    failed = {s.traj.traj_id for s in slots if s.traj.failed}
    return batch.drop_trajectories(failed) if failed else batch


def discounted_returns(batch: RolloutBatch, starts: np.ndarray, gamma: float) -> np.ndarray:
    """Per trajectory id ``k`` (0 .. len(starts) − 1): Σ_j γ^(j − starts[k]) r_j over its rows (NaN for a
    trajectory with no rows: a dropped one). Vectorised over rows."""
    n = len(starts)
    tid = np.asarray(batch.traj_id, dtype=np.int64)
    rows = tid.size
    if rows == 0:
        return np.full(n, np.nan)
    steps = np.asarray(batch.step, dtype=np.float64)
    weights = np.asarray(batch.reward, dtype=np.float64) * gamma ** (steps - np.asarray(starts, float)[tid])
    out = np.bincount(tid, weights=weights, minlength=n)
    has = np.bincount(tid, minlength=n) > 0
    return np.where(has, out, np.nan)

