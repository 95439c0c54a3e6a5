"""webshop-original: WebShop's own data files (here a small set written in their format) behind the same env."""

from __future__ import annotations

import json

import pytest

from gigpo.envs.base import EnvError
from gigpo.envs.registry import make
from gigpo.envs.webshop import oracle_action
from gigpo.envs.webshop.original import DATA_ENV, load_original, parse_pricing, title_nouns

PRODUCTS = [
    {
        "asin": "B000000001",
        "category": "fashion",
        "query": "Men's Shirts ",
        "name": "Acme Slim Fit Cotton Shirt for Men",
        "product_category": "Clothing, Shoes & Jewelry › Men › Clothing › Shirts",
        "full_description": "A slim fit shirt made of soft cotton.",
        "small_description": ["Machine wash cold", "Slim fit, button down collar"],
        "pricing": "$19.99",
        "customization_options": {
            "Color": [{"value": "Navy Blue", "image": None}, {"value": "Black/White", "image": None}],
            "Size": [{"value": "Small"}, {"value": "X-Large"}],
        },
        "images": ["https://example.invalid/1.jpg"],
    },
    {
        "asin": "B000000002",
        "category": "garden",
        "query": "coffee mugs",
        "name": "Ceramic Coffee Mug 12 oz",
        "product_category": "Home & Kitchen › Kitchen & Dining › Mugs",
        "full_description": "Dishwasher safe ceramic mug.",
        "small_description": "Easy clean glaze",
        "pricing": "$10.00 - $30.00",
        "customization_options": None,
        "images": [],
    },
    {"asin": "nan", "name": "skipped: no asin"},
    {"asin": "B000000001", "name": "skipped: repeated asin"},
    {"asin": "B0000000001234", "name": "skipped: asin longer than 10"},
    {
        "asin": "B000000003",
        "category": "beauty",
        "query": "lip balm",
        "name": "Vanilla Lip Balm",
        "product_category": "Beauty › Lip Care",
        "full_description": "",
        "small_description": [],
        "pricing": "",
        "customization_options": {},
        "images": [],
    },
]
ATTRIBUTES = {
    "B000000001": {"attributes": ["machine wash", "slim fit"]},
    "B000000002": {"attributes": ["easy clean"]},
}
HUMAN = {
    "B000000001": [
        {
            "instruction": "i need a slim fit shirt for men in navy blue, size small.",
            "instruction_attributes": ["slim fit", "machine wash"],
            "instruction_options": ["navy blue", "small"],
        },
        {"instruction": "no attributes: skipped", "instruction_attributes": [], "instruction_options": []},
    ],
    "B000000002": [
        {
            "instruction": "i want an easy clean coffee mug",
            "instruction_attributes": ["easy clean"],
            "instruction_options": [],
        }
    ],
}
REVIEWS = [
    {
        "asin": "B000000001",
        "reviews": [{"title": "great", "stars": 5, "review": "love it"}],
        "average_rating": 4.5,
    }
]


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    for name, obj in [
        ("items_shuffle_1000.json", PRODUCTS),
        ("items_ins_v2_1000.json", ATTRIBUTES),
        ("items_human_ins.json", HUMAN),
        ("reviews.json", REVIEWS),
    ]:
        (tmp_path / name).write_text(json.dumps(obj), encoding="utf-8")
    return tmp_path


def test_products_are_converted_as_webshop_loads_them(data_dir):
    data = load_original(data_dir, num_products=1000, seed=0)
    by = {p["asin"]: p for p in data["products"]}
    assert list(by) == ["B000000001", "B000000002", "B000000003"]  # nan, repeated and too-long ASINs skipped
    shirt, mug, balm = by["B000000001"], by["B000000002"], by["B000000003"]
    assert shirt["query"] == "men's shirts"
    assert shirt["options"] == {"color": ["navy blue", "black | white"], "size": ["small", "x-large"]}
    assert shirt["pricing"] == [19.99] and shirt["Price"] == "$19.99" and shirt["price"] == 19.99
    assert (
        mug["pricing"] == [10.0, 30.0] and mug["Price"] == "$10.0 to $30.0" and 10.0 <= mug["price"] <= 30.0
    )
    assert balm["pricing"] == [100.0] and balm["Price"] == "$100.0"
    assert mug["BulletPoints"] == ["Easy clean glaze"] and balm["BulletPoints"] == [""]
    assert mug["options"] == {} and balm["Attributes"] == ["DUMMY_ATTR"]
    assert (
        shirt["Reviews"] == [{"title": "great", "score": 5, "body": "love it"}] and shirt["Rating"] == "4.5"
    )
    assert mug["Reviews"] == [] and mug["Rating"] == "N.A."
    assert shirt["title_nouns"] == ["acme", "slim", "fit", "cotton", "shirt", "men"]


