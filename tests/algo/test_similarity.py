"""Exact-equivalence tests for similarity clustering: fast paths vs the naive difflib / rapidfuzz references."""

from __future__ import annotations

import difflib
import itertools
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Indel
from text_edits import random_edits

import gigpo.algo.similarity as sim
from gigpo.algo.similarity import METRICS, grouping_quality, leader_cluster, leader_cluster_many, ro_ratio
from gigpo.algo.similarity.minhash import lsh_rows, minhash_signatures
from gigpo.algo.similarity.ro import decide_matches, need_matches, prepare, ro_matches

cydifflib = pytest.importorskip("cydifflib")

WORDS = "the of [SEP] item price $19.99 buy now size color blue small back to search page next rating".split()


def naive(texts, threshold, score):
    """The reference: greedy leader clustering scoring (leader, text) with ``score``."""
    leaders, out = [], []
    for t in texts:
        for c, lead in enumerate(leaders):
            if score(lead, t) >= threshold:
                out.append(c)
                break
        else:
            out.append(len(leaders))
            leaders.append(t)
    return np.asarray(out, dtype=np.int64)


def ref_matches(a: str, b: str) -> int:
    return sum(m.size for m in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())


def indel_score(a: str, b: str) -> float:
    return Indel.normalized_similarity(a, b)


def page(rng: random.Random, n: int) -> str:
    s = ""
    while len(s) < n:
        s += rng.choice(WORDS) + " "
    return s[:n]


def with_ad(rng: random.Random, p: str) -> str:
    pos = rng.randrange(len(p) + 1)
    return p[:pos] + f" [Ad] {rng.choice(WORDS)} only ${rng.randint(1, 99)}! " + p[pos:]


def noisy_groups(seed: int, n_pages: int, steps: int, size: int) -> list[str]:
    rng = random.Random(seed)
    pages = [page(rng, size) for _ in range(n_pages)]
    return [with_ad(rng, rng.choice(pages)) for _ in range(steps)]


def adversarial(rng: random.Random) -> list[str]:
    base = page(rng, 300)
    return [
        "",
        "",
        "a",
        "b",
        "ab",
        base,
        base,
        base[:150] + "ünïcödé ✓ 日本語テキスト" + base[150:],
        "日本語テキスト" * 30,
        "ab" * 300,  # periodic: q-gram hits explode -> compiled fallback
        "ba" * 299 + "c",
        "a" * 500,
        with_ad(rng, base),
        with_ad(rng, base),
        page(rng, 1500),
        with_ad(rng, base)[::-1],
        "x\ud800y" * 40 + base[:80],  # lone surrogates: code points like any other
    ]


@pytest.fixture(params=["compiled", "numpy"])
def backend(request, monkeypatch):
    """Run a test on the numba core and on the numpy/cydifflib fallback (GIGPO_NO_JIT set)."""
    if request.param == "numpy":
        monkeypatch.setenv(sim.NO_JIT_ENV, "1")
    elif sim.jit_backend() is None:
        pytest.skip("numba is not installed")
    return request.param


# --- the compiled matcher and the seeded exact count --------------------------------------------------------


def test_cydifflib_bit_identical_to_difflib():
    rng = random.Random(0)
    texts = adversarial(rng) + noisy_groups(1, 3, 6, 400)
    for a, b in itertools.islice(itertools.product(texts, texts), 0, None, 5):
        ref = difflib.SequenceMatcher(None, a, b, autojunk=False)
        fast = cydifflib.SequenceMatcher(None, a, b, autojunk=False)
        assert fast.ratio() == ref.ratio()
        assert [tuple(m) for m in fast.get_matching_blocks()] == [tuple(m) for m in ref.get_matching_blocks()]


