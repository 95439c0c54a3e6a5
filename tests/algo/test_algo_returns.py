"""Discounted returns: hand values, long episodes, γ edge cases, gaps and row order."""

from __future__ import annotations

import numpy as np
import pytest

from gigpo.algo import discounted_returns


def sequential(rewards: np.ndarray, gamma: float) -> np.ndarray:
    out = np.empty_like(rewards)
    running = 0.0
    for t in range(rewards.size - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def test_hand_values_and_interleaved_rows() -> None:
    # Trajectory 7: r = (1, 2, 4) at steps (0, 1, 2); trajectory 3: r = (8,) ; rows interleaved and reversed.
    traj = [7, 3, 7, 7]
    steps = [2, 0, 0, 1]
    rewards = [4.0, 8.0, 1.0, 2.0]
    got = discounted_returns(traj, steps, rewards, 0.5)
    np.testing.assert_allclose(got, [4.0, 8.0, 1 + 0.5 * 2 + 0.25 * 4, 2 + 0.5 * 4])


def test_gamma_edges_and_step_gaps() -> None:
    traj, steps, rewards = ["a"] * 3, [10, 3, 7], [1.0, 1.0, 1.0]  # order by step: 3, 7, 10
    np.testing.assert_allclose(discounted_returns(traj, steps, rewards, 1.0), [1.0, 3.0, 2.0])
    np.testing.assert_allclose(discounted_returns(traj, steps, rewards, 0.0), [1.0, 1.0, 1.0])


@pytest.mark.parametrize("gamma", [0.95, 0.999, 1.0])
def test_long_episodes_are_numerically_safe(gamma: float) -> None:
    rng = np.random.default_rng(0)
    lengths = [100_000, 1, 5_000, 37]
    traj = np.repeat(np.arange(len(lengths)), lengths)
    steps = np.concatenate([np.arange(n) for n in lengths])
    rewards = rng.normal(size=traj.size)
    perm = rng.permutation(traj.size)
    got = np.empty(traj.size)
    got[perm] = discounted_returns(traj[perm], steps[perm], rewards[perm], gamma)
    start = 0
    for n in lengths:
        ref = sequential(rewards[start : start + n], gamma)
        # Different summation association only: errors of the order of n·ulp·max|partial sum|.
        scale = np.abs(ref).max() + 1.0
        np.testing.assert_allclose(got[start : start + n], ref, rtol=0, atol=1e-10 * scale)
        start += n
    assert np.isfinite(got).all()


def test_equal_reward_suffixes_give_bitwise_equal_returns() -> None:
    """Rows whose remaining rewards are identical get identical R_t (ties stay exact ties for step groups)."""
    traj = [0] * 6 + [1] * 3
    steps = list(range(6)) + list(range(3))
    rewards = [0.3, 0.1, 0.7, 0.0, 0.0, 1.0] + [0.9, 0.0, 1.0]  # shared suffix (0, 1) and (1,)
    got = discounted_returns(traj, steps, rewards, 0.9)
    assert got[4] == got[7] and got[5] == got[8]