def test_human_goals_follow_get_human_goals(data_dir):
    data = load_original(data_dir, seed=0)
    goals = data["goals"]["test"]
    assert len(goals) == 2  # the goal without attributes is skipped
    shirt = next(g for g in goals if g["asin"] == "B000000001")
    assert shirt["attributes"] == ["slim fit", "machine wash"]
    # Option values are named by the product option that offers them.
    assert shirt["goal_options"] == {"color": "navy blue", "size": "small"}
    # 19.99 → the first four grid prices above are 20..50; the larger of two drawn is the budget.
    assert shirt["price_upper"] in (30.0, 40.0, 50.0)
    assert shirt["instruction_text"] == (
        f"i need a slim fit shirt for men in navy blue, size small, and price lower than {shirt['price_upper']:.2f} dollars"
    )
    assert shirt["name"] == "Acme Slim Fit Cotton Shirt for Men" and shirt["query"] == "men's shirts"
    # Fewer than 500 goals: the test split takes them all, and train reuses them.
    assert data["goals"]["train"] == goals
    assert load_original(data_dir, seed=0) == data  # reproducible


def test_the_env_runs_and_the_oracle_buys_the_goal(data_dir):
    env = make("webshop-original", data_dir=str(data_dir), split="all", seed=0)
    for seed in range(len(env.goals)):
        obs, info = env.reset(seed)
        assert "WebShop" in obs and "search[<your query>]" in info["admissible_actions"]
        done, r = False, 0.0
        for _ in range(env.max_steps):
            obs, r, done, info = env.step(oracle_action(env))
            if done:
                break
        assert done and r == pytest.approx(1.0), (env.goal["instruction_text"], env.last_reward_info)


def test_noisy_variant_and_env_var(data_dir, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(data_dir))
    env = make("webshop-original-noisy", split="test", ad_rate=1.0, seed=0)
    obs, _ = env.reset(0)
    assert "WebShop" in obs


def test_clear_errors(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    with pytest.raises(EnvError, match="setup.sh"):
        make("webshop-original")
    with pytest.raises(EnvError, match="not a directory"):
        make("webshop-original", data_dir=str(tmp_path / "missing"))
    with pytest.raises(EnvError, match="items_human_ins.json"):
        make("webshop-original", data_dir=str(tmp_path))
    (tmp_path / "items_human_ins.json").write_text("{}", encoding="utf-8")
    with pytest.raises(EnvError, match="items_shuffle_1000.json"):
        make("webshop-original", data_dir=str(tmp_path))
    with pytest.raises(ValueError, match="data_dir"):
        make("webshop-original", data_path="x")  # unknown option: the error lists the real ones


def test_parse_pricing_and_title_nouns():
    assert parse_pricing("$1,299.00") == ([1299.0], "$1299.0")
    assert parse_pricing("$5.00 - $9.50") == ([5.0, 9.5], "$5.0 to $9.5")
    assert parse_pricing(None) == ([100.0], "$100.0")
    assert parse_pricing("call for price") == ([100.0], "$100.0")
    assert title_nouns("The Best-Selling Shirt for a Man, 2 Pack") == [
        "best",
        "selling",
        "shirt",
        "man",
        "pack",
    ]


def test_policy_table_runs_on_the_real_format_sample(data_dir):
    """The calibration table's policies (benchmarks/webshop_policies.py --data-dir) on WebShop's file format, so
    drift between the generated catalog's records and webshop-original's is caught here."""
    from gigpo.envs.webshop.policies import policy_table

    env = make("webshop-original", data_dir=str(data_dir), split="all", seed=0)
    table = policy_table(env, len(env.goals))
    assert {k: (v["score"], v["success"]) for k, v in table.items() if k != "random"} == {
        "oracle": (1.0, 1.0),
        "rule: first result + options in text": (1.0, 1.0),
        "rule: first result, buy": (pytest.approx(0.8), 0.5),  # the shirt goal names options the rule skips
    }
    assert 0.0 <= table["random"]["score"] <= 1.0 and table["random"]["steps"] >= 1
