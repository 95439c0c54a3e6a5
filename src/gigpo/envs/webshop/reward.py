"""WebShop's purchase reward: attribute, option and price matches, scaled by the product-type factor."""

from __future__ import annotations

from typing import Any

from rapidfuzz import fuzz, utils

#: Colour words, alphabetical: ``normalize_color`` maps a value to the first one it contains (so "navy blue" and
#: "light blue" both become "blue", as in WebShop, whose list is also alphabetical).
COLORS = (
    "aqua",
    "azure",
    "beige",
    "black",
    "blue",
    "blush",
    "bronze",
    "brown",
    "burgundy",
    "camel",
    "camo",
    "charcoal",
    "coral",
    "cream",
    "denim",
    "espresso",
    "fuchsia",
    "gold",
    "graphite",
    "gray",
    "green",
    "grey",
    "indigo",
    "ivory",
    "khaki",
    "lavender",
    "lilac",
    "lime",
    "magenta",
    "maroon",
    "mauve",
    "mint",
    "multicolor",
    "mustard",
    "natural",
    "navy",
    "olive",
    "orange",
    "peach",
    "pink",
    "plum",
    "purple",
    "rainbow",
    "red",
    "rose",
    "rust",
    "sage",
    "sand",
    "silver",
    "slate",
    "tan",
    "taupe",
    "teal",
    "terracotta",
    "turquoise",
    "violet",
    "walnut",
    "white",
    "wine",
    "yellow",
)
#: Fuzzy matches must score strictly above this (token-set ratio, 0..100).
FUZZY_THRESHOLD = 85


def normalize_color(value: str) -> str:
    """The first colour word (in ``COLORS`` order) that occurs as a substring of ``value``, else ``value``."""
    for color in COLORS:
        if color in value:
            return color
    return value


def fuzzy_match(a: str, b: str) -> bool:
    """thefuzz's token-set ratio (lower-cased, punctuation to spaces, rounded to an integer, as thefuzz returns it)
    > 85. A token subset scores 100, so "large" matches "x-large"; "2 count" vs "4 count" scores 86 and matches too,
    both as in WebShop."""
    return round(fuzz.token_set_ratio(a, b, processor=utils.default_process)) > FUZZY_THRESHOLD


def get_type_reward(purchased: dict[str, Any], goal: dict[str, Any]) -> dict[str, Any]:
    """Type factor r_type in {1.0, 0.5, 0.1, 0.0}.

    query_match = same search query; category_match = >= 2 shared components of the '›'-separated category path;
    title_score = |nouns(purchased title) ∩ nouns(goal title)| / |nouns(goal title)| (0.2 when the goal has none).
    r_type = 1.0, then 0.5 if none of (query_match, category_match, title_score > 0.2), then 0.1 if title_score < 0.1,
    then 0.0 if title_score == 0 (later rules override earlier ones, as in WebShop).
    """
    query_match = purchased["query"] == goal["query"]
    p_cat = {x.strip() for x in purchased["product_category"].split("›")}
    g_cat = {x.strip() for x in goal["product_category"].split("›")}
    category_match = len(p_cat & g_cat) >= 2
    desired = goal["title_nouns"]
    if not desired:
        title_score = 0.2
    else:
        title_score = len(set(purchased["title_nouns"]) & set(desired)) / len(desired)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {
        "r_type": r_type,
        "query_match": query_match,
        "category_match": category_match,
        "title_score": title_score,
    }


def get_attribute_reward(purchased: dict[str, Any], goal: dict[str, Any]) -> tuple[float, int]:
    """(fraction, count) of goal attributes matched: fuzzy against the product's attributes, else a substring of its
    title, bullet points or description (lower-cased)."""
    goal_attrs = goal["attributes"]
    title = purchased["Title"].lower()
    bullets = " ".join(purchased["BulletPoints"]).lower()
    description = purchased["Description"].lower()
    matches = 0
    for g in goal_attrs:
        if (
            any(fuzzy_match(p, g) for p in purchased["Attributes"])
            or g in title
            or g in bullets
            or g in description
        ):
            matches += 1
    return (matches / len(goal_attrs) if goal_attrs else 0.0), matches


def get_option_reward(purchased_options: list[str], goal_options: list[str]) -> tuple[float | None, int]:
    """(fraction or None when the goal has no options, count) of goal option values matched by a chosen value, after
    colour normalisation on both sides."""
    chosen = [normalize_color(o) for o in purchased_options]
    wanted = [normalize_color(o) for o in goal_options]
    matches = sum(1 for g in wanted if any(fuzzy_match(p, g) for p in chosen))
    return (matches / len(wanted) if wanted else None), matches


def get_reward(
    purchased: dict[str, Any], goal: dict[str, Any], price: float, options: dict[str, str]
) -> tuple[float, dict[str, Any]]:
    """WebShop reward of buying ``purchased`` at ``price`` with the chosen ``options`` (name -> value):

        score = r_type * (n_attr_matched + n_option_matched + [price <= price_upper])
                       / (n_goal_attributes + n_goal_options + 1)

    Returns ``(score, info)``; ``info`` holds every component (r_type, r_att, r_option, r_price, title_score, ...).
    """
    type_info = get_type_reward(purchased, goal)
    r_price = price <= goal["price_upper"]
    r_att, n_att = get_attribute_reward(purchased, goal)
    r_option, n_opt = get_option_reward(list(options.values()), list(goal["goal_options"].values()))
    denom = len(goal["attributes"]) + len(goal["goal_options"]) + 1
    score = (n_att + n_opt + float(r_price)) / denom * type_info["r_type"]
    info = {
        **type_info,
        "r_att": r_att,
        "r_option": r_option,
        "r_price": r_price,
        "num_attr_matches": n_att,
        "num_option_matches": n_opt,
    }
    return score, info
