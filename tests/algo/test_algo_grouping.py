"""Exact and similarity step grouping and step-group statistics."""

from __future__ import annotations

import difflib

import numpy as np
import pytest
from algo_batches import TEXT_POOL, make_batch, same_partition
from reference import ref_step_groups

from gigpo.algo import group_exact, group_similar, similarity, step_group_stats
from gigpo.algo.grouping import GroupingSpec


def test_group_exact() -> None:
    ids = group_exact([0, 0, 1, 1, 0], ["s", "t", "s", "s", "s"])
    assert ids.dtype == np.int64
    assert ids.tolist() == [0, 1, 2, 2, 0]


def test_group_similar_leader_order_is_traj_then_step() -> None:
    # Leader clustering depends on visiting order; rows are given scrambled but visited as (t1,0),(t1,1),(t2,0).
    a, b, c = "aaaaaaaaaa", "aaaaaaaaab", "aaaaaaaabb"  # R-O: a~b 0.9, b~c 0.9, a~c 0.8
    ratio = difflib.SequenceMatcher(None, a, c, autojunk=False).ratio()
    assert ratio == pytest.approx(0.8)
    ids = group_similar([5, 5, 5], ["t2", "t1", "t1"], [0, 1, 0], [c, b, a], GroupingSpec("ro", 0.85))
    # a leads cluster 0; b joins a (0.9); c vs a is 0.8 < 0.85 -> new cluster.
    assert ids.tolist() == [1, 0, 0]


def test_group_similar_never_crosses_episode_groups() -> None:
    ids = group_similar([0, 1], [0, 1], [0, 0], ["same", "same"], GroupingSpec("ro", 0.5))
    assert ids[0] != ids[1]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("threshold", [0.4, 0.7, 1.0])
def test_group_similar_matches_reference(seed: int, threshold: float) -> None:
    b = make_batch(seed, 3, 4, 5, "dense", len(TEXT_POOL), seed % 2 == 1, True)
    got = group_similar(b.group_ids, b.traj_ids, b.steps, b.anchors, GroupingSpec("ro", threshold))
    ref = ref_step_groups(b.group_ids, b.traj_ids, b.steps, b.anchors, threshold)
    assert same_partition(got.tolist(), ref)


def test_threshold_one_equals_exact_grouping() -> None:
    b = make_batch(4, 3, 4, 5, "dense", 4, False, False)
    sim = group_similar(b.group_ids, b.traj_ids, b.steps, b.anchors, GroupingSpec("ro", 1.0))
    assert same_partition(sim.tolist(), group_exact(b.group_ids, b.anchors).tolist())


def test_uses_leader_cluster_many_when_available(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def many(batches, threshold, metric="ro", workers=None):
        calls.append(len(batches))
        return [similarity.leader_cluster(b, threshold, metric=metric) for b in batches]

    monkeypatch.setattr(similarity, "leader_cluster_many", many, raising=False)
    ids = group_similar([0, 0, 1], [0, 1, 2], [0, 0, 0], ["ab", "ab", "ab"], GroupingSpec("ro", 0.9))
    assert calls == [2]  # one call for both episode groups
    assert ids[0] == ids[1] != ids[2]


def test_step_group_stats() -> None:
    s = step_group_stats(np.array([4, 4, 4, 9, 1, 1]))
    assert s == {
        "num_groups": 3,
        "mean_size": 2.0,
        "mean_size_per_row": (9 + 1 + 4) / 6,
        "singleton_frac": 1 / 6,
        "size_hist": {1: 1, 2: 1, 3: 1},
    }
    assert step_group_stats([])["num_groups"] == 0


@pytest.mark.parametrize("seed", range(20))
def test_pair_codes_is_a_bijection_on_pairs(seed: int) -> None:
    from gigpo.algo.ids import pair_codes

    rng = np.random.default_rng(seed)
    n, kb = int(rng.integers(1, 300)), int(rng.integers(1, 50))
    a = np.unique(rng.integers(0, int(rng.integers(1, 5000)), n), return_inverse=True)[1].astype(np.int64)
    b = a % kb if seed % 2 else rng.integers(0, kb, n)  # odd seeds: every anchor in one group only
    codes, k = pair_codes(a, int(a.max()) + 1, b, kb)
    assert same_partition(codes.tolist(), list(zip(a.tolist(), b.tolist(), strict=True)))
    assert sorted(set(codes.tolist())) == list(range(k))
