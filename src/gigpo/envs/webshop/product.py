"""One generated product record in WebShop's field names, shared by the easy and hard catalog generators."""

from __future__ import annotations

import random
from typing import Any

from gigpo.envs.webshop.vocab import REVIEW_TITLES


def draw_reviews(rng: random.Random, ptype: str, attrs: list[str]) -> tuple[list[dict], str]:
    """1–3 reviews and their mean score as WebShop's ``Rating`` string (shared by both difficulties)."""
    reviews = []
    for _ in range(rng.randint(1, 3)):
        head, score = rng.choice(REVIEW_TITLES)
        reviews.append(
            {"title": head, "score": score, "body": f"{head.lower()}; the {ptype} is {rng.choice(attrs)}."}
        )
    return reviews, f"{sum(r['score'] for r in reviews) / len(reviews):.1f}"


def product_record(*, asin, cat, sub, ptype, title, nouns, description, bullets, attrs, options, pricing,
                   price_tag, price, reviews, rating, material, audience, **extra: Any) -> dict:
    """One product in WebShop's field names (key order fixed: cached catalogs depend on it); ``extra`` fields of
    a difficulty (e.g. hard's ``indexed_options``) come last."""
    return {
        "asin": asin, "category": cat.key, "query": sub.query,
        "product_category": f"{cat.root} › {sub.path} › {ptype.title()}",
        "Title": title, "type_word": ptype, "title_nouns": nouns, "Description": description,
        "BulletPoints": bullets, "Attributes": attrs, "options": options, "pricing": pricing,
        "Price": price_tag, "price": price, "Reviews": reviews, "Rating": rating,
        "material": material, "audience": audience, **extra,
    }
