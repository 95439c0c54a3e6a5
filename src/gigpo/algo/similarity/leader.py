"""Greedy leader clustering for the "ro" and "indel" metrics, with exact pair-skipping upper bounds."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gigpo.algo.similarity.ro import Prepared, decide_matches, need_matches, prepare
from gigpo.algo.similarity.support import codepoints, require

# This module is imported only for the "indel" metric and the numpy "ro" path, which both need rapidfuzz.
Indel = require("rapidfuzz.distance", 'the "indel" metric and the numpy "ro" path').Indel
cdist = require("rapidfuzz.process", 'the "indel" metric and the numpy "ro" path').cdist

_NB = (
    128  # character buckets (codepoint % 128): exact counts for ASCII, merged (still a valid bound) otherwise
)
_INDEL_EPS = 1e-9  # rapidfuzz's normalized score is 1 - dist/T in floats: skip only with this margin


class _Leaders:
    """Leaders of one clustering run plus the per-leader data the bounds need (grown by doubling)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.prep: list[Prepared | None] = []
        self.cps: list[np.ndarray] = []
        cap = 16
        self.lens = np.zeros(cap, np.int64)
        self.counts = np.zeros((cap, _NB), np.int64)
        self.dist = np.zeros((cap, cap), np.int64)  # Indel distance |a|+|b|-2·LCS between leaders (a metric)

    def __len__(self) -> int:
        return len(self.texts)

    def add(self, text: str, cp: np.ndarray, counts: np.ndarray) -> None:
        k = len(self.texts)
        if k == self.lens.size:
            cap = 2 * k
            self.lens = np.resize(self.lens, cap)
            self.counts = np.concatenate([self.counts, np.zeros_like(self.counts)])
            dist = np.zeros((cap, cap), np.int64)
            dist[:k, :k] = self.dist
            self.dist = dist
        if k:
            row = cdist([text], self.texts, scorer=Indel.distance, dtype=np.int64)[0]
            self.dist[k, :k] = row
            self.dist[:k, k] = row
        self.texts.append(text)
        self.prep.append(None)
        self.cps.append(cp)
        self.lens[k] = len(text)
        self.counts[k] = counts

    def prepared(self, k: int) -> Prepared:
        p = self.prep[k]
        if p is None:
            p = self.prep[k] = prepare(self.texts[k], self.cps[k])
        return p


def leader_cluster_text(texts: Sequence[str], threshold: float, metric: str) -> np.ndarray:
    """Greedy leader clustering of distinct-or-not strings under "ro" or "indel" (see similarity.leader_cluster).

    For each distinct text (first-occurrence order) and each leader in creation order, an upper bound U >= LCS >= M
    is checked first: U = min(|a|, |b|, Σ_c min(n_a(c), n_b(c)), (|a|+|b|-|d(t,p)-d(p,a)|)/2) where d is the Indel
    metric and p a pivot leader (triangle inequality); LCS itself comes next, the exact decision last. The first
    leader that passes the exact test wins, so bounds only skip, never reorder.
    """
    out = np.empty(len(texts), dtype=np.int64)
    seen: dict[str, int] = {}
    lead = _Leaders()
    for pos, t in enumerate(texts):
        c = seen.get(t)
        if c is None:  # identical texts score 1.0 >= threshold with their own leader: same assignment
            c = seen[t] = _assign(lead, t, threshold, metric)
        out[pos] = c
    return out


def _assign(lead: _Leaders, t: str, threshold: float, metric: str) -> int:
    """Cluster id for ``t``: index of the first passing leader, else a new leader."""
    cp = codepoints(t)
    counts = np.bincount(cp % _NB, minlength=_NB).astype(np.int64) if cp.size else np.zeros(_NB, np.int64)
    k_all = len(lead)
    if k_all:
        lt = cp.size
        lens = lead.lens[:k_all]
        total = lens + lt
        ub = np.minimum(np.minimum(lens, lt), np.minimum(lead.counts[:k_all], counts).sum(1))
        if metric == "ro":
            need = need_matches(threshold, total)
            alive = ub >= need
        else:
            need = np.zeros(k_all, np.int64)
            alive = 2.0 * ub / np.maximum(total, 1) >= threshold - _INDEL_EPS
        piv = -1
        if np.count_nonzero(alive) > 1:
            # Pivot: the alive leader closest in character counts (that L1 is itself a lower bound on Indel).
            l1 = np.abs(lead.counts[:k_all] - counts).sum(1) + np.where(alive, 0, 1 << 40)
            piv = int(np.argmin(l1))
            d = int(Indel.distance(lead.texts[piv], t))
            lcs_ub = (total - np.abs(lead.dist[piv, :k_all] - d)) // 2
            ub = np.minimum(ub, lcs_ub)
            if metric == "ro":
                alive = ub >= need
            else:
                alive = 2.0 * ub / np.maximum(total, 1) >= threshold - _INDEL_EPS
        pt: Prepared | None = None
        for k in np.flatnonzero(alive).tolist():
            if metric == "indel":
                if Indel.normalized_similarity(lead.texts[k], t) >= threshold:
                    return k
                continue
            nk = int(need[k])
            # LCS >= nk  <=>  Indel distance <= T - 2·nk. (rapidfuzz 3.14's LCSseq.similarity(score_cutoff=c)
            # returns 0 for some pairs whose LCS is exactly c, so the cutoff goes through Indel.distance.)
            max_d = int(total[k]) - 2 * nk
            if k != piv and Indel.distance(lead.texts[k], t, score_cutoff=max_d) > max_d:
                continue
            # Argument order matters: R-O breaks ties by position in the first string (the leader, as in naive).
            if pt is None:
                pt = prepare(t, cp)
            if decide_matches(lead.prepared(k), pt, nk) >= nk:
                return k
    lead.add(t, cp, counts)
    return k_all
