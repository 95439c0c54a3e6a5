"""compat="verl-agent" step grouping reproduces the official code: batch order, new text first, autojunk, dict keys."""

from __future__ import annotations

import difflib
import random

import numpy as np
import pytest
from algo_batches import advantages, same_partition
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import official_leader_clusters, ref_compute_advantages, ref_step_groups
from text_edits import random_edits

from gigpo.algo import group_similar
from gigpo.algo.compat import official_anchor_key, official_leader_cluster, official_ratio
from gigpo.algo.grouping import GroupingSpec

WORDS = "the of [SEP] item price $19.99 buy now size color blue small back to search page next".split()


def test_argument_order_changes_the_ratio() -> None:
    """R-O is not symmetric: ties between equally long blocks go to the first string's earliest position."""
    assert difflib.SequenceMatcher(None, "baaab", "abab").ratio() == pytest.approx(2 / 3)  # 0.667
    assert difflib.SequenceMatcher(None, "abab", "baaab").ratio() == pytest.approx(4 / 9)  # 0.444
    assert official_ratio("baaab", "abab") == pytest.approx(2 / 3)  # (new text, leader)
    # The leader "abab" comes first in the batch; the new text "baaab" scores 0.667 against it officially, so the
    # two share a step group at 0.5, while the default (leader first, 0.444) keeps them apart.
    args = ([0, 0], [0, 1], [0, 0], [1.0, 0.0], ["abab", "baaab"])
    official = advantages(*args, grouping=GroupingSpec("ro", 0.5), compat="verl-agent")
    default = advantages(*args, grouping=GroupingSpec("ro", 0.5))
    assert official.step_group_ids.tolist() == [0, 0]
    assert default.step_group_ids.tolist() == [0, 1]


def test_autojunk_is_on_for_long_leaders() -> None:
    """Characters above 1% of a 200+ character leader do not seed matches officially (difflib's autojunk)."""
    rng = random.Random(4)
    leader = " ".join(rng.choice(WORDS) for _ in range(60))[:300]
    text = random_edits(rng, leader, 25, "xyz", 3, 3)
    junk = difflib.SequenceMatcher(None, text, leader).ratio()
    exact = difflib.SequenceMatcher(None, text, leader, autojunk=False).ratio()
    assert junk < exact  # this pair separates the two settings
    threshold = (junk + exact) / 2
    assert official_leader_cluster([leader, text], threshold).tolist() == [0, 1]
    assert group_similar([0, 0], [0, 1], [0, 0], [leader, text], GroupingSpec("ro", threshold)).tolist() == [0, 0]


def test_rows_are_walked_in_batch_order() -> None:
    a, b, c = "aaaaaaaaaa", "aaaaaaaaab", "aaaaaaaabb"  # a~b 0.9, b~c 0.9, a~c 0.8 (symmetric here)
    g, s, r = [5, 5, 5], [0, 1, 0], [0.0, 1.0, 0.0]
    t = ["t2", "t1", "t1"]  # (traj, step) order is a, b, c; batch order is c, b, a
    official = advantages(g, t, s, r, [c, b, a], grouping=GroupingSpec("ro", 0.85), compat="verl-agent")
    default = advantages(g, t, s, r, [c, b, a], grouping=GroupingSpec("ro", 0.85))
    assert same_partition(official.step_group_ids.tolist(), [0, 0, 1])  # c leads, b joins c, a is alone
    assert same_partition(default.step_group_ids.tolist(), [1, 0, 0])  # a leads, b joins a, c is alone


