"""Advantage estimators (GiGPO, GRPO, RLOO) on flat per-step rows: the public entry point ``compute_advantages``.

A = A_E + ω · A_S. ``compute_advantages`` reads as: validate rows → discounted returns → episode term A_E →
step term A_S → combine (:func:`group_advantages`, whose two implementation-specific rules — the episode term and
the step-group labels — are arguments); ``group_normalize`` is the one group statistic both terms use. The
verl-agent reproduction is :func:`gigpo.algo.compat.verl_agent_advantages`, the same pipeline with the official
rules; nothing here knows of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gigpo.algo.grouping import GroupingSpec, check_texts, cluster_sorted, step_group_stats
from gigpo.algo.ids import (
    as_numpy,
    as_object_list,
    factorize_ids,
    factorize_keys,
    id_at,
    pair_codes,
    relabel_first_seen,
)
from gigpo.algo.registry import apply_step_weight, check_step_weight
from gigpo.algo.returns import (
    TrajIndex,
    as_rewards,
    as_steps,
    build_traj_index,
    check_gamma,
    segmented_discount,
)

ESTIMATORS = ("gigpo", "grpo", "rloo")
EPISODE_ESTIMATORS = ("grpo", "rloo")
NORMALIZATIONS = ("mean_std", "mean")
STD_DDOFS = (0, 1)


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
    std_ddof: int = 1,
    leave_one_out: bool = False,
) -> np.ndarray:
    """Per-unit group-relative score, fully vectorised (``np.bincount``; no loop over units).

    mean:      A_i = s · (x_i − mean_g x)
    mean_std:  A_i = s · (x_i − mean_g x) / (std_g x + eps),  std_g² = Σ_g (x − mean_g x)² / (n_g − ``std_ddof``)
    (``std_ddof`` 1: the unbiased std of ``torch.std``; 0: the population std), with s = 1, or s = n_g / (n_g − 1)
    for ``leave_one_out`` (RLOO: x_i − mean of the *other* n_g − 1 units equals n_g/(n_g − 1) · (x_i − mean_g)).
    A singleton group gives 0 (its std is undefined for ddof 1, but its deviation from its own mean is 0), and so
    does a group of equal values — exactly: values are shifted by one member of their group before averaging, so
    equal values give deviations of exactly 0.
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
    denom_n = counts - std_ddof
    var = np.divide(
        np.bincount(codes, weights=dev * dev, minlength=n_codes),
        denom_n,
        out=np.zeros(n_codes),
        where=denom_n > 0,
    )
    denom = np.sqrt(var) + eps
    return np.divide(adv, denom[codes], out=np.zeros_like(adv), where=denom[codes] > 0)


@dataclass(frozen=True)
class Rows:
    """Validated rows: id codes, the (trajectory, step) index, rewards."""

    gcodes: np.ndarray
    n_groups: int
    group_of_traj: np.ndarray
    index: TrajIndex
    rewards: np.ndarray


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
    grouping: GroupingSpec | None = None,
    eps: float = 1e-6,
    *,
    std_ddof: int = 1,
) -> AdvantageOutput:
    """Per-row advantages for GiGPO / GRPO / RLOO from flat step records (equations: docs/library.md "Semantics").

    Inputs (length N, lists / numpy / torch; any row order): ``group_ids`` (episode group), ``traj_ids``, ``steps``
    (int t within the trajectory), ``rewards`` (r_t, penalties included), ``anchors`` (step-grouping keys: any
    hashable, or strings when ``grouping`` is set; ignored by "grpo"/"rloo").

    Episode term, on R(τ) = Σ_t r_t with statistics over the trajectories of a group (each counts once):
      grpo: A_E = (R − mean_G R) / F;  rloo: A_E = (R − mean of the *other* trajectories' R) / F
      F = std_G R + eps for "mean_std" (std with ``std_ddof``: 1 = ``torch.std``, the default; 0 = population),
      F = 1 for "mean"; singleton group → 0.
    Step term (estimator "gigpo"): R_t = r_t + γ R_{t+1}; step group = same ``group_id`` and matching anchor
      (exact key; or, with ``grouping`` a :class:`GroupingSpec`, greedy-leader similarity ≥ its threshold in
      (trajectory, step) order);
      A_S = (R_t − mean_S R_t) / F_S with the same normalisation over the rows of the step group; singleton → 0.
    Result: A = A_E + ``step_weight`` · A_S ("gigpo"), A = A_E ("grpo", "rloo"; then A_S = 0, step ids = -1).

    The official verl-agent numerics (episode statistics over step rows, its similarity grouping in batch order,
    its invalid-action penalty): :func:`gigpo.algo.compat.verl_agent_advantages`, same arguments.

    Raises ``ValueError`` naming the problem for: mismatched lengths, empty input, NaN/inf rewards, duplicate
    (trajectory, step) pairs, a trajectory in two groups, ``grouping`` not a GroupingSpec (whose constructor checks
    its threshold), non-string anchors with similarity, missing anchors for "gigpo", unknown option values, ω negative or not finite.
    """
    check_options(estimator, episode_estimator, normalize, grouping, eps, step_weight, std_ddof)
    return group_advantages(
        group_ids, traj_ids, steps, rewards, anchors, estimator=estimator, episode_estimator=episode_estimator,
        gamma=gamma, step_weight=step_weight, normalize=normalize, eps=eps, std_ddof=std_ddof,
        episode_term=episode_term,
        step_labels=lambda rows, anchors: step_labels(rows, anchors, grouping),
    )


