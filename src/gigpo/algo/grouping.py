"""Id handling and anchor-state grouping: flat arrays -> integer codes, exact and similarity step groups."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gigpo.algo import similarity


def as_numpy(values: Any) -> np.ndarray:
    """Return ``values`` (list, tuple, numpy array or torch tensor) as a numpy array without copying when possible."""
    if hasattr(values, "detach") and hasattr(values, "cpu"):  # torch.Tensor, without importing torch here
        return values.detach().cpu().numpy()
    if isinstance(values, np.ndarray):
        return values
    return np.asarray(values)


def id_at(values: Any, row: int) -> Any:
    """The id at ``row`` as a plain Python value (for error messages)."""
    v = as_numpy(values)[row]
    return v.item() if isinstance(v, np.generic) else v


def _as_object_list(values: Any, name: str) -> list:
    """Flat Python list of ``values`` (strings stay strings; no fixed-width numpy string copy of long texts)."""
    if hasattr(values, "detach") and hasattr(values, "cpu"):
        values = values.detach().cpu().numpy()
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {values.shape}")
        return values.tolist()
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of values, not a single string")
    return list(values)


def factorize_ids(values: Any, name: str) -> tuple[np.ndarray, int]:
    """Map ids (ints or strings) to codes ``0..K-1`` in *natural* order (numeric for ints, lexicographic for strings).

    Returns ``(codes, K)``. Because codes follow the sorted id values, anything ordered by code (e.g. the
    (trajectory, step) order of similarity clustering) does not depend on row order. Raises ``ValueError`` for
    non-1-D input, NaN/inf float ids, booleans, or a mix of types that cannot be ordered.
    """
    arr = as_numpy(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    kind = arr.dtype.kind
    if kind == "b":
        raise ValueError(f"{name} must be ints or strings, got booleans")
    if kind == "f" and not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or inf")
    if kind == "O":
        types = {type(v) for v in arr.tolist()}
        if len(types) > 1 and not all(issubclass(t, (int, np.integer)) for t in types):
            raise ValueError(
                f"{name} mixes id types {sorted(t.__name__ for t in types)}; use all ints or all strings"
            )
    try:
        uniq, codes = np.unique(arr, return_inverse=True)
    except TypeError as err:  # unorderable objects
        raise ValueError(f"{name} must be ints or strings ({err})") from None
    return codes.reshape(-1).astype(np.int64, copy=False), int(uniq.size)


def factorize_keys(values: Any, name: str) -> tuple[np.ndarray, int]:
    """Map arbitrary hashable keys to codes ``0..K-1`` (equal keys <=> equal codes; code order is unspecified).

    Numeric 1-D arrays use ``np.unique``; 2-D numeric arrays treat each row as one key; anything else (strings,
    tuples, mixed objects) goes through a dict, which hashes each key once and never builds a fixed-width copy of
    long texts. Unhashable keys raise ``ValueError``.
    """
    if hasattr(values, "detach") and hasattr(values, "cpu"):
        values = values.detach().cpu().numpy()
    if isinstance(values, np.ndarray) and values.dtype.kind in "iufb":
        if values.ndim == 1:
            uniq, codes = np.unique(values, return_inverse=True)
        elif values.ndim == 2:
            uniq, codes = np.unique(values, axis=0, return_inverse=True)
        else:
            raise ValueError(
                f"{name} must be 1-D (or 2-D numeric, one key per row), got shape {values.shape}"
            )
        return codes.reshape(-1).astype(np.int64, copy=False), int(uniq.shape[0])
    items = _as_object_list(values, name)
    table: dict[Any, int] = {}
    setdefault = table.setdefault
    try:
        codes_list = [setdefault(k, len(table)) for k in items]
    except TypeError:
        bad = next(k for k in items if not _hashable(k))
        raise ValueError(f"{name} must be hashable; got an unhashable {type(bad).__name__}") from None
    return np.fromiter(codes_list, dtype=np.int64, count=len(codes_list)), len(table)


def _hashable(x: Any) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True


def relabel_first_seen(labels: np.ndarray) -> np.ndarray:
    """Renumber ``labels`` to ``0..K-1`` in order of first appearance (vectorised)."""
    uniq, first, inv = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(uniq.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(uniq.size, dtype=np.int64)
    return rank[inv.reshape(-1)]


def group_exact(group_ids: Any, anchors: Any) -> np.ndarray:
    """Exact anchor-state grouping: rows share a step group iff same ``group_id`` AND equal anchor key.

    ``anchors`` may be any hashables (strings, ints, tuples), a numeric array, or a 2-D numeric array (one key per
    row). Returns int64 step-group ids ``0..K-1`` numbered in order of first appearance in the given rows; only
    equality of ids carries meaning (``compute_advantages`` renumbers them in (trajectory, step) order).
    """
    gcodes, _ = factorize_ids(group_ids, "group_ids")
    acodes, n_anchor = factorize_keys(anchors, "anchors")
    if acodes.size != gcodes.size:
        raise ValueError(f"length mismatch: group_ids has {gcodes.size} rows, anchors has {acodes.size}")
    return relabel_first_seen(gcodes * np.int64(max(n_anchor, 1)) + acodes)


def group_similar(
    group_ids: Any,
    traj_ids: Any,
    steps: Any,
    texts: Sequence[str],
    threshold: float,
    metric: str = "ro",
) -> np.ndarray:
    """Similarity grouping: greedy leader clustering of anchor texts within each episode group.

    Within one ``group_id``, rows are visited in (trajectory id, step) order (natural order of the ids: numeric for
    ints, lexicographic for strings); each row joins the first cluster, in creation order, whose leader scores
    ``>= threshold`` under ``metric`` (``"ro"`` = Ratcliff–Obershelp, difflib with ``autojunk=False``), else it
    leads a new cluster. The visiting order makes the result independent of row order. Returns int64 step-group
    ids, unique across episode groups, numbered group by group in that visiting order.
    """
    _check_threshold(threshold)
    gcodes, _ = factorize_ids(group_ids, "group_ids")
    tcodes, _ = factorize_ids(traj_ids, "traj_ids")
    st = as_numpy(steps)
    text_list = _as_object_list(texts, "anchors")
    n = gcodes.size
    if not (tcodes.size == n and st.shape[0] == n and len(text_list) == n):
        raise ValueError(
            f"length mismatch: group_ids {n}, traj_ids {tcodes.size}, steps {st.shape[0]}, anchors {len(text_list)}"
        )
    _check_texts(text_list)
    order = np.lexsort((st, tcodes, gcodes))
    return _cluster_sorted(gcodes[order], order, text_list, threshold, metric)


def _check_threshold(threshold: Any) -> None:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating, np.integer)):
        raise ValueError(f"similarity threshold must be a float in (0, 1], got {threshold!r}")
    if not (0.0 < float(threshold) <= 1.0):
        raise ValueError(f"similarity threshold must be in (0, 1], got {threshold!r}")


def _check_texts(texts: list) -> None:
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise ValueError(
                f"similarity grouping needs string anchors; row {i} has a {type(t).__name__} ({t!r:.60})"
            )


def _cluster_sorted(
    gcodes_sorted: np.ndarray, order: np.ndarray, texts: list, threshold: float, metric: str
) -> np.ndarray:
    """Cluster rows already sorted by (group, traj, step); ``order[k]`` is the original row of sorted position k."""
    n = order.size
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out
    bounds = np.flatnonzero(np.diff(gcodes_sorted)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [n]))
    # One Python loop per *episode group* (not per row); the per-group clustering lives in similarity.py.
    batches = [
        [texts[i] for i in order[s:e].tolist()] for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
    ]
    many = getattr(similarity, "leader_cluster_many", None)
    if many is not None:
        local = many(batches, float(threshold), metric=metric)
    else:
        local = [similarity.leader_cluster(b, float(threshold), metric=metric) for b in batches]
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
    _, sizes = np.unique(ids, return_counts=True)
    hist_sizes, hist_counts = np.unique(sizes, return_counts=True)
    return {
        "num_groups": int(sizes.size),
        "mean_size": n / sizes.size,
        "mean_size_per_row": float(np.dot(sizes.astype(np.float64), sizes)) / n,
        "singleton_frac": float((sizes == 1).sum()) / n,
        "size_hist": {int(s): int(c) for s, c in zip(hist_sizes.tolist(), hist_counts.tolist(), strict=True)},
    }
