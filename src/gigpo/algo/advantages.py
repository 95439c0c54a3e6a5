"""Advantage estimators (GiGPO, GRPO, RLOO) on flat per-step rows: the public entry point ``compute_advantages``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gigpo.algo.grouping import (
    _as_object_list,
    _check_texts,
    _check_threshold,
    _cluster_sorted,
    as_numpy,
    factorize_ids,
    factorize_keys,
    id_at,
    pair_codes,
    relabel_first_seen,
    step_group_stats,
)
from gigpo.algo.returns import as_rewards, as_steps, build_traj_index, check_gamma, segmented_discount

ESTIMATORS = ("gigpo", "grpo", "rloo")
EPISODE_ESTIMATORS = ("grpo", "rloo")
NORMALIZATIONS = ("mean_std", "mean")
COMPAT_MODES = (None, "verl-agent")


@dataclass
class AdvantageOutput:
    """Per-row results of :func:`compute_advantages` (all arrays have one entry per input row, in input order).

    ``advantages`` = ``episode_advantages`` + ω · ``step_advantages``; ``returns`` = discounted R_t;
    ``episode_returns`` = R(τ) = Σ_t r_t of the row's trajectory; ``step_group_ids`` = int64 step-group id
    (-1 everywhere when no step grouping was done, i.e. estimator "grpo"/"rloo"); ``stats`` = JSON-ready metrics.
    """

    advantages: np.ndarray
    episode_advantages: np.ndarray
    step_advantages: np.ndarray
    returns: np.ndarray
    episode_returns: np.ndarray
    step_group_ids: np.ndarray
    stats: dict[str, Any] = field(default_factory=dict)


def group_normalize(
    x: np.ndarray,
    codes: np.ndarray,
    n_codes: int,
    *,
    normalize: str,
    eps: float,
    ddof: int,
    leave_one_out: bool = False,
) -> np.ndarray:
    """Per-unit group-relative score, fully vectorised (``np.bincount``; no loop over units).

    mean:      A_i = s · (x_i − mean_g x)
    mean_std:  A_i = s · (x_i − mean_g x) / (std_g x + eps),  std with ``ddof`` (0: population, 1: unbiased)
    with s = 1, or s = n_g / (n_g − 1) for ``leave_one_out`` (RLOO: x_i − mean of the *other* n_g − 1 units equals
    n_g/(n_g − 1) · (x_i − mean_g)). A singleton group gives 0, and so does a group of equal values — exactly:
    values are shifted by one member of their group before averaging, so equal values give deviations of exactly 0.
    """
    counts = np.bincount(codes, minlength=n_codes).astype(np.float64)
    rep = np.empty(n_codes, dtype=np.int64)
    # Any member works as the shift (it only improves rounding); equal values then deviate by exactly 0.
    rep[codes] = np.arange(codes.size, dtype=np.int64)
    d = x - x[rep][codes]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_d = np.bincount(codes, weights=d, minlength=n_codes) / counts
    dev = d - mean_d[codes]
    if leave_one_out:
        scale = np.divide(counts, counts - 1.0, out=np.zeros(n_codes), where=counts > 1)
        adv = dev * scale[codes]
    else:
        adv = dev
    if normalize == "mean":
        return adv
    denom_n = counts - ddof
    var = np.divide(
        np.bincount(codes, weights=dev * dev, minlength=n_codes),
        denom_n,
        out=np.zeros(n_codes),
        where=denom_n > 0,
    )
    denom = np.sqrt(var) + eps
    return np.divide(adv, denom[codes], out=np.zeros_like(adv), where=denom[codes] > 0)


def _validate_options(estimator, episode_estimator, normalize, compat, similarity, eps, step_weight) -> None:
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; expected one of {ESTIMATORS}")
    if episode_estimator not in EPISODE_ESTIMATORS:
        raise ValueError(
            f"unknown episode_estimator {episode_estimator!r}; expected one of {EPISODE_ESTIMATORS}"
        )
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"unknown normalize {normalize!r}; expected one of {NORMALIZATIONS}")
    if compat not in COMPAT_MODES:
        raise ValueError(f"unknown compat {compat!r}; expected one of {COMPAT_MODES}")
    if similarity is not None:
        _check_threshold(similarity)
    if not np.isfinite(eps) or eps < 0:
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    if not np.isfinite(step_weight):
        raise ValueError(f"step_weight must be finite, got {step_weight!r}")


def _check_len(name: str, size: int, n: int) -> None:
    if size != n:
        raise ValueError(f"length mismatch: {name} has {size} rows but group_ids has {n}")


def compute_advantages(
    group_ids: Any,
    traj_ids: Any,
    steps: Any,
    rewards: Any,
    anchors: Any = None,
    estimator: str = "gigpo",
    episode_estimator: str = "grpo",
    gamma: float = 0.95,
    step_weight: float = 1.0,
    normalize: str = "mean_std",
    similarity: float | None = None,
    similarity_metric: str = "ro",
    compat: str | None = None,
    eps: float = 1e-6,
    *,
    row_penalty: Any = None,
) -> AdvantageOutput:
    """Per-row advantages for GiGPO / GRPO / RLOO from flat step records (DESIGN.md "GiGPO, precisely").

    Inputs (length N, lists / numpy / torch; any row order): ``group_ids`` (episode group), ``traj_ids``, ``steps``
    (int t within the trajectory), ``rewards`` (r_t, penalties included), ``anchors`` (step-grouping keys: any
    hashable, or strings when ``similarity`` is set; ignored by "grpo"/"rloo").

    Episode term, on R(τ) = Σ_t r_t with statistics over the trajectories of a group (each counts once):
      grpo: A_E = (R − mean_G R) / F;  rloo: A_E = (R − mean of the *other* trajectories' R) / F
      F = std_G R + eps for "mean_std" (population std, ddof 0), F = 1 for "mean"; singleton group → 0.
    Step term (estimator "gigpo"): R_t = r_t + γ R_{t+1}; step group = same ``group_id`` and matching anchor
      (exact key, or greedy-leader similarity ≥ ``similarity`` in (trajectory, step) order);
      A_S = (R_t − mean_S R_t) / F_S with the same normalisation over the rows of the step group; singleton → 0.
    Result: A = A_E + ``step_weight`` · A_S ("gigpo"), A = A_E ("grpo", "rloo"; then A_S = 0, step ids = -1).

    ``compat="verl-agent"`` reproduces the official GiGPO code: episode statistics over *step rows* (a trajectory
    weighs as many times as it has steps), unbiased std (ddof 1) in both terms, and an episode group of exactly
    one row keeps its raw score R(τ)/(1 + eps) ("mean_std") or R(τ) ("mean"). ``row_penalty`` (keyword, compat
    only) reproduces its invalid-action penalty, applied after discounting: the row's episode score becomes
    R(τ) − p and its step return R_t − p (pass un-penalised ``rewards`` then).

    Raises ``ValueError`` naming the problem for: mismatched lengths, empty input, NaN/inf rewards, duplicate
    (trajectory, step) pairs, a trajectory in two groups, ``similarity`` outside (0, 1], non-string anchors with
    similarity, missing anchors for "gigpo", unknown option values.
    """
    _validate_options(estimator, episode_estimator, normalize, compat, similarity, eps, step_weight)
    check_gamma(gamma)
    gcodes, n_groups = factorize_ids(group_ids, "group_ids")
    n = gcodes.size
    tcodes, n_traj = factorize_ids(traj_ids, "traj_ids")
    _check_len("traj_ids", tcodes.size, n)
    st = as_numpy(steps)
    _check_len("steps", st.shape[0] if st.ndim else -1, n)
    r_np = as_numpy(rewards)
    _check_len("rewards", r_np.shape[0] if r_np.ndim else -1, n)
    use_steps = estimator == "gigpo"
    if use_steps:
        if anchors is None:
            raise ValueError('estimator "gigpo" needs anchors (one state key per row)')
        a_len = len(anchors) if not isinstance(anchors, np.ndarray) else anchors.shape[0]
        _check_len("anchors", a_len, n)
    penalty = None
    if row_penalty is not None:
        if compat != "verl-agent":
            raise ValueError(
                'row_penalty is only defined for compat="verl-agent"; otherwise put penalties in rewards'
            )
        penalty = as_rewards(row_penalty, None)
        _check_len("row_penalty", penalty.shape[0], n)
    if n == 0:
        raise ValueError("empty input: no step rows")
    r = as_rewards(r_np, n)
    st = as_steps(st, n)

    idx = build_traj_index(tcodes, n_traj, st, traj_ids)
    order = idx.order
    gc_sorted = gcodes[order]
    split = (idx.next_in_traj[:-1] < n) & (gc_sorted[1:] != gc_sorted[:-1])
    if split.any():
        row = int(order[int(np.flatnonzero(split)[0])])
        raise ValueError(f"trajectory {id_at(traj_ids, row)!r} appears in more than one group")

    max_len = int(idx.traj_len.max())
    returns = np.empty(n, dtype=np.float64)
    returns[order] = segmented_discount(r[order], idx.next_in_traj, gamma, max_len)
    traj_return = np.bincount(tcodes, weights=r, minlength=n_traj)
    group_of_traj = np.empty(n_traj, dtype=np.int64)
    group_of_traj[tcodes] = gcodes
    episode_returns = traj_return[tcodes]

    # ---- episode term ----
    loo = (estimator == "rloo") or (estimator == "gigpo" and episode_estimator == "rloo")
    if compat == "verl-agent":
        score = episode_returns if penalty is None else episode_returns - penalty
        ep_adv = group_normalize(
            score, gcodes, n_groups, normalize=normalize, eps=eps, ddof=1, leave_one_out=loo
        )
        rows_per_group = np.bincount(gcodes, minlength=n_groups)
        lone = rows_per_group[gcodes] == 1
        ep_adv[lone] = score[lone] / (1.0 + eps) if normalize == "mean_std" else score[lone]
    else:
        traj_adv = group_normalize(
            traj_return, group_of_traj, n_groups, normalize=normalize, eps=eps, ddof=0, leave_one_out=loo
        )
        ep_adv = traj_adv[tcodes]

    # ---- step term ----
    if use_steps:
        if similarity is None:
            acodes, n_anchor = factorize_keys(anchors, "anchors")
            labels = pair_codes(acodes, n_anchor, gcodes, n_groups)[0]
        else:
            texts = _as_object_list(anchors, "anchors")
            _check_texts(texts)
            by_group = order[np.argsort(gc_sorted, kind="stable")]  # (group, traj, step) order
            labels = _cluster_sorted(gcodes[by_group], by_group, texts, float(similarity), similarity_metric)
        # Canonical numbering: first appearance in (trajectory, step) order, so ids do not depend on row order.
        step_ids = np.empty(n, dtype=np.int64)
        step_ids[order] = relabel_first_seen(labels[order])
        n_step_groups = int(step_ids.max()) + 1
        step_x = returns if penalty is None else returns - penalty
        step_adv = group_normalize(
            step_x,
            step_ids,
            n_step_groups,
            normalize=normalize,
            eps=eps,
            ddof=1 if compat == "verl-agent" else 0,
        )
        if penalty is not None:
            returns = step_x
        advantages = ep_adv + float(step_weight) * step_adv
    else:
        step_ids = np.full(n, -1, dtype=np.int64)
        step_adv = np.zeros(n, dtype=np.float64)
        advantages = ep_adv.copy()

    stats = _stats(
        advantages, ep_adv, step_adv, traj_return, group_of_traj, n_groups, idx.traj_len, step_ids, use_steps
    )
    return AdvantageOutput(advantages, ep_adv, step_adv, returns, episode_returns, step_ids, stats)


def _stats(
    adv, ep_adv, step_adv, traj_return, group_of_traj, n_groups, traj_len, step_ids, use_steps
) -> dict:
    """JSON-ready per-iteration metrics (python scalars only)."""
    trajs_per_group = np.bincount(group_of_traj, minlength=n_groups)
    stats: dict[str, Any] = {
        "num_rows": int(adv.size),
        "num_trajectories": int(traj_return.size),
        "num_episode_groups": int(n_groups),
        "episode_group/singleton_frac": float((trajs_per_group == 1).mean()),
        "traj_len/mean": float(traj_len.mean()),
        "traj_len/max": int(traj_len.max()),
        "episode_return/mean": float(traj_return.mean()),
        "episode_return/std": float(traj_return.std()),
        "adv/mean": float(adv.mean()),
        "adv/std": float(adv.std()),
        "adv/abs_max": float(np.abs(adv).max()),
        "adv/zero_frac": float((adv == 0).mean()),
        "episode_adv/abs_mean": float(np.abs(ep_adv).mean()),
    }
    if use_steps:
        stats["step_adv/abs_mean"] = float(np.abs(step_adv).mean())
        for key, value in step_group_stats(step_ids).items():
            stats[f"step_group/{key}"] = value
    return stats
