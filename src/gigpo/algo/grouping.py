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


def dense_codes(x: np.ndarray) -> tuple[np.ndarray, int]:
    """Codes ``0..K-1`` of integer array ``x`` in ascending value order.

    When the value range is small (≤ 4N + 1024, the usual case for ids and combined keys) this is a lookup table
    (O(N + range), no sort); otherwise ``np.unique``.
    """
    if x.size == 0:
        return np.zeros(0, dtype=np.int64), 0
    lo, hi = int(x.min()), int(x.max())
    if hi - lo <= 4 * x.size + 1024:
        shifted = (x - lo).astype(np.intp, copy=False)
        present = np.zeros(hi - lo + 1, dtype=np.int64)
        present[shifted] = 1
        table = np.cumsum(present) - 1
        return table[shifted], int(table[-1]) + 1
    uniq, codes = np.unique(x, return_inverse=True)
    return codes.reshape(-1).astype(np.int64, copy=False), int(uniq.size)


def pair_codes(a: np.ndarray, ka: int, b: np.ndarray, kb: int) -> tuple[np.ndarray, int]:
    """Dense codes of the pairs (a_i, b_i) for dense codes a in [0, ka), b in [0, kb); equal pairs <=> equal codes.

    Small ka·kb: one lookup table. Otherwise the pairs are only sorted for the keys ``a`` that occur with more than
    one ``b`` (for step groups: anchors seen in several episode groups, usually none), so no full sort is needed.
    """
    n = a.size
    if ka * kb <= 4 * n + 1024:
        return dense_codes(a * np.int64(kb) + b)
    lo = np.full(ka, kb, dtype=np.int64)
    hi = np.full(ka, -1, dtype=np.int64)
    np.minimum.at(lo, a, b)
    np.maximum.at(hi, a, b)
    shared = lo != hi
    if not shared.any():
        return a, ka
    rows = shared[a]
    _, sub = np.unique(a[rows] * np.int64(kb) + b[rows], return_inverse=True)
    out = a.copy()
    out[rows] = ka + sub.reshape(-1)
    return dense_codes(out)


def _dict_codes(items: list, name: str) -> tuple[np.ndarray, list]:
    """Codes by first appearance via one dict (C-level passes, each key hashed once); returns (codes, uniques)."""
    try:
        uniques = list(dict.fromkeys(items))
    except TypeError:
        bad = next(k for k in items if not _hashable(k))
        raise ValueError(f"{name} must be hashable; got an unhashable {type(bad).__name__}") from None
    table = dict(zip(uniques, range(len(uniques)), strict=True))
    return np.fromiter(map(table.__getitem__, items), dtype=np.int64, count=len(items)), uniques


def factorize_ids(values: Any, name: str) -> tuple[np.ndarray, int]:
    """Map ids (ints or strings) to codes ``0..K-1`` in *natural* order (numeric for ints, lexicographic for strings).

    Returns ``(codes, K)``. Because codes follow the sorted id values, anything ordered by code (e.g. the
    (trajectory, step) order of similarity clustering) does not depend on row order. Raises ``ValueError`` for
    non-1-D input, NaN/inf float ids, booleans, or a mix of types that cannot be ordered.
    """
    arr = values if isinstance(values, (list, tuple)) else as_numpy(values)
    if isinstance(arr, np.ndarray):
        if arr.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
        kind = arr.dtype.kind
        if kind == "b":
            raise ValueError(f"{name} must be ints or strings, got booleans")
        if kind in "iu":
            return dense_codes(arr.astype(np.int64, copy=False))
        if kind == "f":
            if not np.isfinite(arr).all():
                raise ValueError(f"{name} contains NaN or inf")
            uniq, codes = np.unique(arr, return_inverse=True)
            return codes.reshape(-1).astype(np.int64, copy=False), int(uniq.size)
        items = arr.tolist()
    else:
        items = list(arr)
        if items and isinstance(items[0], (list, tuple, np.ndarray)):
            raise ValueError(f"{name} must be 1-D (one id per row), got nested sequences")
        if items and all(type(v) is int for v in items[:1]) and _all_ints(items):
            return dense_codes(np.asarray(items, dtype=np.int64))
    # Strings (or objects): dict-factorise in C, then sort only the K unique ids (K << N for ids).
    codes, uniques = _dict_codes(items, name)
    types = {type(u) for u in uniques}
    if len(types) > 1 and not all(issubclass(t, (int, np.integer)) for t in types):
        raise ValueError(
            f"{name} mixes id types {sorted(t.__name__ for t in types)}; use all ints or all strings"
        )
    if types and issubclass(next(iter(types)), (bool, np.bool_)):
        raise ValueError(f"{name} must be ints or strings, got booleans")
    try:
        rank_order = sorted(range(len(uniques)), key=uniques.__getitem__)
    except TypeError as err:  # unorderable objects (e.g. tuples of mixed types)
        raise ValueError(f"{name} must be ints or strings ({err})") from None
    rank = np.empty(len(uniques), dtype=np.int64)
    rank[np.asarray(rank_order, dtype=np.int64)] = np.arange(len(uniques), dtype=np.int64)
    return rank[codes], len(uniques)


def _all_ints(items: list) -> bool:
    try:
        arr = np.asarray(items)
    except (ValueError, OverflowError):
        return False
    return arr.ndim == 1 and arr.dtype.kind in "iu"


def factorize_keys(values: Any, name: str) -> tuple[np.ndarray, int]:
    """Map arbitrary hashable keys to codes ``0..K-1`` (equal keys <=> equal codes; code order is unspecified).

    Integer 1-D arrays use a lookup table or ``np.unique``; 2-D numeric arrays treat each row as one key; anything
    else (strings, tuples, mixed objects) goes through one dict (each key hashed once, no fixed-width copy of long
    texts). Unhashable keys raise ``ValueError``. Fastest: integer keys (e.g. env state ids).
    """
    if hasattr(values, "detach") and hasattr(values, "cpu"):
        values = values.detach().cpu().numpy()
    if isinstance(values, np.ndarray) and values.dtype.kind in "iufb":
        if values.ndim == 1 and values.dtype.kind in "iub":
            return dense_codes(values.astype(np.int64, copy=False))
        if values.ndim == 1:
            uniq, codes = np.unique(values, return_inverse=True)
        elif values.ndim == 2:
            uniq, codes = np.unique(values, axis=0, return_inverse=True)
        else:
            raise ValueError(
                f"{name} must be 1-D (or 2-D numeric, one key per row), got shape {values.shape}"
            )
        return codes.reshape(-1).astype(np.int64, copy=False), int(uniq.shape[0])
    codes, uniques = _dict_codes(_as_object_list(values, name), name)
    return codes, len(uniques)


def _hashable(x: Any) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True


def relabel_first_seen(labels: np.ndarray) -> np.ndarray:
    """Renumber integer ``labels`` to ``0..K-1`` in order of first appearance (O(N) for compact label ranges)."""
    codes, k = dense_codes(labels)
    n = codes.size
    first = np.full(k, n, dtype=np.int64)
    np.minimum.at(first, codes, np.arange(n, dtype=np.int64))
    is_first = first[codes] == np.arange(n, dtype=np.int64)
    new_id = np.empty(k, dtype=np.int64)
    new_id[codes[is_first]] = np.arange(k, dtype=np.int64)
    return new_id[codes]


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
