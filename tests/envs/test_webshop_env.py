"""WebShopEnv: pages and text format, action validity, pagination, determinism, step cap, policies, play."""

from __future__ import annotations

import importlib.util
import random
import time

import pytest

from gigpo.envs import make
from gigpo.envs.base import EnvError
from gigpo.envs.webshop import WebShopEnv, oracle_action, random_action
from gigpo.envs.webshop.policies import goal_query


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("webshop-cache")


@pytest.fixture()
def env(cache):
    return WebShopEnv(split="test", cache_dir=cache)


def _broad_query(env: WebShopEnv) -> str:
    return env.goal["instruction_text"]  # long instruction: at least 50 products share a word with it


def test_catalog_size_and_variety(env):
    products = env.catalog.products
    assert len(products) >= 1000 and len({p["asin"] for p in products}) == len(products)
    assert len({p["category"] for p in products}) >= 10
    for p in products[:50]:
        assert p["Title"] and p["Description"] and p["BulletPoints"] and p["Attributes"] and p["type_word"]
        assert p["pricing"][0] <= p["price"] <= p["pricing"][-1]
    assert len(env.goals) >= 200 and len(env.catalog.goals["train"]) > len(env.goals)


def test_search_page_format_and_info(env):
    obs, info = env.reset(3)
    task = env.goal["instruction_text"]
    assert obs == f"WebShop [SEP] Instruction: [SEP] {task} [SEP] Search"
    assert info["task"] == task and info["admissible_actions"] == ["search[<your query>]"]
    assert info["available_actions"] == {"has_search_bar": True, "clickables": ["search"]}
    assert info["won"] is False and info["action_valid"] is True
    hash(info["state_key"])


def test_results_item_and_subpages(env):
    env.reset(5)
    obs, r, done, info = env.step(f"search[{_broad_query(env)}]")
    assert r == 0 and not done and info["action_valid"]
    assert f"Back to Search [SEP] Page 1 (Total results: {len(env.results)}) [SEP] Next > [SEP]" in obs
    first = env.results[0]
    assert f"[SEP] {first} [SEP] {env.product(first)['Title']} [SEP] {env.product(first)['Price']}" in obs
    assert "click[< prev]" not in info["admissible_actions"]
    assert info["state_key"][0] == "results" and info["admissible_actions"][0] == "click[back to search]"

    obs, _, _, info = env.step(f"click[{first}]")  # upper-case ASIN: clicks are case-insensitive
    p = env.product(first)
    assert info["action_valid"] and obs.startswith("Instruction: [SEP] ")
    assert obs.endswith(
        f"{p['Title']} [SEP] Price: {p['Price']} [SEP] Rating: {p['Rating']} [SEP] Description [SEP] Features "
        "[SEP] Reviews [SEP] Buy Now"
    )
    for name, values in p["options"].items():
        assert f" [SEP] {name} [SEP] {' [SEP] '.join(values)}" in obs
    key_before = info["state_key"]
    if p["options"]:
        name, values = next(iter(p["options"].items()))
        _, _, _, info = env.step(f"click[{values[-1]}]")
        assert info["action_valid"] and info["state_key"] != key_before
        assert dict(info["state_key"][4]) == {name: values[-1]}
    chosen = info["state_key"][4]
    obs, _, _, info = env.step("click[Description]")
    assert obs.endswith(f"< Prev [SEP] {p['Description']}") and info["admissible_actions"] == [
        "click[back to search]",
        "click[< prev]",
    ]
    obs, _, _, info = env.step("click[< prev]")
    assert info["state_key"][0] == "item" and info["state_key"][4] == chosen  # options survive the sub-page
    obs, _, _, info = env.step("click[features]")
    assert obs.endswith(" [SEP] ".join(p["BulletPoints"]))
    env.step("click[< prev]")
    env.step("click[< prev]")  # item -> results, same page
    assert env.page.kind == "results" and env.page.page == 1
    obs, _, _, info = env.step("click[back to search]")
    assert obs.startswith("WebShop [SEP] Instruction:") and info["state_key"] == ("search", "", 1, "", ())


