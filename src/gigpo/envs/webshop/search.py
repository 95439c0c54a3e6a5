"""BM25 product search (bm25s), indexing what WebShop's Lucene index holds: title, description, first bullet, options."""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from typing import Any

import bm25s
import numpy as np
from bm25s.stopwords import STOPWORDS_EN

#: Results kept per search (WebShop's SEARCH_RETURN_N).
SEARCH_RETURN_N = 50
# bm25s sets its own logger to DEBUG on import, which prints "Building index" lines through any root handler.
logging.getLogger("bm25s").setLevel(logging.WARNING)
_TOKEN = re.compile(r"\w\w+")
_STOP = frozenset(STOPWORDS_EN)  # the 33 words of Lucene's classic English stop set


def _stem(word: str) -> str:
    """Harman's S-stemmer: fold English plurals ("shirts" -> "shirt", "batteries" -> "battery").

    Lucene's English analyzer uses Porter; this lighter rule needs no extra dependency and only conflates plurals.
    """
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens of 2+ characters, stop words dropped, plurals folded."""
    return [_stem(t) for t in _TOKEN.findall(text.lower()) if t not in _STOP]


def document_text(p: dict[str, Any]) -> str:
    """What a product is indexed by, as WebShop builds its Lucene documents. A hard-catalog product with
    ``indexed_options`` False keeps its option values out (they show on its item page only)."""
    shown = p["options"].items() if p.get("indexed_options", True) else ()
    option_text = ", and ".join(f"{name}: {', '.join(values)}" for name, values in shown)
    return " ".join([p["Title"], p["Description"], p["BulletPoints"][0], option_text]).lower()


class SearchIndex:
    """BM25 (Lucene variant, k1=0.9, b=0.4: pyserini's defaults) over the catalog, with a small LRU of queries.

    ``search(query)`` returns the ASINs of at most ``SEARCH_RETURN_N`` products with a positive score, best first;
    ties keep catalog order, so results are deterministic.
    """

    def __init__(self, products: list[dict[str, Any]], cache_size: int = 4096) -> None:
        self._asins = [p["asin"] for p in products]
        self._bm25 = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
        self._bm25.index([tokenize(document_text(p)) for p in products], show_progress=False)
        self._cache: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()  # envs may step in threads; the LRU is shared

    def search(self, query: str) -> tuple[str, ...]:
        key = " ".join(query.lower().split())
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        tokens = tokenize(key)
        if not tokens:
            result: tuple[str, ...] = ()
        else:
            scores = np.asarray(self._bm25.get_scores(tokens), dtype=np.float64)
            order = np.argsort(-scores, kind="stable")[:SEARCH_RETURN_N]
            result = tuple(self._asins[i] for i in order if scores[i] > 0)
        with self._lock:
            self._cache[key] = result
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return result
