"""Id and key coding shared by returns, grouping and advantages: flat values -> dense int64 codes.

numpy only. ``factorize_ids`` orders codes by the ids' natural order (so anything sorted by code is row-order
invariant); ``factorize_keys`` only promises equal keys <=> equal codes; ``pair_codes`` combines two codings.
"""

from __future__ import annotations

from typing import Any

import numpy as np


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


def as_object_list(values: Any, name: str) -> list:
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
    codes, uniques = _dict_codes(as_object_list(values, name), name)
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