#: ``episode_term(rows, traj_return, *, loo, normalize, eps, std_ddof) -> A_E per row``.
EpisodeTerm = Callable[..., np.ndarray]
#: ``step_labels(rows, anchors) -> label per row`` (equal label ⇔ same step group).
StepLabels = Callable[["Rows", Any], np.ndarray]


def group_advantages(
    group_ids: Any, traj_ids: Any, steps: Any, rewards: Any, anchors: Any, *, estimator: str,
    episode_estimator: str, gamma: float, step_weight: float, normalize: str, eps: float, std_ddof: int,
    episode_term: EpisodeTerm, step_labels: StepLabels, step_return_offset: np.ndarray | None = None,
) -> AdvantageOutput:
    """The pipeline of :func:`compute_advantages` with its two implementation rules passed in (options already
    checked): validate rows → R_t (minus ``step_return_offset`` per row, if given) → ``episode_term`` →
    step groups from ``step_labels`` → A_S → A = A_E + ω A_S."""
    check_gamma(gamma)
    use_steps = estimator == "gigpo"
    rows = validated_rows(group_ids, traj_ids, steps, rewards, anchors, use_steps)
    returns = _discounted(rows, gamma)
    traj_return = np.bincount(rows.index.tcodes, weights=rows.rewards, minlength=rows.index.n_traj)
    episode_returns = traj_return[rows.index.tcodes]
    loo = estimator == "rloo" or (use_steps and episode_estimator == "rloo")
    norm = dict(normalize=normalize, eps=eps, std_ddof=std_ddof)
    ep_adv = episode_term(rows, traj_return, loo=loo, **norm)
    if use_steps:
        if step_return_offset is not None:
            returns = returns - step_return_offset
        step_ids, step_adv = _step_term(rows, step_labels(rows, anchors), returns, **norm)
        advantages = apply_step_weight(ep_adv, step_adv, step_weight)
    else:
        step_ids = np.full(rows.gcodes.size, -1, dtype=np.int64)
        step_adv = np.zeros(rows.gcodes.size, dtype=np.float64)
        advantages = ep_adv.copy()
    stats = _stats(advantages, ep_adv, step_adv, traj_return, rows, step_ids, use_steps)
    return AdvantageOutput(advantages, ep_adv, step_adv, returns, episode_returns, step_ids, stats)


def check_options(estimator, episode_estimator, normalize, grouping, eps, step_weight, std_ddof) -> None:
    """The option checks shared by :func:`compute_advantages` and the verl-agent reproduction."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; expected one of {ESTIMATORS}")
    if episode_estimator not in EPISODE_ESTIMATORS:
        raise ValueError(
            f"unknown episode_estimator {episode_estimator!r}; expected one of {EPISODE_ESTIMATORS}"
        )
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"unknown normalize {normalize!r}; expected one of {NORMALIZATIONS}")
    if isinstance(std_ddof, bool) or std_ddof not in STD_DDOFS:
        raise ValueError(f"std_ddof must be 0 or 1, got {std_ddof!r}")
    if grouping is not None and not isinstance(grouping, GroupingSpec):
        raise ValueError(f"grouping must be None (exact anchors) or a GroupingSpec, got {grouping!r:.80}")
    if not np.isfinite(eps) or eps < 0:
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    check_step_weight(step_weight)


def check_len(name: str, size: int, n: int) -> None:
    if size != n:
        raise ValueError(f"length mismatch: {name} has {size} rows but group_ids has {n}")


def validated_rows(group_ids, traj_ids, steps, rewards, anchors, use_steps) -> Rows:
    """Code the ids, check every column's length and values, index rows by (trajectory, step)."""
    gcodes, n_groups = factorize_ids(group_ids, "group_ids")
    n = gcodes.size
    tcodes, n_traj = factorize_ids(traj_ids, "traj_ids")
    check_len("traj_ids", tcodes.size, n)
    st = as_numpy(steps)
    check_len("steps", st.shape[0] if st.ndim else -1, n)
    r_np = as_numpy(rewards)
    check_len("rewards", r_np.shape[0] if r_np.ndim else -1, n)
    if use_steps:
        if anchors is None:
            raise ValueError('estimator "gigpo" needs anchors (one state key per row)')
        check_len("anchors", len(anchors) if not isinstance(anchors, np.ndarray) else anchors.shape[0], n)
    if n == 0:
        raise ValueError("empty input: no step rows")
    r = as_rewards(r_np, n)
    index = build_traj_index(tcodes, n_traj, as_steps(st, n), traj_ids)
    gc_sorted = gcodes[index.order]
    split = (index.next_in_traj[:-1] < n) & (gc_sorted[1:] != gc_sorted[:-1])
    if split.any():
        row = int(index.order[int(np.flatnonzero(split)[0])])
        raise ValueError(f"trajectory {id_at(traj_ids, row)!r} appears in more than one group")
    group_of_traj = np.empty(n_traj, dtype=np.int64)
    group_of_traj[tcodes] = gcodes
    return Rows(gcodes, n_groups, group_of_traj, index, r)