def test_pagination(env):
    env.reset(0)
    _, _, _, info = env.step(f"search[{_broad_query(env)}]")
    assert len(env.results) == 50  # top 50
    seen = []
    for page in range(1, 6):
        obs, _, _, info = env.step("click[next >]") if page > 1 else (None, 0, False, info)
        acts = info["admissible_actions"]
        asins = [a for a in acts if a.startswith("click[b0")]
        assert len(asins) == 10 and env.page.page == page
        seen += asins
        assert ("click[< prev]" in acts) == (page > 1)
        assert ("click[next >]" in acts) == (page < 5)
    assert "Page 5 (Total results: 50) [SEP] < Prev [SEP] B0" in obs
    assert seen == [f"click[{a.lower()}]" for a in env.results]
    _, _, _, info = env.step("click[next >]")  # no page 6
    assert not info["action_valid"] and env.page.page == 5
    env.step("click[< prev]")
    assert env.page.page == 4


def test_small_result_set_has_one_page(env):
    env.reset(0)
    obs, _, _, info = env.step("search[zzqx unknownword]")
    assert info["action_valid"] and env.results == ()
    assert info["admissible_actions"] == ["click[back to search]"]
    assert obs.endswith("Back to Search [SEP] Page 1 (Total results: 0)")


@pytest.mark.parametrize(
    "action",
    [
        "click[]",
        "search[",
        "search[]",
        "click[nonexistent button]",
        "buy now",
        "click buy now",
        "jump[x]",
        "click[search]",
        "",
        "click[next >]",
    ],
)
def test_invalid_actions_leave_the_page_unchanged(env, action):
    obs0, info0 = env.reset(1)
    obs, r, done, info = env.step(action)
    assert info["action_valid"] is False and r == 0.0 and not done and not info["won"]
    assert info["state_key"] == info0["state_key"]
    assert obs.startswith("Invalid action: ") and obs.endswith(obs0)


def test_search_only_where_the_search_box_is(env):
    env.reset(2)
    env.step("search[shirt]")
    obs, _, _, info = env.step("search[boots]")
    assert not info["action_valid"] and "click[back to search]" in obs
    assert info["available_actions"]["has_search_bar"] is False


def test_actions_are_case_insensitive(env):
    env.reset(2)
    _, _, _, info = env.step("SEARCH[Cotton SHIRT]")
    assert info["action_valid"] and env.page.query == "cotton shirt"
    _, _, _, info = env.step("Click[BACK TO SEARCH]")
    assert info["action_valid"] and env.page.kind == "search"


def test_every_admissible_action_is_valid(cache):
    env, probe = WebShopEnv(split="test", cache_dir=cache), WebShopEnv(split="test", cache_dir=cache)
    rng = random.Random(0)
    for seed in range(5):
        _, info = env.reset(seed)
        history: list[str] = []
        while not env.done:
            for a in info["admissible_actions"]:
                if a == "search[<your query>]":
                    continue
                probe.reset(seed)
                for h in history:
                    probe.step(h)
                assert probe.step(a)[3]["action_valid"], (history, a)
            a = random_action(env, rng)
            history.append(a)
            _, _, _, info = env.step(a)


def test_reward_only_on_buy_and_step_cap(cache):
    env = WebShopEnv(split="test", cache_dir=cache, max_steps=4)
    env.reset(7)
    rewards = [env.step(a)[1] for a in ("search[shirt]", "click[next >]", "click[< prev]")]
    assert rewards == [0.0, 0.0, 0.0] and not env.done
    obs, r, done, info = env.step("click[next >]")
    assert done and r == 0.0 and info["truncated"] and not info["won"] and info["admissible_actions"] == []
    with pytest.raises(EnvError):
        env.step("click[< prev]")


