"""Measure how long a short `gigpo serve` request waits behind one long request (head-of-line blocking).

    python benchmarks/serve_latency.py [--long-tokens 900] [--reps 3] [--slice-tokens 32]

Serves the tiny model in-process on an ephemeral loopback port (one torch thread), then prints, in seconds:
the median latency of a short request (max_tokens=1) on an idle server; the latency of the same short request
sent 0.2 s after a long one (max_tokens=--long-tokens, greedy); and the long request's own latency. Before the
step-sliced batcher the short request waited for the whole long generation; after, it waits about one slice.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import urllib.request

import torch

from gigpo.serve import make_server


def chat(url: str, max_tokens: int, content: str = "Current observation:\n. P\nG .") -> tuple[float, dict]:
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, "temperature": 0}
    req = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.loads(r.read())
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--long-tokens", type=int, default=900)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--slice-tokens", type=int, default=None, help="passed to make_server when given")
    args = ap.parse_args()
    torch.set_num_threads(1)
    extra = {} if args.slice_tokens is None else {"slice_tokens": args.slice_tokens}
    srv = make_server("tiny", port=0, device="cpu", **extra)
    th = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    th.start()
    try:
        chat(srv.url, 1)  # warm-up
        idle = statistics.median(chat(srv.url, 1)[0] for _ in range(args.reps))
        behind, longs, long_tokens = [], [], 0
        for _ in range(args.reps):
            res: dict = {}
            t = threading.Thread(target=lambda out=res: out.update(zip(("s", "body"), chat(srv.url, args.long_tokens))))
            t.start()
            time.sleep(0.2)
            behind.append(chat(srv.url, 1)[0])
            t.join()
            longs.append(res["s"])
            long_tokens = res["body"]["usage"]["completion_tokens"]
        print(f"short request alone:        {idle:.3f} s (median of {args.reps})")
        print(f"short request behind long:  {statistics.median(behind):.3f} s (median; all: "
              f"{', '.join(f'{x:.3f}' for x in behind)})")
        print(f"long request ({long_tokens} tokens): {statistics.median(longs):.3f} s (median)")
    finally:
        srv.close()
        th.join(timeout=5)


if __name__ == "__main__":
    main()
