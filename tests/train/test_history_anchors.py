"""History-aware anchors (grouping.history): the key includes the trajectory's previous anchors; hgpo and history
reach the trainer's advantage dispatch; config errors are one line."""

from __future__ import annotations

import numpy as np
import pytest

from gigpo.algo import compute_advantages, group_exact
from gigpo.algo.grouping import history_anchors
from gigpo.rollout.batch import RolloutBatch
from gigpo.train.config import load_config
from gigpo.train.config.error import ConfigError
from gigpo.train.update.estimate import row_advantages
from gigpo.train.update.grouping import anchors_for, grouping_spec

# Two trajectories of one group visit "s" at step 2, one from "a", one from "b"; both start at "x".
TRAJ = [0, 0, 0, 1, 1, 1]
STEP = [0, 1, 2, 0, 1, 2]
OBS = ["x", "a", "s", "x", "b", "s"]


def batch() -> RolloutBatch:
    b = RolloutBatch()
    for t, s, o in zip(TRAJ, STEP, OBS, strict=True):
        b.add_row(group_id=0, traj_id=t, step=s, reward=float(t == 0 and s == 2), done=s == 2, action_valid=True,
                  observation=o, state_key=(o,), prompt_ids=[1], response_ids=[2], sampling_logprobs=[0.0])
    return b


def test_history_splits_the_same_state_reached_by_different_paths():
    flat = group_exact([0] * 6, OBS)
    assert flat[2] == flat[5]  # today: "s" is one step group
    keys = history_anchors(TRAJ, STEP, OBS, 1)
    hist = group_exact([0] * 6, keys)
    assert hist[2] != hist[5] and hist[0] == hist[3]  # "s" after "a" vs after "b"; the start is shared
    assert keys.shape == (6, 2) and (keys[[0, 3], 0] == -1).all()
    # k = 0 is the same partition as the anchors; shuffled rows give the same keys row by row
    same = group_exact([0] * 6, history_anchors(TRAJ, STEP, OBS, 0))
    assert len({(int(a), int(b)) for a, b in zip(same, flat, strict=True)}) == len(set(flat.tolist()))
    perm = np.random.default_rng(0).permutation(6)
    shuffled = history_anchors(np.array(TRAJ)[perm], np.array(STEP)[perm], [OBS[i] for i in perm], 1)
    np.testing.assert_array_equal(group_exact([0] * 6, shuffled), group_exact([0] * 6, keys[perm]))


def test_history_changes_the_step_advantage():
    rewards = [0, 0, 1, 0, 0, 0]
    flat = compute_advantages([0] * 6, TRAJ, STEP, rewards, OBS, normalize="mean")
    hist = compute_advantages([0] * 6, TRAJ, STEP, rewards, history_anchors(TRAJ, STEP, OBS, 1), normalize="mean")
    assert flat.step_advantages[2] > 0 and hist.step_advantages[2] == 0  # alone once its path counts


def test_anchors_for_and_row_advantages_use_history_and_hgpo():
    b = batch()
    anchors = anchors_for(b, "exact", None, history=1)
    assert anchors.shape == (6, 2)
    anchors = anchors_for(b, "state_key", None, history=2)
    assert anchors.shape == (6, 3)
    for overrides in (["grouping.history=1"], ["algorithm=hgpo"], ["algorithm=hgpo", "algorithm.hgpo.episode=false"]):
        cfg = load_config("lock", overrides)
        adv, _, stats = row_advantages(cfg, b, grouping_spec(cfg))
        assert adv.shape == (6,) and np.isfinite(adv).all() and "adv/abs_step_mean" in stats


@pytest.mark.parametrize("bad", [["grouping.history=-1"], ["grouping.history=1", "grouping.metric=ro"],
                                 ["algorithm=hgpo", "grouping.metric=indel"], ["algorithm.hgpo.levels=-2"],
                                 ["algorithm=hgpo", "grouping.history=1"]])
def test_config_errors(bad):
    with pytest.raises(ConfigError):
        load_config("lock", bad)