def test_ro_matches_exact_on_adversarial_and_noisy_pairs():
    rng = random.Random(1)
    texts = adversarial(rng) + noisy_groups(2, 3, 6, 900)
    for a, b in itertools.islice(itertools.product(texts, texts), 0, None, 5):
        m = ref_matches(a, b)
        assert ro_matches(a, b) == m, (len(a), len(b))
        pa, pb = prepare(a), prepare(b)
        for need in (m - 1, m, m + 1):
            assert (decide_matches(pa, pb, need) >= need) == (m >= need)


def test_wide_unicode_uses_verified_hits():
    # Codepoints >= 256 hash non-injectively; hits are verified, so counts stay exact.
    rng = random.Random(3)
    alpha = "日本語テキスト✓ü"
    for _ in range(20):
        base = "".join(rng.choice(alpha) for _ in range(400))
        a = with_ad(rng, base)
        b = base[: rng.randrange(400)] + "".join(rng.choice(alpha) for _ in range(30)) + base[200:]
        assert ro_matches(a, b) == ref_matches(a, b)


def test_rapidfuzz_cutoff_path_used_for_the_lcs_bound_is_exact():
    # The leader loop tests LCS >= need through Indel.distance(score_cutoff=T - 2·need); check it at the boundary.
    rng = random.Random(12)
    for _ in range(300):
        p = page(rng, rng.randint(10, 1500))
        a, b = with_ad(rng, p), with_ad(rng, p) if rng.random() < 0.7 else page(rng, rng.randint(10, 1500))
        d = Indel.distance(a, b)
        for max_d in (d - 1, d, d + 1):
            if max_d >= 0:
                assert (Indel.distance(a, b, score_cutoff=max_d) <= max_d) == (d <= max_d)


