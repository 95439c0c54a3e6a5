"""What ``compat="verl-agent"`` needs beyond numerics: the official code's anchor keys and similarity grouping.

Reproduced from the behaviour of verl-agent's ``gigpo/core_gigpo.py`` (``to_hashable``, ``are_similar``,
``build_step_group``), not from its code. The similarity part walks rows in Python on purpose: it is a
reproduction of a per-row greedy loop whose result depends on the order of the rows, so it cannot be vectorised
without changing what it computes. The default (non-compat) grouping lives in ``gigpo.algo.grouping``.
"""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np

from gigpo.algo.ids import as_object_list, factorize_keys


def official_anchor_key(x: Any) -> Any:
    """The hashable key the official exact grouping uses for an anchor (its ``to_hashable``).

    dict -> tuple of its items sorted by key (values converted recursively); list / tuple -> tuple of converted
    elements; numpy array -> tuple of its flattened elements; numpy scalar -> Python scalar; anything else as is.
    (The official code raises ``TypeError`` for types outside int/float/str/bool/numpy/list/tuple/dict, e.g.
    ``None``; here any other hashable is its own key, and an unhashable one is rejected by the caller.)
    """
    if isinstance(x, dict):
        return tuple(sorted((k, official_anchor_key(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return tuple(official_anchor_key(e) for e in x)
    if isinstance(x, np.ndarray):
        return tuple(official_anchor_key(e) for e in x.reshape(-1).tolist())
    if isinstance(x, np.generic):
        return x.item()
    return x


def official_anchor_codes(anchors: Any) -> tuple[np.ndarray, int]:
    """``factorize_keys`` of the anchors after ``official_anchor_key`` (so dict / list anchors are accepted).

    Hashable anchors already compare as the official keys do (a tuple equals the tuple of its converted
    elements; a numpy scalar equals its Python value), so they skip the per-row conversion.
    """
    try:
        return factorize_keys(anchors, "anchors")
    except ValueError as err:
        if "hashable" not in str(err):
            raise
    return factorize_keys([official_anchor_key(a) for a in as_object_list(anchors, "anchors")], "anchors")


def official_ratio(new_text: str, leader_text: str) -> float:
    """The official similarity score: ``difflib.SequenceMatcher(None, new_text, leader_text).ratio()``.

    Argument order matters (R-O breaks ties between equally long blocks by position in the first string):
    ``official_ratio("baaab", "abab")`` = 2/3 but ``official_ratio("abab", "baaab")`` = 4/9. ``autojunk`` is
    difflib's default (True): for a ``leader_text`` of 200+ characters, characters making up more than 1% of it
    do not seed matches, which lowers the ratio of long texts.
    """
    return difflib.SequenceMatcher(None, new_text, leader_text).ratio()


def official_leader_cluster(texts: list[str], threshold: float) -> np.ndarray:
    """Greedy leader clustering exactly as the official similarity grouping, rows in the given order.

    Each text joins the first cluster, in creation order, with ``official_ratio(text, leader) >= threshold``,
    else it leads a new cluster. Returns int64 cluster ids in creation order. Two shortcuts keep every decision
    identical: difflib's ``real_quick_ratio() >= quick_ratio() >= ratio()`` bounds skip leaders that cannot pass
    (same numerator order, same float formula), and a repeated text reuses its first decision — valid because
    leaders are only appended, so the leaders it was tested against are unchanged (a text that founded a cluster
    reuses it only if it passes against itself).
    """
    matchers: list[difflib.SequenceMatcher] = []  # one per leader: seq2 = leader text, so b2j is built once
    decided: dict[str, int] = {}
    out = np.empty(len(texts), dtype=np.int64)
    for pos, text in enumerate(texts):
        cluster = decided.get(text)
        if cluster is None:
            cluster = _first_passing_leader(matchers, text, threshold)
            if cluster == len(matchers):
                matchers.append(difflib.SequenceMatcher(None, text, text))
                if matchers[-1].ratio() >= threshold:
                    decided[text] = cluster
            else:
                decided[text] = cluster
        out[pos] = cluster
    return out


def _first_passing_leader(matchers: list[difflib.SequenceMatcher], text: str, threshold: float) -> int:
    for k, m in enumerate(matchers):
        m.set_seq1(text)
        if m.real_quick_ratio() >= threshold and m.quick_ratio() >= threshold and m.ratio() >= threshold:
            return k
    return len(matchers)


def official_similarity_groups(gcodes: np.ndarray, texts: list[str], threshold: float) -> np.ndarray:
    """Step-group labels of the official similarity grouping: per episode group, rows in *batch* order.

    ``gcodes`` are the episode-group codes per row; labels are unique across groups (only their equality
    matters). The result depends on the order of the rows, as the official one does.
    """
    n = gcodes.size
    labels = np.empty(n, dtype=np.int64)
    if n == 0:
        return labels
    order = np.argsort(gcodes, kind="stable")  # each group's rows keep their batch order
    bounds = np.flatnonzero(np.diff(gcodes[order])) + 1
    offset = 0
    for rows in np.split(order, bounds):  # one iteration per episode group
        ids = official_leader_cluster([texts[i] for i in rows.tolist()], threshold)
        labels[rows] = ids + offset
        offset += int(ids.max()) + 1
    return labels
