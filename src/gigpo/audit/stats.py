"""The audit's statistics, vectorised over bootstrap resamples (numpy only).

Per estimator, on the sampled rows (advantage ``a``, reference ``A*`` with standard error ``se``):

* **rank correlation** — Spearman's ρ: the Pearson correlation of the average ranks (ties share the mean of
  their ranks); NaN when either side is constant;
* **sign agreement** — over the rows where A* is clearly non-zero (|A*| > 2 se), the fraction with
  sign(a) = sign(A*) (a = 0 counts as a miss: no credit given);
* **step signal** — the fraction of rows whose step-level term is non-zero.

Each with a percentile bootstrap 95% CI over the rows: ``B`` resamples of row indices drawn at once (a B × n
index matrix); ranks, correlations and fractions are computed for all resamples together — no loop over
resamples or rows.
"""

from __future__ import annotations

import numpy as np

#: |A*| > CLEAR × SE: the rows where the reference's sign is trusted
CLEAR = 2.0


def average_ranks(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties averaged) of ``values[index[b]]`` within each row b of ``index`` (B × n)."""
    dense = np.unique(values, return_inverse=True)[1].reshape(-1)  # value -> its place among the distinct values
    m = int(dense.max()) + 1 if dense.size else 0
    picked = dense[index]  # B × n
    b = index.shape[0]
    counts = np.bincount((picked + m * np.arange(b)[:, None]).ravel(), minlength=b * m).reshape(b, m)
    below = np.cumsum(counts, axis=1) - counts  # per resample, how many picked values are smaller
    rank_of = below + (counts + 1) / 2.0
    return np.take_along_axis(rank_of, picked, axis=1)


def pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per row of the B × n matrices, the Pearson correlation (NaN where a row is constant)."""
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean(axis=1, keepdims=True)
    den = np.sqrt((xc * xc).sum(axis=1) * (yc * yc).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (xc * yc).sum(axis=1) / np.where(den > 0, den, 1.0), np.nan)


def spearman_rows(a: np.ndarray, b: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Spearman's ρ of ``a`` and ``b`` over the rows each resample of ``index`` picks."""
    return pearson_rows(average_ranks(a, index), average_ranks(b, index))


def bootstrap_index(n: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``resamples`` × n row indices drawn with replacement; row 0 of the result is the sample itself."""
    index = rng.integers(0, n, size=(resamples + 1, n))
    index[0] = np.arange(n)
    return index


def _summary(per_resample: np.ndarray) -> dict[str, float]:
    """The sample's value (resample 0) and the percentile 95% CI of the resamples (NaNs left out)."""
    rest = per_resample[1:][np.isfinite(per_resample[1:])]
    lo, hi = (np.quantile(rest, [0.025, 0.975]) if rest.size else (np.nan, np.nan))
    return {"value": float(per_resample[0]), "lo": float(lo), "hi": float(hi)}


def _fraction(hit: np.ndarray, mask: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Per resample, the fraction of ``hit`` among the rows where ``mask`` holds (NaN where none does)."""
    num = hit[index].astype(float) * mask[index]
    den = mask[index].sum(axis=1).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num.sum(axis=1) / np.where(den > 0, den, 1.0), np.nan)


def credit_scores(advantage: np.ndarray, step_term: np.ndarray | None, reference: np.ndarray, se: np.ndarray,
                  index: np.ndarray) -> dict[str, dict[str, float]]:
    """The three scores of one estimator (see the module docstring), each ``{"value", "lo", "hi"}``;
    ``clear_rows``: how many rows have |A*| > 2 se."""
    a, ref, se = (np.asarray(x, dtype=np.float64) for x in (advantage, reference, se))
    clear = np.abs(ref) > CLEAR * se
    agree = np.sign(a) == np.sign(ref)
    signal = np.zeros(a.size, bool) if step_term is None else np.asarray(step_term, dtype=np.float64) != 0
    every = np.ones(a.size, bool)
    return {
        "spearman": _summary(spearman_rows(a, ref, index)),
        "sign_agreement": _summary(_fraction(agree, clear, index)),
        "step_signal": _summary(_fraction(signal, every, index)),
        "clear_rows": {"value": float(clear.sum()), "lo": np.nan, "hi": np.nan},
    }
