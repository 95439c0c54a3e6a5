"""Benchmark: shared-prefix passes (``optim.shared_prefix``) and shared-prefix prefill, before -> after, per preset.

For each preset two trainers are built with the same seed, one per arm: **before** (``optim.shared_prefix=off``
and generation's prefill shared only between identical prompts, as before issue 38) and **after** (the shared
prefix computed once in the learner's passes and in generation's prefill). Their iterations are interleaved
(before 1, after 1, before 2, ...) so that a machine's slow minute hits both arms. Both arms collect their own
batch with the same seeds (the same batch up to float rounding) and update on it.

Sparse-reward presets often give an untrained policy no signal (every advantage 0), and then the trainer skips
the update: to measure the update every iteration, the advantages are replaced by a fixed pseudo-random ±1 per
row (the same in both arms; the update's cost does not depend on their values). Everything else is the trainer's
own iteration: rollout, old log-probs, PPO epochs, optimizer steps.

Per iteration it prints the learner's tokens (every row whole / identical rows once / forwarded), the update's
CPU and wall seconds and the whole iteration's CPU and wall seconds; then per preset the medians and the
before/after ratios. CPU seconds are ``time.process_time`` (all threads of this process).

    python benchmarks/shared_prefix.py [--presets smollm2-lock-fixed,quickstart] [--iterations 3] [--json F]
    python benchmarks/shared_prefix.py --grouping-cost   # the plan's own cost on random batches
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time

import numpy as np

#: name -> (preset, overrides): the issue's four measurements
PRESETS = {
    "smollm2-lock-fixed": ("smollm2-lock-fixed", []),
    "smollm2": ("smollm2", []),
    # micro-batches of 16 rows: the preset's 128 (sized for the tiny model) does not fit SmolLM2's flat update in
    # 24 GB (measured: killed by the OOM killer at 20.6 GB); 2 groups of 8 games instead of 4 for the CPU budget
    "textarena-tictactoe+smollm2": ("textarena-tictactoe", ["model.name=smollm2-135m", "optim.micro_batch_size=16",
                                                            "rollout.groups=2"]),
    "quickstart": ("quickstart", []),
}


def kernel_set() -> str:
    flags = open("/proc/cpuinfo").read().split()
    return "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "neither AVX2 nor AVX-512"


def build(preset: str, overrides: list[str], shared: bool, run_dir: str, threads: int):
    from gigpo.train import trainer as trainer_mod
    from gigpo.train.config import load_config

    cfg = load_config(preset, [*overrides, "train.eval_episodes=0", "train.eval_every=0", "train.checkpoint_every=0",
                               "train.progress=false", *([f"train.threads={threads}"] if threads else []),
                               "train.sample_trajectories=0",
                               f"optim.shared_prefix={'auto' if shared else 'off'}", f"train.run_dir={run_dir}"])
    return trainer_mod.Trainer(cfg)


def one_iteration(tr, it: int) -> dict:
    """One trainer iteration with ±1 advantages (the arm is the trainer's own optim.shared_prefix)."""
    from gigpo.train import trainer as trainer_mod

    real = trainer_mod.row_advantages

    def signal(cfg, batch, *rest):
        adv, targets, stats = real(cfg, batch, *rest)
        rng = np.random.default_rng([cfg.train.seed, it, 7])
        return trainer_mod.Advantages(rng.choice([-1.0, 1.0], size=len(batch)), targets, stats)

    trainer_mod.row_advantages = signal
    try:
        w, c = time.perf_counter(), time.process_time()
        rec = tr.iteration(it)
        rec["wall"], rec["cpu"] = time.perf_counter() - w, time.process_time() - c
    finally:
        trainer_mod.row_advantages = real
    return rec


def run_preset(name: str, iterations: int, threads: int) -> dict:
    preset, overrides = PRESETS[name]
    out: dict = {"preset": preset, "overrides": overrides, "before": [], "after": []}
    with tempfile.TemporaryDirectory() as d:
        arms = {"before": build(preset, overrides, False, f"{d}/before", threads),
                "after": build(preset, overrides, True, f"{d}/after", threads)}
        for it in range(1, iterations + 1):
            for arm, tr in arms.items():
                r = one_iteration(tr, it)
                row = {"rows_tokens": r["update/tokens_rows"], "unique_tokens": r["update/tokens_unique_rows"],
                       "forwarded_tokens": r["update/tokens_forwarded"], "update_cpu": r["time/update_cpu"],
                       "update_wall": r["time/update"], "iteration_cpu": r["cpu"], "iteration_wall": r["wall"],
                       "rollout_wall": r["time/rollout"], "steps": r["rollout/steps"]}
                out[arm].append(row)
                print(f"  {name} it {it} {arm:6s}: tokens {row['rows_tokens']:.0f} rows / "
                      f"{row['unique_tokens']:.0f} unique / {row['forwarded_tokens']:.0f} forwarded; update cpu "
                      f"{row['update_cpu']:.1f}s wall {row['update_wall']:.1f}s; iteration cpu "
                      f"{row['iteration_cpu']:.1f}s wall {row['iteration_wall']:.1f}s ({row['steps']:.0f} steps)",
                      flush=True)
        for tr in arms.values():
            tr.collector.close()
    med = {arm: {k: statistics.median(r[k] for r in out[arm]) for k in out[arm][0]} for arm in ("before", "after")}
    out["median"] = med
    out["ratios"] = {
        "tokens (before's forwarded / after's)": med["before"]["forwarded_tokens"] / med["after"]["forwarded_tokens"],
        "update cpu": med["before"]["update_cpu"] / med["after"]["update_cpu"],
        "iteration cpu": med["before"]["iteration_cpu"] / med["after"]["iteration_cpu"],
        "iteration wall": med["before"]["iteration_wall"] / med["after"]["iteration_wall"],
    }
    pairs = list(zip(out["before"], out["after"]))  # iteration i of both arms: same seeds, same batch
    out["paired_ratios"] = {  # the median over iterations of each iteration's own before/after ratio
        "tokens": statistics.median(b["forwarded_tokens"] / a["forwarded_tokens"] for b, a in pairs),
        "update cpu": statistics.median(b["update_cpu"] / a["update_cpu"] for b, a in pairs),
        "iteration cpu": statistics.median(b["iteration_cpu"] / a["iteration_cpu"] for b, a in pairs),
    }
    print(f"{name}: " + ", ".join(f"{k} {v:.2f}x" for k, v in out["ratios"].items()) + "; paired: "
          + ", ".join(f"{k} {v:.2f}x" for k, v in out["paired_ratios"].items()), flush=True)
    return out


def grouping_cost(repeat: int = 20) -> dict:
    """CPU seconds of :func:`plan_prefix_groups` per micro-batch vs one tiny-model forward of the same rows."""
    import torch

    from gigpo.models.tiny import build_tiny
    from gigpo.rollout.prefix_sharing import plan_prefix_groups
    from gigpo.train.update.logprobs import policy_forward

    model, tok = build_tiny(None, 0)
    rng = np.random.default_rng(0)
    res = {}
    for B, P in ((16, 96), (64, 256)):
        base = rng.integers(5, len(tok), P).tolist()
        prompts = [base[:int(rng.integers(P // 2, P))] + rng.integers(5, len(tok), 8).tolist() for _ in range(B)]
        resps = [rng.integers(5, len(tok), 2).tolist() for _ in range(B)]
        seqs = [p + r for p, r in zip(prompts, resps)]
        c = time.process_time()
        for _ in range(repeat):
            plan_prefix_groups(seqs, 16, [3] * B)
        plan_s = (time.process_time() - c) / repeat
        with torch.no_grad():
            c = time.process_time()
            for _ in range(repeat):
                policy_forward(model, prompts, resps, pad_id=tok.pad_token_id, device=torch.device("cpu"))
            fwd_s = (time.process_time() - c) / repeat
        res[f"B={B} P={P}"] = {"plan_cpu_s": plan_s, "tiny_flat_forward_cpu_s": fwd_s}
        print(f"grouping B={B} P~{P}: plan {1e3 * plan_s:.2f} ms CPU; the tiny model's flat forward of the same "
              f"rows {1e3 * fwd_s:.2f} ms CPU ({plan_s / fwd_s:.1%})")
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--presets", default=",".join(PRESETS), help=f"comma-separated, from {', '.join(PRESETS)}")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: the preset's train.threads)")
    ap.add_argument("--grouping-cost", action="store_true", help="only the plan's own cost")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    import torch

    res: dict = {"machine": f"{platform.machine()}, {kernel_set()}, torch {torch.__version__}, "
                            f"{args.threads or 'preset'} threads", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    print(res["machine"], flush=True)
    if args.grouping_cost:
        res["grouping_cost"] = grouping_cost()
    else:
        res["presets"] = [run_preset(n, args.iterations, args.threads) for n in args.presets.split(",")]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
