"""Exact Ratcliff–Obershelp match counting (difflib, autojunk=False) accelerated by q-gram seeded block finding."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

import numpy as np

from gigpo.algo.similarity.support import codepoints, require

try:  # compiled difflib (same algorithm, C++); verified bit-identical in tests/algo/test_similarity.py
    import cydifflib as _cdl

    _SequenceMatcher = _cdl.SequenceMatcher
except ImportError:  # pragma: no cover - optional extra `gigpo[fast]`
    _SequenceMatcher = difflib.SequenceMatcher

Q = 8  # seed length: blocks >= Q are found from exact q-gram hits, shorter ones by the compiled fallback
_SMALL = 4096  # |a|*|b| below which the compiled matcher is cheaper than numpy set-up
_B_LATIN1 = np.uint64(256)  # q-grams of codepoints < 256 pack injectively into 64 bits (Q == 8)
_B_WIDE = np.uint64(0x100000001B3)  # generic polynomial base; hits are then verified char by char


@dataclass
class Prepared:
    """A text with the arrays the seeded matcher needs (computed once per distinct text)."""

    s: str
    cp: np.ndarray = field(repr=False)  # uint32 codepoints
    h: np.ndarray = field(repr=False)  # uint64 hash of each q-gram, len max(0, n-Q+1)
    hs: np.ndarray = field(repr=False)  # sorted h
    ho: np.ndarray = field(repr=False)  # stable argsort of h (so equal hashes list increasing positions)
    wide: bool = False  # has a codepoint >= 256: q-gram hashes are not injective


def prepare(s: str, cp: np.ndarray | None = None) -> Prepared:
    """Codepoints and sorted q-gram hashes of ``s`` (``cp``: its codepoints if already computed)."""
    if cp is None:
        cp = codepoints(s)
    n = cp.size - Q + 1
    if n <= 0:
        h = np.zeros(0, np.uint64)
        wide = False
    else:
        x = cp.astype(np.uint64)
        wide = int(cp.max()) >= 256
        base = _B_WIDE if wide else _B_LATIN1
        h = x[:n].copy()
        for t in range(1, Q):  # Horner over the window; uint64 arithmetic wraps (mod 2^64) by design
            h = h * base + x[t : t + n]
    ho = np.argsort(h, kind="stable")
    return Prepared(s, cp, h, h[ho], ho, wide)


def _compiled_matches(a: str, b: str) -> int:
    """M = Σ matching-block sizes of difflib.SequenceMatcher(None, a, b, autojunk=False)."""
    return sum(m[2] for m in _SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())


def ro_matches(a: str, b: str) -> int:
    """Exact number M of Ratcliff–Obershelp matched characters; ratio = 2.0*M/(|a|+|b|) (1.0 if both empty)."""
    return decide_matches(prepare(a), prepare(b), None)


def need_matches(threshold: float, total: np.ndarray) -> np.ndarray:
    """Smallest integer m with ``2.0*m/total >= threshold`` (difflib's float formula), elementwise; 0 where total==0.

    Since 2.0*m/T is a correctly rounded division of increasing numerators it is monotone in m, so
    ``ratio >= threshold`` ⇔ ``M >= need`` exactly, with no epsilon.
    """
    t = np.asarray(total, dtype=np.int64)
    tf = np.maximum(t, 1).astype(np.float64)
    m = np.ceil(threshold * tf / 2.0).astype(np.int64)
    # The float guess is off by at most one (relative error ~1e-16 on values <= T): repair both directions.
    m -= (m > 0) & (2.0 * (m - 1) / tf >= threshold)
    m += 2.0 * m / tf < threshold
    return np.where(t == 0, 0, m)


def _seed_runs(a: Prepared, b: Prepared) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Maximal common substrings of length >= Q as (start_i, diag=j-i, length), longest first.

    Every q-gram hit (i, j) lies on exactly one maximal diagonal match; it starts one iff the characters before
    differ (or i or j is 0) and ends one iff the characters after its window differ. Starts and ends sorted by
    (diagonal, i) pair up one to one, so only run boundaries are sorted, never all hits.
    None if hits explode (highly repetitive text): the caller then uses the compiled matcher.
    """
    empty = np.zeros(0, np.int64)
    if a.h.size == 0 or b.h.size == 0:
        return empty, empty, empty
    # Sorted queries into sorted keys: searchsorted walks memory in order (several times faster than raw a.h).
    lo = np.searchsorted(b.hs, a.hs, "left")
    cnt = np.searchsorted(b.hs, a.hs, "right") - lo
    tot = int(cnt.sum())
    la, lb = a.cp.size, b.cp.size
    if tot > 16 * (la + lb) + 256:
        return None
    if tot == 0:
        return empty, empty, empty
    off = np.cumsum(cnt) - cnt
    ii = np.repeat(a.ho, cnt).astype(np.int64)
    jj = b.ho[np.repeat(lo - off, cnt) + np.arange(tot)].astype(np.int64)
    ca, cb = a.cp, b.cp
    if a.wide or b.wide:  # hashes may collide beyond Latin-1: keep only hits whose q-grams really are equal
        ok = np.ones(tot, dtype=bool)
        for t in range(Q):
            ok &= ca[ii + t] == cb[jj + t]
        ii, jj = ii[ok], jj[ok]
    st = (ii == 0) | (jj == 0)
    st[~st] = ca[ii[~st] - 1] != cb[jj[~st] - 1]
    ie, je = ii + Q, jj + Q
    en = (ie >= la) | (je >= lb)
    en[~en] = ca[ie[~en]] != cb[je[~en]]
    la1 = la + 1  # i < la1, so (diagonal, i) packs into one sortable int64 key
    ks = (jj[st] - ii[st] + la) * la1 + ii[st]
    ke = (jj[en] - ii[en] + la) * la1 + ii[en]
    ks.sort()
    ke.sort()
    d = ks // la1 - la
    i0 = ks % la1
    k = ke % la1 - i0 + Q
    o = np.argsort(-k, kind="stable")
    return i0[o], d[o], k[o]


def decide_matches(a: Prepared, b: Prepared, need: int | None) -> int:
    """Exact R-O matched-character count M of (a, b), or with ``need`` a value v such that (v >= need) == (M >= need).

    Follows difflib's recursion exactly: the top block of a rectangle is the longest common substring, ties broken
    by smallest i then smallest j. Every common substring of length >= Q lies inside one maximal seed run, so
    clipping runs to the rectangle gives the exact top block whenever it is >= Q; rectangles whose longest
    block is shorter go to the compiled matcher (sub-problems are independent, so M is additive). With ``need``,
    stop as soon as the found blocks reach it (lower bound) or found + Σ bounds of open rectangles falls short.
    """
    la, lb = a.cp.size, b.cp.size
    if la * lb <= _SMALL or min(la, lb) < 2 * Q:
        return _compiled_matches(a.s, b.s)
    runs = _seed_runs(a, b)
    if runs is None:
        return _compiled_matches(a.s, b.s)
    ri, rd, rk = runs  # longest first
    re = ri + rk
    n_runs = ri.size
    lb1 = lb + 1  # i*lb1 + j orders by (i, j) for blocks inside the rectangle (0 <= j < lb1)
    # big exceeds |i*lb1 + j| for every run, so a longer clipped length always ranks first.
    big = 4 * (la + lb + 2) * (lb + 2)
    found = 0
    # Rectangles carry the indices of runs meeting them once known (None: all runs, scanned longest first).
    stack: list[tuple[int, int, int, int, np.ndarray | None]] = [(0, la, 0, lb, None)]
    open_ub = min(la, lb)  # Σ min(width, height) over rectangles on the stack: M - found <= open_ub
    hard: list[tuple[int, int, int, int, int]] = []  # (alo, ahi, blo, bhi, lower bound) with top block < Q
    hard_lb = 0
    while stack:
        if need is not None:
            if found + hard_lb >= need:
                return found + hard_lb
            if found + open_ub < need:
                return found + open_ub
        alo, ahi, blo, bhi, sub = stack.pop()
        w = min(ahi - alo, bhi - blo)
        k = 0
        child: np.ndarray | None = None
        if sub is None:
            n = 32
            while n_runs:
                # Longest runs first; a run no longer than the best clipped length so far cannot beat it
                # (an equal one could still win the tie on position, hence the strict test).
                n = min(n, n_runs)
                s = np.maximum(np.maximum(ri[:n], alo), blo - rd[:n])
                cl = np.minimum(np.minimum(re[:n], ahi), bhi - rd[:n]) - s
                # One argmin ranks by (longest clipped, then smallest i, then smallest j = i + diag).
                pick = int(np.argmin(s * lb1 + s + rd[:n] - cl * big))
                k = int(cl[pick])
                if n == n_runs:
                    child = np.flatnonzero(cl > 0)
                    break
                if k > rk[n]:
                    break
                n *= 8
            i = int(s[pick]) if n_runs else 0
            j = i + int(rd[pick]) if n_runs else 0
        elif sub.size:
            rd_s = rd[sub]
            s = np.maximum(np.maximum(ri[sub], alo), blo - rd_s)
            cl = np.minimum(np.minimum(re[sub], ahi), bhi - rd_s) - s
            pick = int(np.argmin(s * lb1 + s + rd_s - cl * big))
            k = int(cl[pick])
            child = sub[cl > 0]
            i = int(s[pick])
            j = i + int(rd_s[pick])
        if k < Q:
            hard.append((alo, ahi, blo, bhi, max(k, 0)))
            hard_lb += max(k, 0)
            continue
        open_ub -= w
        found += k
        if alo < i and blo < j:
            stack.append((alo, i, blo, j, child))
            open_ub += min(i - alo, j - blo)
        if i + k < ahi and j + k < bhi:
            stack.append((i + k, ahi, j + k, bhi, child))
            open_ub += min(ahi - i - k, bhi - j - k)
    return _finish_hard(a.s, b.s, found, hard, need)


def _finish_hard(
    a: str, b: str, found: int, hard: list[tuple[int, int, int, int, int]], need: int | None
) -> int:
    """Resolve rectangles without a long block: LCS upper bounds first, then the exact compiled matcher."""
    if need is None:
        return found + sum(_compiled_matches(a[x0:x1], b[y0:y1]) for x0, x1, y0, y1, _ in hard)
    lb = found + sum(h[4] for h in hard)
    if lb >= need:
        return lb
    # M(sub) <= LCS(sub): R-O's blocks form a common subsequence of the sub-strings.
    LCSseq = require("rapidfuzz.distance", 'the numpy "ro" path').LCSseq
    ubs = [int(LCSseq.similarity(a[x0:x1], b[y0:y1])) for x0, x1, y0, y1, _ in hard]
    ub = found + sum(ubs)
    if ub < need:
        return ub
    for (x0, x1, y0, y1, low), u in sorted(zip(hard, ubs, strict=True), key=lambda p: -p[1]):
        m = _compiled_matches(a[x0:x1], b[y0:y1])
        lb += m - low
        ub += m - u
        if lb >= need:
            return lb
        if ub < need:
            return ub
    return lb
