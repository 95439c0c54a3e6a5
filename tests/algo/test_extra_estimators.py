"""GAE, REINFORCE++ and the PPO + step combination against plain per-trajectory loops; row-order invariance."""

import numpy as np
import pytest

from gigpo.algo.estimators import gae, ppo_step_combine, reinforce_pp, whiten


def _batch(seed: int, n_traj: int = 5):
    rng = np.random.default_rng(seed)
    traj, steps = [], []
    for t in range(n_traj):
        n = int(rng.integers(1, 6))
        traj += [t] * n
        steps += list(range(n))
    n = len(traj)
    return np.array(traj), np.array(steps), rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)


def _ref_gae(traj, steps, r, v, gamma, lam):
    adv = np.zeros(len(r))
    for t in set(traj.tolist()):
        rows = sorted(np.flatnonzero(traj == t), key=lambda i: steps[i])
        running, v_next = 0.0, 0.0
        for i in reversed(rows):
            delta = r[i] + gamma * v_next - v[i]
            running = delta + gamma * lam * running
            adv[i] = running
            v_next = v[i]
    return adv, adv + v


@pytest.mark.parametrize("gamma,lam", [(0.95, 0.9), (1.0, 1.0), (0.9, 0.0), (0.0, 0.5)])
def test_gae_matches_reference_in_any_row_order(gamma, lam):
    traj, steps, r, v, _ = _batch(1)
    want_a, want_t = _ref_gae(traj, steps, r, v, gamma, lam)
    perm = np.random.default_rng(2).permutation(len(r))
    a, t = gae(traj[perm], steps[perm], r[perm], v[perm], gamma, lam)
    np.testing.assert_allclose(a, want_a[perm], atol=1e-12)
    np.testing.assert_allclose(t, want_t[perm], atol=1e-12)


def test_gae_lambda_one_is_return_minus_value():
    traj, steps, r, v, _ = _batch(3)
    a, _ = gae(traj, steps, r, v, 0.9, 1.0)
    g, _ = _ref_gae(traj, steps, r, np.zeros_like(v), 0.9, 1.0)  # V = 0: A = R_t
    np.testing.assert_allclose(a, g - v, atol=1e-12)


def test_gae_rejects_bad_input():
    with pytest.raises(ValueError, match="lambda"):
        gae([0], [0], [1.0], [0.0], 0.9, 1.5)
    with pytest.raises(ValueError, match="values"):
        gae([0, 0], [0, 1], [1.0, 1.0], [0.0], 0.9, 0.9)


def test_reinforce_pp_matches_reference():
    traj, steps, r, _, kl = _batch(4)
    beta, gamma = 0.1, 0.9
    shaped = r - beta * kl
    g = np.zeros(len(r))
    for t in set(traj.tolist()):
        rows = sorted(np.flatnonzero(traj == t), key=lambda i: steps[i])
        run = 0.0
        for i in reversed(rows):
            run = shaped[i] + gamma * run
            g[i] = run
    want = (g - g.mean()) / (g.std() + 1e-6)
    perm = np.random.default_rng(5).permutation(len(r))
    adv, ret = reinforce_pp(traj[perm], steps[perm], r[perm], kl[perm], gamma, beta)
    np.testing.assert_allclose(ret, g[perm], atol=1e-12)
    np.testing.assert_allclose(adv, want[perm], atol=1e-9)
    assert abs(adv.mean()) < 1e-9 and abs(adv.std() - 1) < 1e-5


def test_kl_in_reward_lowers_the_advantage_of_the_high_kl_step():
    adv0, _ = reinforce_pp([0, 1], [0, 0], [1.0, 1.0], [0.0, 0.0], 1.0, 0.5)
    adv1, _ = reinforce_pp([0, 1], [0, 0], [1.0, 1.0], [0.0, 4.0], 1.0, 0.5)
    assert np.all(adv0 == 0)
    assert adv1[1] < 0 < adv1[0]


def test_ppo_step_combine():
    a = np.array([1.0, 2.0, 3.0, 6.0])
    s = np.array([0.5, -0.5, 0.0, 1.0])
    out = ppo_step_combine(a, s, 0.5)
    np.testing.assert_allclose(out, whiten(a) + 0.5 * s)
    np.testing.assert_allclose(whiten(a), (a - a.mean()) / (a.std() + 1e-6))
    assert np.all(whiten([2.0, 2.0]) == 0)
    with pytest.raises(ValueError, match="length"):
        ppo_step_combine(a, s[:2], 1.0)
