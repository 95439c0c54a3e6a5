"""Scripted policies on the search env per data source (oracle vs retrieve-then-answer) + retrieval speed.

    python benchmarks/search_baselines.py                 # test split, every question, in-process BM25
    python benchmarks/search_baselines.py --http          # also through a loopback `serve-retriever`
    python benchmarks/search_baselines.py --limit 200     # quicker

Prints, per data source: EM/F1 of the hop-following oracle (upper bound: proves the questions are answerable
through the env's own retrieval) and of a retrieve-then-answer baseline (one search with the question text,
answer = a heuristic span), the baseline's "gold in retrieved passages" rate, mean turns; then BM25 build time
and query throughput (batched vs one query per call), and with --http the client round-trip latency.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import numpy as np

from gigpo.envs.search import SearchEnv, build_fictional, normalize_answer
from gigpo.envs.search.corpus import DATA_SOURCES
from gigpo.envs.search.oracle import HopOracle, RetrieveThenAnswer, evaluate
from gigpo.envs.search.retrieval import BM25Retriever, HttpRetriever


def _gold_in_info(row: dict) -> bool:
    info = normalize_answer(" ".join(row["observations"][1:]))
    return any(f" {normalize_answer(g)} " in f" {info} " for g in row["golden_answers"])


def run_policies(args: argparse.Namespace, retriever_url: str | None = None) -> list[list[str]]:
    table = []
    for source in DATA_SOURCES:
        env = SearchEnv(
            split=args.split,
            data_sources=[source],
            cache_dir=args.cache_dir,
            topk=args.topk,
            retriever_url=retriever_url,
        )
        seeds = range(min(len(env.questions), args.limit or len(env.questions)))
        t0 = time.perf_counter()
        oracle = evaluate(env, HopOracle(), seeds)
        t_oracle = time.perf_counter() - t0
        base = evaluate(env, RetrieveThenAnswer(), seeds)
        mean = lambda rows, k: float(np.mean([float(r[k]) for r in rows]))  # noqa: E731
        table.append(
            [
                source,
                str(len(seeds)),
                f"{mean(oracle, 'em'):.3f}",
                f"{mean(oracle, 'f1'):.3f}",
                f"{mean(oracle, 'turns'):.2f}",
                f"{mean(base, 'em'):.3f}",
                f"{mean(base, 'f1'):.3f}",
                f"{np.mean([_gold_in_info(r) for r in base]):.3f}",
                f"{sum(r['turns'] for r in oracle) / t_oracle:.0f}",
            ]
        )
    return table


def _print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))


def retrieval_speed(corpus_file: str, n_queries: int, topk: int) -> None:
    t0 = time.perf_counter()
    bm25 = BM25Retriever(corpus_file)
    build = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    titles = [d["contents"].split("\n", 1)[0].strip('"') for d in bm25.docs]
    queries = [f"{titles[i]} founded" for i in rng.integers(0, len(titles), n_queries)]
    t0 = time.perf_counter()
    bm25.search(queries, topk)
    batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    for q in queries:
        bm25.search([q], topk)
    single = time.perf_counter() - t0
    print(
        f"\nBM25 over {len(bm25.docs)} passages: index built in {build:.2f} s; {n_queries} queries: "
        f"{n_queries / batched:.0f} q/s batched, {n_queries / single:.0f} q/s one per call"
    )


def http_latency(url: str, n: int, topk: int) -> None:
    client = HttpRetriever(url, timeout=10, retries=0)
    lat = []
    for i in range(n):
        t0 = time.perf_counter()
        client.search([f"query number {i} river"], topk)
        lat.append(time.perf_counter() - t0)
    lat.sort()
    print(
        f"HTTP round trip over loopback ({n} single-query requests): median {1e3 * statistics.median(lat):.1f} ms, "
        f"p95 {1e3 * lat[int(0.95 * (n - 1))]:.1f} ms"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--split", default="test", choices=["train", "test"])
    p.add_argument("--limit", type=int, default=0, help="questions per data source (0 = all)")
    p.add_argument("--topk", type=int, default=3)
    p.add_argument("--cache-dir", default=None)
    p.add_argument(
        "--http", action="store_true", help="also run the oracle/baseline through a loopback server"
    )
    args = p.parse_args()
    corpus_file = build_fictional(args.cache_dir).corpus_file
    header = [
        "data_source",
        "n",
        "oracle_EM",
        "oracle_F1",
        "oracle_turns",
        "base_EM",
        "base_F1",
        "base_gold_in_docs",
        "oracle_steps/s",
    ]
    print(f"split={args.split} topk={args.topk} (in-process BM25)")
    _print_table(header, run_policies(args))
    retrieval_speed(str(corpus_file), 500, args.topk)
    if args.http:
        from gigpo.envs.search.server import make_server

        server = make_server(BM25Retriever.shared(corpus_file), port=0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{server.server_address[1]}/retrieve"
        try:
            http_latency(url, 200, args.topk)
            print(f"\nsame policies through {url}")
            _print_table(header, run_policies(args, retriever_url=url))
        finally:
            server.shutdown()
            server.server_close()


if __name__ == "__main__":
    main()
