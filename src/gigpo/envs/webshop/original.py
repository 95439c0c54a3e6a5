"""WebShop's own data (the 1.18M-product crawl or its 1,000-product subset) as a catalog for the same env.

Nothing is downloaded: point ``data_dir`` (or the ``GIGPO_WEBSHOP_DATA`` environment variable) at the folder
WebShop's ``setup.sh`` fills (``setup.sh -d small`` for the 1k subset, ``-d all`` for everything). Files read:

- ``items_shuffle_1000.json`` or ``items_shuffle.json``: a JSON list of products with ``asin``, ``category``,
  ``query``, ``name``, ``product_category``, ``full_description``, ``small_description`` (a bullet list or one
  string), ``pricing`` (``"$12.99"``, ``"$10.00 - $20.00"``, or empty) and ``customization_options``
  (``{name: [{"value": ..., "image": ...}, ...]}``);
- ``items_ins_v2_1000.json`` or ``items_ins_v2.json``: ``{asin: {"attributes": [...], ...}}``;
- ``items_human_ins.json``: the human-written goals, ``{asin: [{"instruction", "instruction_attributes",
  "instruction_options"}, ...]}``;
- ``reviews.json`` (optional): ``[{"asin", "reviews": [{"stars"|"score", "review"|"body", ...}], "average_rating"}]``.

Conversion follows WebShop's ``load_products`` and ``get_human_goals``: products with an ``asin`` of "nan" or
longer than 10 characters and repeated ASINs are skipped; the price text is parsed by keeping digits and dots
after each ``$`` (no price → $100.0); option names are lower-cased and values lower-cased with "/" → " | ";
products without attributes get ``["DUMMY_ATTR"]``; goals without attributes are skipped; the budget is WebShop's
rule (two of the first four $10-grid prices above the product's price, the larger one; none if fewer than two).
Where WebShop draws from Python's global random state (a range price's actual price, the budget, the goal
shuffle), we draw from ``random.Random(seed)`` in a fixed order, so the values differ from a WebShop server's but
are reproducible. Splits follow the text-env baselines: after the shuffle the first 500 goals are ``test``, the
rest ``train``.

Product type (WebShop's ``r_type``) compares the nouns of the two product names, which WebShop gets from spaCy's
part-of-speech tagger. gigpo does not ship a tagger, so ``title_nouns`` here are the lower-cased alphabetic words of
the name without stop words: nouns plus adjectives and the like, so ``title_score`` can be higher than WebShop's
for near-misses (identical products still score 1).
"""

from __future__ import annotations

import json
import os
import random
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from gigpo.envs.base import EnvError
from gigpo.envs.webshop.catalog import Catalog, Goal, Product, goal_for, price_upper_for, shared_catalog

DATA_ENV = "GIGPO_WEBSHOP_DATA"
#: (1k-subset file, full file) per role; the full file is used when present and more than 1,000 products are asked.
FILES = {
    "products": ("items_shuffle_1000.json", "items_shuffle.json"),
    "attributes": ("items_ins_v2_1000.json", "items_ins_v2.json"),
}
HUMAN_FILE = "items_human_ins.json"
REVIEWS_FILE = "reviews.json"
TEST_GOALS = 500
_WORD = re.compile(r"[a-z]+")
_STOP = frozenset(
    "a an and are as at be by for from in into is it its of on or the to with without your you this that these "
    "those our x".split()
)


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path:
    """``data_dir``, else ``$GIGPO_WEBSHOP_DATA``; an error that says what to download when neither is usable."""
    raw = data_dir if data_dir not in (None, "") else os.environ.get(DATA_ENV)
    if not raw:
        raise EnvError(
            f"webshop-original needs WebShop's data files: set env.data_dir (or ${DATA_ENV}) to the folder that "
            f"WebShop's setup.sh fills ({FILES['products'][0]}, {FILES['attributes'][0]} and {HUMAN_FILE}; "
            "`./setup.sh -d small` in a clone of princeton-nlp/WebShop downloads them). gigpo never downloads data."
        )
    path = Path(raw).expanduser()
    if not path.is_dir():
        raise EnvError(f"webshop-original: data_dir {str(path)!r} is not a directory")
    return path


def _pick(folder: Path, role: str, num_products: int | None) -> Path:
    small, full = (folder / name for name in FILES[role])
    want_full = num_products is None or num_products > 1000
    for path in (full, small) if want_full else (small, full):
        if path.is_file():
            return path
    raise EnvError(f"webshop-original: neither {small.name} nor {full.name} is in {str(folder)!r}")


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise EnvError(f"webshop-original: cannot read {str(path)!r}: {e}") from e


def parse_pricing(text: Any) -> tuple[list[float], str]:
    """WebShop's price parsing: ``("$10.00 - $20.00")`` → ([10.0, 20.0], "$10.0 to $20.0"); empty → $100.0."""
    if not text or not isinstance(text, str):
        return [100.0], "$100.0"
    values = []
    for part in text.split("$")[1:]:
        digits = re.sub(r"[^\d.]", "", part)
        try:
            values.append(float(Decimal(digits)))
        except InvalidOperation:
            continue
    if not values:
        return [100.0], "$100.0"
    if len(values) == 1:
        return values, f"${values[0]}"
    return values[:2], f"${values[0]} to ${values[1]}"


def title_nouns(name: str) -> list[str]:
    """Content words of a product name, in order, without repeats (stands in for spaCy's nouns; see module doc)."""
    out: list[str] = []
    for w in _WORD.findall(name.lower()):
        if len(w) > 1 and w not in _STOP and w not in out:
            out.append(w)
    return out