def test_dict_and_list_anchors_are_keyed_like_the_official_code() -> None:
    anchors = [{"room": 1, "key": [1, 2]}, {"key": [1, 2], "room": 1}, {"room": 2, "key": [1, 2]}, [1, [2]]]
    assert official_anchor_key(anchors[0]) == (("key", (1, 2)), ("room", 1))
    assert official_anchor_key(np.array([[1, 2], [3, 4]])) == (1, 2, 3, 4)
    out = advantages(
        [0] * 4, [0, 1, 2, 3], [0] * 4, [1.0, 0.0, 1.0, 0.0], anchors, compat="verl-agent"
    )
    assert out.step_group_ids.tolist() == [0, 0, 1, 2]
    with pytest.raises(ValueError, match="hashable"):  # the default mode keeps rejecting unhashable anchors
        advantages([0] * 4, [0, 1, 2, 3], [0] * 4, [1.0, 0.0, 1.0, 0.0], anchors)
    with pytest.raises(ValueError, match="string anchors"):  # the official similarity path raises too
        advantages(
            [0] * 4, [0, 1, 2, 3], [0] * 4, [0.0] * 4, anchors, grouping=GroupingSpec("ro", 0.5), compat="verl-agent"
        )


def test_repeated_texts_and_quick_ratio_shortcuts_change_no_decision() -> None:
    """official_leader_cluster (memo + quick-ratio bounds) equals the plain loop, repeats and long texts included."""
    rng = random.Random(7)
    for _ in range(30):
        base = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 80))) for _ in range(3)]
        texts = [random_edits(rng, rng.choice(base), rng.randint(0, 6), "xyz ", 4, 4) for _ in range(12)]
        texts += rng.sample(texts, 4) + ["", "", "a" * 300, "a" * 300]
        rng.shuffle(texts)
        for threshold in (0.3, 0.6, 0.9, 1.0):
            got = official_leader_cluster(texts, threshold).tolist()
            assert got == official_leader_clusters(texts, threshold), threshold


@st.composite
def text_batches(draw) -> tuple[list, list, list, list, list]:
    """Episode groups of short texts over a tiny alphabet (ties decide the argument order) or long pages with
    edits (200+ characters: autojunk matters), rows shuffled."""
    rng = random.Random(draw(st.integers(0, 2**31 - 1)))
    long_texts = draw(st.booleans())
    cols: list[list] = [[], [], [], [], []]
    traj = 0
    for g in range(draw(st.integers(1, 3))):
        if long_texts:
            pages = [
                " ".join(rng.choice(WORDS) for _ in range(60))[: rng.randint(200, 320)] for _ in range(2)
            ]
        for _ in range(rng.randint(1, 4)):
            for t in range(rng.randint(1, 4)):
                if long_texts:
                    text = random_edits(rng, rng.choice(pages), rng.randint(0, 20), "xyz", 3, 3)
                else:
                    text = "".join(rng.choice("ab") for _ in range(rng.randint(1, 6)))
                for col, v in zip(cols, (g, traj, t, rng.choice([0.0, 0.5, 1.0]), text), strict=True):
                    col.append(v)
            traj += 1
    perm = list(range(len(cols[0])))
    rng.shuffle(perm)
    return tuple([c[i] for i in perm] for c in cols)  # type: ignore[return-value]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cols=text_batches(), threshold=st.sampled_from([0.3, 0.5, 0.7, 0.9, 0.95]))
def test_compat_similarity_groups_equal_the_official_reference(cols, threshold: float) -> None:
    out = advantages(*cols, grouping=GroupingSpec("ro", threshold), compat="verl-agent")
    labels = ref_step_groups(cols[0], cols[1], cols[2], cols[4], threshold, compat="verl-agent")
    assert same_partition(out.step_group_ids.tolist(), labels)
    ref = ref_compute_advantages(*cols, similarity=threshold, compat="verl-agent")
    np.testing.assert_allclose(out.advantages, ref["advantages"], rtol=1e-9, atol=1e-9)


def test_compat_rejects_what_it_cannot_reproduce() -> None:
    args = ([0, 0], [0, 1], [0, 0], [1.0, 0.0], ["abc", "abd"])
    with pytest.raises(ValueError, match="std_ddof=0"):
        advantages(*args, compat="verl-agent", std_ddof=0)
    with pytest.raises(ValueError, match='grouping.metric must be "ro"'):
        advantages(*args, grouping=GroupingSpec("indel", 0.5), compat="verl-agent")
