"""The compiled R-O core (gigpo.algo.similarity.jit) against difflib, pair by pair and decision by decision."""

from __future__ import annotations

import difflib
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from text_edits import random_edits

from gigpo.algo.similarity.ro import codepoints as cps
from gigpo.algo.similarity.ro import need_matches

jit = pytest.importorskip("gigpo.algo.similarity.jit")  # needs numba (the `fast` extra; dev installs it)


def ref_matches(a: str, b: str) -> int:
    return sum(m.size for m in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())


def check_pair(a: str, b: str) -> None:
    """Exact count, and the decision at every cut near M (where a wrong bound would flip it) and a few far."""
    m = ref_matches(a, b)
    assert jit.ro_decide_pair(cps(a), cps(b), -1) == m
    for need in {0, 1, max(m - 1, 0), m, m + 1, m + 7, (len(a) + len(b)) // 4, min(len(a), len(b))}:
        v = jit.ro_decide_pair(cps(a), cps(b), need)
        assert (v >= need) == (m >= need), (a[:40], b[:40], need, m, v)


WORDS = "the of [SEP] item price $19.99 buy now size color blue small back to search page next rating".split()


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def test_pages_with_ads_and_pages_that_differ():
    rng = random.Random(0)
    for _ in range(40):
        p = words(rng, rng.randint(50, 400))
        q = words(rng, rng.randint(50, 400))
        ad = f" [Ad] {words(rng, 4)} only ${rng.randint(1, 99)}! "
        i, j = rng.randrange(len(p) + 1), rng.randrange(len(p) + 1)
        check_pair(p[:i] + ad + p[i:], p[:j] + p[j:] + ad)  # same page, ads elsewhere
        check_pair(p, q)  # different pages: the LCS bounds and difflib's search decide these


@pytest.mark.parametrize(
    "a,b",
    [
        ("", ""),
        ("", "abc"),
        ("abc", ""),
        ("a", "a"),
        ("abcdefgh", "abcdefgh"),  # exactly one q-gram
        ("abcdefg", "abcdefg"),  # shorter than Q: the hard path alone
        (
            "ab" * 400,
            "ba" * 399 + "c",
        ),  # periodic: q-gram hits explode, the whole pair goes to difflib's search
        ("a" * 700, "a" * 650),
        ("日本語テキスト" * 40, "テキスト日本語" * 41),  # wide characters: hashes, buckets and radix passes
        (
            "x\ud800y" * 30 + "common tail of the text",
            "\ud800" + "x\ud800y" * 29 + "common tail",
        ),  # surrogates
        ("😀 emoji 😀 text " * 20, "text 😀 emoji " * 21),
    ],
)
def test_adversarial_pairs(a, b):
    check_pair(a, b)
    check_pair(b, a)


def test_tie_break_follows_difflib():
    # Several equally long candidate blocks: difflib takes the smallest i, then the smallest j; a different
    # choice changes the recursion and M.
    rng = random.Random(3)
    for _ in range(200):
        unit = "".join(rng.choice("abcd") for _ in range(rng.randint(8, 14)))
        a = "".join(rng.choice([unit, "xy", "z", unit[::-1]]) for _ in range(rng.randint(2, 9)))
        b = "".join(rng.choice([unit, "yx", "zz", unit[1:]]) for _ in range(rng.randint(2, 9)))
        check_pair(a, b)


@settings(max_examples=200, deadline=None)
@given(
    a=st.text(alphabet="ab ✓xyz", max_size=300),
    b=st.text(alphabet="ab ✓xyz", max_size=300),
)
def test_property_matches_difflib(a, b):
    check_pair(a, b)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), length=st.integers(0, 1200), edits=st.integers(0, 6))
def test_property_long_edited_texts(seed, length, edits):
    rng = random.Random(seed)
    a = "".join(rng.choice("abc xyz") for _ in range(length))
    b = random_edits(rng, a, edits, "abcq ", max_insert=30, max_delete=20)
    check_pair(a, b)


@pytest.mark.parametrize("threshold", [1e-9, 0.1, 0.5, 0.9, 0.97, 1.0])
def test_need_is_the_numpy_cut(threshold):
    totals = np.arange(0, 5000)
    expect = need_matches(threshold, totals)
    got = np.array([jit.need_of(threshold, int(t)) for t in totals])
    assert np.array_equal(got, expect)


def test_cluster_groups_equals_cluster_group_per_group():
    rng = random.Random(4)
    groups = []
    for _ in range(5):
        pages = [words(rng, 80) for _ in range(3)]
        groups.append([p[: rng.randrange(len(p))] + " ad " + p for p in rng.choices(pages, k=12)])
    flat = [t for g in groups for t in g]
    cp = cps("".join(flat))
    off = np.concatenate([[0], np.cumsum([len(t) for t in flat])]).astype(np.int64)
    goff = np.arange(0, len(flat) + 1, 12, dtype=np.int64)
    together = jit.cluster_groups(cp, off, goff, 0.8)
    for g in range(5):
        a, b = goff[g], goff[g + 1]
        alone = jit.cluster_group(cp[off[a] : off[b]], off[a : b + 1] - off[a], 0.8)
        assert np.array_equal(together[a:b], alone)
