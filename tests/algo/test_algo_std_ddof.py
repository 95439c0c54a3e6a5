"""std_ddof: the std of normalize="mean_std" is torch.std's (ddof 1) by default, the population std with 0."""

from __future__ import annotations

import math

import numpy as np
import pytest
from algo_batches import make_batch

from gigpo.algo import compute_advantages, group_normalize

# g0: trajectory a (R=1, 2 steps) and b (R=0, 3 steps); g1: trajectory c alone. Same batch as test_algo_advantages.
G = [0, 0, 0, 0, 0, 1]
T = ["a", "a", "b", "b", "b", "c"]
S = [0, 1, 0, 1, 2, 0]
R = [0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
A = ["x", "y", "x", "z", "y", "q"]
EPS = 1e-6


def test_default_is_the_unbiased_std_in_both_terms() -> None:
    out = compute_advantages(G, T, S, R, A)
    # Episode: R = (1, 0), mean 0.5, unbiased std sqrt(0.5) -> ±0.5 / (0.7071 + eps); singleton group c -> 0.
    e = 0.5 / (math.sqrt(0.5) + EPS)
    np.testing.assert_allclose(out.episode_advantages, [e, e, -e, -e, -e, 0.0])
    # Step groups {a0, b0}: returns (0.95, 0), std 0.95/sqrt(2); {a1, b2}: (1, 0); singletons -> 0.
    sx = 0.475 / (0.95 / math.sqrt(2) + EPS)
    np.testing.assert_allclose(out.step_advantages, [sx, e, -sx, 0.0, -e, 0.0])
    explicit = compute_advantages(G, T, S, R, A, std_ddof=1)
    np.testing.assert_array_equal(out.advantages, explicit.advantages)


def test_ddof_zero_scales_a_pair_by_sqrt_two() -> None:
    """For groups of two the two conventions differ by sqrt(n / (n - 1)) = 1.41 (up to eps)."""
    one = compute_advantages(G, T, S, R, A, eps=0.0)
    zero = compute_advantages(G, T, S, R, A, eps=0.0, std_ddof=0)
    np.testing.assert_allclose(zero.advantages, one.advantages * math.sqrt(2), rtol=1e-12)


def test_default_matches_torch_std() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.normal(size=7)
    codes = np.array([0, 0, 0, 1, 1, 1, 1])
    got = group_normalize(x, codes, 2, normalize="mean_std", eps=EPS)
    for c in (0, 1):
        t = torch.tensor(x[codes == c], dtype=torch.float64)
        np.testing.assert_allclose(got[codes == c], ((t - t.mean()) / (t.std() + EPS)).numpy(), rtol=1e-12)


@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize("eps", [1e-6, 0.0])
def test_singletons_are_zero_for_both_ddofs(ddof: int, eps: float) -> None:
    """A group of one: the unbiased std is undefined (torch.std gives nan), the deviation from its own mean is 0."""
    out = compute_advantages([0, 1], [0, 1], [0, 0], [1.0, 3.0], ["s", "s"], std_ddof=ddof, eps=eps)
    assert out.advantages.tolist() == [0.0, 0.0]
    lone = group_normalize(np.array([2.5]), np.array([0]), 1, normalize="mean_std", eps=eps, std_ddof=ddof)
    assert lone.tolist() == [0.0]


@pytest.mark.parametrize("seed", range(4))
def test_mean_normalisation_ignores_ddof(seed: int) -> None:
    b = make_batch(seed, 3, 4, 5, "dense", 3, False, True)
    zero = compute_advantages(*b.columns(), normalize="mean", std_ddof=0)
    one = compute_advantages(*b.columns(), normalize="mean", std_ddof=1)
    np.testing.assert_array_equal(zero.advantages, one.advantages)


@pytest.mark.parametrize("bad", [2, -1, 0.5, True, "1", None])
def test_std_ddof_must_be_zero_or_one(bad) -> None:
    with pytest.raises(ValueError, match="std_ddof must be 0 or 1"):
        compute_advantages(G, T, S, R, A, std_ddof=bad)
