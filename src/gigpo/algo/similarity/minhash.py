"""MinHash signatures of word shingles and LSH-banded greedy leader clustering on the estimated Jaccard index."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

NUM_PERM = 128
SHINGLE = 3  # words per shingle
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_C = np.uint64(0x9E3779B97F4A7C15)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a fixed bijective scramble of uint64 (wrapping arithmetic is intended)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def minhash_signatures(
    texts: Sequence[str], num_perm: int = NUM_PERM, shingle: int = SHINGLE, seed: int = 0
) -> np.ndarray:
    """(n, num_perm) uint64 MinHash signatures of the sets of ``shingle``-word shingles (whitespace tokens).

    sig[p] = min over shingles x of h_p(x), h_p(x) = mix64(x XOR s_p) with seeds s_p from ``seed``; then
    P(sig_a[p] == sig_b[p]) ≈ J(a, b) (Jaccard of the shingle sets). Texts with fewer than ``shingle`` words use
    their whole token tuple as one shingle; a text with no token gets the all-ones signature (empty set).
    Deterministic: word hashes are blake2b, never Python's salted ``hash``.
    """
    perm = np.random.default_rng(seed).integers(0, 2**64 - 1, size=num_perm, dtype=np.uint64, endpoint=True)
    word_hash: dict[str, int] = {}
    out = np.full((len(texts), num_perm), np.iinfo(np.uint64).max, dtype=np.uint64)
    for r, text in enumerate(texts):
        words = text.split()
        if not words:
            continue
        ids = []
        for w in words:
            h = word_hash.get(w)
            if h is None:
                h = word_hash[w] = int.from_bytes(
                    hashlib.blake2b(w.encode(), digest_size=8).digest(), "little"
                )
            ids.append(h)
        wh = np.array(ids, dtype=np.uint64)
        n = max(1, wh.size - shingle + 1)
        x = wh[:n].copy()
        for t in range(1, min(shingle, wh.size)):  # order-sensitive combination of consecutive word hashes
            x = _mix(x * _C + wh[t : t + n])
        out[r] = _mix(np.unique(x)[:, None] ^ perm[None, :]).min(axis=0)
    return out


def lsh_rows(threshold: float, num_perm: int = NUM_PERM, max_miss: float = 0.01) -> int:
    """Rows per band r (bands b = num_perm / r): the largest divisor r of num_perm whose probability of missing a
    pair with Jaccard = threshold, (1 - threshold^r)^b, is at most ``max_miss``; 1 if none is."""
    for r in sorted((d for d in range(1, num_perm + 1) if num_perm % d == 0), reverse=True):
        if (1.0 - threshold**r) ** (num_perm // r) <= max_miss:
            return r
    return 1


def minhash_leader_cluster(
    texts: Sequence[str], threshold: float, num_perm: int = NUM_PERM, shingle: int = SHINGLE, seed: int = 0
) -> np.ndarray:
    """Greedy leader clustering on estimated Jaccard Ĵ = mean_p[sig_a[p] == sig_b[p]] >= threshold.

    Approximate by design: Ĵ estimates the Jaccard index of word shingles (std ≈ sqrt(J(1-J)/num_perm)), and a
    leader is only considered when it shares at least one LSH band (``lsh_rows`` rows) with the text, so a pair at
    Ĵ ≈ threshold is missed with probability <= 1%. Among considered leaders the first in creation order with
    Ĵ >= threshold wins. Cost per text is O(bands + candidates·num_perm) instead of O(leaders).
    """
    n = len(texts)
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out
    first: dict[str, int] = {}
    inv = np.empty(n, dtype=np.int64)
    for i, t in enumerate(texts):
        inv[i] = first.setdefault(t, len(first))
    sig = minhash_signatures(list(first), num_perm, shingle, seed)
    r = lsh_rows(threshold, num_perm)
    n_bands = num_perm // r
    buckets: dict[tuple[int, bytes], list[int]] = {}
    leader_rows: list[int] = []
    uniq_cluster = np.empty(len(first), dtype=np.int64)
    need = threshold * num_perm
    for u in range(len(first)):
        keys = [(b, sig[u, b * r : (b + 1) * r].tobytes()) for b in range(n_bands)]
        cands = sorted({c for key in keys for c in buckets.get(key, ())})
        hit = -1
        if cands:
            eq = (sig[[leader_rows[c] for c in cands]] == sig[u]).sum(1)
            ok = np.flatnonzero(eq >= need - 1e-9)
            if ok.size:
                hit = cands[int(ok[0])]
        if hit < 0:
            hit = len(leader_rows)
            leader_rows.append(u)
            for key in keys:
                buckets.setdefault(key, []).append(hit)
        uniq_cluster[u] = hit
    out[:] = uniq_cluster[inv]
    return out
