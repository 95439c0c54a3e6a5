"""Device check of rollout.engine=vllm (needs CUDA and `pip install 'gigpo[vllm]'`; never run in this repo's CI).

    VLLM_ALLOW_INSECURE_SERIALIZATION=1 python benchmarks/vllm_check.py [--model smollm2-135m] [--tokens 16]

1. greedy tokens and log-probs of :class:`gigpo.rollout.engine_vllm.VLLMEngine` vs the in-process
   :class:`gigpo.rollout.engine.HFEngine` on the same model and prompts (tokens must match; the log-prob gap is
   printed: vLLM's kernels differ from HF's, so equality is up to float error — bf16 more than fp32);
2. a weight push: the HF model is perturbed, pushed with ``push_weights``, and the comparison repeated — the
   vLLM answers must follow the new weights (the gap stays small and differs from the gap to the old weights).
Exit 0 when both hold, 1 otherwise; prints one JSON line of measurements.
"""

from __future__ import annotations

import argparse
import json
import sys

PROMPT_TEXTS = ["The capital of France is", "Sort the numbers 3 1 2:", "def fibonacci(n):"]


def compare(a, b) -> tuple[bool, float]:
    same = all(x.token_ids == y.token_ids for x, y in zip(a, b))
    gap = max(abs(p - q) for x, y in zip(a, b) for p, q in zip(x.logprobs, y.logprobs))
    return same, gap


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args()
    import torch

    from gigpo.models import load_model
    from gigpo.rollout import HFEngine
    from gigpo.rollout.engine_vllm import VLLMEngine

    if not torch.cuda.is_available():
        print("vllm_check: no CUDA device; nothing to check", file=sys.stderr)
        return 2
    bundle = load_model(args.model, device="cuda", dtype=args.dtype)
    hf = HFEngine(bundle.model, bundle.tokenizer, "cuda")
    engine = VLLMEngine(bundle, eos_ids=hf.eos_ids, seed=0)
    prompts = [bundle.tokenizer.encode(t) for t in PROMPT_TEXTS]
    kw = dict(max_new_tokens=args.tokens, temperature=0.0)
    same0, gap0 = compare(hf.generate(prompts, **kw), engine.generate(prompts, **kw))
    with torch.no_grad():
        for p in bundle.model.parameters():
            p.mul_(1.05)
    engine.push_weights(bundle.model, 1)
    same1, gap1 = compare(hf.generate(prompts, **kw), engine.generate(prompts, **kw))
    ok = same0 and same1
    print(json.dumps({"model": args.model, "dtype": args.dtype, "tokens_equal_before": same0, "gap_before": gap0,
                      "tokens_equal_after_push": same1, "gap_after_push": gap1, "ok": ok}))
    engine.close()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
