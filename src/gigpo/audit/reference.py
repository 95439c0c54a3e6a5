"""The Monte-Carlo reference advantage of ``gigpo audit``: A*(s, a) = Q(s, a) − V(s) under the policy itself.

For a sampled row — state s_t of a trajectory, the action a_t it took, its reward r_t (penalties included) — with
K continuations each (:func:`gigpo.rollout.continuations.continue_from`, same policy, same temperature, same cap):

    V(s_t)      ≈ mean_k G_k(s_t)                      G(s) = Σ_j γ^j r_{t+j}, the discounted return from s
    Q(s_t, a_t) ≈ r_t + γ · mean_k G_k(s_{t+1})        s_{t+1}: the state the row's action led to
    SE(A*)      = sqrt(var G(s_t) / K + γ² var G(s_{t+1}) / K)     (independent samples; ddof 1)

When the row ended its episode (terminal, or the step cap) Q = r_t exactly. s_{t+1} is the same trajectory's next
recorded state, so the continuation after an invalid response starts from the unchanged env with one turn less,
as the episode did. Returns, Q and V are the rewards the estimators see, with the estimators' γ.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gigpo.rollout.batch import RolloutBatch
from gigpo.rollout.continuations import State, continue_from, discounted_returns


class StateRecorder:
    """The collector's ``on_step`` hook: every step's state before it, keyed by ``(traj_id, step)``."""

    def __init__(self) -> None:
        self.states: dict[tuple[int, int], State] = {}

    def __call__(self, slot, step: int) -> None:
        self.states[(slot.traj.traj_id, step)] = State.of(slot, step)


def collect_recorded(collector, seeds: list[int], group_size: int,
                     temperature: float | None = None) -> tuple[RolloutBatch, dict[tuple[int, int], State]]:
    """One collection with every row's state recorded (the collector's hooks are restored afterwards)."""
    recorder = StateRecorder()
    was = collector.record_paths, collector.on_step
    collector.record_paths, collector.on_step = True, recorder
    try:
        batch = collector.collect(seeds, group_size, temperature=temperature)
    finally:
        collector.record_paths, collector.on_step = was
    return batch, recorder.states


@dataclass
class Reference:
    """Per sampled row (batch row indices ``rows``): ``q``, ``v``, ``advantage`` (A* = q − v) and ``se``."""

    rows: np.ndarray
    q: np.ndarray
    v: np.ndarray
    advantage: np.ndarray
    se: np.ndarray


def reference_advantages(collector, batch: RolloutBatch, states: dict[tuple[int, int], State], rows: np.ndarray,
                         copies: int, gamma: float, *, chunk: int = 16,
                         progress: Callable[[int], None] | None = None) -> Reference:
    """A* with its standard error for the batch rows ``rows`` (see the module docstring); ``copies`` = K ≥ 2.
    ``chunk`` states are continued together (bounding the envs alive at once); ``progress(k)`` is told after
    each chunk how many states it finished."""
    if copies < 2:
        raise ValueError(f"continuations must be >= 2 (a standard error needs two samples), got {copies}")
    rows = np.asarray(rows, dtype=np.int64)
    tid = np.asarray(batch.traj_id, dtype=np.int64)[rows]
    step = np.asarray(batch.step, dtype=np.int64)[rows]
    reward = np.asarray(batch.reward, dtype=np.float64)[rows]
    here = [states[(int(a), int(b))] for a, b in zip(tid, step)]
    after = [states.get((int(a), int(b) + 1)) for a, b in zip(tid, step)]
    todo = here + [s for s in after if s is not None]  # V's states, then Q's
    mean, var = np.full(len(todo), np.nan), np.full(len(todo), np.nan)
    for lo in range(0, len(todo), chunk):
        part = todo[lo:lo + chunk]
        cont = continue_from(collector, part, copies)
        starts = np.repeat([s.step for s in part], copies)
        g = discounted_returns(cont, starts, gamma).reshape(len(part), copies)
        ok = np.isfinite(g).sum(axis=1)  # continuations that finished (an env fault drops one)
        total = np.where(np.isfinite(g), g, 0.0).sum(axis=1)
        m = np.where(ok > 0, total / np.maximum(ok, 1), np.nan)
        dev = np.where(np.isfinite(g), g - m[:, None], 0.0)
        mean[lo:lo + len(part)] = m
        # the variance of the mean: sample variance (ddof 1) / count
        var[lo:lo + len(part)] = np.where(ok > 1, (dev**2).sum(axis=1) / np.maximum(ok - 1, 1) / np.maximum(ok, 1),
                                          np.nan)
        if progress is not None:
            progress(len(part))
    n = len(rows)
    has_next = np.asarray([s is not None for s in after])
    next_mean, next_var = np.zeros(n), np.zeros(n)
    next_mean[has_next], next_var[has_next] = mean[n:], var[n:]
    v, v_var = mean[:n], var[:n]
    q = reward + gamma * next_mean
    return Reference(rows, q, v, q - v, np.sqrt(v_var + gamma**2 * next_var))


def stderr_bar(total: int, label: str, enabled: bool = True) -> tuple[Callable[[int], None], Callable[[], None]]:
    """A tqdm progress bar on stderr: ``(advance(k), close())``; silent when not ``enabled``."""
    if not enabled:
        return (lambda k: None), (lambda: None)
    from tqdm import tqdm

    bar = tqdm(total=total, desc=label, unit="state", file=sys.stderr, leave=False)
    return bar.update, bar.close