def test_buy_ends_with_webshop_score(env):
    env.reset(11)
    while not env.done:
        obs, r, done, info = env.step(oracle_action(env))
    assert done and r == info["score"] and info["won"] == (r == 1.0) and not info["truncated"]
    assert obs == f"Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] {r}"
    assert env.last_reward_info["r_type"] in (0.0, 0.1, 0.5, 1.0)


def _rollout(env, seed, actions):
    out = [env.reset(seed)]
    out += [env.step(a) for a in actions]
    return out


def test_determinism_by_seed(cache):
    a, b = WebShopEnv(split="train", cache_dir=cache), WebShopEnv(split="train", cache_dir=cache)
    for seed in (0, 1, 17, 10_000):
        a.reset(seed)
        acts = [
            f"search[{goal_query(a.goal)}]",
            f"click[{a.catalog.index.search(goal_query(a.goal))[0]}]",
            "click[buy now]",
        ]
        assert _rollout(a, seed, acts) == _rollout(b, seed, acts)
    assert a.reset(0)[0] != a.reset(1)[0]
    assert a.reset(3)[0] == a.reset(3 + len(a.goals))[0]  # seeds wrap around the split


def test_catalog_seed_changes_the_catalog(cache):
    from gigpo.envs.webshop.catalog import generate_catalog

    assert generate_catalog(200, 1) == generate_catalog(200, 1)
    assert generate_catalog(200, 1)["products"] != generate_catalog(200, 2)["products"]


def test_train_and_test_goals_differ(env):
    train = {g["instruction_text"] for g in env.catalog.goals["train"]}
    test = [g["instruction_text"] for g in env.catalog.goals["test"]]
    assert len(set(test) & train) < 0.05 * len(test)


def test_oracle_succeeds_on_test_goals(env):
    wins = 0
    for seed in range(200):
        env.reset(seed)
        while not env.done:
            _, r, _, info = env.step(oracle_action(env))
        wins += info["won"]
    assert wins / 200 >= 0.9


def test_random_policy_is_far_worse(env):
    rng, total = random.Random(0), 0.0
    for seed in range(100):
        env.reset(seed)
        while not env.done:
            total += env.step(random_action(env, rng))[1]
    assert total / 100 < 0.5


def test_reset_and_step_are_fast(cache):
    env = WebShopEnv(split="test", cache_dir=cache)  # catalog and index are shared: no rebuild
    t0, n = time.perf_counter(), 0
    for seed in range(50):
        env.reset(seed)
        while not env.done:
            env.step(oracle_action(env))
            n += 1
    assert (time.perf_counter() - t0) / (n + 50) < 0.01


def test_registry_and_noisy_variant(cache):
    env = make("webshop", split="test", cache_dir=cache)
    obs, info = env.reset(0)
    assert obs.startswith("WebShop [SEP]") and env.max_steps == 15
    noisy = make("webshop-noisy", split="test", ad_rate=1.0, cache_dir=cache)
    nobs, ninfo = noisy.reset(0)
    assert ninfo["state_key"] == info["state_key"] and nobs != obs


@pytest.mark.skipif(
    importlib.util.find_spec("gigpo.envs.play") is None, reason="gigpo.envs.play not written yet"
)
def test_play_with_scripted_input(env):
    from gigpo.envs.play import play

    env.reset(4)
    script = iter([f"search[{goal_query(env.goal)}]"])
    printed: list[str] = []

    def input_fn(_prompt: str) -> str:
        try:
            return next(script)
        except StopIteration:
            return oracle_action(env)  # then finish the purchase like the oracle would

    result = play(env, 4, input_fn=input_fn, print_fn=lambda *a, **k: printed.append(" ".join(map(str, a))))
    assert result.done and result.won and result.total_reward == 1.0
    assert any("search[<your query>]" in line for line in printed)
    assert any("Thank you for shopping with us!" in line for line in printed)
