"""Benchmark: exact Ratcliff–Obershelp leader clustering vs naive difflib on WebShop-like pages with ads.

Part (a), speed: 16 episode groups x 400 observations of ~1.8 KB. Each group revisits a dozen procedurally built
pages (search results, item pages, item details); every observation gets one "ad" snippet at a random character
position. The naive loop (difflib.SequenceMatcher(None, leader, text, autojunk=False).ratio() >= threshold) is run
on group prefixes within a time budget and its assignment asserted identical to ours; its full-batch time is
extrapolated from the exact number of pairs it would score (known from the identical assignment) times its
measured mean time per passing / failing pair.

    python benchmarks/grouping.py [--groups 16] [--steps 400] [--naive-budget 60] [--seed 0] [--fallback]

"ours" is the compiled (numba) core when numba is installed; --fallback also times the numpy/cydifflib path
(GIGPO_NO_JIT=1). The first call's compilation (cached on disk afterwards) is timed separately, not in the batch.
"""

from __future__ import annotations

import argparse
import difflib
import os
import platform
import random
import time

import numpy as np

import gigpo.algo.similarity as sim
from gigpo.algo.similarity import leader_cluster, leader_cluster_many, ro_ratio

_ADJ = "soft durable lightweight waterproof vintage organic premium classic slim compact wireless portable".split()
_NOUN = "shirt sneakers backpack lamp headphones blender mug jacket watch pillow speaker charger rug kettle".split()
_BASE_WORDS = (
    "made with high quality material suitable for daily use easy to clean machine washable perfect gift for "
    "men women kids family friends comfortable fit long lasting battery fast shipping satisfaction guaranteed "
    "stainless steel cotton blend adjustable strap non slip rubber sole modern design multiple colors available"
).split()
_SYLL = "ka lo mi ne ru ta vo si pe da gu fi zo re na li mo tu be sa ko".split()


