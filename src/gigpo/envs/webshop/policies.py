"""Scripted baselines: an oracle that uses the hidden goal (proof the env is solvable), the WebShop paper's rule
baseline, and a random clicker."""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable

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


def oracle_query(env: WebShopEnv) -> str:
    """The instruction without its price clause, or, when no product that search returns can score 1.0 (a
    paraphrased instruction can miss the target), the target product's title."""
    goal = env.goal
    query = goal_query(goal)
    hits = env.catalog.index.search(query)
    if any(math.isclose(attainable_score(env.product(a), goal), 1.0) for a in hits):
        return query
    return goal["name"].lower()


def oracle_action(env: WebShopEnv) -> str:
    """The next action of a goal-aware shopper.

    Search ``oracle_query`` (the instruction without price, else the target's title); among the (up to 50) results
    take the product with the highest attainable score (ties: the higher-ranked), paging with Next/Prev to reach
    it; choose the goal's options; buy. It reads the env's hidden goal and the full result list, so it is an
    upper-bound baseline, not an agent.
    """
    s, goal = env.page, env.goal
    if s.kind == "search":
        return f"search[{oracle_query(env)}]"
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


def rule_action(env: WebShopEnv, choose_options: bool = False) -> str:
    """The WebShop paper's rule baseline: search the instruction (without price), open the first result, buy.
    With ``choose_options`` it first clicks, per option, the first value of the item page that appears verbatim
    in the instruction (the "first result + options" baseline)."""
    s = env.page
    if s.kind == "search":
        return f"search[{goal_query(env.goal)}]"
    if s.kind == "results":
        return f"click[{env.results[0].lower()}]" if env.results else "click[back to search]"
    if s.kind == "item" and choose_options:
        chosen = {v for _, v in s.options}
        text = env.goal["instruction_text"]
        for values in env.product(s.asin)["options"].values():
            for v in values:
                if v in text and v not in chosen and not any(c in values for c in chosen):
                    return f"click[{v}]"
    return "click[buy now]"


def run_policy(env: WebShopEnv, policy: Callable[[WebShopEnv], str], n: int) -> dict[str, float]:
    """Mean score, success rate (score 1.0), actions per episode and wall ms per step of ``policy`` on goals
    ``reset(0..n-1)`` (an episode that runs out of steps scores 0)."""
    scores, wins, steps = [], 0, 0
    t0 = time.perf_counter()
    for seed in range(n):
        env.reset(seed)
        r, info = 0.0, {"won": False}
        while not env.done:
            _, r, _, info = env.step(policy(env))
            steps += 1
        scores.append(r)
        wins += bool(info["won"])
    dt = time.perf_counter() - t0
    return {"score": sum(scores) / n, "success": wins / n, "steps": steps / n, "ms_step": 1e3 * dt / max(1, steps)}


def policy_table(env: WebShopEnv, n: int, seed: int = 0) -> dict[str, dict[str, float]]:
    """``run_policy`` for the oracle, both rule baselines and random (its clicks drawn from ``random.Random(seed)``)
    on the first ``n`` goals of ``env``'s split: the calibration table of docs/envs/webshop.md."""
    rng = random.Random(seed)
    policies: dict[str, Callable[[WebShopEnv], str]] = {
        "oracle": oracle_action,
        "rule: first result + options in text": lambda e: rule_action(e, True),
        "rule: first result, buy": rule_action,
        "random": lambda e: random_action(e, rng),
    }
    return {name: run_policy(env, policy, n) for name, policy in policies.items()}
