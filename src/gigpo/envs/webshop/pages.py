"""Page state, WebShop's [SEP]-joined text rendering of each page, and each page's clickables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Products per results page (WebShop's PRODUCT_WINDOW).
PRODUCT_WINDOW = 10
SEP = " [SEP] "
BACK_TO_SEARCH = "Back to Search"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BUY_NOW = "Buy Now"
SUB_PAGES = ("Description", "Features", "Reviews")


@dataclass(frozen=True)
class PageState:
    """Everything that identifies what the agent sees (the env's ``state_key`` is ``astuple`` of this).

    kind: "search" | "results" | "item" | "description" | "features" | "reviews" | "done".
    query: the last search's keywords ("" before any search); page: results page number (1-based);
    asin: the open product; options: chosen (name, value) pairs, sorted by name.
    """

    kind: str = "search"
    query: str = ""
    page: int = 1
    asin: str = ""
    options: tuple[tuple[str, str], ...] = ()

    def key(self) -> tuple[str, str, int, str, tuple[tuple[str, str], ...]]:
        return (self.kind, self.query, self.page, self.asin, self.options)


def num_pages(total: int) -> int:
    return max(1, -(-total // PRODUCT_WINDOW))


def clickables(state: PageState, results: tuple[str, ...], product: dict[str, Any] | None) -> list[str]:
    """Lower-cased button texts, product links (ASINs) and option values on the page, in page order.

    As in WebShop, the search page's only button is "search", which is not clickable (use ``search[...]``).
    "< Prev" shows on results pages after the first; "Next >" only while a further page exists.
    """
    k = state.kind
    if k == "search":
        return ["search"]
    if k == "done":
        return []
    out = [BACK_TO_SEARCH.lower()]
    if k == "results":
        if state.page > 1:
            out.append(PREV_PAGE.lower())
        if state.page < num_pages(len(results)):
            out.append(NEXT_PAGE.lower())
        start = (state.page - 1) * PRODUCT_WINDOW
        out.extend(a.lower() for a in results[start : start + PRODUCT_WINDOW])
        return out
    out.append(PREV_PAGE.lower())
    if k == "item" and product is not None:
        for values in product["options"].values():
            out.extend(values)
        out.extend(s.lower() for s in SUB_PAGES)
        out.append(BUY_NOW.lower())
    return out


def render(
    state: PageState,
    instruction: str,
    results: tuple[str, ...],
    by_asin: dict[str, dict[str, Any]],
    score: float | None = None,
) -> str:
    """The page as WebShop's "text" observation mode shows it: visible texts joined with ``" [SEP] "``."""
    k = state.kind
    if k == "search":
        return SEP.join(["WebShop", "Instruction:", instruction, "Search"])
    if k == "done":
        return SEP.join(["Thank you for shopping with us!", "Your score (min 0.0, max 1.0)", f"{score}"])
    parts = ["Instruction:", instruction, BACK_TO_SEARCH]
    if k == "results":
        parts.append(f"Page {state.page} (Total results: {len(results)})")
        if state.page > 1:
            parts.append(PREV_PAGE)
        if state.page < num_pages(len(results)):
            parts.append(NEXT_PAGE)
        start = (state.page - 1) * PRODUCT_WINDOW
        for asin in results[start : start + PRODUCT_WINDOW]:
            p = by_asin[asin]
            parts.extend([asin, p["Title"], p["Price"]])
        return SEP.join(parts)
    p = by_asin[state.asin]
    parts.append(PREV_PAGE)
    if k == "item":
        for name, values in p["options"].items():
            parts.append(name)
            parts.extend(values)
        parts.extend([p["Title"], f"Price: {p['Price']}", f"Rating: {p['Rating']}", *SUB_PAGES, BUY_NOW])
    elif k == "description":
        parts.append(p["Description"])
    elif k == "features":
        parts.extend(p["BulletPoints"])
    elif k == "reviews":
        for r in p["Reviews"]:
            parts.extend([f'"{r["title"]}"', str(r["score"]), r["body"]])
    return SEP.join(parts)
