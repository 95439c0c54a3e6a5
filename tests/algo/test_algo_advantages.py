"""Hand-computed values and invariances of compute_advantages (GiGPO / GRPO / RLOO, default and verl-agent compat)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from algo_batches import advantages, make_batch

from gigpo.algo import AdvantageOutput
from gigpo.algo.grouping import GroupingSpec

# Two groups. g0: trajectory a (R=1, 2 steps) and b (R=0, 3 steps); g1: trajectory c alone (R=1, 1 step).
G = [0, 0, 0, 0, 0, 1]
T = ["a", "a", "b", "b", "b", "c"]
S = [0, 1, 0, 1, 2, 0]
R = [0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
A = ["x", "y", "x", "z", "y", "q"]
EPS = 1e-6


def test_gigpo_by_hand() -> None:
    out = advantages(G, T, S, R, A, std_ddof=0)
    assert isinstance(out, AdvantageOutput)
    # Episode: R = (1, 0) -> mean 0.5, population std 0.5 -> ±0.5 / (0.5 + eps). Singleton group c -> 0.
    e = 0.5 / (0.5 + EPS)
    np.testing.assert_allclose(out.episode_advantages, [e, e, -e, -e, -e, 0.0])
    np.testing.assert_allclose(out.returns, [0.95, 1.0, 0.0, 0.0, 0.0, 1.0])
    np.testing.assert_allclose(out.episode_returns, [1, 1, 0, 0, 0, 1])
    # Step groups: {a0, b0} on "x" (0.95 vs 0), {a1, b2} on "y" (1 vs 0), {b1} "z", {c0} "q" (singletons -> 0).
    sx = 0.475 / (0.475 + EPS)
    sy = 0.5 / (0.5 + EPS)
    np.testing.assert_allclose(out.step_advantages, [sx, sy, -sx, 0.0, -sy, 0.0])
    np.testing.assert_allclose(out.advantages, out.episode_advantages + out.step_advantages)
    assert out.step_group_ids.tolist() == [0, 1, 0, 2, 1, 3]  # numbered by first row in (traj, step) order
    s = out.stats
    assert s["step_group/num_groups"] == 4 and s["step_group/size_hist"] == {1: 2, 2: 2}
    assert s["step_group/singleton_frac"] == pytest.approx(2 / 6)
    assert s["step_group/mean_size"] == pytest.approx(1.5)
    assert s["step_group/mean_size_per_row"] == pytest.approx((2 * 2 + 2 * 2 + 1 + 1) / 6)
    assert s["num_trajectories"] == 3 and s["num_episode_groups"] == 2
    assert s["episode_group/signal_frac"] == 0.5  # g0's returns differ (1 vs 0); g1 has one trajectory


def test_mean_normalisation_and_step_weight() -> None:
    out = advantages(G, T, S, R, A, normalize="mean", step_weight=0.5)
    np.testing.assert_allclose(out.episode_advantages, [0.5, 0.5, -0.5, -0.5, -0.5, 0.0])
    np.testing.assert_allclose(out.step_advantages, [0.475, 0.5, -0.475, 0.0, -0.5, 0.0])
    np.testing.assert_allclose(out.advantages, out.episode_advantages + 0.5 * out.step_advantages)


def test_verl_agent_compat_by_hand() -> None:
    """Official numerics: episode stats over step rows, unbiased std, one-row group keeps R/(1+eps)."""
    out = advantages(G, T, S, R, A, compat="verl-agent")
    rows = np.array([1, 1, 0, 0, 0], dtype=float)  # g0 scores per *row*: a counts twice, b three times
    mean, std = rows.mean(), rows.std(ddof=1)  # 0.4, sqrt(0.3)
    assert std == pytest.approx(math.sqrt(0.3))
    expect = list((rows - mean) / (std + EPS)) + [1.0 / (1.0 + EPS)]
    np.testing.assert_allclose(out.episode_advantages, expect)
    # Step groups of two: unbiased std of (0.95, 0) is 0.95/sqrt(2) -> ±0.475 / (0.6718 + eps).
    sx = 0.475 / (0.95 / math.sqrt(2) + EPS)
    sy = 0.5 / (1.0 / math.sqrt(2) + EPS)
    np.testing.assert_allclose(out.step_advantages, [sx, sy, -sx, 0.0, -sy, 0.0])
    mean_mode = advantages(G, T, S, R, A, compat="verl-agent", normalize="mean")
    np.testing.assert_allclose(mean_mode.episode_advantages, [0.6, 0.6, -0.4, -0.4, -0.4, 1.0])


def test_compat_one_trajectory_with_several_rows_is_not_a_singleton() -> None:
    """The official singleton rule counts rows: one trajectory of 3 steps has 3 equal scores -> 0, not R."""
    out = advantages(
        [0, 0, 0], [1, 1, 1], [0, 1, 2], [0, 0, 2.0], ["p", "q", "r"], compat="verl-agent"
    )
    np.testing.assert_array_equal(out.episode_advantages, 0.0)
    one = advantages([0], [1], [0], [2.0], ["p"], compat="verl-agent")
    assert one.episode_advantages[0] == pytest.approx(2.0 / (1.0 + EPS))
    assert advantages([0], [1], [0], [2.0], ["p"]).advantages[0] == 0.0  # default: singleton -> 0


def test_compat_row_penalty_applied_after_discounting() -> None:
    pen = [0.0, 0.1, 0.0, 0.1, 0.0, 0.0]
    out = advantages(G, T, S, R, A, compat="verl-agent", normalize="mean", row_penalty=pen)
    scores = np.array([1.0, 0.9, 0.0, -0.1, 0.0])
    np.testing.assert_allclose(out.episode_advantages[:5], scores - scores.mean())
    np.testing.assert_allclose(out.returns, [0.95, 0.9, 0.0, -0.1, 0.0, 1.0])  # R_t - p, not discounted p
    with pytest.raises(TypeError, match="row_penalty"):  # the default implementation has no such penalty
        advantages(G, T, S, R, A, row_penalty=pen)


def test_rloo_baseline_excludes_the_trajectory_itself() -> None:
    g, t, s, r = [0, 0, 0, 0], [0, 1, 2, 3], [0, 0, 0, 0], [1.0, 0.0, 0.0, 0.0]
    out = advantages(g, t, s, r, estimator="rloo", normalize="mean")
    np.testing.assert_allclose(out.advantages, [1.0, -1 / 3, -1 / 3, -1 / 3])
    grpo = advantages(g, t, s, r, estimator="grpo", normalize="mean")
    np.testing.assert_allclose(out.advantages, grpo.advantages * 4 / 3)  # n/(n-1) x GRPO
    std = advantages(g, t, s, r, estimator="rloo", std_ddof=0)
    np.testing.assert_allclose(std.advantages, out.advantages / (np.std(r) + EPS))  # same F as grpo
    lone = advantages([0], [0], [0], [5.0], estimator="rloo")
    assert lone.advantages[0] == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_step_weight_zero_gives_grpo(seed: int) -> None:
    b = make_batch(seed, 3, 4, 6, "dense", 2, seed % 2 == 0, True)
    gigpo = advantages(*b.columns(), step_weight=0.0)
    grpo = advantages(*b.columns()[:4], estimator="grpo")
    np.testing.assert_array_equal(gigpo.advantages, grpo.advantages)
    assert grpo.step_advantages.tolist() == [0.0] * len(b.rewards)
    rloo = advantages(*b.columns(), step_weight=0.0, episode_estimator="rloo")
    np.testing.assert_array_equal(
        rloo.advantages, advantages(*b.columns()[:4], estimator="rloo").advantages
    )


@pytest.mark.parametrize("seed", range(5))
def test_all_distinct_anchors_give_zero_step_term(seed: int) -> None:
    b = make_batch(seed, 3, 4, 6, "dense", 2, False, False)
    distinct = [f"state-{i}" for i in range(len(b.rewards))]
    out = advantages(*b.columns()[:4], distinct)
    assert not out.step_advantages.any()
    assert out.stats["step_group/singleton_frac"] == 1.0


@pytest.mark.parametrize("normalize", ["mean_std", "mean"])
@pytest.mark.parametrize("compat", [None, "verl-agent"])
def test_constant_shift_of_a_group_leaves_episode_advantages(normalize: str, compat: str | None) -> None:
    b = make_batch(11, 3, 4, 5, "dense", 3, False, False)
    g, t, s, r, a = b.columns()
    # Shift every trajectory's return in group g[0] by c: add c to its last step's reward.
    last: dict = {}
    for i in range(len(r)):
        if t[i] not in last or s[i] > s[last[t[i]]]:
            last[t[i]] = i
    shifted = list(r)
    for i in last.values():
        if g[i] == g[0]:
            shifted[i] += 3.25
    base = advantages(g, t, s, r, a, normalize=normalize, compat=compat)
    moved = advantages(g, t, s, shifted, a, normalize=normalize, compat=compat)
    if compat is None:
        np.testing.assert_allclose(moved.episode_advantages, base.episode_advantages, atol=1e-9)
    else:  # verl-agent's raw singleton score moves with the shift; every other row must not
        multi = np.bincount(np.unique(g, return_inverse=True)[1])[np.unique(g, return_inverse=True)[1]] > 1
        np.testing.assert_allclose(moved.episode_advantages[multi], base.episode_advantages[multi], atol=1e-9)


def test_equal_length_constant_per_step_shift() -> None:
    """Adding c to every step reward of a group of equal-length trajectories leaves A_E unchanged."""
    g, t, s = [0] * 6, [0, 0, 1, 1, 2, 2], [0, 1] * 3
    r = [0.0, 1.0, 0.5, 0.0, 0.2, 0.3]
    base = advantages(g, t, s, r, estimator="grpo")
    moved = advantages(g, t, s, [x - 7.0 for x in r], estimator="grpo")
    np.testing.assert_allclose(moved.advantages, base.advantages, atol=1e-12)


@pytest.mark.parametrize("eps", [1e-6, 0.0])
@pytest.mark.parametrize("compat", [None, "verl-agent"])
def test_all_equal_and_singletons_are_exactly_zero(eps: float, compat: str | None) -> None:
    g = [0] * 6 + [1]
    t = [0, 0, 1, 1, 2, 2, 3]
    s = [0, 1, 0, 1, 0, 1, 0]
    r = [0.1] * 7
    out = advantages(g, t, s, r, ["x", "y"] * 3 + ["z"], eps=eps, compat=compat)
    assert np.isfinite(out.advantages).all()
    assert (out.step_advantages == 0.0).all()
    assert (out.episode_advantages[:6] == 0.0).all()


def test_string_and_int_ids_give_same_numbers() -> None:
    b = make_batch(5, 3, 4, 6, "ties", 3, False, True)
    as_str = advantages(
        [f"g{x}" for x in b.group_ids], [f"t{x}" for x in b.traj_ids], *b.columns()[2:]
    )
    as_int = advantages(*b.columns())
    np.testing.assert_allclose(as_str.advantages, as_int.advantages, rtol=1e-12, atol=1e-12)


def test_tuple_and_array_anchors() -> None:
    g, t, s, r = [0, 0, 0, 0], [0, 0, 1, 1], [0, 1, 0, 1], [0.0, 1.0, 0.0, 0.0]
    tup = advantages(g, t, s, r, [(1, 2), (3, 4), (1, 2), (9, 9)])
    arr = advantages(g, t, s, r, np.array([[1, 2], [3, 4], [1, 2], [9, 9]]))
    np.testing.assert_array_equal(tup.step_group_ids, [0, 1, 0, 2])
    np.testing.assert_array_equal(arr.step_group_ids, tup.step_group_ids)
    np.testing.assert_array_equal(arr.advantages, tup.advantages)


def test_same_anchor_in_different_groups_never_shares_a_step_group() -> None:
    out = advantages([0, 1], [0, 1], [0, 0], [0.0, 1.0], ["s", "s"])
    assert out.step_group_ids[0] != out.step_group_ids[1]
    assert not out.step_advantages.any()


def test_similarity_grouping_in_advantages() -> None:
    # Two trajectories, near-identical first observations (R-O ratio 0.9 >= 0.8), distinct second ones.
    g, t, s, r = [0] * 4, [0, 0, 1, 1], [0, 1, 0, 1], [0.0, 1.0, 0.0, 0.0]
    texts = ["room with a key!!", "zzzz", "room with a key??", "qqqq"]
    out = advantages(g, t, s, r, texts, grouping=GroupingSpec("ro", 0.8))
    assert out.step_group_ids.tolist() == [0, 1, 0, 2]
    exact = advantages(g, t, s, r, texts)
    assert exact.step_group_ids.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("seed", range(3))
def test_compat_matches_official_style_loop(seed: int) -> None:
    """A second, independent transcription of the official numerics (float32, torch statistics) agrees."""
    from reference import official_style_loop

    b = make_batch(seed, 4, 8, 6, "ties", 3, seed == 1, False)
    order = sorted(range(len(b.rewards)), key=lambda i: (b.traj_ids[i], b.steps[i]))
    cols = [[c[i] for i in order] for c in b.columns()]
    ours = advantages(*cols, compat="verl-agent")
    np.testing.assert_allclose(ours.advantages, official_style_loop(*cols), rtol=1e-5, atol=1e-5)
