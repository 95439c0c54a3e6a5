"""DAPO data side: dynamic sampling fills exactly / stops at the round limit; overlong shaping; batch merging."""

import numpy as np
import pytest

from gigpo.rollout.batch import RolloutBatch, Trajectory
from gigpo.train.collect.dynamic_sampling import (
    dynamic_sample,
    informative_groups,
    merge_batches,
    overlong_penalty,
    round_seeds,
    select_groups,
    shape_overlong,
)
from gigpo.train.compose import train_seeds


def make_batch(returns_per_group: list[list[float]], steps: int = 2, resp_len: int = 3) -> RolloutBatch:
    """Groups of trajectories; each trajectory's return is split over ``steps`` rows."""
    b = RolloutBatch()
    tid = 0
    for g, rets in enumerate(returns_per_group):
        for ret in rets:
            b.trajectories.append(Trajectory(traj_id=tid, group_id=g, seed=g, episode_return=ret, length=steps))
            for s in range(steps):
                b.add_row(group_id=g, traj_id=tid, step=s, reward=ret / steps, done=s == steps - 1,
                          action_valid=True, observation=f"o{s}", state_key=s, prompt_ids=[1, 2],
                          response_ids=[5] * resp_len, sampling_logprobs=[-1.0] * resp_len)
            tid += 1
    return b


def test_informative_groups():
    b = make_batch([[1, 1, 1], [0, 1, 0], [0.5, 0.5], [2], [0, 0, 0.0001]])
    assert informative_groups(b) == [1, 4]


def test_select_and_merge_keep_ids_unique_and_consistent():
    a = select_groups(make_batch([[0, 1], [1, 1], [1, 0]]), [0, 2])
    c = make_batch([[3, 4]])
    m = merge_batches([a, c])
    assert len(m) == len(a) + len(c)
    pairs = set(zip(m.traj_id, m.step))
    assert len(pairs) == len(m)  # no (traj, step) clash after renumbering
    by_traj = {t.traj_id: t.group_id for t in m.trajectories}
    assert all(by_traj[t] == g for t, g in zip(m.traj_id, m.group_id))
    assert len(set(m.group_id)) == 3 and len(m.trajectories) == 6


def _rounds(plan: list[list[list[float]]]):
    calls = []

    def collect(k: int) -> RolloutBatch:
        calls.append(k)
        return make_batch(plan[k])

    return collect, calls


def test_fills_exactly_and_truncates_the_surplus():
    plan = [
        [[1, 1], [0, 1], [2, 2], [2, 2]],   # 1 informative
        [[0, 1], [1, 0], [0, 3], [5, 5]],   # 3 informative, only 2 needed
        [[0, 1], [0, 1], [0, 1], [0, 1]],
    ]
    collect, calls = _rounds(plan)
    kept, every, st = dynamic_sample(collect, target=3, max_rounds=5)
    assert calls == [0, 1]
    assert st == {"rounds": 2.0, "kept_groups": 3.0, "dropped_groups": 4.0, "surplus_groups": 1.0, "filled": 1.0}
    assert len({t.group_id for t in kept.trajectories}) == 3 == len(set(kept.group_id))
    assert len(every.trajectories) == 16
    # the kept groups are round 0's group 1, then round 1's groups 0 and 1, in that order
    rets = [sorted(t.episode_return for t in kept.trajectories if t.group_id == g) for g in sorted(set(kept.group_id))]
    assert rets == [[0, 1], [0, 1], [0, 1]]


def test_stops_at_the_round_limit():
    plan = [[[1, 1], [0, 1]], [[2, 2], [3, 3]], [[0, 1], [0, 1]]]
    collect, calls = _rounds(plan)
    kept, _, st = dynamic_sample(collect, target=2, max_rounds=2)
    assert calls == [0, 1]
    assert st["rounds"] == 2 and st["kept_groups"] == 1 and st["filled"] == 0
    assert len(set(kept.group_id)) == 1


def test_round_zero_uses_the_plain_train_seeds():
    assert round_seeds(3, 7, 0, 5) == train_seeds(3, 7, 5)
    assert round_seeds(3, 7, 1, 5) != round_seeds(3, 7, 0, 5)
    assert round_seeds(3, 7, 2, 5) == round_seeds(3, 7, 2, 5)


def test_overlong_penalty_matches_dapo():
    # L_max = 10, L_cache = 4: no penalty up to 6 tokens, linear to -1 at 10, -1 beyond.
    got = overlong_penalty([0, 6, 7, 8, 10, 12], 10, 0.4, 1.0)
    np.testing.assert_allclose(got, [0, 0, -0.25, -0.5, -1.0, -1.0])
    np.testing.assert_allclose(overlong_penalty([10], 10, 0.4, 0.5), [-0.5])
    assert np.all(overlong_penalty([1, 10], 10, 0.0) == 0)
    assert np.all(overlong_penalty([1], 1, 0.2) == 0)  # 20% of one token is no buffer: off


def test_shape_overlong_changes_training_reward_only():
    b = make_batch([[1.0, 0.0]], steps=1, resp_len=8)
    mean = shape_overlong(b, 10, 0.4, 1.0)
    assert mean == pytest.approx(-0.5)
    assert b.reward == pytest.approx([0.5, -0.5])
    assert [t.episode_return for t in b.trajectories] == [1.0, 0.0]
