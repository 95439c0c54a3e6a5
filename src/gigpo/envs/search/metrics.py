"""QA scoring: Search-R1's answer normalisation, exact match, token F1, and per-data-source summaries."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Search-R1 / SQuAD normalisation: lowercase → drop ASCII punctuation → drop a/an/the → collapse spaces.

    The order matters and follows qa_em.py: punctuation goes before articles, so ``"the-end"`` → ``"theend"``
    keeps its letters while ``"The End"`` → ``"end"``.
    """
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _as_list(golds: str | Sequence[str]) -> list[str]:
    return [golds] if isinstance(golds, str) else list(golds)


def exact_match(prediction: str, golds: str | Sequence[str]) -> float:
    """EM = 1 if normalize(prediction) equals normalize(g) for some gold g, else 0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in _as_list(golds)))


def f1_score(prediction: str, golds: str | Sequence[str]) -> float:
    """Token F1 = max over golds of 2·P·R/(P+R) on normalised whitespace tokens (bag overlap).

    When either side normalises to no tokens, F1 is 1 if both do and 0 otherwise (no division by zero).
    """
    pred_tokens = normalize_answer(prediction).split()
    best = 0.0
    for gold in _as_list(golds):
        gold_tokens = normalize_answer(gold).split()
        if not pred_tokens or not gold_tokens:
            best = max(best, float(pred_tokens == gold_tokens))
            continue
        common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
        if common:
            p, r = common / len(pred_tokens), common / len(gold_tokens)
            best = max(best, 2 * p * r / (p + r))
    return best


def summarize_by_source(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Mean EM/F1 per ``data_source`` over finished episodes (one row = one episode's final ``info``).

    Returns ``{source: {"n", "em", "f1"}}`` plus an ``"all"`` entry averaged over episodes (micro average).
    A row missing ``em``/``f1`` (e.g. an episode cut by the turn limit) counts as 0.
    """
    rows = list(rows)
    if not rows:
        return {}
    sources = np.array([str(r.get("data_source", "unknown")) for r in rows])
    em = np.array([float(r.get("em", 0.0)) for r in rows])
    f1 = np.array([float(r.get("f1", 0.0)) for r in rows])
    names, inverse = np.unique(sources, return_inverse=True)
    counts = np.bincount(inverse, minlength=len(names))
    em_mean = np.bincount(inverse, weights=em, minlength=len(names)) / counts
    f1_mean = np.bincount(inverse, weights=f1, minlength=len(names)) / counts
    out = {
        str(n): {"n": float(c), "em": float(e), "f1": float(f)}
        for n, c, e, f in zip(names, counts, em_mean, f1_mean, strict=True)
    }
    out["all"] = {"n": float(len(rows)), "em": float(em.mean()), "f1": float(f1.mean())}
    return out


def format_source_table(summary: Mapping[str, Mapping[str, float]], title: str = "") -> str:
    """A fixed-width table ``data_source | n | EM | F1`` with ``all`` last."""
    names = sorted(k for k in summary if k != "all") + (["all"] if "all" in summary else [])
    width = max([len("data_source"), *(len(n) for n in names)])
    lines = [title] if title else []
    lines.append(f"{'data_source':<{width}}  {'n':>6}  {'EM':>6}  {'F1':>6}")
    for n in names:
        s = summary[n]
        lines.append(f"{n:<{width}}  {int(s['n']):>6d}  {s['em']:>6.3f}  {s['f1']:>6.3f}")
    return "\n".join(lines)
