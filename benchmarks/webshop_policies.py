"""Offline WebShop: catalog/goal statistics and scripted-policy scores (oracle, rule baselines, random).

python benchmarks/webshop_policies.py [--goals 500] [--split test] [--num-products 1000] [--catalog-seed 0]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable

from gigpo.envs.webshop import WebShopEnv, oracle_action, random_action
from gigpo.envs.webshop.catalog import generate_catalog, load_or_build
from gigpo.envs.webshop.policies import goal_query
from gigpo.envs.webshop.search import SearchIndex


def rule_action(env: WebShopEnv, choose_options: bool) -> str:
    """WebShop paper's rule baseline: search the instruction, open the first result, buy. With ``choose_options``
    it first clicks every option value of the item page that appears verbatim in the instruction."""
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


def run(env: WebShopEnv, policy: Callable[[WebShopEnv], str], n: int) -> dict[str, float]:
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
    return {
        "score": statistics.mean(scores),
        "success": wins / n,
        "steps": steps / n,
        "ms_step": 1e3 * dt / steps,
    }


def catalog_stats(num_products: int, seed: int) -> None:
    t0 = time.perf_counter()
    data = generate_catalog(num_products, seed)
    t_gen = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as d:
        load_or_build(num_products, seed, cache_dir=d)
        t0 = time.perf_counter()
        load_or_build(num_products, seed, cache_dir=d)
        t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    SearchIndex(data["products"])
    t_index = time.perf_counter() - t0
    ps = data["products"]
    goals = data["goals"]["train"] + data["goals"]["test"]
    print(
        f"catalog: {len(ps)} products, {len({p['category'] for p in ps})} categories, "
        f"{len({p['query'] for p in ps})} sub-categories, {len({p['type_word'] for p in ps})} product types"
    )
    print(
        f"  attributes/product {statistics.mean(len(p['Attributes']) for p in ps):.2f}, "
        f"option names/product {statistics.mean(len(p['options']) for p in ps):.2f}, "
        f"values/option {statistics.mean(len(v) for p in ps for v in p['options'].values()):.2f}, "
        f"price ranges {sum(len(p['pricing']) == 2 for p in ps) / len(ps):.0%}, "
        f"median price ${statistics.median(p['price'] for p in ps):.2f}"
    )
    print(
        f"goals: train {len(data['goals']['train'])}, test {len(data['goals']['test'])}; "
        f"attributes/goal {statistics.mean(len(g['attributes']) for g in goals):.2f}, "
        f"options/goal {statistics.mean(len(g['goal_options']) for g in goals):.2f}, "
        f"with a price limit {sum(g['price_upper'] < 1e6 for g in goals) / len(goals):.1%}"
    )
    print(
        f"build: generate {t_gen * 1e3:.0f} ms, load cached JSON {t_load * 1e3:.0f} ms, BM25 index {t_index * 1e3:.0f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--goals", type=int, default=500)
    ap.add_argument("--split", default="test")
    ap.add_argument("--num-products", type=int, default=1000)
    ap.add_argument("--catalog-seed", type=int, default=0)
    args = ap.parse_args()
    catalog_stats(args.num_products, args.catalog_seed)
    env = WebShopEnv(split=args.split, num_products=args.num_products, catalog_seed=args.catalog_seed)
    n = min(args.goals, len(env.goals))
    rng = random.Random(0)
    policies: dict[str, Callable[[WebShopEnv], str]] = {
        "oracle": oracle_action,
        "rule: first result + options in text": lambda e: rule_action(e, True),
        "rule: first result, buy": lambda e: rule_action(e, False),
        "random": lambda e: random_action(e, rng),
    }
    print(f"\n{n} {args.split} goals, max_steps {env.max_steps}")
    print(f"{'policy':40s} {'score':>7s} {'success':>8s} {'steps':>6s} {'ms/step':>8s}")
    for name, policy in policies.items():
        m = run(env, policy, n)
        print(f"{name:40s} {m['score']:7.3f} {m['success']:8.3f} {m['steps']:6.2f} {m['ms_step']:8.3f}")


if __name__ == "__main__":
    main()
