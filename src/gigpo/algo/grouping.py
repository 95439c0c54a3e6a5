"""Anchor-state step groups: exact keys, or greedy-leader similarity clustering within each episode group.

Exact grouping is numpy only. Similarity grouping calls into ``gigpo.algo.similarity``, imported on first use so
that returns, exact grouping and advantages never load the similarity engine or its optional libraries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gigpo.algo.ids import (
    as_numpy,
    as_object_list,
    dense_codes,
    factorize_ids,
    factorize_keys,
    pair_codes,
    relabel_first_seen,
)

#: The similarity scores step grouping can use (:mod:`gigpo.algo.similarity`'s text metrics; named here so that
#: checking a spec does not load the similarity engine).
SIMILARITY_METRICS = ("ro", "indel", "minhash")


@dataclass(frozen=True)
class GroupingSpec:
    """Similarity step grouping: two anchor texts of one episode group match when ``metric``'s score of (leader,
    text) is ≥ ``threshold`` (greedy leader clustering, :func:`group_similar`). ``metric``: "ro" (Ratcliff–
    Obershelp, ``difflib.SequenceMatcher(None, leader, text, autojunk=False).ratio()``), "indel" (normalised indel
    similarity) or "minhash" (estimated Jaccard of character shingles). Exact grouping has no spec (None).

    The one place the threshold is checked: a real number in (0, 1] (``ValueError`` otherwise), as is the metric;
    ``grouping.metric`` / ``grouping.threshold`` of a config become one of these once, at validation."""

    metric: str = "ro"
    threshold: float = 0.9

    def __post_init__(self) -> None:
        if self.metric not in SIMILARITY_METRICS:
            raise ValueError(f"unknown similarity metric {self.metric!r}; expected one of {SIMILARITY_METRICS}")
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, (int, float, np.floating, np.integer)):
            raise ValueError(f"similarity threshold must be a float in (0, 1], got {t!r}")
        if not (0.0 < float(t) <= 1.0):
            raise ValueError(f"similarity threshold must be in (0, 1], got {t!r}")
        object.__setattr__(self, "threshold", float(t))


def group_exact(group_ids: Any, anchors: Any) -> np.ndarray:
    """Exact anchor-state grouping: rows share a step group iff same ``group_id`` AND equal anchor key.

    ``anchors`` may be any hashables (strings, ints, tuples), a numeric array, or a 2-D numeric array (one key per
    row). Returns int64 step-group ids ``0..K-1`` numbered in order of first appearance in the given rows; only
    equality of ids carries meaning (``compute_advantages`` renumbers them in (trajectory, step) order).
    """
    gcodes, n_groups = factorize_ids(group_ids, "group_ids")
    acodes, n_anchor = factorize_keys(anchors, "anchors")
    if acodes.size != gcodes.size:
        raise ValueError(f"length mismatch: group_ids has {gcodes.size} rows, anchors has {acodes.size}")
    return relabel_first_seen(pair_codes(acodes, n_anchor, gcodes, n_groups)[0])


def group_similar(
    group_ids: Any,
    traj_ids: Any,
    steps: Any,
    texts: Sequence[str],
    spec: GroupingSpec,
) -> np.ndarray:
    """Similarity grouping: greedy leader clustering of anchor texts within each episode group.

    Within one ``group_id``, rows are visited in (trajectory id, step) order (natural order of the ids: numeric for
    ints, lexicographic for strings); each row joins the first cluster, in creation order, whose leader scores
    ``>= spec.threshold`` under ``spec.metric`` (:class:`GroupingSpec`), else it leads a new cluster. The visiting order makes the result independent of row order. Returns int64 step-group
    ids, unique across episode groups, numbered group by group in that visiting order.
    """
    gcodes, _ = factorize_ids(group_ids, "group_ids")
    tcodes, _ = factorize_ids(traj_ids, "traj_ids")
    st = as_numpy(steps)
    text_list = as_object_list(texts, "anchors")
    n = gcodes.size
    if not (tcodes.size == n and st.shape[0] == n and len(text_list) == n):
        raise ValueError(
            f"length mismatch: group_ids {n}, traj_ids {tcodes.size}, steps {st.shape[0]}, anchors {len(text_list)}"
        )
    check_texts(text_list)
    order = np.lexsort((st, tcodes, gcodes))
    return cluster_sorted(gcodes[order], order, text_list, spec)


def check_texts(texts: list) -> None:
    """Similarity grouping compares strings: any other anchor raises ``ValueError`` naming its row."""
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise ValueError(
                f"similarity grouping needs string anchors; row {i} has a {type(t).__name__} ({t!r:.60})"
            )


def cluster_sorted(gcodes_sorted: np.ndarray, order: np.ndarray, texts: list, spec: GroupingSpec) -> np.ndarray:
    """Cluster rows already sorted by (group, traj, step); ``order[k]`` is the original row of sorted position k."""
    n = order.size
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out
    bounds = np.flatnonzero(np.diff(gcodes_sorted)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [n]))
    from gigpo.algo import similarity  # the similarity engine loads only when a batch needs it

    # One Python loop per *episode group* (not per row); the per-group clustering lives in gigpo.algo.similarity.
    batches = [
        [texts[i] for i in order[s:e].tolist()] for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
    ]
    local = similarity.leader_cluster_many(batches, spec.threshold, metric=spec.metric)
    offset = 0
    sorted_ids = np.empty(n, dtype=np.int64)
    for s, e, ids in zip(starts.tolist(), ends.tolist(), local, strict=True):
        ids = np.asarray(ids, dtype=np.int64)
        sorted_ids[s:e] = ids + offset
        offset += int(ids.max()) + 1 if ids.size else 0
    out[order] = sorted_ids
    return out


def step_group_stats(step_group_ids: Any) -> dict[str, Any]:
    """Summary of step-group sizes (for logging every iteration).

    Keys: ``num_groups``; ``mean_size`` = N / #groups (mean over groups); ``mean_size_per_row`` = Σ n_k² / N (the
    size of the group a random row sits in); ``singleton_frac`` = fraction of rows alone in their group;
    ``size_hist`` = {size: number of groups of that size} (int keys, ascending). Empty input gives zeros.
    """
    ids = as_numpy(step_group_ids).reshape(-1)
    n = int(ids.size)
    if n == 0:
        return {
            "num_groups": 0,
            "mean_size": 0.0,
            "mean_size_per_row": 0.0,
            "singleton_frac": 0.0,
            "size_hist": {},
        }
    if ids.dtype.kind in "iu":
        sizes = np.bincount(dense_codes(ids.astype(np.int64, copy=False))[0])
    else:
        sizes = np.unique(ids, return_counts=True)[1]
    hist_sizes, hist_counts = np.unique(sizes, return_counts=True)
    return {
        "num_groups": int(sizes.size),
        "mean_size": n / sizes.size,
        "mean_size_per_row": float(np.dot(sizes.astype(np.float64), sizes)) / n,
        "singleton_frac": float((sizes == 1).sum()) / n,
        "size_hist": {int(s): int(c) for s, c in zip(hist_sizes.tolist(), hist_counts.tolist(), strict=True)},
    }


def history_anchors(traj_ids: Any, steps: Any, anchors: Any, k: int) -> np.ndarray:
    """History-aware anchor keys: row i's key is its own anchor and the anchors of the ``k`` previous steps of its
    trajectory, ``(a_{t-k}, ..., a_{t-1}, a_t)`` — as an int64 array of shape (N, k + 1) of anchor codes, −1 where
    the trajectory has fewer than k earlier steps (so a short history never equals a full one). ``k = 0`` gives
    the anchors' codes alone (same partition as the anchors). Feed it to :func:`group_exact` /
    ``compute_advantages(anchors=...)`` (2-D numeric: one key per row). "Previous" follows step order within the
    trajectory, vectorised over rows (one shifted gather per lag)."""
    from gigpo.algo.returns import as_steps, build_traj_index

    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ValueError(f"history length k must be an int >= 0, got {k!r}")
    tcodes, n_traj = factorize_ids(traj_ids, "traj_ids")
    acodes, _ = factorize_keys(anchors, "anchors")
    n = tcodes.size
    if acodes.size != n:
        raise ValueError(f"length mismatch: traj_ids has {n} rows, anchors has {acodes.size}")
    index = build_traj_index(tcodes, n_traj, as_steps(steps, n), traj_ids)
    order = index.order
    t_sorted, a_sorted = tcodes[order], acodes[order]
    keys_sorted = np.full((n, k + 1), -1, dtype=np.int64)
    keys_sorted[:, k] = a_sorted
    pos = np.arange(n)
    for lag in range(1, k + 1):
        src = pos - lag
        ok = src >= 0
        ok[ok] = t_sorted[src[ok]] == t_sorted[ok]
        keys_sorted[ok, k - lag] = a_sorted[src[ok]]
    out = np.empty_like(keys_sorted)
    out[order] = keys_sorted
    return out