def test_need_matches_is_the_exact_float_cut():
    rng = random.Random(4)
    for _ in range(5000):
        t = rng.randint(1, 10_000)
        thr = rng.choice([rng.random() or 0.5, 2 * rng.randint(1, t // 2 or 1) / t, 0.5, 0.9, 1.0])
        m = int(need_matches(min(thr, 1.0), np.array([t]))[0])
        assert 2.0 * m / t >= min(thr, 1.0) > (2.0 * (m - 1) / t if m else -1.0)


# --- leader clustering equivalence -------------------------------------------------------------------------


@pytest.mark.parametrize("threshold", [0.2, 0.5, 0.8, 0.9, 0.97, 1.0])
def test_leader_cluster_ro_equals_naive_on_noisy_pages(threshold, backend):
    steps = 12 if threshold == 1.0 else 30  # at 1.0 every text leads: naive is quadratic
    texts = noisy_groups(seed=int(threshold * 100), n_pages=5, steps=steps, size=600)
    texts += texts[:5]  # exact duplicates
    assert np.array_equal(leader_cluster(texts, threshold), naive(texts, threshold, ro_ratio))


@pytest.mark.parametrize("threshold", [0.3, 0.95])
def test_leader_cluster_ro_equals_naive_on_adversarial(threshold, backend):
    texts = adversarial(random.Random(5))
    assert np.array_equal(leader_cluster(texts, threshold), naive(texts, threshold, ro_ratio))


@pytest.mark.parametrize("threshold", [0.4, 0.8, 0.95])
def test_leader_cluster_indel_equals_naive(threshold):
    texts = noisy_groups(seed=7, n_pages=4, steps=40, size=500) + adversarial(random.Random(8))
    got = leader_cluster(texts, threshold, metric="indel")
    assert np.array_equal(got, naive(texts, threshold, indel_score))


def test_threshold_exactly_at_a_ratio_passes_and_one_ulp_above_fails(backend):
    rng = random.Random(9)
    for _ in range(30):
        p = page(rng, rng.randint(40, 900))
        a, b = with_ad(rng, p), with_ad(rng, p)
        r = ro_ratio(a, b)
        if r == 1.0:
            continue
        assert leader_cluster([a, b], r).tolist() == [0, 0]
        assert leader_cluster([a, b], float(np.nextafter(r, 2.0))).tolist() == [0, 1]
        r = indel_score(a, b)
        assert leader_cluster([a, b], r, metric="indel").tolist() == [0, 0]


def test_leader_is_the_first_argument(backend):
    # R-O is asymmetric (ties broken by position in the first string); the leader comes first, as in naive.
    a, b = "aababb", "abbbbab"
    r_ab, r_ba = ro_ratio(a, b), ro_ratio(b, a)
    assert r_ab != r_ba
    thr = max(r_ab, r_ba)
    assert leader_cluster([a, b], thr).tolist() == naive([a, b], thr, ro_ratio).tolist()
    assert leader_cluster([b, a], thr).tolist() == naive([b, a], thr, ro_ratio).tolist()


def _mutate(rng: random.Random, s: str) -> str:
    return random_edits(rng, s, rng.randint(0, 4), "abc xyz", max_insert=12, max_delete=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**31),
    n_base=st.integers(1, 4),
    n=st.integers(0, 14),
    length=st.integers(0, 260),
    threshold=st.sampled_from([0.1, 0.45, 0.7, 0.85, 0.93, 1.0]),
)
def test_property_ro_matches_naive(seed, n_base, n, length, threshold, backend):
    rng = random.Random(seed)
    bases = ["".join(rng.choice("abc xyz") for _ in range(length)) for _ in range(n_base)]
    texts = [_mutate(rng, rng.choice(bases)) for _ in range(n)]
    assert np.array_equal(leader_cluster(texts, threshold), naive(texts, threshold, ro_ratio))


@settings(max_examples=150, deadline=None)
@given(a=st.text(alphabet="ab ✓", max_size=120), b=st.text(alphabet="ab ✓", max_size=120))
def test_property_ro_matches_count(a, b):
    assert ro_matches(a, b) == ref_matches(a, b)


# --- other metrics, errors, determinism, batching ----------------------------------------------------------


def test_exact_metric_accepts_hashables():
    keys = [("s", 1), "x", ("s", 1), 3, "x", 3.0]
    assert leader_cluster(keys, 1.0, metric="exact").tolist() == [0, 1, 0, 2, 1, 2]


def test_minhash_deterministic_and_sensible():
    rng = random.Random(10)
    p1, p2 = " ".join(rng.choice(WORDS) for _ in range(200)), " ".join(rng.choice(WORDS) for _ in range(200))
    texts = [p1, p1 + " ad ad", p2, p1, p2 + " x"]
    a = leader_cluster(texts, 0.8, metric="minhash")
    assert a.tolist() == leader_cluster(texts, 0.8, metric="minhash").tolist()
    assert a[0] == a[1] == a[3] and a[2] == a[4] and a[0] != a[2]
    s1, s2 = minhash_signatures(texts), minhash_signatures(texts)
    assert np.array_equal(s1, s2) and not np.array_equal(minhash_signatures(texts, seed=1), s1)
    assert 1 <= lsh_rows(0.9) and 128 % lsh_rows(0.2) == 0
    # Estimated Jaccard tracks the true shingle Jaccard.
    sh = [{tuple(t.split()[i : i + 3]) for i in range(len(t.split()) - 2)} for t in (p1, p1 + " ad ad")]
    true_j = len(sh[0] & sh[1]) / len(sh[0] | sh[1])
    assert abs((s1[0] == s1[1]).mean() - true_j) < 0.15


@pytest.mark.parametrize("metric", ["ro", "indel", "minhash"])
def test_non_string_anchor_is_an_error_naming_the_metric(metric):
    with pytest.raises(ValueError, match=metric):
        leader_cluster(["a", 3], 0.5, metric=metric)


@pytest.mark.parametrize("threshold", [0.0, -0.1, 1.0000001, float("nan"), 2])
def test_threshold_out_of_range(threshold):
    with pytest.raises(ValueError, match="threshold"):
        leader_cluster(["a"], threshold)
    with pytest.raises(ValueError, match="threshold"):
        leader_cluster_many([["a"]], threshold)


def test_unknown_metric():
    assert "state_key" in METRICS
    with pytest.raises(ValueError, match="metric"):
        leader_cluster(["a"], 0.5, metric="cosine")


def test_empty_and_determinism(backend):
    assert leader_cluster([], 0.9).shape == (0,)
    texts = noisy_groups(11, 3, 30, 600)
    first = leader_cluster(texts, 0.9)
    assert first.dtype == np.int64
    assert all(np.array_equal(first, leader_cluster(texts, 0.9)) for _ in range(2))


@pytest.mark.parametrize("metric", ["ro", "indel", "minhash", "exact"])
def test_many_equals_map(monkeypatch, metric, backend):
    groups = [noisy_groups(s, 3, 15, 400) for s in range(4)] + [[]]
    expect = [leader_cluster(g, 0.8, metric) for g in groups]
    got = leader_cluster_many(groups, 0.8, metric)
    assert all(np.array_equal(x, y) for x, y in zip(got, expect, strict=True))
    if metric == "ro":  # force the process pool path
        monkeypatch.setattr(sim, "_PARALLEL_MIN_CHARS", 0)
        got = leader_cluster_many(groups, 0.8, metric, workers=2)
        assert all(np.array_equal(x, y) for x, y in zip(got, expect, strict=True))


# --- grouping quality --------------------------------------------------------------------------------------


def brute_quality(pred, true, grp):
    pp = pt = pb = 0
    for i, j in itertools.combinations(range(len(pred)), 2):
        if grp[i] != grp[j]:
            continue
        sp, stt = pred[i] == pred[j], true[i] == true[j]
        pp += sp
        pt += stt
        pb += sp and stt
    return pp, pt, pb


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3), st.integers(0, 2)), max_size=40))
def test_grouping_quality_matches_brute_force(rows):
    pred = [r[0] for r in rows]
    true = [("k", r[1]) for r in rows]  # tuple keys exercise the hashable path
    grp = [f"g{r[2]}" for r in rows]
    q = grouping_quality(np.array(pred), true, grp)
    pp, pt, pb = brute_quality(pred, true, grp)
    assert (q["pairs_pred"], q["pairs_true"], q["pairs_both"]) == (pp, pt, pb)
    assert q["precision"] == (pb / pp if pp else 1.0)
    assert q["recall"] == (pb / pt if pt else 1.0)


