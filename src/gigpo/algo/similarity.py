"""Text-similarity clustering of anchor states (greedy leader clustering over a similarity metric)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import numpy as np


def ro_ratio(a: str, b: str) -> float:
    """Ratcliff–Obershelp ratio 2·M/(|a|+|b|) exactly as ``difflib.SequenceMatcher(None, a, b, autojunk=False)``."""
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def leader_cluster(texts: Sequence[str], threshold: float, metric: str = "ro") -> np.ndarray:
    """Greedy leader clustering in the given order.

    Each text joins the first existing cluster (in creation order) whose leader (first member) scores
    ``>= threshold`` against it, else it leads a new cluster. Returns int64 cluster ids numbered in creation order.
    """
    if metric != "ro":
        raise ValueError(f"unknown similarity metric {metric!r}")
    leaders: list[str] = []
    out = np.empty(len(texts), dtype=np.int64)
    for i, text in enumerate(texts):
        for c, leader in enumerate(leaders):
            if ro_ratio(leader, text) >= threshold:
                out[i] = c
                break
        else:
            out[i] = len(leaders)
            leaders.append(text)
    return out
