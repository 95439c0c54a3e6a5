"""Text-similarity clustering of anchor states (greedy leader clustering over a similarity metric) and its quality."""

from __future__ import annotations

import difflib
import numbers
import os
import warnings
from collections.abc import Hashable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from gigpo.algo.similarity_leader import leader_cluster_text
from gigpo.algo.similarity_minhash import minhash_leader_cluster
from gigpo.algo.similarity_ro import codepoints

# "state_key" is the env-supplied true state fed to exact grouping by the trainer; it is listed for config checks.
METRICS = ("ro", "indel", "minhash", "exact", "state_key")
TEXT_METRICS = ("ro", "indel", "minhash")

# Heuristic for the metrics without a compiled core ("indel", "minhash", and "ro" without numba): processes cost
# a fork plus pickling every text, so they pay only for batches whose serial run takes seconds.
_PARALLEL_MIN_CHARS = 2_000_000

# Set to any non-empty value to bypass the compiled (numba) "ro" core and use the numpy/rapidfuzz path.
NO_JIT_ENV = "GIGPO_NO_JIT"
_jit_module: Any = None


def jit_backend() -> Any:
    """The compiled "ro" core (gigpo.algo.similarity_jit) or None when numba is missing or GIGPO_NO_JIT is set.

    Imported on first use: numba's import and the first compilation (cached on disk afterwards) cost seconds,
    which ``import gigpo`` should not pay.
    """
    global _jit_module
    if os.environ.get(NO_JIT_ENV):
        return None
    if _jit_module is None:
        try:
            from gigpo.algo import similarity_jit
        except ImportError:  # numba not installed: `pip install gigpo[fast]`
            _jit_module = False
        else:
            _jit_module = similarity_jit
    return _jit_module or None


def _ro_compiled_or_none(
    jit: Any, groups: Sequence[Sequence[str]], threshold: float, workers: int
) -> list[np.ndarray] | None:
    """``_ro_compiled``, or None after a warning if numba cannot compile the core here (the caller then takes the
    numpy path, which gives the same groups). Only numba's own errors are caught: anything else is a bug."""
    global _jit_module
    try:
        return _ro_compiled(jit, groups, threshold, workers)
    except Exception as err:
        from numba.core.errors import NumbaError

        if not isinstance(err, NumbaError):
            raise
        warnings.warn(
            f"the compiled R-O grouping core failed to build ({type(err).__name__}: {str(err)[:300]}); "
            "using the numpy path, which gives the same groups more slowly",
            RuntimeWarning,
            stacklevel=3,
        )
        _jit_module = False
        return None


def _ro_compiled(
    jit: Any, groups: Sequence[Sequence[str]], threshold: float, workers: int
) -> list[np.ndarray]:
    """ "ro" leader clustering of every group in one compiled call (groups spread over ``workers`` threads).

    Identical texts are merged first (a text scores 1.0 against its own leader, so it joins the same cluster).
    """
    distinct: list[str] = []
    inverse: list[np.ndarray] = []
    group_off = [0]
    for g in groups:
        first: dict[str, int] = {}
        inverse.append(
            np.fromiter((first.setdefault(t, len(first)) for t in g), dtype=np.int64, count=len(g))
        )
        distinct.extend(first)
        group_off.append(len(distinct))
    cp = codepoints("".join(distinct))
    off = np.zeros(len(distinct) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, distinct), dtype=np.int64, count=len(distinct)), out=off[1:])
    goff = np.asarray(group_off, dtype=np.int64)
    if len(groups) > 1 and workers > 1:
        import numba

        before = numba.get_num_threads()
        numba.set_num_threads(max(1, min(workers, numba.config.NUMBA_NUM_THREADS)))
        try:
            ids = jit.cluster_groups(cp, off, goff, threshold)
        finally:
            numba.set_num_threads(before)
    else:
        ids = (
            np.concatenate(
                [
                    jit.cluster_group(cp[off[a] : off[b]], off[a : b + 1] - off[a], threshold)
                    for a, b in zip(group_off[:-1], group_off[1:], strict=True)
                ]
            )
            if distinct
            else np.zeros(0, np.int64)
        )
    return [ids[a:b][inv] for a, b, inv in zip(group_off[:-1], group_off[1:], inverse, strict=True)]


