"""GPU readiness check with the bundled SmolLM2-135M (no downloads): a few real trainer iterations on one device.

Prints rollout and update tokens/s (prompt + response tokens each phase processed per second), peak device
memory, and the agreement checks a correct learner must pass:

* log-probs: the sampler's per-token log-probs against the learner's no-grad recomputation of the same rows
  (``update/sampler_logprob_gap``, mean |Δ| per token; the same masks under constrained decoding). fp32 on CPU
  agrees to ~1e-6; bf16 on a GPU to ~1e-2 (bf16 has 8 mantissa bits);
* loss: at the first PPO mini-batch the policy equals the one that produced the old log-probs, so the ratio is 1:
  ``loss/approx_kl`` ≈ 0 and ``loss/clip_frac`` = 0 (printed for the first iteration, one epoch, one mini-batch);
* shared prefixes (``optim.shared_prefix``, on in every iteration above): the last batch's log-probs over shared
  prefixes against the flat pass, within the same dtype limit, and the tokens each forwarded.

Sized for ≤ 8 minutes on one H200 (default: 3 iterations of 16 groups × 8 trajectories, gridgoal, LoRA,
constrained decoding, bf16). ``--device cpu --quick`` runs the same code on a CPU in a minute or two (fp32, 1
iteration of 2 × 2): how this script was tested here; it has not been run on a GPU in this repository.

    python benchmarks/gpu_check.py                       # on the GPU machine
    python benchmarks/gpu_check.py --vllm                # + the vLLM engines (needs `pip install 'gigpo[vllm]'`)
    python benchmarks/gpu_check.py --device cpu --quick  # smoke run anywhere

``--vllm`` then runs ``benchmarks/vllm_check.py`` on the same device: one iteration each with the hf engine, a
vLLM server on 127.0.0.1 (``rollout.engine=openai``, LoRA adapters pushed through ``/v1/load_lora_adapter``) and
in-process vLLM (``rollout.engine=vllm``, ``collective_rpc reload_weights``), constrained decoding through
``structured_outputs.choice``, failing on a rollout-vs-learner log-prob gap above the dtype's limit. Budget on
one H200 (not measured: no GPU was available to this repository): ~3 min for the training checks, ~4 min for the
vLLM engines (two eager vLLM starts of ~1 min each). The vLLM part is tested on CPU (``.ci/vllm``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

import torch


def shared_prefix_check(tr, batch) -> tuple[float, dict]:
    """optim.shared_prefix on the device: the last batch's log-probs over shared prefixes against the flat pass
    (max |Δ| over response tokens, no grad), and the tokens each forwarded."""
    from gigpo.train.update.logprobs import policy_forward

    if batch is None:
        return float("nan"), {}
    rows = [i for i in range(len(batch)) if batch.response_ids[i]][:64]
    kw = dict(pad_id=tr.pad_id, device=tr.device, temperature=tr.cfg.rollout.temperature or 1.0,
              allowed=[batch.allowed_tokens[i] for i in rows] if getattr(batch, "allowed_tokens", None) else None)
    out, tallies = [], []
    with torch.no_grad():
        for share in (0, tr.cfg.optim.shared_prefix_min_tokens):
            tallies.append({})
            lp, mask, _, _ = policy_forward(tr.model, [batch.prompt_ids[i] for i in rows],
                                            [batch.response_ids[i] for i in rows], share_min_tokens=share,
                                            tally=tallies[-1], **kw)
            out.append((lp * mask).float())
    gap = float((out[0] - out[1]).abs().max())
    tally = {"flat": tallies[0].get("forwarded", 0), "shared": tallies[1].get("forwarded", 0)}
    print(f"shared prefix: {len(rows)} rows, tokens forwarded {tally['flat']} flat -> {tally['shared']} shared, "
          f"max |log-prob gap| {gap:.2e}", flush=True)
    return gap, tally


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="tiny batch, one iteration (CPU smoke run)")
    ap.add_argument("--iterations", type=int, default=0, help="default: 3 (1 with --quick)")
    ap.add_argument("--decoding", default="constrained", choices=["free", "constrained"])
    ap.add_argument("--max-gap", type=float, default=0.0, help="fail above this log-prob gap (default: by dtype)")
    ap.add_argument("--json", default="")
    ap.add_argument("--vllm", action="store_true", help="then check the vLLM engines (benchmarks/vllm_check.py)")
    args = ap.parse_args()
    from gigpo.train.config import load_config
    from gigpo.train.trainer import Trainer

    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print("no CUDA device here; use --device cpu --quick for a smoke run", file=sys.stderr)
        return 2
    iterations = args.iterations or (1 if args.quick else 3)
    groups, size = (2, 2) if args.quick else (16, 8)
    dtype = "bfloat16" if cuda else "float32"
    with tempfile.TemporaryDirectory() as d:
        cfg = load_config("smollm2", [
            f"model.device={args.device}", f"model.dtype={dtype}", f"rollout.decoding={args.decoding}",
            f"rollout.groups={groups}", f"rollout.group_size={size}", f"train.iterations={iterations}",
            "train.eval_episodes=0", "train.checkpoint_every=0", "train.progress=false",
            "train.sample_trajectories=0", "optim.micro_batch_size=64" if cuda else "optim.micro_batch_size=8",
            f"train.run_dir={d}/run"])
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        tr = Trainer(cfg)
        load_s = time.perf_counter() - t0
        counts = {"tokens": 0}
        orig = tr.prepare

        def prepare(batch):
            counts["tokens"] += sum(len(p) + len(r) for p, r in zip(batch.prompt_ids, batch.response_ids))
            return orig(batch)

        orig_update = tr.update

        def update(batch, *args, **kwargs):  # every iteration's batch reaches update, with signal or not
            counts["batch"] = batch
            return orig_update(batch, *args, **kwargs)

        tr.prepare, tr.update = prepare, update
        recs = []
        for it in range(1, iterations + 1):
            before = counts["tokens"]
            rec = tr.iteration(it)
            rec["tokens"] = counts["tokens"] - before
            recs.append(rec)
            print(f"iteration {it}: rollout {rec['time/rollout']:.1f}s ({rec['tokens'] / rec['time/rollout']:.0f} "
                  f"tok/s), update {rec['time/update']:.1f}s ({rec['tokens'] / rec['time/update']:.0f} tok/s), "
                  f"{rec['rollout/steps']:.0f} steps, valid {rec['rollout/valid_action_rate']:.2f}, "
                  f"success {rec['rollout/success_rate']:.2f}, sampler gap {rec.get('update/sampler_logprob_gap', float('nan')):.2e}, "
                  f"approx_kl {rec.get('loss/approx_kl', float('nan')):.2e}", flush=True)
        shared_gap, shared_tally = shared_prefix_check(tr, counts.get("batch"))
        tr.collector.close()
        tr.eval_collector.close()
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")
    # an iteration without signal (every advantage 0) skips its update and measures no gap: judge the others
    updated = [r for r in recs if "update/sampler_logprob_gap" in r]
    if not updated:
        print(f"FAILED: no iteration of {iterations} updated (no reward signal), so no log-prob gap was measured; "
              "rerun with more iterations")
        sys.exit(1)
    gap = max(r["update/sampler_logprob_gap"] for r in updated)
    first = updated[0]
    limit = args.max_gap or (3e-2 if dtype == "bfloat16" else 1e-4)
    ok = gap <= limit and abs(first.get("loss/approx_kl", 0.0)) <= limit and first.get("loss/clip_frac", 0.0) == 0.0
    ok = ok and shared_gap <= limit
    tok = sum(r["tokens"] for r in recs)
    summary = {"device": args.device, "dtype": dtype, "load_s": load_s, "iterations": iterations,
               "rollout_tokens_per_s": tok / sum(r["time/rollout"] for r in recs),
               "update_tokens_per_s": tok / sum(r["time/update"] for r in recs), "peak_memory_gib": peak,
               "max_sampler_logprob_gap": gap, "first_approx_kl": first.get("loss/approx_kl"),
               "first_clip_frac": first.get("loss/clip_frac"), "shared_prefix_gap": shared_gap,
               "shared_prefix_tokens": shared_tally, "ok": ok}
    print(json.dumps(summary, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    print("OK" if ok else f"FAILED: log-prob gap or first-step ratio beyond {limit}")
    if args.vllm:
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import vllm_check

        vllm_args = ["--device", args.device] + (["--groups", "2", "--group-size", "2"] if args.quick else [])
        ok = vllm_check.main(vllm_args + (["--json", args.json + ".vllm.json"] if args.json else [])) == 0 and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
