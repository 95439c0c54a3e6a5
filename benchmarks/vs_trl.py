"""gigpo's learner step and generation side by side with TRL's ``GRPOTrainer`` (docs/results/vs_trl.md).

    python benchmarks/vs_trl.py [--models tiny,smollm2-135m] [--reps 3] [--steps 3] [--batch 8]
                                [--prompt-len 64] [--completion-len 32] [--threads 1]
                                [--trl-python /tmp/trl-venv/bin/python]

One fixed batch per model — ``--batch`` prompts of ``--prompt-len`` random token ids (seeded) and one sampled
completion each (HF ``generate``, at most ``--completion-len`` tokens, stops at EOS), advantages drawn once — is
written to a JSON file; then, in separate processes, interleaved ``--reps`` times:

* **gigpo**: ``Trainer.update`` on that batch as a RolloutBatch (one mini-batch, one micro-batch, token-mean,
  clip 0.2/0.2, no KL, no entropy term, ``optim.recompute_old_logprobs=false`` so no extra no-grad pass: what TRL
  does with ``num_iterations=1``), AdamW, grad clip 1.0;
* **TRL**: ``GRPOTrainer.compute_loss`` (``loss_type="bnpo"``: token mean over the batch; ``beta=0``; epsilon
  0.2) + ``accelerator.backward`` + grad clip 1.0 + its AdamW step, on the same tensors;
* generation: gigpo's ``HFEngine.generate`` (tokens and their sampling log-probs) vs TRL's
  ``_generate_single_turn`` (both Hugging Face ``generate`` underneath; tokens only), and vs that plus TRL's
  no-grad ``_get_per_token_logps_and_entropies`` pass (how TRL gets the same log-probs when it needs them),
  ``--batch`` prompts, sampled at temperature 1, ``--completion-len`` new tokens at most; each call seeded
  alike on both sides, so both generate the same tokens. The TRL process also runs gigpo's HFEngine on TRL's
  model object, interleaved call by call with TRL's generation: the ratio free of process-to-process noise.

Reported per framework: the median over ``--steps`` timed steps (after one warm-up step) of seconds per
optimizer step (wall and process CPU), tokens/s (prompt + completion tokens of the batch per second), the
step's peak resident memory above the resident memory before it (Linux VmHWM, reset through
/proc/self/clear_refs), and generation seconds (wall and CPU) and tokens/s; then the ratios gigpo / TRL within
each rep. Same torch threads (``--threads``) for both. TRL is run from its
own virtual environment (``--trl-python``) so it cannot change the main one; without it the script says so and
exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
DEFAULT_TRL_PYTHON = "/tmp/trl-venv/bin/python"


# ---------------------------------------------------------------------- memory
def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def timed_peak(fn):
    """(seconds, peak RSS above the RSS before, in bytes) of ``fn()``."""
    before = _status("VmRSS")
    _reset_peak()
    t0 = time.perf_counter()
    fn()
    seconds = time.perf_counter() - t0
    return seconds, max(0, _status("VmHWM") - before)


# ---------------------------------------------------------------------- the fixed batch
def make_batch(model_name: str, batch: int, prompt_len: int, completion_len: int, path: Path) -> None:
    import numpy as np
    import torch

    from gigpo.models import load_model
    from gigpo.rollout import HFEngine

    bundle = load_model(model_name, device="cpu", seed=0)
    tok = bundle.tokenizer
    special = set(tok.all_special_ids)
    rng = np.random.default_rng(0)
    pool = [i for i in range(min(len(tok), 30000)) if i not in special]
    prompts = [rng.choice(pool, size=prompt_len).tolist() for _ in range(batch)]
    torch.manual_seed(0)
    gens = HFEngine(bundle.model, tok, "cpu").generate(prompts, max_new_tokens=completion_len, temperature=1.0,
                                                       top_p=1.0)
    adv = rng.standard_normal(batch)
    adv = ((adv - adv.mean()) / (adv.std() + 1e-6)).tolist()
    path.write_text(json.dumps({"model": model_name, "prompts": prompts, "completions": [g.token_ids for g in gens],
                                "logprobs": [g.logprobs for g in gens], "advantages": adv}))


# ---------------------------------------------------------------------- one framework, one process
def run_gigpo(data: dict, args: argparse.Namespace) -> dict:
    import numpy as np
    import torch

    from gigpo.rollout import HFEngine, RolloutBatch
    from gigpo.train.config import load_config
    from gigpo.train.trainer import Trainer

    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(None, [
            f"model.name={data['model']}", "model.tiny={}", "algorithm=grpo", f"train.run_dir={tmp}/run",
            f"rollout.max_response_tokens={args.completion_len}", f"optim.micro_batch_size={args.batch}",
            "optim.mini_batches=1", "optim.ppo_epochs=1", "optim.loss_agg=token-mean", "optim.clip_low=0.2",
            "optim.clip_high=0.2", "optim.kl_coef=0", "optim.entropy_coef=0", "optim.grad_clip=1.0",
            "optim.lr=1e-6", "optim.recompute_old_logprobs=false", f"train.threads={args.threads}",
            "train.eval_episodes=0", "train.progress=false", "optim.lr_schedule=constant"])
        trainer = Trainer(cfg)
        torch.set_num_threads(args.threads)
        b = RolloutBatch()
        for i, (p, c, lp) in enumerate(zip(data["prompts"], data["completions"], data["logprobs"])):
            b.add_row(group_id=i // 4, traj_id=i, step=0, reward=0.0, done=True, action_valid=True, observation="",
                      state_key="", prompt_ids=p, response_ids=c, sampling_logprobs=lp)
        adv = np.asarray(data["advantages"])
        step = lambda: trainer.update(b, adv, 1)  # noqa: E731
        engine = HFEngine(trainer.model, trainer.tok, "cpu")
        gen = lambda: engine.generate(data["prompts"], max_new_tokens=args.completion_len,  # noqa: E731
                                      temperature=1.0, top_p=1.0)
        return measure(step, {"gen": gen}, data, args)


def run_trl(data: dict, args: argparse.Namespace) -> dict:
    import torch
    import trl
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from gigpo.models import load_model
    from gigpo.rollout import HFEngine

    torch.set_num_threads(args.threads)
    bundle = load_model(data["model"], device="cpu", seed=0)
    model, tok = bundle.model, bundle.tokenizer
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    with tempfile.TemporaryDirectory() as tmp:
        targs = GRPOConfig(output_dir=tmp, per_device_train_batch_size=args.batch, num_generations=4,
                           max_completion_length=args.completion_len, beta=0.0, loss_type="bnpo", epsilon=0.2,
                           learning_rate=1e-6, max_grad_norm=1.0, optim="adamw_torch", weight_decay=0.0,
                           use_cpu=True, report_to=[], logging_steps=1000, temperature=1.0, top_p=1.0,
                           bf16=False, fp16=False)
        trainer = GRPOTrainer(model=model, reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
                              args=targs, train_dataset=Dataset.from_dict({"prompt": ["x"] * args.batch}),
                              processing_class=tok)
        trainer.create_optimizer()
        trainer.current_gradient_accumulation_steps = 1  # set by the HF training loop, which we do not run
        pad = tok.pad_token_id
        P = max(len(p) for p in data["prompts"])
        C = max(len(c) for c in data["completions"])
        prompt_ids = torch.tensor([[pad] * (P - len(p)) + p for p in data["prompts"]])
        prompt_mask = torch.tensor([[0] * (P - len(p)) + [1] * len(p) for p in data["prompts"]])
        completion_ids = torch.tensor([c + [pad] * (C - len(c)) for c in data["completions"]])
        completion_mask = torch.tensor([[1] * len(c) + [0] * (C - len(c)) for c in data["completions"]])
        inputs = {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
                  "completion_mask": completion_mask, "advantages": torch.tensor(data["advantages"]),
                  "num_items_in_batch": completion_mask.sum()}
        model = trainer.model
        opt = trainer.optimizer

        def step() -> None:
            model.train()
            loss = trainer.compute_loss(model, inputs)
            trainer.accelerator.backward(loss)
            trainer.accelerator.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)

        def gen() -> list:
            model.eval()
            ids, _ = trainer._generate_single_turn(data["prompts"], None, {}, 1)
            return ids

        def gen_logp() -> list:
            """Generation plus the no-grad pass in which TRL gets the old (sampling-policy) log-probs when it
            needs them (num_iterations > 1, misaligned generation, vLLM importance sampling): gigpo's
            HFEngine returns them with the tokens, so this is the like-for-like side of the comparison."""
            ids = gen()
            comp = [torch.tensor(c) for c in ids]
            cmax = max(len(c) for c in ids)
            c_ids = torch.stack([torch.cat([c, torch.full((cmax - len(c),), pad)]) for c in comp])
            c_mask = torch.tensor([[1] * len(c) + [0] * (cmax - len(c)) for c in ids])
            with torch.no_grad():
                trainer._get_per_token_logps_and_entropies(
                    model, torch.cat([prompt_ids, c_ids], 1), torch.cat([prompt_mask, c_mask], 1), cmax,
                    batch_size=args.batch)
            return ids

        # gigpo's engine on this same model object, interleaved with TRL's calls: no process-to-process noise
        engine = HFEngine(model, tok, "cpu")

        def gen_gigpo() -> list:
            return engine.generate(data["prompts"], max_new_tokens=args.completion_len, temperature=1.0, top_p=1.0)

        out = measure(step, {"gen": gen, "genlp": gen_logp, "gigpo_gen": gen_gigpo}, data, args)
        out["trl_version"] = trl.__version__
        return out


def measure(step, gens: dict, data: dict, args: argparse.Namespace) -> dict:
    """Medians of the timed calls. Generation call ``i`` of every arm in ``gens`` is seeded
    ``torch.manual_seed(i)``, the arms interleaved call by call (order rotated), so arms in one process sample
    the same tokens from the same weights, and across processes (weights differing by lr-1e-6 steps) nearly so."""
    import torch
    import transformers

    step()  # warm-up (allocations, optimizer state)
    secs, cpus, peaks = [], [], []
    for _ in range(args.steps):
        c0 = time.process_time()
        s, p = timed_peak(step)
        secs.append(s)
        cpus.append(time.process_time() - c0)
        peaks.append(p)
    tokens = sum(len(p) + len(c) for p, c in zip(data["prompts"], data["completions"]))
    step_s = statistics.median(secs)
    out = {"step_s": step_s, "step_cpu_s": statistics.median(cpus), "tokens_per_s": tokens / step_s,
           "peak_mb": statistics.median(peaks) / 2**20, "torch": torch.__version__,
           "transformers": transformers.__version__, "threads": torch.get_num_threads()}
    for fn in gens.values():
        torch.manual_seed(10_000)
        fn()  # warm-up
    rec = {name: {"walls": [], "cpus": [], "toks": [], "faults": []} for name in gens}
    names = list(gens)
    for i in range(args.steps):
        for name in names[i % len(names):] + names[:i % len(names)]:
            torch.manual_seed(i)
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            c0, t0 = time.process_time(), time.perf_counter()
            res = gens[name]()
            r = rec[name]
            r["walls"].append(time.perf_counter() - t0)
            r["cpus"].append(time.process_time() - c0)
            r["faults"].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
            r["toks"].append(sum(len(getattr(g, "token_ids", g)) for g in res))
    for name, r in rec.items():
        out.update({f"{name}_s": statistics.median(r["walls"]), f"{name}_cpu_s": statistics.median(r["cpus"]),
                    f"{name}_walls": r["walls"], f"{name}_tokens": r["toks"],
                    f"{name}_minflt": statistics.median(r["faults"]),
                    f"{name}_tokens_per_s": statistics.median(t / s for t, s in zip(r["toks"], r["walls"]))})
    return out


# ---------------------------------------------------------------------- driver
def trl_available(python: str) -> str | None:
    """TRL's version in ``python``'s environment, or None."""
    if not Path(python).exists():
        return None
    out = subprocess.run([python, "-c", "import trl; print(trl.__version__)"], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def child(python: str, *argv: str) -> dict:
    out = subprocess.run([python, str(HERE), *argv], capture_output=True, text=True)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(argv[:3])} failed ({out.returncode}): {out.stderr[-3000:]}")
    return json.loads(lines[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="tiny,smollm2-135m")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--prompt-len", type=int, default=64)
    p.add_argument("--completion-len", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--trl-python", default=os.environ.get("TRL_PYTHON", DEFAULT_TRL_PYTHON))
    p.add_argument("--out", default="")
    p.add_argument("_role", nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args._role:  # a child: _role = [framework, batch file]
        data = json.loads(Path(args._role[1]).read_text())
        print(json.dumps((run_trl if args._role[0] == "trl" else run_gigpo)(data, args)))
        return
    version = trl_available(args.trl_python)
    if version is None:
        print(f"skipped: trl is not installed for {args.trl_python} (make a separate venv: python -m venv "
              "--system-site-packages VENV && VENV/bin/pip install trl -c <torch==2.13.0 constraint>; then "
              "--trl-python VENV/bin/python)")
        return
    common = [f"--batch={args.batch}", f"--prompt-len={args.prompt_len}", f"--completion-len={args.completion_len}",
              f"--threads={args.threads}", f"--steps={args.steps}"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            path = Path(tmp) / f"batch-{model}.json"
            make_batch(model, args.batch, args.prompt_len, args.completion_len, path)
            for rep in range(args.reps):
                res = {"gigpo": child(sys.executable, *common, "gigpo", str(path)),
                       "trl": child(args.trl_python, *common, "trl", str(path))}
                row = {"model": model, "rep": rep, **{f"{fw}_{k}": v for fw, r in res.items() for k, v in r.items()}}
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.out:
        Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"\ntrl {version}; batch {args.batch} x ({args.prompt_len} prompt + <= {args.completion_len} completion "
          f"tokens), threads {args.threads}; ratios gigpo/TRL per rep (machine shared: interleaved, repeated); "
          "wall (CPU) seconds\n")
    print("| model | step s gigpo / TRL | step time ratio | peak MB gigpo / TRL | generation s gigpo / TRL / "
          "TRL+logp | gen. tokens/s ratio vs TRL gen | vs TRL gen+logp | same process, interleaved | "
          "tokens/call gigpo / TRL |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model in args.models.split(","):
        mine = [r for r in rows if r["model"] == model]

        def med(k, mine=mine):
            return statistics.median(r[k] for r in mine)

        def ratios(a, b, mine=mine):
            return ", ".join(f"{r[a] / r[b]:.2f}" for r in mine)

        # per rep: the median over calls of TRL's time / gigpo's (same tokens, same weights: a tokens/s ratio)
        inproc = ", ".join(
            f"{statistics.median(t / g for t, g in zip(r['trl_gen_walls'], r['trl_gigpo_gen_walls'])):.2f}"
            for r in mine)
        print(f"| {model} | {med('gigpo_step_s'):.3f} ({med('gigpo_step_cpu_s'):.3f}) / {med('trl_step_s'):.3f} "
              f"({med('trl_step_cpu_s'):.3f}) | {ratios('gigpo_step_s', 'trl_step_s')} | "
              f"{med('gigpo_peak_mb'):.0f} / {med('trl_peak_mb'):.0f} | {med('gigpo_gen_s'):.3f} "
              f"({med('gigpo_gen_cpu_s'):.3f}) / {med('trl_gen_s'):.3f} ({med('trl_gen_cpu_s'):.3f}) / "
              f"{med('trl_genlp_s'):.3f} ({med('trl_genlp_cpu_s'):.3f}) | "
              f"{ratios('gigpo_gen_tokens_per_s', 'trl_gen_tokens_per_s')} | "
              f"{ratios('gigpo_gen_tokens_per_s', 'trl_genlp_tokens_per_s')} | {inproc} | "
              f"{mine[0]['gigpo_gen_tokens']} / {mine[0]['trl_gen_tokens']} |")


if __name__ == "__main__":
    main()