def _options(raw: Any) -> dict[str, list[str]]:
    options: dict[str, list[str]] = {}
    if isinstance(raw, dict):
        for name, contents in raw.items():
            if not contents:
                continue
            values = [str(c["value"]).strip().replace("/", " | ").lower() for c in contents if "value" in c]
            if values:
                options[str(name).lower()] = values
    return options


def _reviews(entry: dict[str, Any] | None) -> tuple[list[dict[str, Any]], str]:
    if not entry:
        return [], "N.A."
    out = []
    for r in entry.get("reviews") or []:
        out.append(
            {
                "title": str(r.get("title", "")),
                "score": r.get("score", r.get("stars", "N.A.")),
                "body": str(r.get("body", r.get("review", ""))),
            }
        )
    return out, str(entry.get("average_rating", "N.A."))


def convert_product(
    p: dict[str, Any], attributes: dict[str, Any], reviews: dict[str, Any], rng: random.Random
) -> Product:
    """One product of WebShop's file in the env's schema (see gigpo.envs.webshop.catalog)."""
    asin = str(p["asin"])
    pricing, price_tag = parse_pricing(p.get("pricing"))
    # WebShop charges a price drawn once, uniformly inside a displayed range.
    price = rng.uniform(*pricing[:2]) if len(pricing) == 2 else pricing[0]
    bullets = p.get("small_description") or []
    bullets = [str(b) for b in bullets] if isinstance(bullets, list) else [str(bullets)]
    attrs = (attributes.get(asin) or {}).get("attributes") or ["DUMMY_ATTR"]
    revs, rating = _reviews(reviews.get(asin))
    name = str(p.get("name") or "")
    return {
        "asin": asin,
        "category": str(p.get("category") or ""),
        "query": str(p.get("query") or "").lower().strip(),
        "product_category": str(p.get("product_category") or ""),
        "Title": name,
        "title_nouns": title_nouns(name),
        "Description": str(p.get("full_description") or ""),
        "BulletPoints": bullets or [""],
        "Attributes": [str(a) for a in attrs],
        "options": _options(p.get("customization_options")),
        "pricing": pricing,
        "Price": price_tag,
        "price": round(price, 2),
        "Reviews": revs,
        "Rating": rating,
    }


def _goal_options(raw: Any, product: Product) -> dict[str, str]:
    """Human goals list option *values*; name each by the product option that offers it (``option_k`` if none),
    so the reward (which counts values) is unchanged and the oracle knows where to click."""
    if isinstance(raw, dict):
        return {str(k).lower(): str(v).lower() for k, v in raw.items()}
    out: dict[str, str] = {}
    for k, value in enumerate(raw or []):
        v = str(value).lower()
        name = next((n for n, vs in product["options"].items() if v in vs and n not in out), f"option_{k}")
        out[name] = v
    return out


def human_goals(products: list[Product], human: dict[str, Any], rng: random.Random) -> list[Goal]:
    """WebShop's ``get_human_goals``: one goal per human instruction with attributes, budget clause appended."""
    goals: list[Goal] = []
    for p in products:
        for ins in human.get(p["asin"]) or []:
            attrs = [str(a) for a in ins.get("instruction_attributes") or []]
            if not attrs:
                continue
            price_upper = price_upper_for(p["price"], rng)
            instruction = str(ins.get("instruction", "")).strip(".")
            options = _goal_options(ins.get("instruction_options"), p)
            goals.append(goal_for(p, instruction, attrs, options, price_upper))
    return goals


def load_original(
    data_dir: str | os.PathLike[str] | None, num_products: int | None = 1000, seed: int = 233
) -> dict[str, Any]:
    """``{"products": [...], "goals": {"train": [...], "test": [...]}}`` from WebShop's files (see module doc)."""
    folder = resolve_data_dir(data_dir)
    human_path = folder / HUMAN_FILE
    if not human_path.is_file():
        raise EnvError(f"webshop-original: {HUMAN_FILE} (the human goals) is not in {str(folder)!r}")
    raw = _read_json(_pick(folder, "products", num_products))
    if not isinstance(raw, list):
        raise EnvError("webshop-original: the products file must hold a JSON list of products")
    attributes = _read_json(_pick(folder, "attributes", num_products))
    human = _read_json(human_path)
    reviews_path = folder / REVIEWS_FILE
    reviews = {r["asin"]: r for r in _read_json(reviews_path)} if reviews_path.is_file() else {}
    rng = random.Random(seed)
    products: list[Product] = []
    seen: set[str] = set()
    for p in raw[:num_products] if num_products is not None else raw:
        asin = str(p.get("asin", "nan"))
        if asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        products.append(convert_product(p, attributes, reviews, rng))
    if not products:
        raise EnvError(f"webshop-original: no usable product in {str(folder)!r}")
    goals = human_goals(products, human, rng)
    if not goals:
        raise EnvError(
            f"webshop-original: none of these products has a human goal with attributes in {HUMAN_FILE}"
        )
    rng.shuffle(goals)
    return {"products": products, "goals": {"test": goals[:TEST_GOALS], "train": goals[TEST_GOALS:] or goals}}


def get_original_catalog(
    data_dir: str | os.PathLike[str] | None, num_products: int | None, seed: int
) -> Catalog:
    """The process-wide catalog of these files (built once; keyed by folder, size and seed)."""
    folder = resolve_data_dir(data_dir).resolve()
    return shared_catalog(
        ("original", str(folder), num_products, seed), lambda: load_original(folder, num_products, seed)
    )
