"""Hash tables of q-grams for the compiled R-O core: a leader is indexed once, a text's q-grams are looked up.

Q-gram hashes are polynomial (mod 2^64): equal strings get equal hashes, and a collision can only produce a hit
that extends to fewer than Q characters, which ``seed_runs`` drops. Trigram codes pack three 21-bit codepoints, so
they are exact. See similarity.jit for how the runs are used.
"""

from __future__ import annotations

import numpy as np
from numba import njit

Q = 8
STRIDE = 4  # q-grams of the text looked up: every STRIDE-th (runs of length >= LONG are still all found)
LONG = Q + STRIDE - 1
_BASE = np.uint64(0x100000001B3)  # polynomial q-gram hash, wrapping mod 2^64; equal strings → equal hashes
_MIX = np.uint64(0xFF51AFD7ED558CCD)  # murmur3 finaliser constant: spreads hashes over table slots
_S33 = np.uint64(33)
_HIT_BUDGET = 32  # hits per character of the pair beyond which the seeded path gives up (repetitive text)


@njit(cache=True)
def qgram_hashes(s):
    n = s.size - Q + 1
    if n <= 0:
        return np.zeros(0, np.uint64)
    out = np.empty(n, np.uint64)
    for j in range(n):
        h = np.uint64(0)
        for t in range(Q):
            h = h * _BASE + np.uint64(s[j + t])
        out[j] = h
    return out


@njit(cache=True)
def slot(h, shift):
    x = h ^ (h >> _S33)
    x = x * _MIX
    x = x ^ (x >> _S33)
    return np.int64(x >> shift)


@njit(cache=True)
def table_bits(nq):
    bits = 4
    while (1 << bits) < 2 * nq:
        bits += 1
    return bits


@njit(cache=True)
def build_index(hs, keys, head, nxt):
    """Open-addressing table q-gram hash → first position; ``nxt`` chains equal-hash positions in increasing order."""
    size = keys.size
    shift = np.uint64(64 - table_bits(hs.size))
    for i in range(hs.size - 1, -1, -1):
        h = hs[i]
        s = slot(h, shift)
        while head[s] != -1 and keys[s] != h:
            s = (s + 1) & (size - 1)
        keys[s] = h
        nxt[i] = head[s]
        head[s] = i


@njit(cache=True)
def seed_runs(a, b, hb, keys, head, nxt, runs):
    """Maximal common runs that hold a q-gram of b starting at a multiple of STRIDE, as rows (i, j, k) of ``runs``.

    Every maximal run of length >= LONG = Q + STRIDE - 1 holds such a q-gram, so all of those are found (shorter
    ones may be). A hit (i, j) records its run only if j is the run's first sampled q-gram (fewer than STRIDE equal
    characters before it), so each run appears once. Returns the count, or -1 if hits explode (repetitive text).
    """
    na, nb = a.size, b.size
    size = keys.size
    shift = np.uint64(64 - table_bits(na - Q + 1))
    budget = _HIT_BUDGET * (na + nb) // STRIDE + 256
    hits = 0
    n = 0
    for j in range(0, hb.size, STRIDE):
        h = hb[j]
        s = slot(h, shift)
        while head[s] != -1 and keys[s] != h:
            s = (s + 1) & (size - 1)
        i = head[s]
        while i != -1:
            hits += 1
            back = 0
            while back < STRIDE and back < i and back < j and a[i - back - 1] == b[j - back - 1]:
                back += 1
            if back < STRIDE:
                k = 0
                while i + k < na and j + k < nb and a[i + k] == b[j + k]:
                    k += 1
                if k >= Q:  # else a hash collision
                    if n == runs.shape[0]:
                        return -1  # cannot happen (runs start on distinct text positions), kept as a guard
                    runs[n, 0] = i - back
                    runs[n, 1] = j - back
                    runs[n, 2] = k + back
                    n += 1
            i = nxt[i]
        if hits > budget:
            return -1
    return n


@njit(cache=True)
def trigram_codes(s, out):
    """Exact codes of the 3-grams of ``s`` (three 21-bit codepoints packed) into ``out[:len(s)-2]``."""
    for j in range(s.size - 2):
        out[j] = (
            (np.uint64(s[j]) << np.uint64(42)) | (np.uint64(s[j + 1]) << np.uint64(21)) | np.uint64(s[j + 2])
        )


@njit(cache=True)
def log2(size):
    bits = 0
    while (1 << bits) < size:
        bits += 1
    return bits


@njit(cache=True)
def table_sizes(n):
    """Slots of a text's q-gram table and of its trigram table."""
    return 1 << table_bits(max(n - Q + 1, 0)), 1 << table_bits(max(n - 2, 0))


@njit(cache=True)
def index_leader(s, hs, keys, head, nxt, nxt3, scratch):
    """Build both tables of leader ``s`` into ``keys``/``head`` (q-gram table first, then the trigram table)."""
    size8, size3 = table_sizes(s.size)
    build_index(hs, keys[:size8], head[:size8], nxt)
    trigram_codes(s, scratch)
    build_index(scratch[: max(s.size - 2, 0)], keys[size8 : size8 + size3], head[size8 : size8 + size3], nxt3)