def ro_ratio(a: str, b: str) -> float:
    """Ratcliff–Obershelp ratio 2·M/(|a|+|b|) exactly as ``difflib.SequenceMatcher(None, a, b, autojunk=False)``.

    This is the slow pure-Python reference; ``leader_cluster`` reproduces its decisions exactly, much faster.
    """
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _check(texts: Sequence[Hashable], threshold: float, metric: str) -> None:
    if metric not in METRICS or metric == "state_key":
        raise ValueError(
            f"unknown similarity metric {metric!r}; expected one of {METRICS[:4]} ('state_key' is exact grouping "
            "on the env's state_key)"
        )
    if not isinstance(threshold, numbers.Real) or not (0.0 < float(threshold) <= 1.0):
        raise ValueError(f"similarity threshold must be in (0, 1], got {threshold!r}")
    if metric in TEXT_METRICS:
        for t in texts:
            if not isinstance(t, str):
                raise ValueError(f"metric {metric!r} needs string anchors, got {type(t).__name__}: {t!r:.80}")


def leader_cluster(texts: Sequence[Hashable], threshold: float, metric: str = "ro") -> np.ndarray:
    """Greedy leader clustering in the given order; returns int64 cluster ids numbered in creation order.

    Each text joins the first existing cluster (creation order) whose leader (first member) scores
    ``>= threshold`` against it, else it leads a new cluster. Scores (leader first, text second):
      - "ro": difflib.SequenceMatcher(None, leader, text, autojunk=False).ratio() — assignment identical to the
        naive loop, computed with exact skip bounds and seeded block finding (compiled with numba when installed,
        see similarity_jit; numpy + cydifflib otherwise, see similarity_leader);
      - "indel": rapidfuzz.distance.Indel.normalized_similarity = 2·LCS/(|a|+|b|) — identical to the naive loop;
      - "minhash": estimated Jaccard of 3-word shingles, LSH-banded (approximate; see similarity_minhash);
      - "exact": equality (any hashable anchors; threshold is irrelevant but still checked).
    Raises ValueError for an unknown metric, a threshold outside (0, 1], or non-string anchors with a text metric.
    """
    _check(texts, threshold, metric)
    threshold = float(threshold)
    if metric == "exact":
        first: dict[Hashable, int] = {}
        return np.fromiter((first.setdefault(t, len(first)) for t in texts), dtype=np.int64, count=len(texts))
    if metric == "minhash":
        return minhash_leader_cluster(texts, threshold)  # type: ignore[arg-type]
    jit = jit_backend() if metric == "ro" else None
    if jit is not None:
        done = _ro_compiled_or_none(jit, [texts], threshold, workers=1)  # type: ignore[list-item]
        if done is not None:
            return done[0]
    return leader_cluster_text(texts, threshold, metric)  # type: ignore[arg-type]


def _one(args: tuple[Sequence[Hashable], float, str]) -> np.ndarray:
    return leader_cluster(*args)


def leader_cluster_many(
    groups: Sequence[Sequence[Hashable]], threshold: float, metric: str = "ro", workers: int | None = None
) -> list[np.ndarray]:
    """``[leader_cluster(g, threshold, metric) for g in groups]`` — identical result, independent groups in parallel.

    "ro" with numba installed runs every group in one compiled call, groups spread over ``workers`` threads.
    Otherwise processes are used only when it pays: more than one worker, more than one group and at least
    ``_PARALLEL_MIN_CHARS`` characters of text in total. ``workers=None`` means min(#groups, os.cpu_count()).
    Results keep the input order, so the output is deterministic whatever the scheduling.
    """
    for g in groups:
        _check(g, threshold, metric)
    n_workers = min(len(groups), os.cpu_count() or 1) if workers is None else min(int(workers), len(groups))
    jit = jit_backend() if metric == "ro" else None
    if jit is not None:
        done = _ro_compiled_or_none(jit, groups, float(threshold), max(n_workers, 1))  # type: ignore[arg-type]
        if done is not None:
            return done
    size = sum(len(t) for g in groups for t in g if isinstance(t, str)) if metric in TEXT_METRICS else 0
    if n_workers <= 1 or size < _PARALLEL_MIN_CHARS:
        return [leader_cluster(g, threshold, metric) for g in groups]
    # Largest groups first so one long group does not start last; results are put back in input order.
    order = sorted(range(len(groups)), key=lambda i: -sum(len(t) for t in groups[i]))
    with ProcessPoolExecutor(max_workers=n_workers) as ex:
        res = list(ex.map(_one, [(list(groups[i]), threshold, metric) for i in order]))
    out: list[np.ndarray] = [np.empty(0, np.int64)] * len(groups)
    for i, r in zip(order, res, strict=True):
        out[i] = r
    return out


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
