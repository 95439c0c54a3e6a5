"""Offline WebShop: catalog/goal statistics and scripted-policy scores (oracle, rule baselines, random).

python benchmarks/webshop_policies.py [--goals 500] [--split test] [--num-products 1000] [--catalog-seed 0]
    [--difficulty hard|easy] [--paraphrase P] [--hidden-attributes P] [--near-misses N] [--goal-option-rate P]
    [--item-page-options P]
python benchmarks/webshop_policies.py --data-dir /path/to/WebShop/data   # the same table on webshop-original

The real WebShop (Yao et al. 2022) reports 45.6 score / 9.6 % success for its rule baseline ("first result, buy").
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from gigpo.envs.webshop import OriginalWebShopEnv, WebShopEnv
from gigpo.envs.webshop.catalog import generate_catalog, load_or_build
from gigpo.envs.webshop.hard import resolve_difficulty
from gigpo.envs.webshop.policies import policy_table
from gigpo.envs.webshop.search import SearchIndex

KNOBS = ("paraphrase", "hidden_attributes", "near_misses", "goal_option_rate", "item_page_options")


def catalog_stats(num_products: int, seed: int, difficulty) -> None:
    t0 = time.perf_counter()
    data = generate_catalog(num_products, seed, difficulty=difficulty)
    t_gen = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as d:
        load_or_build(num_products, seed, cache_dir=d, difficulty=difficulty)
        t0 = time.perf_counter()
        load_or_build(num_products, seed, cache_dir=d, difficulty=difficulty)
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
        f"without options {sum(not g['goal_options'] for g in goals) / len(goals):.1%}, "
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
    ap.add_argument("--difficulty", default="hard", choices=("hard", "easy"))
    for k in KNOBS:
        ap.add_argument("--" + k.replace("_", "-"), type=int if k == "near_misses" else float, default=None)
    ap.add_argument("--data-dir", default=None, help="run on webshop-original (WebShop's data folder) instead")
    args = ap.parse_args()
    if args.data_dir is not None:
        env: WebShopEnv = OriginalWebShopEnv(data_dir=args.data_dir, split=args.split, num_products=args.num_products)
        print(f"webshop-original: {len(env.catalog.products)} products from {args.data_dir}")
    else:
        knobs = {k: getattr(args, k) for k in KNOBS}
        difficulty = resolve_difficulty(args.difficulty, **knobs)
        print(f"difficulty: {args.difficulty} {difficulty or ''}")
        catalog_stats(args.num_products, args.catalog_seed, difficulty)
        env = WebShopEnv(
            split=args.split, num_products=args.num_products, catalog_seed=args.catalog_seed,
            difficulty=args.difficulty, **knobs,
        )
    n = min(args.goals, len(env.goals))
    print(f"\n{n} {args.split} goals, max_steps {env.max_steps}")
    print(f"{'policy':40s} {'score':>7s} {'success':>8s} {'steps':>6s} {'ms/step':>8s}")
    for name, m in policy_table(env, n).items():
        print(f"{name:40s} {m['score']:7.3f} {m['success']:8.3f} {m['steps']:6.2f} {m['ms_step']:8.3f}")


if __name__ == "__main__":
    main()
