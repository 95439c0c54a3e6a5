"""The audit's vectorised bootstrap statistics against plain per-resample references (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gigpo.audit.stats import average_ranks, bootstrap_index, credit_scores, spearman_rows


def plain_ranks(x: list[float]) -> list[float]:
    """Average 1-based ranks, ties sharing the mean of their places: the textbook loop."""
    order = sorted(range(len(x)), key=lambda i: x[i])
    ranks = [0.0] * len(x)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def plain_spearman(a: list[float], b: list[float]) -> float:
    ra, rb = np.array(plain_ranks(a)), np.array(plain_ranks(b))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


values = st.lists(st.sampled_from([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 2.0]), min_size=2, max_size=25)


@settings(max_examples=60, deadline=None)
@given(values, st.integers(0, 2**31))
def test_ranks_and_spearman_of_every_resample_match_the_plain_loop(a, seed):
    rng = np.random.default_rng(seed)
    b = list(rng.normal(size=len(a)).round(1))
    index = bootstrap_index(len(a), 7, rng)
    ranks = average_ranks(np.array(a), index)
    rho = spearman_rows(np.array(a), np.array(b), index)
    for r in range(index.shape[0]):
        pa, pb = [a[i] for i in index[r]], [b[i] for i in index[r]]
        assert np.allclose(ranks[r], plain_ranks(pa))
        want = plain_spearman(pa, pb)
        assert (np.isnan(want) and np.isnan(rho[r])) or np.isclose(rho[r], want)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-2, 2, allow_nan=False), min_size=3, max_size=30), st.integers(0, 2**31))
def test_sign_agreement_and_step_signal_are_the_plain_fractions(adv, seed):
    rng = np.random.default_rng(seed)
    n = len(adv)
    ref, se = rng.normal(size=n), rng.uniform(0, 0.8, size=n)
    step = np.where(rng.random(n) < 0.5, 0.0, rng.normal(size=n))
    s = credit_scores(np.array(adv), step, ref, se, bootstrap_index(n, 200, rng))
    clear = [i for i in range(n) if abs(ref[i]) > 2 * se[i]]
    agree = [np.sign(adv[i]) == np.sign(ref[i]) for i in clear]
    if clear:
        assert np.isclose(s["sign_agreement"]["value"], sum(agree) / len(clear))
    else:
        assert np.isnan(s["sign_agreement"]["value"])
    assert s["clear_rows"]["value"] == len(clear)
    assert np.isclose(s["step_signal"]["value"], np.mean(step != 0))
    assert s["step_signal"]["lo"] <= s["step_signal"]["hi"]


def test_a_perfect_estimator_scores_one_and_a_reversed_one_minus_one():
    rng = np.random.default_rng(0)
    ref = rng.normal(size=40)
    se = np.full(40, 0.01)
    index = bootstrap_index(40, 500, rng)
    good = credit_scores(3 * ref, None, ref, se, index)
    bad = credit_scores(-ref, None, ref, se, index)
    assert np.isclose(good["spearman"]["value"], 1) and good["sign_agreement"]["value"] == 1
    assert np.isclose(bad["spearman"]["value"], -1) and bad["sign_agreement"]["value"] == 0
    assert good["step_signal"]["value"] == 0  # no step term: no step-level signal
    noise = credit_scores(rng.normal(size=40), None, ref, se, index)["spearman"]
    assert noise["lo"] < 0 < noise["hi"]  # a random estimator's CI covers 0
