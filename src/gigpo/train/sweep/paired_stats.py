"""Paired-seed statistics of two arms (A, B) run on the same seeds: the one implementation behind
``gigpo sweep --paired`` and the credit benchmarks (benchmarks/credit_bridge.py, credit.py, paired_seeds.py).

For a metric with per-seed values ``a_s`` and ``b_s`` over the seeds ``S`` both arms have (|S| = n):

- paired difference ``d_s = b_s − a_s``; its mean ``d̄ = Σ d_s / n``;
- percentile bootstrap 95 % CI of ``d̄``: ``R`` resamples (default 10 000), resample ``r`` draws indices
  ``i_{r,1..n}`` uniformly with replacement (``numpy.random.default_rng(seed).integers(0, n, (R, n))``,
  seed 0), its mean ``m_r = Σ_j d_{i_{r,j}} / n``; the CI is the 2.5th and 97.5th percentile of ``m_1..m_R``
  (linear interpolation between order statistics, numpy's default);
- better / worse / tie: seeds with ``d_s > 0``, ``< 0``, ``= 0``;
- two-sided exact sign test, ties dropped: with ``k = max(better, worse)`` and ``m = better + worse``,
  ``p = min(1, 2 · Σ_{j=k..m} C(m, j) / 2^m)`` (``p = 1`` when ``m = 0``);
- verdict (the rule of docs/results/credit.md, applied to each metric): "B helps" when ``p < 0.05`` and the CI
  lies above 0, "B hurts" when ``p < 0.05`` and the CI lies below 0, else "cannot be told apart".
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
#: the significance level and CI level of the verdict rule (docs/results/credit.md)
ALPHA = 0.05
HELPS, HURTS, APART = "B helps", "B hurts", "cannot be told apart"


def sign_test_p(better: int, worse: int) -> float:
    """Two-sided exact sign test p of ``better`` positive against ``worse`` negative differences (ties dropped)."""
    m = better + worse
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, j) for j in range(max(better, worse), m + 1))
    return min(1.0, 2 * tail / 2**m)


def bootstrap_ci(diffs: np.ndarray, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                 level: float = 0.95) -> tuple[float, float]:
    """Percentile-bootstrap CI of the mean of ``diffs`` (module docstring); ``(nan, nan)`` for no values."""
    d = np.asarray(diffs, dtype=float)
    if d.size == 0:
        return math.nan, math.nan
    idx = np.random.default_rng(seed).integers(0, d.size, size=(resamples, d.size))
    means = d[idx].mean(axis=1)
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(lo), float(hi)


def verdict(p: float, lo: float, hi: float) -> str:
    """docs/results/credit.md's rule: a sign test below ``ALPHA`` and a CI on one side of 0."""
    if p < ALPHA and lo > 0:
        return HELPS
    if p < ALPHA and hi < 0:
        return HURTS
    return APART


@dataclass
class PairedStat:
    """One metric's paired comparison B − A (module docstring for every field's definition)."""

    seeds: list[int]
    a: list[float]  #: A's value per seed (same order as ``seeds``)
    b: list[float]
    diff: list[float]  #: b − a per seed
    mean_a: float
    mean_b: float
    mean_diff: float
    lo: float  #: bootstrap CI of mean_diff
    hi: float
    better: int
    worse: int
    ties: int
    p: float
    verdict: str

    def to_dict(self) -> dict:
        return asdict(self)


def paired_stat(a: dict[int, float], b: dict[int, float], resamples: int = BOOTSTRAP_RESAMPLES) -> PairedStat:
    """The paired comparison over the seeds where both ``a`` and ``b`` hold a finite value (sorted by seed)."""
    seeds = sorted(s for s in set(a) & set(b) if _finite(a[s]) and _finite(b[s]))
    va = np.array([a[s] for s in seeds], dtype=float)
    vb = np.array([b[s] for s in seeds], dtype=float)
    d = vb - va
    better, worse = int((d > 0).sum()), int((d < 0).sum())
    p = sign_test_p(better, worse)
    lo, hi = bootstrap_ci(d, resamples)
    empty = not seeds
    return PairedStat(
        seeds=seeds, a=va.tolist(), b=vb.tolist(), diff=d.tolist(),
        mean_a=math.nan if empty else float(va.mean()), mean_b=math.nan if empty else float(vb.mean()),
        mean_diff=math.nan if empty else float(d.mean()), lo=lo, hi=hi,
        better=better, worse=worse, ties=len(seeds) - better - worse, p=p, verdict=verdict(p, lo, hi))


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)
