"""Find where the step-level signal goes: GRPO vs GiGPO on one lock, from a tabular policy to `gigpo train`.

Rungs (one change at a time; every arm of a rung gets identical settings, paired by seed):

* ``T1`` tabular softmax policy θ[room, action] (zeros at start), plain policy gradient: one step per
  iteration, θ += lr · mean_rows A·∇log π(a|room) (the token-mean of the trainer, one token per row);
* ``T2`` the same table trained like the trainer: PPO ratio clip ε=0.2, ``epochs`` epochs × ``mini_batches``
  mini-batches, Adam (β 0.9/0.999), global grad-norm clip 1.0;
* ``M3`` the tiny random-init Llama through ``gigpo train`` (configs/lock.yaml: 1-token actions, prompt =
  observation only, PPO 2 epochs × 4 mini-batches, Adam lr 2e-3) — adds function approximation and the
  invalid-token phase (274-token vocabulary, 4 valid words);
* ``M4`` M3 with the trainer's defaults for the prompt and the update (history of 2 turns, instructions,
  admissible list, 1 epoch × 1 mini-batch).

Ablations on T2 (tabular, cheap): ω, normalize, std ddof, γ, learning rate, step groups keyed by (state, t)
instead of state (no mixing of time steps), history-aware anchors and HGPO.

The tabular rungs run here in numpy on the real :class:`gigpo.envs.lock.LockEnv` with
:func:`gigpo.algo.compute_advantages`; the model rungs run through :func:`gigpo.train.sweep.run_sweep` (seed-major
order, so a partial run still pairs seeds), equivalent to::

    gigpo sweep --config lock --seeds 8 --out OUT --name M3 algorithm=grpo,gigpo
    gigpo sweep --config lock --seeds 8 --out OUT --name M4 algorithm=grpo,gigpo prompt.history_length=2 \
        prompt.instructions=true prompt.show_admissible=true optim.ppo_epochs=1 optim.mini_batches=1

Statistic per rung: success AUC = mean over iterations of the fraction of won trajectories; the paired
difference (B − A) per seed, its mean with a percentile-bootstrap 95% CI over seeds (10 000 resamples) and the
two-sided exact sign test p (ties dropped). Same for final success (mean of the last 10 iterations).
One implementation: :mod:`gigpo.train.sweep.paired_stats` (``gigpo sweep --paired`` uses it too).

    python benchmarks/credit_bridge.py tabular [--seeds 16] [--out runs/credit_bridge]
    python benchmarks/credit_bridge.py model [--seeds 8] [--out runs/credit_bridge] [--rungs M3,M4]
    python benchmarks/credit_bridge.py report [--out runs/credit_bridge]   # tables of everything that ran
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from gigpo.algo import compute_advantages
from gigpo.envs.lock import LockEnv
from gigpo.train.sweep.paired_stats import paired_stat

LOCK = dict(rooms=5, actions=4, traps=1, trap="reset", max_steps=15, lock_seed=0)  # = configs/lock.yaml
GROUPS, GROUP_SIZE, ITERS = 4, 8, 60
INVALID_PENALTY = -0.1  # = rollout.invalid_penalty of configs/lock.yaml
MODEL_RUNGS = {
    "M3": [],
    "M3-mean": ["algorithm.normalize=mean"],  # cause-2 ablation: penalty differences not scaled up to unit size
    "M4": ["prompt.history_length=2", "prompt.instructions=true", "prompt.show_admissible=true",
           "optim.ppo_epochs=1", "optim.mini_batches=1"],
    # cause-2 remedies, one at a time: no invalid-token phase; exploration kept alive; no-signal groups re-drawn
    "M3-constrained": ["rollout.decoding=constrained"],
    "M3-entropy": ["optim.entropy_coef=0.01"],
    "M3-dynamic": ["rollout.dapo.dynamic_sampling=true"],
    # cause 4: after the solve, mean_std turns γ-only return differences into unit-size step advantages
    "M3-constrained-mean": ["rollout.decoding=constrained", "algorithm.normalize=mean"],
}


# ---------------------------------------------------------------- tabular rollouts and updates
def collect(theta: np.ndarray, rng: np.random.Generator, it: int, lock: dict) -> dict[str, np.ndarray | list]:
    """GROUPS × GROUP_SIZE episodes of the lock under π = softmax(θ[room]); flat per-step rows."""
    rows: dict[str, list] = {k: [] for k in ("group", "traj", "step", "reward", "room", "action", "obs", "won")}
    envs = [LockEnv(**lock) for _ in range(GROUPS * GROUP_SIZE)]
    obs = [e.reset(seed=1000 * it + i // GROUP_SIZE)[0] for i, e in enumerate(envs)]
    alive = list(range(len(envs)))
    t = 0
    while alive:
        rooms = np.array([envs[i].state_key[0] for i in alive])
        logits = theta[rooms]
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        acts = (rng.random(len(alive))[:, None] > np.cumsum(p, 1)).sum(1)
        nxt = []
        for i, room, a in zip(alive, rooms, acts, strict=True):
            # Columns past the env's words are invalid outputs (the model's other vocabulary tokens): the
            # rollout's penalty, state unchanged.
            valid = a < len(envs[i].words)
            o2, r, done, info = envs[i].step(envs[i].words[a] if valid else "<invalid>")
            r += 0.0 if valid else INVALID_PENALTY
            for k, v in (("group", i // GROUP_SIZE), ("traj", i), ("step", t), ("reward", r), ("room", room),
                         ("action", a), ("obs", obs[i]), ("won", info["won"])):
                rows[k].append(v)
            obs[i] = o2
            if not done:
                nxt.append(i)
        alive, t = nxt, t + 1
    out = {k: np.asarray(v) for k, v in rows.items() if k != "obs"}
    out["obs"] = rows["obs"]
    return out


def success_rate(rows) -> float:
    return float(rows["won"].sum()) / (GROUPS * GROUP_SIZE)


AdvFn = Callable[[dict], np.ndarray]


def arm_advantages(arm: str, **kw) -> AdvFn:
    """Advantage function of an arm over collected rows (``kw``: compute_advantages overrides / anchor mode)."""
    anchors_mode = kw.pop("anchors", "obs")
    history = kw.pop("history", 0)

    def fn(rows) -> np.ndarray:
        if arm == "hgpo":
            from gigpo.algo.estimators.hgpo import hgpo_advantages

            return hgpo_advantages(rows["group"], rows["traj"], rows["step"], rows["reward"], rows["obs"],
                                   **kw).advantages
        anchors = rows["obs"]
        if anchors_mode == "obs_t":
            anchors = list(zip(rows["obs"], rows["step"].tolist(), strict=True))
        if history:
            from gigpo.algo.grouping import history_anchors

            anchors = history_anchors(rows["traj"], rows["step"], anchors, history)
        est = "grpo" if arm == "grpo" else "gigpo"
        return compute_advantages(rows["group"], rows["traj"], rows["step"], rows["reward"], anchors,
                                  estimator=est, **kw).advantages

    return fn


def logp_grad(theta, rooms, acts):
    """π(a|room) and ∂ log π(a|room)/∂θ[room, :] = onehot(a) − π(room) per row."""
    logits = theta[rooms]
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    g = -p
    g[np.arange(len(acts)), acts] += 1.0
    return p[np.arange(len(acts)), acts], g


def scatter(theta_shape, rooms, row_grads):
    out = np.zeros(theta_shape)
    np.add.at(out, rooms, row_grads)
    return out


def train_tabular(rung: str, adv_fn: AdvFn, seed: int, lr: float | None = None, epochs: int = 2,
                  mini_batches: int = 4, clip: float = 0.2, iters: int = ITERS, opt: str = "adam",
                  vocab: int = 0, rooms: int = 0, adv_scale: float = 1.0) -> list[float]:
    """Success rate per iteration of one tabular run (T1: plain PG; T2: PPO + Adam, as the trainer; ``opt="sgd"``
    keeps T2's epochs, mini-batches and clip but steps θ −= lr·grad, isolating what Adam does; ``vocab`` = V > 0:
    the table has V columns of which only the first ``actions`` are valid words — the invalid-token phase;
    ``rooms`` > 0: a longer lock of that many rooms with a step cap of 3 per room; ``adv_scale`` multiplies
    every advantage — Adam is invariant to it except through the ratio clip and the grad-norm clip)."""
    lock = dict(LOCK, rooms=rooms, max_steps=3 * rooms) if rooms else LOCK
    rng = np.random.default_rng(seed)
    theta = np.zeros((lock["rooms"], vocab or lock["actions"]))
    m, v, k = np.zeros_like(theta), np.zeros_like(theta), 0
    curve = []
    for it in range(iters):
        rows = collect(theta, rng, it, lock)
        curve.append(success_rate(rows))
        adv = adv_fn(rows) * adv_scale
        rooms, acts = rows["room"], rows["action"]
        if rung == "T1":
            _, g = logp_grad(theta, rooms, acts)
            theta += (0.5 if lr is None else lr) * scatter(theta.shape, rooms, adv[:, None] * g) / len(adv)
            continue
        old_p, _ = logp_grad(theta, rooms, acts)
        for _ in range(epochs):
            for mb in np.array_split(rng.permutation(len(adv)), mini_batches):
                p, g = logp_grad(theta, rooms[mb], acts[mb])
                ratio = p / old_p[mb]
                a = adv[mb]
                # PPO: -min(r A, clip(r) A); gradient flows only where the unclipped term is the minimum.
                active = ~(((a > 0) & (ratio > 1 + clip)) | ((a < 0) & (ratio < 1 - clip)))
                grad = -scatter(theta.shape, rooms[mb], (active * a * ratio)[:, None] * g) / len(mb)
                norm = float(np.sqrt((grad**2).sum()))
                if norm > 1.0:
                    grad /= norm
                if opt == "sgd":
                    theta -= (0.5 if lr is None else lr) * grad
                    continue
                k += 1
                m = 0.9 * m + 0.1 * grad
                v = 0.999 * v + 0.001 * grad**2
                step = (0.05 if lr is None else lr) * (m / (1 - 0.9**k)) / (np.sqrt(v / (1 - 0.999**k)) + 1e-8)
                theta -= step
    return curve


# ---------------------------------------------------------------- statistics
def paired(a: dict[int, list[float]], b: dict[int, list[float]], last_k: int = 10) -> dict:
    """Paired AUC and final-success differences B − A over the seeds both ran (the statistics and the verdict:
    :mod:`gigpo.train.sweep.paired_stats`, the implementation behind ``gigpo sweep --paired``)."""
    res: dict = {"seeds": len(set(a) & set(b))}
    for name, f in (("auc", lambda c: float(np.mean(c))), ("final", lambda c: float(np.mean(c[-last_k:])))):
        s = paired_stat({k: f(c) for k, c in a.items() if len(c)}, {k: f(c) for k, c in b.items() if len(c)})
        res[name] = dict(a=s.mean_a, b=s.mean_b, diff=s.mean_diff, lo=s.lo, hi=s.hi, wins=s.better,
                         losses=s.worse, p=s.p, verdict=s.verdict)
    return res


def verdict(r: dict) -> str:
    """The verdict on the AUC difference (docs/results/credit.md's rule)."""
    return r["auc"]["verdict"]


def row_md(label: str, r: dict) -> str:
    a, f = r["auc"], r["final"]
    return (f"| {label} | {r['seeds']} | {a['a']:.3f} | {a['b']:.3f} | {a['diff']:+.3f} [{a['lo']:+.3f}, "
            f"{a['hi']:+.3f}] | {a['wins']}/{a['losses']} | {a['p']:.3g} | {f['diff']:+.3f} [{f['lo']:+.3f}, "
            f"{f['hi']:+.3f}] | {verdict(r)} |")


HEADER = ("| comparison (A → B) | seeds | AUC A | AUC B | ΔAUC [95% CI] | B better/worse | sign p | Δfinal [95% CI]"
          " | verdict |\n|---|---|---|---|---|---|---|---|---|")


# ---------------------------------------------------------------- studies
def tabular_studies() -> list[tuple[str, str, dict, dict]]:
    """(label, rung, arm A spec, arm B spec); a spec is {"arm": name, **advantage kwargs, **train kwargs}."""
    g, s = {"arm": "grpo"}, {"arm": "gigpo"}
    out = [("T1 plain PG: grpo → gigpo", "T1", g, s), ("T2 PPO+Adam: grpo → gigpo", "T2", g, s)]
    for w in (0.4, 2.0):
        out.append((f"T2 ω={w}: grpo → gigpo", "T2", g, {**s, "step_weight": w}))
    out.append(("T2 normalize=mean: grpo → gigpo", "T2", {**g, "normalize": "mean"}, {**s, "normalize": "mean"}))
    out.append(("T2 std_ddof=0: grpo → gigpo", "T2", {**g, "std_ddof": 0}, {**s, "std_ddof": 0}))
    for gamma in (1.0, 0.8):
        out.append((f"T2 γ={gamma}: grpo → gigpo", "T2", {**g, "gamma": gamma}, {**s, "gamma": gamma}))
    for lr in (0.005, 0.015, 0.15):
        out.append((f"T2 lr={lr}: grpo → gigpo", "T2", {**g, "lr": lr}, {**s, "lr": lr}))
    out.append(("T2 with SGD (lr 0.5) instead of Adam: grpo → gigpo", "T2", {**g, "opt": "sgd"}, {**s, "opt": "sgd"}))
    one = {"epochs": 1, "mini_batches": 1}
    out.append(("T2 1 epoch × 1 mini-batch (Adam step only): grpo → gigpo", "T2", {**g, **one}, {**s, **one}))
    for clip in (0.05, 1e9):  # how much the ratio clip limits each arm's step (1e9: no clip)
        lab = "none" if clip > 1e6 else clip
        out.append((f"T2 clip={lab}: grpo → gigpo", "T2", {**g, "clip": clip}, {**s, "clip": clip}))
    for c in (0.1, 10.0):  # advantage scale: matters under Adam only through the clips
        out.append((f"T2 advantages ×{c}: grpo → gigpo", "T2", {**g, "adv_scale": c}, {**s, "adv_scale": c}))
    for rung in ("T1", "T2"):
        out.append((f"{rung} lock of 8 rooms (24 steps): grpo → gigpo", rung, {**g, "rooms": 8}, {**s, "rooms": 8}))
    inv = {"vocab": 274, "iters": 200}  # the tiny model's vocabulary (english_words: false); 200 iterations
    out.append(("T2 + 274-token outputs (invalid phase), 200 it.: grpo → gigpo", "T2", {**g, **inv}, {**s, **inv}))
    mean = {**inv, "normalize": "mean"}
    out.append(("T2 + 274-token outputs, normalize=mean, 200 it.: grpo → gigpo", "T2", {**g, **mean}, {**s, **mean}))
    out.append(("T2 gigpo: anchors state → (state, t)", "T2", s, {**s, "anchors": "obs_t"}))
    out.append(("T2 gigpo: history 0 → 1", "T2", s, {**s, "history": 1}))
    h = {"arm": "hgpo", "normalize": "mean_std", "std_ddof": 1}  # the trainer's normalisation, as the other arms
    out.append(("T2: grpo → hgpo (K=2, α=1)", "T2", g, h))
    out.append(("T2: gigpo → hgpo (K=2, α=1)", "T2", s, h))
    out.append(("T2: gigpo → hgpo, official normalisation (mean, both terms)", "T2", s, {"arm": "hgpo"}))
    return out


TRAIN_KEYS = ("lr", "epochs", "mini_batches", "clip", "opt", "vocab", "iters", "rooms", "adv_scale")


def run_spec(rung: str, spec: dict, seed: int) -> list[float]:
    spec = dict(spec)
    arm = spec.pop("arm")
    train_kw = {k: spec.pop(k) for k in TRAIN_KEYS if k in spec}
    return train_tabular(rung, arm_advantages(arm, **spec), seed, **train_kw)


def tabular_main(args) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache_file = out / "tabular_curves.json"
    cache = json.loads(cache_file.read_text()) if cache_file.is_file() else {}
    t0, c0 = time.time(), time.process_time()
    for label, rung, a, b in tabular_studies():
        for spec in (a, b):
            key = json.dumps([rung, spec], sort_keys=True)
            have = cache.setdefault(key, {})
            for seed in range(args.seeds):
                if str(seed) not in have:
                    have[str(seed)] = run_spec(rung, spec, seed)
            cache_file.write_text(json.dumps(cache))
        print(f"{label}: done ({time.time() - t0:.0f}s wall, {time.process_time() - c0:.0f}s CPU)", flush=True)
    report_main(args)


def model_main(args) -> None:
    from gigpo.train.sweep import build_cells, run_sweep

    out = Path(args.out) / "model"
    config = args.config
    seeds = list(range(args.seeds))
    jobs, cells_by_rung = [], {}
    for rung in args.rungs.split(","):
        cells = build_cells(config, {"algorithm": ["grpo", "gigpo"]}, MODEL_RUNGS[rung] + list(args.overrides))
        cells_by_rung[rung] = cells
    for s in seeds:  # seed-major across rungs: a partial run still has paired seeds in every rung
        for rung in cells_by_rung:
            jobs += [(c, s) for c in cells_by_rung[rung]]
    env = {"PYTHONPATH": args.pythonpath} if args.pythonpath else None
    all_cells = [c for cs in cells_by_rung.values() for c in cs]
    results = run_sweep(config, all_cells, seeds, out, workers=args.workers, threads=1, extra_env=env, order=jobs)
    for r in results:
        if r.status == "failed":
            print(f"FAILED {r.cell.label} seed {r.seed}: {r.error[-300:]}", file=sys.stderr)
    (out / "rungs.json").write_text(json.dumps({k: [c.key for c in v] for k, v in cells_by_rung.items()}))
    report_main(args)


def model_curves(out: Path) -> dict[str, dict[str, dict[int, list[float]]]]:
    f = out / "model" / "rungs.json"
    if f.is_file():
        rungs = json.loads(f.read_text())
    else:  # still running: every cell under out/model is one rung, named after the folder
        rungs = {out.name: [d.name for d in sorted((out / "model" / "cells").glob("*"))]}
    res: dict = {}
    for rung, keys in rungs.items():
        for key in keys:
            arm = key.split("-")[0].split("=")[1]
            for sd in sorted((out / "model" / "cells" / key).glob("seed*")):
                m = sd / "metrics.jsonl"
                if not m.is_file():
                    continue
                recs = [json.loads(x) for x in m.read_text().splitlines() if x.strip()]
                curve = [r["rollout/success_rate"] for r in recs if "rollout/success_rate" in r]
                if len(curve) >= ITERS:  # finished runs only
                    res.setdefault(rung, {}).setdefault(arm, {})[int(sd.name[4:])] = curve[:ITERS]
    return res


def model_seed_rows(out: Path) -> list[str]:
    """Every model run found (finished or not): iterations, success AUC so far, last success, entropy, valid rate."""
    rows = []
    for m in sorted((out / "model" / "cells").glob("*/seed*/metrics.jsonl")):
        recs = [json.loads(x) for x in m.read_text().splitlines() if x.strip()]
        if not recs:
            continue
        c = [r["rollout/success_rate"] for r in recs]
        last = recs[-1]
        # an iteration without signal skips its update, so it logs no entropy: the last one that did
        ent = next((r["loss/entropy"] for r in reversed(recs) if "loss/entropy" in r), float("nan"))
        rows.append(f"| {m.parent.parent.name} | {m.parent.name[4:]} | {len(recs)} | {np.mean(c):.3f} | "
                    f"{np.mean(c[-10:]):.3f} | {ent:.2f} | "
                    f"{last.get('rollout/valid_action_rate', float('nan')):.3f} |")
    if not rows:
        return []
    return ["", "| model run (cell) | seed | iterations | success AUC | last-10 success | last logged entropy | last valid rate |",
            "|---|---|---|---|---|---|---|", *rows]


def report_main(args) -> None:
    out = Path(args.out)
    lines = [HEADER]
    cache_file = out / "tabular_curves.json"
    if cache_file.is_file():
        cache = json.loads(cache_file.read_text())
        for label, rung, a, b in tabular_studies():
            ca = cache.get(json.dumps([rung, a], sort_keys=True), {})
            cb = cache.get(json.dumps([rung, b], sort_keys=True), {})
            lines.append(row_md(label, paired({int(k): v for k, v in ca.items()},
                                              {int(k): v for k, v in cb.items()})))
    for rung, arms in model_curves(out).items():
        if "grpo" in arms and "gigpo" in arms:
            lines.append(row_md(f"{rung} tiny model: grpo → gigpo", paired(arms["grpo"], arms["gigpo"])))
    lines += model_seed_rows(out)
    text = "\n".join(lines)
    (out / "bridge.md").write_text(text + "\n")
    print(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("tabular", "model", "report"))
    p.add_argument("--out", default="runs/credit_bridge")
    p.add_argument("--seeds", type=int, default=16)
    p.add_argument("--rungs", default="M3,M4")
    p.add_argument("--workers", type=int, default=1, help="model runs at a time (one torch thread each)")
    p.add_argument("--config", default="lock")
    p.add_argument("--pythonpath", default=os.environ.get("CREDIT_PYTHONPATH", ""),
                   help="PYTHONPATH of a frozen copy of src/ for the model runs (empty: the installed gigpo)")
    p.add_argument("overrides", nargs="*", help="extra key=value overrides of every model run")
    args = p.parse_args(argv)
    {"tabular": tabular_main, "model": model_main, "report": report_main}[args.what](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
