"""Pairwise precision / recall of step groups against true state keys (numpy only, no pair loops)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np


def _codes(x: Sequence[Hashable] | np.ndarray) -> np.ndarray:
    """Dense int64 codes of arbitrary labels (np.unique when the array is numeric/string, dict otherwise)."""
    try:
        arr = x if isinstance(x, np.ndarray) else np.asarray(x)
    except (ValueError, TypeError):  # ragged / mixed labels
        arr = None
    if arr is not None and arr.ndim == 1 and arr.dtype.kind in "biufUS":
        return np.unique(arr, return_inverse=True)[1].astype(np.int64).ravel()
    first: dict[Hashable, int] = {}
    return np.fromiter((first.setdefault(k, len(first)) for k in x), dtype=np.int64, count=len(x))


def _pairs(*codes: np.ndarray) -> int:
    """Σ over cells of the joint labelling of C(n_cell, 2)."""
    key = np.zeros(codes[0].size, dtype=np.int64)
    for c in codes:  # re-densify after each combine so keys stay < n² and never overflow int64
        key = np.unique(key * (int(c.max(initial=0)) + 1) + c, return_inverse=True)[1].ravel()
    n = np.bincount(key)
    return int((n * (n - 1) // 2).sum())


def grouping_quality(
    pred_ids: Sequence[Hashable] | np.ndarray,
    true_keys: Sequence[Hashable] | np.ndarray,
    episode_group_ids: Sequence[Hashable] | np.ndarray,
) -> dict[str, float]:
    """Pairwise precision/recall of "same step group" decisions against true state keys, within episode groups.

    With pairs counted only between rows of the same episode group: pairs_pred = Σ_cells C(n, 2) over
    (group, pred) cells, pairs_true likewise over (group, true), pairs_both over (group, pred, true);
    precision = pairs_both / pairs_pred, recall = pairs_both / pairs_true (1.0 when the denominator is 0: no pair
    was claimed / none exists), f1 = harmonic mean (0 when both are 0). O(n log n), no pair loops.
    """
    p, t, g = _codes(pred_ids), _codes(true_keys), _codes(episode_group_ids)
    if not (p.size == t.size == g.size):
        raise ValueError(f"length mismatch: pred {p.size}, true {t.size}, groups {g.size}")
    if p.size == 0:
        return {"precision": 1.0, "recall": 1.0, "f1": 1.0, "pairs_pred": 0, "pairs_true": 0, "pairs_both": 0}
    pp, pt, pb = _pairs(g, p), _pairs(g, t), _pairs(g, p, t)
    prec = pb / pp if pp else 1.0
    rec = pb / pt if pt else 1.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec > 0 else 0.0
    return {"precision": prec, "recall": rec, "f1": f1, "pairs_pred": pp, "pairs_true": pt, "pairs_both": pb}
