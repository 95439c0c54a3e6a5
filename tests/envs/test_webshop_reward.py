"""WebShop reward: attribute / option / price partial matches, every type-factor branch, the price_upper rule."""

from __future__ import annotations

import random

import pytest

from gigpo.envs.webshop.catalog import NO_PRICE_LIMIT, PRICE_GRID, price_upper_for
from gigpo.envs.webshop.reward import (
    fuzzy_match,
    get_attribute_reward,
    get_option_reward,
    get_reward,
    get_type_reward,
    normalize_color,
)


def _product(**over):
    p = {
        "query": "men's clothing",
        "product_category": "Clothing, Shoes & Jewelry › Men › Clothing › Shirt",
        "title_nouns": ["zentro", "cotton", "shirt", "men"],
        "Title": "Zentro Classic Cotton Shirt for Men - Long Sleeve",
        "Description": "The Zentro shirt is made of cotton. It is machine wash and button closure.",
        "BulletPoints": ["LONG SLEEVE: this shirt is long sleeve.", "PACKAGE: 1 x shirt."],
        "Attributes": ["long sleeve", "machine wash", "button closure"],
    }
    p.update(over)
    return p


def _goal(**over):
    g = {
        "query": "men's clothing",
        "product_category": "Clothing, Shoes & Jewelry › Men › Clothing › Shirt",
        "title_nouns": ["zentro", "cotton", "shirt", "men"],
        "attributes": ["long sleeve", "machine wash"],
        "goal_options": {"color": "navy blue", "size": "large"},
        "price_upper": 40.0,
    }
    g.update(over)
    return g


def test_perfect_purchase_scores_one():
    score, info = get_reward(_product(), _goal(), 25.0, {"color": "navy blue", "size": "large"})
    assert score == 1.0 and info["r_type"] == 1.0 and info["r_price"]


def test_partial_attributes():
    # 1 of 2 goal attributes ("relaxed fit" is nowhere in the product): (1 + 2 + 1) / 5
    goal = _goal(attributes=["long sleeve", "relaxed fit"])
    score, info = get_reward(_product(), goal, 25.0, {"color": "navy blue", "size": "large"})
    assert score == pytest.approx(4 / 5) and info["r_att"] == 0.5


def test_attribute_matched_by_text_when_not_listed():
    p = _product(
        Attributes=["button closure"]
    )  # "machine wash" only in the description, "long sleeve" in title
    assert get_attribute_reward(p, _goal()) == (1.0, 2)
    p2 = _product(
        Attributes=["button closure"], Title="Zentro Shirt", BulletPoints=["x"], Description="plain"
    )
    assert get_attribute_reward(p2, _goal()) == (0.0, 0)


def test_attribute_fuzzy_threshold():
    assert fuzzy_match("machine washable", "machine wash")  # token-set ratio 86 > 85
    assert not fuzzy_match("long sleeve", "short sleeve")
    p = _product(Attributes=["machine washable"], Title="T", BulletPoints=["b"], Description="d")
    assert get_attribute_reward(p, _goal(attributes=["machine wash", "long sleeve"])) == (0.5, 1)


def test_partial_options_and_colour_normalisation():
    assert normalize_color("navy blue") == "blue" and normalize_color("light blue") == "blue"
    assert normalize_color("2 count") == "2 count"
    # light blue ~ navy blue (both "blue"); small != large
    assert get_option_reward(["light blue", "small"], ["navy blue", "large"]) == (0.5, 1)
    assert get_option_reward(["x-large"], ["large"]) == (1.0, 1)  # token subset scores 100, as in WebShop
    assert get_option_reward(["black"], []) == (None, 0)
    score, _ = get_reward(_product(), _goal(), 25.0, {"color": "red", "size": "large"})
    assert score == pytest.approx(4 / 5)
    score, _ = get_reward(_product(), _goal(), 25.0, {})  # no option chosen at all
    assert score == pytest.approx(3 / 5)


def test_price_within_and_over_budget():
    opts = {"color": "navy blue", "size": "large"}
    assert get_reward(_product(), _goal(), 40.0, opts)[0] == 1.0  # price == budget passes (<=)
    score, info = get_reward(_product(), _goal(), 40.01, opts)
    assert score == pytest.approx(4 / 5) and not info["r_price"]


def test_goal_without_options_denominator():
    score, info = get_reward(_product(), _goal(goal_options={}), 99.0, {"color": "red"})
    assert score == pytest.approx(2 / 3) and info["r_option"] is None


# --- every branch of the type factor -------------------------------------------------------------------------
OTHER = {"query": "beverages", "product_category": "Grocery & Gourmet Food › Beverages › Tea"}


@pytest.mark.parametrize(
    ("purchased", "desired", "expected", "why"),
    [
        ({}, ["a", "b"], 1.0, "query match, title 0.5"),
        ({"query": "x"}, ["a", "b", "c", "d", "e", "f"], 1.0, "category match only, title 1/6 in [0.1, 0.2]"),
        (OTHER, ["a", "b", "c"], 1.0, "no query/category match but title 1/3 > 0.2"),
        (OTHER, ["a", "b", "c", "d", "e"], 0.5, "no match of any kind: title exactly 0.2 is not > 0.2"),
        ({}, ["a"] + [f"n{i}" for i in range(10)], 0.1, "title 1/11 < 0.1 overrides the query match"),
        ({}, ["zz", "yy"], 0.0, "title 0 overrides the query match"),
        ({}, [], 1.0, "no goal nouns: title 0.2, query match keeps 1.0"),
        (OTHER, [], 0.5, "no goal nouns and no query/category match"),
    ],
)
def test_type_factor_branches(purchased, desired, expected, why):
    p = _product(title_nouns=["a", "cotton"], **purchased)
    g = _goal(title_nouns=desired)
    assert get_type_reward(p, g)["r_type"] == expected, why


def test_type_factor_scales_the_score():
    p = _product(title_nouns=["zz"], **OTHER)  # r_type 0: everything else perfect still scores 0
    assert get_reward(p, _goal(), 25.0, {"color": "navy blue", "size": "large"})[0] == 0.0
    g = _goal(title_nouns=["cotton", "b", "c", "d", "e"])
    p = _product(title_nouns=["cotton"], **OTHER)  # title 0.2, no query/category match -> 0.5
    assert get_reward(p, g, 25.0, {"color": "navy blue", "size": "large"})[0] == pytest.approx(0.5)


def test_category_match_needs_two_shared_components():
    p = _product(query="x", product_category="Clothing, Shoes & Jewelry › Women › Dress", title_nouns=["a"])
    g = _goal(title_nouns=["a", "b", "c", "d", "e", "f"])
    assert get_type_reward(p, g)["category_match"] is False  # only the root is shared
    assert get_type_reward(p, g)["r_type"] == 0.5  # title 1/6 < 0.2 and no match -> 0.5


def test_price_upper_rule():
    rng = random.Random(0)
    for _ in range(200):
        price = rng.uniform(0.5, 960)
        above = [p for p in PRICE_GRID if p > price][:4]
        up = price_upper_for(price, rng)
        assert (
            up in above[1:] and up > price
        )  # the larger of two distinct draws is never the first grid price
    assert price_upper_for(975.0, rng) == 990.0  # exactly two grid prices left: both drawn
    assert price_upper_for(985.0, rng) == NO_PRICE_LIMIT  # fewer than two: no budget
