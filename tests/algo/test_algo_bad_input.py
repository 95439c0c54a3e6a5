"""Bad input raises ValueError naming the problem."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gigpo.algo import compute_advantages, discounted_returns, group_exact, group_similar
from gigpo.algo.grouping import GroupingSpec

OK = dict(
    group_ids=[0, 0, 1], traj_ids=[0, 1, 2], steps=[0, 0, 0], rewards=[1.0, 0.0, 1.0], anchors=["a", "a", "b"]
)


def call(**over):
    return compute_advantages(**{**OK, **over})


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"traj_ids": [0, 1]}, "length mismatch: traj_ids"),
        ({"steps": [0, 0]}, "length mismatch: steps"),
        ({"rewards": [1.0]}, "length mismatch: rewards"),
        ({"anchors": ["a"]}, "length mismatch: anchors"),
        ({"rewards": [1.0, math.nan, 0.0]}, "NaN or inf"),
        ({"rewards": [1.0, math.inf, 0.0]}, "NaN or inf"),
        ({"traj_ids": [0, 0, 2]}, "duplicate \\(trajectory, step\\) pair: trajectory 0, step 0"),
        ({"traj_ids": [0, 1, 1], "steps": [0, 0, 1]}, "trajectory 1 appears in more than one group"),
        ({"grouping": 0.5}, "grouping must be None \\(exact anchors\\) or a GroupingSpec"),
        ({"grouping": GroupingSpec("ro", 0.5), "anchors": ["a", 3, "b"]}, "string anchors; row 1 has a int"),
        ({"anchors": None}, "needs anchors"),
        ({"anchors": [["unhashable"], ["x"], ["y"]]}, "anchors must be hashable"),
        ({"estimator": "ppo"}, "unknown estimator"),
        ({"episode_estimator": "gae"}, "unknown episode_estimator"),
        ({"normalize": "std"}, "unknown normalize"),
        ({"step_weight": -1.0}, "step_weight"),
        ({"gamma": 1.5}, "gamma must be in \\[0, 1\\]"),
        ({"eps": -1.0}, "eps must be"),
        ({"steps": [0.5, 0, 0]}, "steps must be integers"),
        ({"group_ids": [[0], [0], [1]]}, "group_ids must be 1-D"),
    ],
)
def test_bad_input_names_the_problem(over: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call(**over)


def test_empty_input() -> None:
    with pytest.raises(ValueError, match="empty input"):
        compute_advantages([], [], [], [], [])


def test_mixed_id_types() -> None:
    with pytest.raises(ValueError, match="traj_ids"):
        call(traj_ids=np.array([0, "a", 2.5], dtype=object))


def test_helpers_validate_too() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        discounted_returns([0, 0], [1, 1], [1.0, 1.0], 0.9)
    with pytest.raises(ValueError, match="NaN"):
        discounted_returns([0, 0], [0, 1], [1.0, math.nan], 0.9)
    with pytest.raises(ValueError, match="length mismatch"):
        group_exact([0, 0], ["a"])
    with pytest.raises(ValueError, match="in \\(0, 1\\]"):
        group_similar([0], [0], [0], ["a"], GroupingSpec("ro", 0))
    with pytest.raises(ValueError, match="string anchors"):
        group_similar([0], [0], [0], [b"bytes"], GroupingSpec("ro", 0.5))


def test_grouping_spec_is_checked_once_in_its_constructor() -> None:
    """The similarity threshold and metric are checked where the spec is made (and nowhere on the way down)."""
    for bad in (0, 0.0, -0.1, 1.5, float("nan"), True, "0.9", None):
        with pytest.raises(ValueError, match="similarity threshold must be"):
            GroupingSpec("ro", bad)
    with pytest.raises(ValueError, match="unknown similarity metric 'exact'"):
        GroupingSpec("exact", 0.9)  # exact grouping has no spec: grouping=None
    spec = GroupingSpec("indel", 1)
    assert spec.threshold == 1.0 and isinstance(spec.threshold, float) and spec == GroupingSpec("indel", 1.0)
    with pytest.raises(AttributeError):
        spec.threshold = 0.5  # frozen: what was checked stays checked