def _discounted(rows: Rows, gamma: float) -> np.ndarray:
    """R_t = r_t + γ R_{t+1} per trajectory, in input row order."""
    order = rows.index.order
    returns = np.empty(order.size, dtype=np.float64)
    max_len = int(rows.index.traj_len.max())
    returns[order] = segmented_discount(rows.rewards[order], rows.index.next_in_traj, gamma, max_len)
    return returns


def episode_term(
    rows: Rows, traj_return: np.ndarray, *, loo: bool, normalize: str, eps: float, std_ddof: int
) -> np.ndarray:
    """A_E per row: group-normalised R(τ) over the group's trajectories (each trajectory counts once)."""
    traj_adv = group_normalize(traj_return, rows.group_of_traj, rows.n_groups, normalize=normalize, eps=eps,
                               std_ddof=std_ddof, leave_one_out=loo)
    return traj_adv[rows.index.tcodes]


def _step_term(
    rows: Rows, labels: np.ndarray, returns: np.ndarray, *, normalize: str, eps: float, std_ddof: int
) -> tuple[np.ndarray, np.ndarray]:
    """(step-group ids, A_S): the step groups given by ``labels``, then group-normalised R_t."""
    # Canonical numbering: first appearance in (trajectory, step) order, so ids do not depend on row order.
    order = rows.index.order
    step_ids = np.empty(order.size, dtype=np.int64)
    step_ids[order] = relabel_first_seen(labels[order])
    n_step_groups = int(step_ids.max()) + 1
    step_adv = group_normalize(
        returns, step_ids, n_step_groups, normalize=normalize, eps=eps, std_ddof=std_ddof
    )
    return step_ids, step_adv


def step_labels(rows: Rows, anchors: Any, grouping: GroupingSpec | None) -> np.ndarray:
    """Step-group labels (equal ⇔ same step group): exact anchor keys within the episode group, or greedy-leader
    similarity clusters per episode group in (trajectory, step) order."""
    if grouping is None:
        acodes, n_anchor = factorize_keys(anchors, "anchors")
        return pair_codes(acodes, n_anchor, rows.gcodes, rows.n_groups)[0]
    texts = as_object_list(anchors, "anchors")
    check_texts(texts)
    by_group = rows.index.order[
        np.argsort(rows.gcodes[rows.index.order], kind="stable")
    ]  # (group, traj, step)
    return cluster_sorted(rows.gcodes[by_group], by_group, texts, grouping)


def _stats(adv, ep_adv, step_adv, traj_return, rows: Rows, step_ids, use_steps) -> dict:
    """JSON-ready per-iteration metrics (python scalars only)."""
    trajs_per_group = np.bincount(rows.group_of_traj, minlength=rows.n_groups)
    # a group whose trajectories all returned the same gives no episode-level signal (GRPO's "no variance" groups)
    group_min = np.full(rows.n_groups, np.inf)
    group_max = np.full(rows.n_groups, -np.inf)
    np.minimum.at(group_min, rows.group_of_traj, traj_return)
    np.maximum.at(group_max, rows.group_of_traj, traj_return)
    traj_len = rows.index.traj_len
    stats: dict[str, Any] = {
        "num_rows": int(adv.size),
        "num_trajectories": int(traj_return.size),
        "num_episode_groups": int(rows.n_groups),
        "episode_group/singleton_frac": float((trajs_per_group == 1).mean()),
        "episode_group/signal_frac": float((group_max > group_min).mean()),
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