def _vocabulary(n: int = 2000, seed: int = 12345) -> tuple[list[str], list[float]]:
    """Product-description vocabulary: the base words plus procedural ones, with Zipf frequencies (1/rank)."""
    rng = random.Random(seed)
    words = list(_BASE_WORDS)
    seen = set(words)
    while len(words) < n:
        w = "".join(rng.choices(_SYLL, k=rng.randint(1, 4)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words, [1.0 / (r + 1) for r in range(n)]


_WORDS, _ZIPF = _vocabulary()


def _text(rng: random.Random, k: int) -> str:
    return " ".join(rng.choices(_WORDS, weights=_ZIPF, k=k))


_BRANDS = "Acme Zenith Nova Orbit Lumen Vertex Apex Harbor Maple Pioneer Quartz Summit".split()
_SLOGANS = [
    "limited time offer",
    "free shipping today",
    "best seller of the year",
    "save big now",
    "as seen on TV",
    "rated five stars",
    "new arrival",
    "while supplies last",
]
_AD_TEMPLATES = [
    "[Ad] {b} {a} {n} - {s}! Only ${p}.",
    "Sponsored: {s} on {b} {n}s from ${p}",
    "** {b} ** {a} {n} at ${p} - {s} **",
]


def _title(rng: random.Random) -> str:
    return f"{rng.choice(_BRANDS)} {rng.choice(_ADJ)} {rng.choice(_NOUN)} " + _text(rng, 8)


def _pad(text: str, rng: random.Random, size: int) -> str:
    while len(text) < size:
        text += " [SEP] " + _text(rng, 12)
    return text[:size]


def make_pages(rng: random.Random, n_pages: int = 12, size: int = 1800) -> list[str]:
    """WebShop-like pages of one task: shared instruction, results pages and item pages, ~``size`` chars each."""
    instr = (
        f"WebShop [SEP] Instruction: [SEP] i need a {rng.choice(_ADJ)} {rng.choice(_NOUN)}, price lower than "
    )
    instr += f"{rng.randint(20, 90)}.00 dollars [SEP] Back to Search"
    pages = []
    for k in range(n_pages):
        if k % 3 == 0:
            items = " ".join(
                f"[SEP] B0{rng.randrange(10**8):08d} [SEP] {_title(rng)} [SEP] ${rng.randint(5, 99)}.99"
                for _ in range(10)
            )
            body = f"{instr} [SEP] Page {k // 3 + 1} (Total results: 50) [SEP] Next > {items}"
        else:
            opts = " [SEP] ".join(
                rng.sample(["small", "medium", "large", "x-large", "black", "white", "blue"], 4)
            )
            body = f"{instr} [SEP] < Prev [SEP] {opts} [SEP] {_title(rng)} [SEP] Price: ${rng.randint(5, 99)}.99 "
            body += "[SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now [SEP] "
            body += _text(rng, 60)
        pages.append(_pad(body, rng, size))
    return pages


def make_ad(rng: random.Random) -> str:
    """One of 3 templates x 12 brands x 12 adjectives x 14 nouns x 8 slogans x 95 prices (>> 500 distinct ads)."""
    return (
        " "
        + rng.choice(_AD_TEMPLATES).format(
            b=rng.choice(_BRANDS),
            a=rng.choice(_ADJ),
            n=rng.choice(_NOUN),
            s=rng.choice(_SLOGANS),
            p=rng.randint(5, 99),
        )
        + " "
    )


def make_group(seed: int, steps: int = 400, n_pages: int = 12) -> list[str]:
    """Observations of one episode group: pages revisited with a skewed (Zipf-like) frequency, one ad each."""
    rng = random.Random(seed)
    pages = make_pages(rng, n_pages)
    weights = [1.0 / (k + 1) for k in range(n_pages)]
    obs = []
    for _ in range(steps):
        page = rng.choices(pages, weights=weights)[0]
        pos = rng.randrange(len(page) + 1)
        obs.append(page[:pos] + make_ad(rng) + page[pos:])
    return obs


def naive_prefix(
    texts: list[str], threshold: float, deadline: float
) -> tuple[list[int], list[float], list[float]]:
    """Naive greedy leader clustering until ``deadline``; returns (ids, pass-pair seconds, fail-pair seconds)."""
    leaders: list[str] = []
    ids: list[int] = []
    t_pass: list[float] = []
    t_fail: list[float] = []
    for text in texts:
        if time.perf_counter() > deadline:
            break
        for c, lead in enumerate(leaders):
            t0 = time.perf_counter()
            ok = difflib.SequenceMatcher(None, lead, text, autojunk=False).ratio() >= threshold
            (t_pass if ok else t_fail).append(time.perf_counter() - t0)
            if ok:
                ids.append(c)
                break
        else:
            ids.append(len(leaders))
            leaders.append(text)
    return ids, t_pass, t_fail


def naive_pair_counts(ids: np.ndarray) -> tuple[int, int]:
    """(passing, failing) ratio calls the naive loop makes for a given assignment (it has no duplicate shortcut)."""
    n_pass = n_fail = 0
    n_leaders = 0
    for c in ids.tolist():
        if c < n_leaders:
            n_pass += 1
            n_fail += c
        else:
            n_fail += n_leaders
            n_leaders += 1
    return n_pass, n_fail


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=16)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.9, 0.5])
    ap.add_argument("--naive-budget", type=float, default=60.0, help="seconds of naive difflib per threshold")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fallback", action="store_true", help="also time the numpy/cydifflib path (no numba)")
    args = ap.parse_args()

    groups = [make_group(args.seed * 1000 + g, args.steps) for g in range(args.groups)]
    n_obs = sum(len(g) for g in groups)
    mean_len = np.mean([len(t) for g in groups for t in g])
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, Python "
        f"{platform.python_version()}"
    )
    print(
        f"data: {args.groups} groups x {args.steps} obs = {n_obs} observations, mean {mean_len:.0f} chars, "
        f"{len({t for g in groups for t in g})} distinct"
    )

    # difflib's default autojunk=True treats characters occurring in > 1% of a text of >= 200 chars as junk.
    rng = random.Random(args.seed)
    junk, true = [], []
    for _ in range(20):
        page = make_pages(rng, 1)[0]
        a, b = (
            page[:p] + make_ad(rng) + page[p:] for p in (rng.randrange(len(page)), rng.randrange(len(page)))
        )
        junk.append(difflib.SequenceMatcher(None, a, b).ratio())
        true.append(ro_ratio(a, b))
    print(
        f"20 pairs (page+ad, page+other ad), ~{len(a)} chars: difflib default autojunk=True ratio "
        f"mean {np.mean(junk):.3f} (min {min(junk):.3f}); true autojunk=False ratio mean {np.mean(true):.3f} "
        f"(min {min(true):.3f})"
    )

    backend = (
        "compiled (numba)" if sim.jit_backend() is not None else "numpy + cydifflib (numba not installed)"
    )
    t0 = time.perf_counter()
    leader_cluster(groups[0][:3], 0.9)  # compile, or load the on-disk cache of an earlier compile
    print(
        f"backend: {backend}; first call (compile or cache load) {time.perf_counter() - t0:.1f} s, not counted"
    )

    rows = []
    for thr in args.thresholds:
        serial = [
            _timed(lambda thr=thr: [leader_cluster(g, thr) for g in groups]) for _ in range(args.repeats)
        ]
        t_serial, cpu_serial = min(serial)
        ours = [leader_cluster(g, thr) for g in groups]
        t_par = min(
            _timed(lambda thr=thr: leader_cluster_many(groups, thr, workers=2))[0]
            for _ in range(args.repeats)
        )
        many = leader_cluster_many(groups, thr, workers=2)
        assert all(np.array_equal(a, b) for a, b in zip(ours, many, strict=True)), "parallel != serial"
        t_fb = float("nan")
        if args.fallback and sim.jit_backend() is not None:
            os.environ[sim.NO_JIT_ENV] = "1"
            try:
                t_fb = _timed(lambda thr=thr: leader_cluster_many(groups, thr, workers=2))[0]
                fb = leader_cluster_many(groups, thr, workers=2)
            finally:
                del os.environ[sim.NO_JIT_ENV]
            assert all(np.array_equal(a, b) for a, b in zip(ours, fb, strict=True)), "fallback != compiled"

        deadline = time.perf_counter() + args.naive_budget
        t_pass: list[float] = []
        t_fail: list[float] = []
        checked = 0
        for g, ids in zip(groups, ours, strict=True):
            nids, tp, tf = naive_prefix(g, thr, deadline)
            t_pass += tp
            t_fail += tf
            checked += len(nids)
            assert np.array_equal(np.asarray(nids, dtype=np.int64), ids[: len(nids)]), (
                "assignment differs from naive"
            )
            if len(nids) < len(g):
                break
        n_pass, n_fail = map(sum, zip(*(naive_pair_counts(ids) for ids in ours), strict=True))
        mp = float(np.mean(t_pass)) if t_pass else 0.0
        mf = float(np.mean(t_fail)) if t_fail else mp
        naive_est = n_pass * mp + n_fail * mf
        full = checked == n_obs
        sizes = [len(np.unique(ids)) for ids in ours]
        rows.append(
            (
                thr,
                naive_est,
                full,
                checked,
                n_pass + n_fail,
                t_serial,
                cpu_serial,
                t_par,
                np.mean(sizes),
                t_fb,
            )
        )
        print(
            f"threshold {thr}: clusters/group {np.mean(sizes):.1f}; naive scored {len(t_pass) + len(t_fail)} "
            f"pairs on {checked}/{n_obs} obs (identical assignment asserted), mean {1e3 * mp:.1f} ms/pass-pair "
            f"{1e3 * mf:.1f} ms/fail-pair; full naive needs {n_pass + n_fail} pairs -> "
            f"{'measured' if full else 'EXTRAPOLATED'} {naive_est:.1f} s"
        )
        print(
            f"  ours: serial {t_serial:.3f} s wall / {cpu_serial:.3f} s CPU ({naive_est / t_serial:.0f}x), "
            f"leader_cluster_many(workers=2) "
            f"{t_par:.3f} s ({naive_est / t_par:.0f}x)"
            + (f"; numpy fallback, 2 procs: {t_fb:.3f} s" if t_fb == t_fb else "")
        )

    print(
        "\n| threshold | clusters/group | naive difflib (s) | ours serial wall (s) | ours serial CPU (s) "
        "| ours, 2 workers, wall (s) | speed-up (best wall) | numpy fallback, 2 workers (s) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for thr, est, full, checked, pairs, ts, cs, tp, cl, fb in rows:
        tag = "" if full else f" (extrapolated from {checked} obs; {pairs} pairs)"
        best = min(ts, tp)
        fbs = f"{fb:.3f}" if fb == fb else "-"
        print(
            f"| {thr} | {cl:.1f} | {est:.0f}{tag} | {ts:.3f} | {cs:.3f} | {tp:.3f} | {est / best:.0f}x | {fbs} |"
        )


def _timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


if __name__ == "__main__":
    main()
