"""Scripted baselines: an oracle that uses the hidden goal (proof the env is solvable) and a random clicker."""

from __future__ import annotations

import random
import re

from rapidfuzz import fuzz, utils

from gigpo.envs.webshop.catalog import Goal, Product
from gigpo.envs.webshop.env import WebShopEnv
from gigpo.envs.webshop.pages import PRODUCT_WINDOW
from gigpo.envs.webshop.reward import get_reward, normalize_color

_PRICE_CLAUSE = re.compile(r",? and price lower than [\d.]+ dollars$")


def goal_query(goal: Goal) -> str:
    """What the oracle types: the instruction without its price clause (prices are not indexed)."""
    return _PRICE_CLAUSE.sub("", goal["instruction_text"])


def _best_value(values: list[str], wanted: str) -> str:
    if wanted in values:
        return wanted
    w = normalize_color(wanted)
    return max(
        values, key=lambda v: fuzz.token_set_ratio(normalize_color(v), w, processor=utils.default_process)
    )


def best_options(product: Product, goal: Goal) -> dict[str, str]:
    """For each goal option the product offers, the product's value closest to the goal's."""
    return {
        n: _best_value(product["options"][n], v)
        for n, v in goal["goal_options"].items()
        if n in product["options"]
    }


def attainable_score(product: Product, goal: Goal) -> float:
    """The score of buying ``product`` with ``best_options`` (what the oracle can still get from it)."""
    return get_reward(product, goal, product["price"], best_options(product, goal))[0]


def oracle_action(env: WebShopEnv) -> str:
    """The next action of a goal-aware shopper.

    Search the instruction text (without price); among the (up to 50) results take the product with the highest
    attainable score (ties: the higher-ranked), paging with Next/Prev to reach it; choose the goal's options; buy.
    It reads the env's hidden goal and the full result list, so it is an upper-bound baseline, not an agent.
    """
    s, goal = env.page, env.goal
    if s.kind == "search":
        return f"search[{goal_query(goal)}]"
    if s.kind in ("description", "features", "reviews"):
        return "click[< prev]"
    if s.kind == "results":
        if not env.results:
            return "click[back to search]"
        scores = [attainable_score(env.product(a), goal) for a in env.results]
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        want_page = best // PRODUCT_WINDOW + 1
        if want_page > s.page:
            return "click[next >]"
        if want_page < s.page:
            return "click[< prev]"
        return f"click[{env.results[best].lower()}]"
    if s.kind == "item":
        chosen = dict(s.options)
        for name, value in best_options(env.product(s.asin), goal).items():
            if chosen.get(name) != value:
                return f"click[{value}]"
        return "click[buy now]"
    raise ValueError(f"no action on a {s.kind!r} page (the episode is over)")


def random_action(env: WebShopEnv, rng: random.Random) -> str:
    """A uniformly random admissible action; on the search page, a query of 1-4 random words of the instruction."""
    if env.page.kind == "search":
        words = env.goal["instruction_text"].split()
        return f"search[{' '.join(rng.sample(words, k=min(len(words), rng.randint(1, 4))))}]"
    return f"click[{rng.choice([c for c in env.clickables() if c != 'search'])}]"
