"""Segmented discounted returns R_t = r_t + γ R_{t+1} per trajectory, vectorised over any row order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gigpo.algo.ids import as_numpy, factorize_ids, id_at


@dataclass(frozen=True)
class TrajIndex:
    """Rows sorted by (trajectory, step): the shared index behind returns and grouping.

    ``order[k]`` is the original row at sorted position k; ``tcodes`` are trajectory codes (natural id order);
    ``next_in_traj[k]`` is the sorted position of the next step of the same trajectory, or ``n`` (a sentinel).
    """

    order: np.ndarray
    tcodes: np.ndarray
    n_traj: int
    traj_len: np.ndarray
    next_in_traj: np.ndarray


def as_steps(steps: Any, n: int) -> np.ndarray:
    """Validate ``steps`` as n integers (integral floats accepted) and return them as int64."""
    st = as_numpy(steps)
    if st.ndim != 1:
        raise ValueError(f"steps must be 1-D, got shape {st.shape}")
    if st.shape[0] != n:
        raise ValueError(f"length mismatch: steps has {st.shape[0]} rows, expected {n}")
    if st.dtype.kind in "iu":
        return st.astype(np.int64, copy=False)
    if st.dtype.kind == "f":
        if not np.isfinite(st).all() or not np.array_equal(st, np.round(st)):
            raise ValueError("steps must be integers (got non-integral or non-finite floats)")
        return st.astype(np.int64)
    if st.dtype.kind == "O" and n == 0:
        return np.zeros(0, dtype=np.int64)
    raise ValueError(f"steps must be integers, got dtype {st.dtype}")


def as_rewards(rewards: Any, n: int | None = None) -> np.ndarray:
    """Validate rewards as finite floats and return them as float64."""
    r = as_numpy(rewards)
    if r.ndim != 1:
        raise ValueError(f"rewards must be 1-D, got shape {r.shape}")
    if n is not None and r.shape[0] != n:
        raise ValueError(f"length mismatch: rewards has {r.shape[0]} rows, expected {n}")
    if r.dtype.kind not in "iuf":
        raise ValueError(f"rewards must be numbers, got dtype {r.dtype}")
    r = r.astype(np.float64, copy=False)
    if not np.isfinite(r).all():
        bad = int(np.flatnonzero(~np.isfinite(r))[0])
        raise ValueError(f"rewards contain NaN or inf (first at row {bad}: {r[bad]})")
    return r


def build_traj_index(tcodes: np.ndarray, n_traj: int, steps: np.ndarray, traj_ids: Any = None) -> TrajIndex:
    """Sort rows by (trajectory code, step); reject duplicate (trajectory, step) pairs."""
    n = tcodes.size
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return TrajIndex(empty, tcodes, 0, empty, empty)
    smin, smax = int(steps.min()), int(steps.max())
    span = smax - smin + 1
    if n_traj * span <= 4 * n + 1024:
        # Compact keys (the usual case: steps 0..L-1): counting sort, O(N + range), no comparison sort.
        key = tcodes * np.int64(span) + (steps - smin)
        counts = np.bincount(key, minlength=n_traj * span)
        if counts.max() > 1:
            _raise_duplicate(np.flatnonzero(counts[key] > 1)[0], tcodes, steps, traj_ids)
        slot = np.cumsum(counts) - 1
        order = np.empty(n, dtype=np.int64)
        order[slot[key]] = np.arange(n, dtype=np.int64)
    else:
        if n_traj * span < 2**62:  # one int64 key sorts ~2x faster than a two-key lexsort
            key = tcodes * np.int64(span) + (steps - smin)
            order = np.argsort(key)  # keys are unique unless duplicated, so stability is moot
            key_s = key[order]
            dup = key_s[1:] == key_s[:-1]
        else:
            order = np.lexsort((steps, tcodes))
            dup = (tcodes[order][1:] == tcodes[order][:-1]) & (steps[order][1:] == steps[order][:-1])
        if dup.any():
            _raise_duplicate(order[int(np.flatnonzero(dup)[0])], tcodes, steps, traj_ids)
    tc_s = tcodes[order]
    same_next = np.empty(n, dtype=bool)
    same_next[:-1] = tc_s[1:] == tc_s[:-1]
    same_next[-1] = False
    next_in_traj = np.where(same_next, np.arange(1, n + 1, dtype=np.int64), np.int64(n))
    traj_len = np.bincount(tcodes, minlength=n_traj)
    return TrajIndex(order, tcodes, n_traj, traj_len, next_in_traj)


def _raise_duplicate(row: Any, tcodes: np.ndarray, steps: np.ndarray, traj_ids: Any) -> None:
    row = int(row)
    tid = id_at(traj_ids, row) if traj_ids is not None else int(tcodes[row])
    raise ValueError(f"duplicate (trajectory, step) pair: trajectory {tid!r}, step {int(steps[row])}")


def segmented_discount(
    r_sorted: np.ndarray, next_in_traj: np.ndarray, gamma: float, max_len: int
) -> np.ndarray:
    """R_k = Σ_j γ^j r_{k+j} along ``next_in_traj`` chains, by pointer doubling.

    Each pass doubles the span a row has summed: v_k ← v_k + c_k · v_{next_k}, c_k ← c_k · c_{next_k},
    next_k ← next_{next_k}, with c = γ^span. ⌈log2 L⌉ passes of O(N) gathers (L = longest trajectory). Only
    products of powers of γ ≤ 1 and sums appear (no γ^{-t} rescaling), so long episodes and γ = 1 are exact up to
    ordinary rounding; contributions past float range underflow to 0 as they should.
    """
    n = r_sorted.size
    v = np.empty(n + 1, dtype=np.float64)
    v[:n] = r_sorted
    v[n] = 0.0  # sentinel: "past the end of the trajectory"
    c = np.full(n + 1, float(gamma), dtype=np.float64)
    c[n] = 0.0
    nxt = np.empty(n + 1, dtype=np.int64)
    nxt[:n] = next_in_traj
    nxt[n] = n
    span = 1
    while span < max_len:
        v = v + c * v[nxt]
        c = c * c[nxt]
        nxt = nxt[nxt]
        span *= 2
    return v[:n]


def discounted_returns(traj_ids: Any, steps: Any, rewards: Any, gamma: float) -> np.ndarray:
    """Discounted return of every row, R_t = r_t + γ R_{t+1} (R after the last step = 0), in the input row order.

    Rows of a trajectory may come in any order and need not be contiguous; "t+1" is the next larger ``step`` of
    the same trajectory (gaps in step numbers are allowed). ``gamma`` in [0, 1]. Returns float64 (N,).
    Duplicate (trajectory, step) pairs, NaN/inf rewards or mismatched lengths raise ``ValueError``.
    """
    check_gamma(gamma)
    tcodes, n_traj = factorize_ids(traj_ids, "traj_ids")
    n = tcodes.size
    r = as_rewards(rewards, n)
    st = as_steps(steps, n)
    idx = build_traj_index(tcodes, n_traj, st, traj_ids)
    out = np.empty(n, dtype=np.float64)
    if n:
        max_len = int(idx.traj_len.max())
        out[idx.order] = segmented_discount(r[idx.order], idx.next_in_traj, gamma, max_len)
    return out


def check_gamma(gamma: Any) -> None:
    """γ must be a real number in [0, 1]."""
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.floating, np.integer)):
        raise ValueError(f"gamma must be a float in [0, 1], got {gamma!r}")
    if not (0.0 <= float(gamma) <= 1.0):
        raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
