"""Bounds and block searches for the compiled R-O core's "hard" rectangles (longest block shorter than LONG).

Upper bounds on the R-O match count M of a rectangle: the character-multiset overlap and the LCS (M <= LCS
because R-O's blocks form a common subsequence), both on characters bucketed by ``c & 255`` (merging characters
only adds matches, so they stay upper bounds). Exact top blocks: difflib's find_longest_match, on characters or
on the leader's trigram index.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gigpo.algo.similarity.jit_index import log2, slot

_NB = 256  # multiset / LCS character buckets


@njit(cache=True)
def multiset_ub(a, alo, ahi, b, blo, bhi, ca, cb):
    """min(w, h, Σ_bucket min(count_a, count_b)) for the rectangle: an upper bound on its LCS, hence on M."""
    w, h = ahi - alo, bhi - blo
    m = min(w, h)
    if m <= 0:
        return 0
    ca[:] = 0
    cb[:] = 0
    for i in range(alo, ahi):
        ca[a[i] & 255] += 1
    for j in range(blo, bhi):
        cb[b[j] & 255] += 1
    tot = 0
    for c in range(_NB):
        tot += min(ca[c], cb[c])
    return min(m, tot)


@njit(cache=True)
def popcount(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(cache=True)
def lcs_ub(a, alo, ahi, b, blo, bhi, pm, present, v):
    """LCS of the rectangle's strings with characters bucketed by ``c & 255`` (bit-parallel, Hyyrö 2004).

    Bucketing only adds matches, so this is >= the true LCS >= the R-O count M of the rectangle (R-O's blocks
    form a common subsequence). Cost ceil(w/64)·h word operations.
    """
    w = ahi - alo
    n_words = (w + 63) >> 6
    for x in range(w):
        c = a[alo + x] & 255
        if not present[c]:
            present[c] = True
            pm[c, :n_words] = 0
        pm[c, x >> 6] |= np.uint64(1) << np.uint64(x & 63)
    v[:n_words] = ~np.uint64(0)
    one = np.uint64(1)
    for y in range(blo, bhi):
        c = b[y] & 255
        if not present[c]:  # no match in this row: V is unchanged
            continue
        carry = np.uint64(0)
        for k in range(n_words):
            x = v[k]
            m = pm[c, k]
            u = x & m
            s = x + u
            c1 = s < x
            s2 = s + carry
            c2 = s2 < s
            carry = one if (c1 or c2) else np.uint64(0)
            v[k] = s2 | (x & ~m)
    total = 0
    for k in range(n_words):
        zeros = ~v[k]
        if k == n_words - 1 and (w & 63):
            zeros &= (one << np.uint64(w & 63)) - one
        total += popcount(zeros)
    for x in range(w):
        present[a[alo + x] & 255] = False
    return total


@njit(cache=True)
def longest_match(a, alo, ahi, blo, bhi, bo, rlo, rhi, lens, stamps, stamp):
    """difflib's find_longest_match (no junk): (i, j, k, next stamp); ties → smallest i, then smallest j."""
    best_i, best_j, best_k = alo, blo, 0
    prev, cur = 0, 1
    for i in range(alo, ahi):
        lo, hi = rlo[i], rhi[i]
        while lo < hi:  # first position >= blo among b's positions of the character a[i]
            mid = (lo + hi) >> 1
            if bo[mid] < blo:
                lo = mid + 1
            else:
                hi = mid
        for p in range(lo, rhi[i]):
            j = bo[p]
            if j >= bhi:
                break
            k = 1
            if j > blo and stamps[prev, j - 1] == stamp - 1:
                k = lens[prev, j - 1] + 1
            lens[cur, j] = k
            stamps[cur, j] = stamp
            if k > best_k:
                best_i, best_j, best_k = i - k + 1, j - k + 1, k
        prev, cur = cur, prev
        stamp += 1
    return best_i, best_j, best_k, stamp + 2


@njit(cache=True)
def longest_match3(b3, alo, ahi, blo, bhi, keys3, head3, nxt3, lens, stamps, stamp):
    """find_longest_match for rectangles whose longest block is >= 3, through a's trigram index: (i, j, k, stamp).

    A common substring of length K >= 3 is a diagonal run of K-2 equal trigrams, so difflib's j2len recursion run
    on trigram matches (rows j of b, columns i of a) gives every maximal block inside the rectangle; ties go to the
    smallest i, then the smallest j, as in difflib. k == 0 means the longest block is shorter than 3.
    """
    best_i, best_j, best_k = alo, blo, 0
    size = keys3.size
    shift = np.uint64(64 - log2(size))
    prev, cur = 0, 1
    for j in range(blo, bhi - 2):
        h = b3[j]
        s = slot(h, shift)
        while head3[s] != -1 and keys3[s] != h:
            s = (s + 1) & (size - 1)
        i = head3[s]
        while i != -1 and i < alo:
            i = nxt3[i]
        while i != -1 and i <= ahi - 3:
            k = 1
            if i > alo and stamps[prev, i - 1] == stamp - 1:
                k = lens[prev, i - 1] + 1
            lens[cur, i] = k
            stamps[cur, i] = stamp
            si, sj = i - k + 1, j - k + 1
            if k > best_k or (k == best_k and (si < best_i or (si == best_i and sj < best_j))):
                best_i, best_j, best_k = si, sj, k
            i = nxt3[i]
        prev, cur = cur, prev
        stamp += 1
    return best_i, best_j, (best_k + 2 if best_k else 0), stamp + 2


@njit(cache=True)
def set_b2j(b, bo, bsorted, tmp):
    """difflib's b2j as arrays: ``bo`` = b's positions stably sorted by codepoint (LSD radix, 8 bits a pass),
    ``bsorted`` = the codepoints in that order; ``tmp`` is scratch of the same length."""
    n = b.size
    for p in range(n):
        bo[p] = p
    top = 0
    for p in range(n):
        top = max(top, np.int64(b[p]))
    shift = 0
    cnt = np.empty(257, np.int64)
    while True:
        cnt[:] = 0
        for p in range(n):
            cnt[((np.int64(b[bo[p]]) >> shift) & 255) + 1] += 1
        for c in range(256):
            cnt[c + 1] += cnt[c]
        for p in range(n):
            d = (np.int64(b[bo[p]]) >> shift) & 255
            tmp[cnt[d]] = bo[p]
            cnt[d] += 1
        for p in range(n):
            bo[p] = tmp[p]
        shift += 8
        if (top >> shift) == 0:
            break
    for p in range(n):
        bsorted[p] = b[bo[p]]
