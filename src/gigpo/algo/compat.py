"""The verl-agent reproduction: GiGPO / GRPO / RLOO with the official code's numerics, as one function
(:func:`verl_agent_advantages`, registered as estimator ``verl-agent`` in :mod:`gigpo.algo.estimators.verl_agent`)
over the same pipeline as :func:`gigpo.algo.compute_advantages`, with the official rules for the episode term and
the step groups passed in: its anchor keys and similarity grouping, its statistics over step rows, its one-row
groups, its invalid-action penalty.

Reproduced from the behaviour of verl-agent's ``gigpo/core_gigpo.py`` (``to_hashable``, ``are_similar``,
``build_step_group``), not from its code. The similarity part walks rows in Python on purpose: it is a
reproduction of a per-row greedy loop whose result depends on the order of the rows, so it cannot be vectorised
without changing what it computes. The default (non-compat) grouping lives in ``gigpo.algo.grouping``.
"""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np

from gigpo.algo.advantages import (
    AdvantageOutput,
    Rows,
    check_len,
    check_options,
    group_advantages,
    group_normalize,
)
from gigpo.algo.grouping import GroupingSpec, check_texts
from gigpo.algo.ids import as_numpy, as_object_list, factorize_keys, pair_codes
from gigpo.algo.returns import as_rewards


def verl_agent_advantages(
    group_ids: Any,
    traj_ids: Any,
    steps: Any,
    rewards: Any,
    anchors: Any = None,
    estimator: str = "gigpo",
    episode_estimator: str = "grpo",
    gamma: float = 0.95,
    step_weight: float = 1.0,
    normalize: str = "mean_std",
    grouping: GroupingSpec | None = None,
    eps: float = 1e-6,
    *,
    row_penalty: Any = None,
    std_ddof: int = 1,
) -> AdvantageOutput:
    """:func:`gigpo.algo.compute_advantages` as the official GiGPO code computes it (docs/library.md, the compat
    table): episode statistics over *step rows* (a trajectory weighs as many times as it has steps), ddof 1 in
    both terms (``std_ddof`` must stay 1), an episode group of exactly one row keeps its raw score R(τ)/(1 + eps)
    ("mean_std") or R(τ) ("mean"), exact anchors keyed as its ``to_hashable`` (dict / list anchors accepted), and
    its similarity grouping (rows in batch order, score ``SequenceMatcher(None, new_text, leader)`` with
    autojunk) — which makes the result depend on row order. ``row_penalty`` reproduces its invalid-action
    penalty, applied after discounting: the row's episode score becomes R(τ) − p and its step return R_t − p (pass
    un-penalised ``rewards`` then)."""
    check_options(estimator, episode_estimator, normalize, grouping, eps, step_weight, std_ddof)
    if std_ddof != 1:
        raise ValueError('compat="verl-agent" uses torch.std (std_ddof=1); std_ddof=0 contradicts it')
    if grouping is not None and grouping.metric != "ro":
        raise ValueError(f'compat="verl-agent" reproduces the official difflib score; grouping.metric must be '
                         f'"ro", got {grouping.metric!r}')
    penalty = None
    if row_penalty is not None:
        penalty = as_rewards(row_penalty, None)
        check_len("row_penalty", penalty.shape[0], as_numpy(group_ids).shape[0])

    def episode_term(rows: Rows, traj_return: np.ndarray, *, loo: bool, normalize: str, eps: float,
                     std_ddof: int) -> np.ndarray:
        """A_E over the group's step rows; a group of one row keeps its raw score (official rule: mean := 0,
        std := 1)."""
        score = traj_return[rows.index.tcodes]
        if penalty is not None:
            score = score - penalty
        ep_adv = group_normalize(score, rows.gcodes, rows.n_groups, normalize=normalize, eps=eps,
                                 std_ddof=std_ddof, leave_one_out=loo)
        lone = np.bincount(rows.gcodes, minlength=rows.n_groups)[rows.gcodes] == 1
        ep_adv[lone] = score[lone] / (1.0 + eps) if normalize == "mean_std" else score[lone]
        return ep_adv

    def step_labels(rows: Rows, anchors: Any) -> np.ndarray:
        if grouping is None:
            acodes, n_anchor = official_anchor_codes(anchors)
            return pair_codes(acodes, n_anchor, rows.gcodes, rows.n_groups)[0]
        texts = as_object_list(anchors, "anchors")
        check_texts(texts)
        return official_similarity_groups(rows.gcodes, texts, grouping.threshold)

    return group_advantages(
        group_ids, traj_ids, steps, rewards, anchors, estimator=estimator, episode_estimator=episode_estimator,
        gamma=gamma, step_weight=step_weight, normalize=normalize, eps=eps, std_ddof=std_ddof,
        episode_term=episode_term, step_labels=step_labels, step_return_offset=penalty,
    )


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