def test_grouping_quality_edge_cases():
    q = grouping_quality([0, 0, 1], ["a", "a", "a"], [0, 0, 0])
    assert q["precision"] == 1.0 and q["recall"] == pytest.approx(1 / 3)
    q = grouping_quality([0, 0], ["a", "a"], [0, 1])  # different episode groups: no pairs at all
    assert q["pairs_pred"] == 0 and q["pairs_true"] == 0 and q["f1"] == 1.0
    with pytest.raises(ValueError, match="length"):
        grouping_quality([0], [0, 1], [0])


def test_a_numba_build_failure_falls_back_to_the_numpy_path(monkeypatch):
    jit = sim.jit_backend()
    if jit is None:
        pytest.skip("numba is not installed")
    from numba.core.errors import TypingError

    def broken(*args, **kwargs):
        raise TypingError("simulated: this numba cannot compile the core")

    monkeypatch.setattr(jit, "cluster_group", broken)
    monkeypatch.setattr(jit, "cluster_groups", broken)
    monkeypatch.setattr(sim, "_jit_module", jit)  # restored after the test, whatever the fallback sets
    texts = noisy_groups(seed=3, n_pages=3, steps=12, size=300)
    with pytest.warns(RuntimeWarning, match="numpy path"):
        got = leader_cluster(texts, 0.8)
    assert np.array_equal(got, naive(texts, 0.8, ro_ratio))
    assert sim.jit_backend() is None  # later calls go straight to the numpy path, without another warning
