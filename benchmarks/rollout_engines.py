"""Rollout at scale, measured: env steps/s per worker mode, and training-iteration time per generation engine.

    python benchmarks/rollout_engines.py envs [--envs 16] [--steps 12] [--delay-ms 20]
        env steps/s of EnvGuard.call_many batches (reset, then ``--steps`` turns of one step per env, actions
        drawn from the env's admissible actions by a seeded RNG) on webshop and on a *slow* env (gridgoal plus a
        ``--delay-ms`` sleep per step: an env waiting on I/O, like WebShop's search server or a browser), for
        env workers inline / process / ray (ray: one actor per env). Worker start-up is timed apart.
    python benchmarks/rollout_engines.py iteration [--iterations 3] [--servers 1 2]
        seconds per training iteration of the tiny model on gridgoal with rollout.engine=hf and with
        rollout.engine=openai against 1 and 2 `gigpo serve` processes on 127.0.0.1 (started here, weights pushed
        each iteration), and the rollout-vs-learner log-prob gap. The first iteration (warm-up) is left out.

Prints one markdown table per part, wall and CPU (process_time of this process) seconds.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gigpo.envs.base import Env
from gigpo.envs.gridgoal import GridGoalEnv


class SlowGridGoal(Env):
    """GridGoal whose every reset/step first sleeps ``delay_s`` (an env waiting on a server)."""

    def __init__(self, delay_s: float = 0.02):
        self.inner, self.delay_s = GridGoalEnv(size=5, max_steps=50), delay_s
        self.instructions, self.max_steps = self.inner.instructions, 50

    def reset(self, seed):
        time.sleep(self.delay_s)
        return self.inner.reset(seed)

    def step(self, action):
        time.sleep(self.delay_s)
        return self.inner.step(action)


def env_throughput(factory, workers: str, n_envs: int, steps: int) -> dict:
    from gigpo.envs.guard import EnvFault, EnvGuard

    if workers == "ray":
        import ray

        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    guard = EnvGuard(factory, workers=workers, timeout_s=60.0)
    rng = random.Random(0)
    t0 = time.perf_counter()
    handles = [guard.new() for _ in range(n_envs)]
    infos = [r[1] if not isinstance(r, EnvFault) else {} for r in guard.call_many([(h, "reset", i) for i, h in
                                                                                   enumerate(handles)])]
    startup = time.perf_counter() - t0
    t0, c0, done = time.perf_counter(), time.process_time(), 0
    for _ in range(steps):
        calls = [(h, "step", rng.choice(info.get("admissible_actions") or ["up", "down", "left", "right"]))
                 for h, info in zip(handles, infos)]
        outs = guard.call_many(calls)
        for k, out in enumerate(outs):
            if isinstance(out, EnvFault):
                raise RuntimeError(out)
            infos[k] = out[3]
            done += 1
            if out[2]:  # episode over: a new one, so every turn steps every env
                infos[k] = guard.call_many([(handles[k], "reset", 1000 + k)])[0][1]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    guard.close()
    return {"steps": done, "startup_s": startup, "wall_s": wall, "cpu_s": cpu, "steps_per_s": done / wall}


def bench_envs(args) -> None:
    from gigpo.envs.guard import registered_factory

    envs = {"webshop": registered_factory("webshop"),
            f"slow ({args.delay_ms:g} ms/step)": functools.partial(SlowGridGoal, args.delay_ms / 1000)}
    print("| env | workers | envs | steps | start-up s | wall s | CPU s (this process) | env steps/s |\n|---|---|---|---|---|---|---|---|")
    for name, factory in envs.items():
        for workers in args.workers:
            r = env_throughput(factory, workers, args.envs, args.steps)
            print(f"| {name} | {workers} | {args.envs} | {r['steps']} | {r['startup_s']:.2f} | {r['wall_s']:.2f} | "
                  f"{r['cpu_s']:.2f} | {r['steps_per_s']:.1f} |", flush=True)


SMALL = ["model.tiny={english_words: false}", "env.size=4", "env.max_steps=4", "rollout.groups=4",
         "rollout.group_size=4", "rollout.max_response_tokens=8", "optim.micro_batch_size=64", "optim.ppo_epochs=1",
         "train.eval_episodes=0", "train.progress=false", "train.checkpoint_every=0", "train.threads=1"]


def start_server(model_dir: Path) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-m", "gigpo", "serve", str(model_dir), "--port", "0", "--device", "cpu",
                          "--served-model-name", "tiny", "--weights-dir", str(model_dir.parent)], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    line = p.stdout.readline()
    m = re.search(r"on (http://\S+/v1)", line)
    if not m:
        p.kill()
        raise RuntimeError(f"gigpo serve did not start: {line!r}")
    return p, m.group(1)


def bench_iteration(args) -> None:
    import numpy as np

    from gigpo.models import load_model, save_pretrained
    from gigpo.train.config import load_config
    from gigpo.train.trainer import Trainer

    tmp = Path(tempfile.mkdtemp(prefix="gigpo-bench-"))
    save_pretrained(load_model("tiny", device="cpu", seed=0, tiny={"english_words": False}), tmp / "model")
    print("| engine | servers | s / iteration (wall) | CPU s / iteration (learner process) | rollout s | weight push s |"
          " log-prob gap mean | gap max |\n|---|---|---|---|---|---|---|---|")
    for servers in [0, *args.servers]:
        procs, urls = [], []
        try:
            for _ in range(servers):
                p, url = start_server(tmp / "model")
                procs.append(p)
                urls.append(url)
            extra = [f"train.run_dir={tmp / f'run{servers}'}", f"train.iterations={args.iterations}"]
            if servers:
                extra += ["rollout.engine=openai", f"rollout.openai.urls={','.join(urls)}", "rollout.openai.model=tiny"]
            tr = Trainer(load_config(None, SMALL + extra))
            walls, cpus, gaps, rolls, pushes = [], [], [], [], []
            for it in range(1, args.iterations + 1):
                t0, c0 = time.perf_counter(), time.process_time()
                rec = tr.iteration(it)
                if it > 1:
                    walls.append(time.perf_counter() - t0)
                    cpus.append(time.process_time() - c0)
                    rolls.append(rec["time/rollout"])
                    pushes.append(rec.get("weights/push_s", 0.0))
                    gaps.append((rec.get("rollout/logprob_gap_mean", float("nan")),
                                 rec.get("rollout/logprob_gap_max", float("nan"))))
            tr.collector.close()
            g = np.array(gaps)  # hf samples with the learner's own model: no remote gap is logged
            gap = f"{g[:, 0].mean():.2e} | {g[:, 1].max():.2e}" if servers else "- | -"
            print(f"| {'openai' if servers else 'hf'} | {servers or '-'} | {np.mean(walls):.2f} | {np.mean(cpus):.2f} |"
                  f" {np.mean(rolls):.2f} | {np.mean(pushes):.3f} | {gap} |", flush=True)
        finally:
            for p in procs:
                p.terminate()
                p.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="part", required=True)
    e = sub.add_parser("envs")
    e.add_argument("--envs", type=int, default=16)
    e.add_argument("--steps", type=int, default=12)
    e.add_argument("--delay-ms", type=float, default=20.0)
    e.add_argument("--workers", nargs="+", default=["inline", "process", "ray"])
    i = sub.add_parser("iteration")
    i.add_argument("--iterations", type=int, default=3)
    i.add_argument("--servers", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    bench_envs(args) if args.part == "envs" else bench_iteration(args)


if __name__ == "__main__":
    main()
