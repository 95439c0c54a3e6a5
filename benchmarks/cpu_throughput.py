"""Benchmark: where SmolLM2-135M's time goes on this CPU, and what the trainer achieves against the raw rates.

One run prints (docs/results/cpu_throughput.md):

* the machine's fp32 matmul rate (GFLOP/s, ``torch.mm`` of two n×n matrices);
* raw model rates: prefill tokens/s (one no-grad forward over B prompts of P tokens), decode tokens/s (cached
  one-token forwards), update tokens/s (forward + backward + AdamW step over B×P tokens) full and LoRA, each with
  its model FLOPs utilisation MFU = achieved FLOP/s ÷ measured matmul FLOP/s. FLOPs per token: 2·N forward
  (N = parameters in matmuls: the decoder's linear layers, plus the LM head where logits are computed),
  6·N forward+backward for full fine-tuning, 4·N with LoRA (no weight gradients for frozen matrices);
  attention's O(P²) term is left out (P ≤ 128 here: < 5% of the total);
* knobs, each A vs B back-to-back in this run: no_grad vs inference_mode, eager vs SDPA attention, 1 vs 2
  threads;
* the trainer on the given presets (``--preset``, default the old and new SmolLM2 settings): seconds of rollout
  and update per iteration, steps, and the tokens each phase processed per second (prompt + response tokens,
  since prompts are what costs), next to the raw rates above.

Wall time and CPU time (``time.process_time``) are both printed: on a shared machine compare ratios within a run.

    python benchmarks/cpu_throughput.py [--quick] [--threads 2] [--iterations 1] [--skip-trainer]
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time

import torch

#: The SmolLM2 preset before issue 18 (free decoding, history and admissible list in every prompt), as overrides
#: of today's configs/smollm2.yaml; the preset with identical rows computed every time (the shared prefill and the
#: learner's row dedupe switched off); with identical rows once; and as is, shared prefixes computed once
#: (optim.shared_prefix=auto, issue 38). (name, overrides, rows shared)
PRESETS = [
    ("before", ["rollout.decoding=free", "prompt.history_length=1", "prompt.show_admissible=true",
                "prompt.max_prompt_tokens=512", "optim.micro_batch_size=8", "optim.shared_prefix=off"], False),
    ("after, rows not shared", ["optim.shared_prefix=off"], False),
    ("after", ["optim.shared_prefix=off"], True),
    ("shared_prefix", [], True),  # issue 38: shared prefixes computed once (benchmarks/shared_prefix.py)
]


def timed(fn, repeat: int = 1) -> tuple[float, float]:
    """(wall s, CPU s) per call, best wall of ``repeat``."""
    best = (float("inf"), 0.0)
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        w, c = time.perf_counter() - w, time.process_time() - c
        best = min(best, (w, c))
    return best


def matmul_gflops(n: int, repeat: int) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    wall, _ = timed(lambda: torch.mm(a, b), repeat)
    return 2 * n**3 / wall / 1e9


def matmul_params(model) -> tuple[int, int]:
    """(decoder linear-layer parameters, LM-head parameters)."""
    head = model.get_output_embeddings().weight.numel()
    lin = sum(m.weight.numel() for n, m in model.named_modules()
              if isinstance(m, torch.nn.Linear) and "lm_head" not in n and "lora_" not in n)
    return lin, head


def load(attn: str = "sdpa", lora: bool = False):
    from gigpo.models import load_model

    b = load_model("smollm2-135m", device="cpu", dtype="float32",
                   lora={"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": "all-linear"} if lora else None)
    b.model.config._attn_implementation = attn  # eager or sdpa: read at every forward
    return b


def raw_rates(B: int, P: int, T: int, repeat: int, peak: float) -> dict:
    out: dict[str, dict] = {}
    b = load()
    model = b.model.eval()
    lin, head = matmul_params(model)
    ids = torch.randint(100, 40000, (B, P))
    attn = torch.ones_like(ids)

    def prefill(ctx=torch.inference_mode):
        with ctx():
            return model(input_ids=ids, attention_mask=attn, use_cache=True, logits_to_keep=1)

    for name, ctx in (("prefill (no_grad)", torch.no_grad), ("prefill (inference_mode)", torch.inference_mode)):
        wall, cpu = timed(lambda ctx=ctx: prefill(ctx), repeat)
        out[name] = {"tokens_per_s": B * P / wall, "wall_s": wall, "cpu_s": cpu,
                     "mfu": 2 * lin * B * P / wall / 1e9 / peak}
    for attn_impl in ("eager", "sdpa"):
        model.config._attn_implementation = attn_impl
        wall, cpu = timed(prefill, repeat)
        out[f"prefill ({attn_impl})"] = {"tokens_per_s": B * P / wall, "wall_s": wall, "cpu_s": cpu,
                                         "mfu": 2 * lin * B * P / wall / 1e9 / peak}
    model.config._attn_implementation = "sdpa"

    def decode():
        with torch.inference_mode():
            o = model(input_ids=ids, attention_mask=attn, use_cache=True, logits_to_keep=1)
            m = attn
            for _ in range(T):
                m = torch.cat([m, torch.ones((B, 1), dtype=m.dtype)], 1)
                kv = {"cache": o.cache} if "cache" in o else {"past_key_values": o.past_key_values}
                o = model(input_ids=o.logits[:, -1].argmax(-1, keepdim=True), attention_mask=m, use_cache=True,
                          **kv)

    wall_all, cpu_all = timed(decode, 1)
    wall = max(wall_all - out["prefill (inference_mode)"]["wall_s"], 1e-9)
    out["decode"] = {"tokens_per_s": B * T / wall, "wall_s": wall, "cpu_s": cpu_all,
                     "mfu": 2 * (lin + head) * B * T / wall / 1e9 / peak}
    for lora in (False, True):
        bb = load(lora=lora)
        m = bb.model.train()
        opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-5)

        def step(m=m, opt=opt):  # bound now: called only inside this loop turn
            loss = m(input_ids=ids, attention_mask=attn, logits_to_keep=T + 1).logits.float().logsumexp(-1).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        step()  # warm-up: AdamW state allocation
        wall, cpu = timed(step, repeat)
        flops = (4 if lora else 6) * lin * B * P + 6 * head * B * (T + 1)
        out["update (LoRA r=8)" if lora else "update (full)"] = {
            "tokens_per_s": B * P / wall, "wall_s": wall, "cpu_s": cpu, "mfu": flops / wall / 1e9 / peak}
    return out


def trainer_phases(preset: str, overrides: list[str], iterations: int, threads: int, shared: bool = True) -> dict:
    from gigpo.rollout import sampling
    from gigpo.train.config import load_config
    from gigpo.train.trainer import Trainer
    from gigpo.train.update import logprobs

    sampling.SHARE_PREFILL = logprobs.DEDUPE_ROWS = shared

    with tempfile.TemporaryDirectory() as d:
        cfg = load_config("smollm2", [*overrides, f"train.iterations={iterations}", "train.eval_episodes=0",
                                      "train.checkpoint_every=0", "train.progress=false", f"train.threads={threads}",
                                      "train.sample_trajectories=0", f"train.run_dir={d}/run"])
        tr = Trainer(cfg)
        counts = {"prompt": 0, "response": 0, "rows": 0, "distinct_rows": 0}
        orig = tr.prepare

        def prepare(batch):  # count the tokens this iteration's passes process
            counts["prompt"] += sum(len(p) for p in batch.prompt_ids)
            counts["response"] += sum(len(r) for r in batch.response_ids)
            counts["rows"] += len(batch.prompt_ids)
            counts["distinct_rows"] += len(logprobs.unique_rows(batch.prompt_ids, batch.response_ids,
                                                                getattr(batch, "allowed_tokens", None) or None)[0])
            return orig(batch)

        tr.prepare = prepare
        cpu0 = time.process_time()
        recs = [tr.iteration(it) for it in range(1, iterations + 1)]
        forwarded = sum(r.get("update/tokens_forwarded", 0.0) for r in recs)
        cpu = time.process_time() - cpu0
        tr.collector.close()
    roll = sum(r["time/rollout"] for r in recs)
    upd = sum(r["time/update"] for r in recs)
    toks = counts["prompt"] + counts["response"]
    sampling.SHARE_PREFILL = logprobs.DEDUPE_ROWS = True
    return {"preset": preset, "overrides": overrides, "iterations": iterations, "shared": shared,
            "rows": counts["rows"], "distinct_rows": counts["distinct_rows"], "learner_tokens_forwarded": forwarded,
            "steps": sum(r["rollout/steps"] for r in recs), "prompt_tokens": counts["prompt"],
            "response_tokens": counts["response"], "valid_action_rate": recs[-1]["rollout/valid_action_rate"],
            "rollout_s_per_it": roll / iterations, "update_s_per_it": upd / iterations,
            "iteration_s": (roll + upd) / iterations, "cpu_s": cpu,
            "rollout_tokens_per_s": toks / roll, "update_tokens_per_s": toks / upd}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small shapes, one repeat (a smoke run)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=1, help="trainer iterations per preset")
    ap.add_argument("--skip-trainer", action="store_true")
    ap.add_argument("--json", default="", help="also write the results here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    B, P, T, rep, n = (2, 32, 4, 1, 256) if args.quick else (8, 96, 8, 2, 1024)
    res: dict = {"machine": f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
                            f"{torch.get_num_threads()} threads", "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                            time.gmtime())}
    peak = matmul_gflops(n, 3 * rep)
    res["matmul_gflops"] = peak
    print(f"fp32 matmul ({n}x{n}): {peak:.1f} GFLOP/s   [{res['machine']}]")
    res["raw"] = raw_rates(B, P, T, rep, peak)
    print(f"raw SmolLM2-135M rates, B={B} P={P} T={T}:")
    for k, v in res["raw"].items():
        print(f"  {k:26s} {v['tokens_per_s']:8.1f} tok/s  MFU {100 * v['mfu']:5.1f}%  wall {v['wall_s']:.2f}s "
              f"cpu {v['cpu_s']:.2f}s")
    for threads in (1, 2) if not args.quick else ():
        torch.set_num_threads(threads)
        b = load().model.eval()
        ids = torch.randint(100, 40000, (B, P))
        with torch.inference_mode():
            wall, cpu = timed(lambda b=b, ids=ids: b(input_ids=ids, logits_to_keep=1), rep)
        res["raw"][f"prefill ({threads} thread)"] = {"tokens_per_s": B * P / wall, "wall_s": wall, "cpu_s": cpu,
                                                     "mfu": float("nan")}
        print(f"  prefill {threads} thread(s)       {B * P / wall:8.1f} tok/s  wall {wall:.2f}s cpu {cpu:.2f}s")
    torch.set_num_threads(args.threads)
    if not args.skip_trainer:
        res["trainer"] = []
        for name, ov, shared in PRESETS:
            r = trainer_phases(name, ov, args.iterations, args.threads, shared)
            res["trainer"].append(r)
            print(f"trainer [{name}] {r['iteration_s']:.1f} s/it (rollout {r['rollout_s_per_it']:.1f} + update "
                  f"{r['update_s_per_it']:.1f}), {r['steps']:.0f} steps, {r['prompt_tokens']} prompt + "
                  f"{r['response_tokens']} response tokens ({r['distinct_rows']}/{r['rows']} rows distinct, "
                  f"{r['learner_tokens_forwarded']:.0f} tokens forwarded by the learner); rollout {r['rollout_tokens_per_s']:.0f} tok/s, update "
                  f"{r['update_tokens_per_s']:.0f} tok/s; valid {r['valid_action_rate']:.2f}; cpu {r['cpu_s']:.1f}s")
        for new in res["trainer"][-2:]:  # rows shared, then shared prefixes too: the column against the raw rates
            print(f"[{new['preset']}] rollout phase / raw prefill: "
                  f"{new['rollout_tokens_per_s'] / res['raw']['prefill (sdpa)']['tokens_per_s']:.2f}"
                  f"; update phase / raw LoRA update: "
                  f"{new['update_tokens_per_s'] / res['raw']['update (LoRA r=8)']['tokens_per_s']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
