"""Benchmark: vectorised compute_advantages vs the per-row Python-loop reference (tests/algo/reference.py).

Batches mimic agent rollouts: episode groups of 8 trajectories, 1..50 steps each (uniform), terminal 0/1 reward
plus occasional -0.1 step penalties, string state keys drawn from a small per-group pool (so step groups form),
rows shuffled. Prints N, our time, the loop reference's time and their ratio; checks both agree.

    python benchmarks/bench_advantages.py [--sizes 1000 7000 64000 512000] [--string-ids] [--max-ref-n N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "algo"))
from reference import ref_compute_advantages  # noqa: E402

from gigpo.algo import compute_advantages  # noqa: E402


def make_rollouts(n_rows: int, seed: int, string_ids: bool) -> tuple[list, list, list, list, list]:
    """Flat step records with exactly ``n_rows`` rows (the last trajectory is cut short if needed)."""
    rng = np.random.default_rng(seed)
    lengths: list[int] = []
    while sum(lengths) < n_rows:
        lengths.append(int(rng.integers(1, 51)))
    lengths[-1] -= sum(lengths) - n_rows
    n_traj = len(lengths)
    traj = np.repeat(np.arange(n_traj), lengths)
    group = traj // 8
    steps = np.concatenate([np.arange(n) for n in lengths])
    is_last = np.concatenate([np.arange(n) == n - 1 for n in lengths])
    rewards = np.where(is_last, rng.integers(0, 2, size=n_rows), 0.0) - 0.1 * (rng.random(n_rows) < 0.1)
    # State keys: the same few states recur within a group (start state, then a random walk over 30 states).
    state = np.where(steps == 0, 0, rng.integers(0, 30, size=n_rows))
    anchors = [f"g{g}/state-{s}" for g, s in zip(group.tolist(), state.tolist(), strict=True)]
    perm = rng.permutation(n_rows)
    cols = [group[perm], traj[perm], steps[perm], rewards[perm]]
    if string_ids:
        cols[0] = np.array([f"task-{g}" for g in cols[0].tolist()])
        cols[1] = np.array([f"traj-{t:08d}" for t in cols[1].tolist()])
    return cols[0].tolist(), cols[1].tolist(), cols[2].tolist(), cols[3].tolist(), [anchors[i] for i in perm]


def best_time(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 7000, 64000, 512000])
    ap.add_argument("--repeats", type=int, default=5, help="best of R runs for ours (reference: best of 1-3)")
    ap.add_argument("--string-ids", action="store_true", help="string group/trajectory ids instead of ints")
    ap.add_argument("--max-ref-n", type=int, default=10**9, help="skip the loop reference above this N")
    args = ap.parse_args()

    print(f"{'N':>8} | {'ours (ms)':>10} | {'loop ref (ms)':>13} | {'ratio':>7} | agree")
    print("-" * 55)
    for n in args.sizes:
        g, t, s, r, a = make_rollouts(n, seed=n, string_ids=args.string_ids)
        # Inputs as numpy arrays, as a trainer would hand them over; the reference gets plain lists.
        ga, ta, sa, ra = np.asarray(g), np.asarray(t), np.asarray(s), np.asarray(r)
        ours = best_time(lambda: compute_advantages(ga, ta, sa, ra, a), args.repeats)  # noqa: B023
        if n <= args.max_ref_n:
            ref_reps = 3 if n <= 10_000 else 1
            ref = best_time(lambda: ref_compute_advantages(g, t, s, r, a), ref_reps)  # noqa: B023
            out = compute_advantages(ga, ta, sa, ra, a)
            want = ref_compute_advantages(g, t, s, r, a)
            agree = np.allclose(out.advantages, want["advantages"], rtol=1e-9, atol=1e-9)
            print(f"{n:>8} | {ours * 1e3:>10.1f} | {ref * 1e3:>13.1f} | {ref / ours:>6.0f}x | {agree}")
        else:
            print(f"{n:>8} | {ours * 1e3:>10.1f} | {'skipped':>13} | {'-':>7} | -")


if __name__ == "__main__":
    main()
