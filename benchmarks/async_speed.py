"""Synchronous vs ``rollout.async`` training (docs/results/async.md): seconds per iteration, and learning on lock.

    python benchmarks/async_speed.py speed [--iterations 20] [--reps 3] [--delay 0.02] [--out /tmp/async/speed]
    python benchmarks/async_speed.py lock [--seeds 8] [--first-seed 0] [--iterations 150] [--out /tmp/async/lock]
    python benchmarks/async_speed.py serve [--iterations 3] [--reps 3] [--server-threads 1] [--out /tmp/async/serve]

``speed``: the quickstart (tiny model, gridgoal 8 groups x 8) on ``gridgoal-slow`` (benchmarks/slow_env.py: 20 ms
of wall time per env step) with process env workers, train.threads=1 (the learner and the rollout worker one
thread each). Arms sync / async s=1 / async s=2 run as separate processes, interleaved, ``--reps`` times; each
reports the wall and CPU seconds of ``Trainer.train()`` (model loading and worker start excluded; CPU includes
the rollout worker and env processes) per iteration. Ratios are taken inside each rep (the machine is shared).

``lock``: the 8-room lock of docs/results/credit.md (constrained decoding, normalize=mean, 150 iterations,
greedy held-out success on 32 episodes at the end), sync vs async s=1 vs async s=2 with optim.offpolicy_correction
=tis, on paired seeds: final greedy success per seed, and a sign test of async vs sync.

``serve``: SmolLM2-135M (configs/smollm2.yaml: LoRA, gridgoal 4x4; sized down to 2 groups x 2, <= 4 steps) with
generation on one `gigpo serve` process (started here, ``--server-threads`` torch threads; free decoding, since
gigpo serve does not constrain; LoRA pushed merged), sync vs async s=1 (tis), arms interleaved per rep on the
same server. CPU per iteration adds the server's own CPU time over the run (from /proc) to the learner's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARMS = {
    "sync": [],
    "async1": ["rollout.async=true", "rollout.max_staleness=1", "optim.offpolicy_correction=tis"],
    "async2": ["rollout.async=true", "rollout.max_staleness=2", "optim.offpolicy_correction=tis"],
}
SPEED = ["env=gridgoal-slow", "rollout.env_workers=process", "train.eval_episodes=0", "train.checkpoint_every=0",
         "train.threads=1", "train.progress=false", "train.sample_trajectories=0"]
LOCK = ["env.rooms=8", "env.max_steps=24", "rollout.decoding=constrained", "algorithm.normalize=mean",
        "train.eval_every=0", "train.eval_episodes=32", "train.checkpoint_every=0", "train.progress=false",
        "train.sample_trajectories=0", "train.threads=1"]


def run_one(config: str, overrides: list[str]) -> dict:
    """In this process: build the Trainer, time train() (wall, CPU of this process and its reaped children)."""
    sys.path.insert(0, str(HERE))
    import slow_env  # noqa: F401  (registers gridgoal-slow)

    from gigpo.train.config import load_config
    from gigpo.train.trainer import Trainer

    cfg = load_config(config, overrides)
    trainer = Trainer(cfg)
    c0, k0 = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    last = trainer.train()
    wall = time.perf_counter() - w0
    k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - c0 + (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)
    n = cfg.train.iterations
    return {"wall_s": wall, "cpu_s": cpu, "iterations": n, "wall_per_it": wall / n, "cpu_per_it": cpu / n,
            "eval_success": last.get("eval/success_rate"), "train_success": last.get("rollout/success_rate"),
            "run_dir": str(trainer.run_dir)}


def spawn(config: str, overrides: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, __file__, "_one", config, *overrides], capture_output=True, text=True,
                         env=env)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"run failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(lines[-1])


def speed(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for rep in range(args.reps):
        for arm in args.arms.split(","):
            o = [*SPEED, *ARMS[arm], f"train.iterations={args.iterations}", f"env.delay_s={args.delay}",
                 f"train.seed={rep}", f"train.run_dir={out}/{arm}-rep{rep}", "train.overwrite=true"]
            r = {"rep": rep, "arm": arm, **spawn("quickstart", o)}
            rows.append(r)
            print(json.dumps(r), flush=True)
    (out / "speed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    arms = args.arms.split(",")
    print(f"\n| arm | wall s/it (median of {args.reps}) | CPU s/it | iterations/hour | wall ratio sync/arm "
          f"(per rep) |")
    print("|---|---|---|---|---|")
    for arm in arms:
        mine = [r for r in rows if r["arm"] == arm]
        ratios = [next(s for s in rows if s["arm"] == "sync" and s["rep"] == r["rep"])["wall_per_it"] /
                  r["wall_per_it"] for r in mine] if "sync" in arms else []
        w = statistics.median(r["wall_per_it"] for r in mine)
        c = statistics.median(r["cpu_per_it"] for r in mine)
        print(f"| {arm} | {w:.3f} | {c:.3f} | {3600 / w:.0f} | {', '.join(f'{x:.2f}' for x in ratios)} |")


# sized down from the preset (2 x 2 trajectories of <= 4 steps): on 2 shared cores an iteration of the preset's
# 2 x 4 x 6 with free decoding took ~160 s, ~120 s of it the update
SERVE = ["rollout.decoding=free", "rollout.engine=openai", "rollout.openai.model=smollm2", "train.eval_episodes=0",
         "train.checkpoint_every=0", "train.threads=1", "train.progress=false", "train.sample_trajectories=0",
         "rollout.group_size=2", "env.max_steps=4"]


def _cpu_of(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(out: Path, threads: int) -> tuple[subprocess.Popen, str]:
    """`gigpo serve smollm2-135m` on a free port, loading pushes from ``out/pushes``; (process, base URL)."""
    import socket
    import urllib.request

    (out / "pushes").mkdir(parents=True, exist_ok=True)
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    proc = subprocess.Popen([sys.executable, "-m", "gigpo.serve", "smollm2-135m", "--port", str(port),
                             "--served-model-name", "smollm2", "--weights-dir", str(out / "pushes"),
                             "--device", "cpu"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(600):
        try:
            urllib.request.urlopen(url + "/models", timeout=2).read()
            return proc, url
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"gigpo serve exited with {proc.returncode}") from None
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("gigpo serve did not answer within 5 minutes")


def serve(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    proc, url = start_server(out, args.server_threads)
    rows = []
    try:
        for rep in range(args.reps):
            for arm in args.arms.split(","):
                o = [*SERVE, *ARMS[arm], f"rollout.openai.urls={url}", f"rollout.openai.weights_dir={out}/pushes",
                     f"train.iterations={args.iterations}", f"train.seed={rep}",
                     f"train.run_dir={out}/{arm}-rep{rep}", "train.overwrite=true"]
                c0 = _cpu_of(proc.pid)
                r = {"rep": rep, "arm": arm, **spawn("smollm2", o)}
                # the server's CPU over the whole child (model loading included: the server idles then)
                r["server_cpu_s"] = _cpu_of(proc.pid) - c0
                r["cpu_per_it_total"] = (r["cpu_s"] + r["server_cpu_s"]) / r["iterations"]
                rows.append(r)
                print(json.dumps(r), flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    (out / "serve.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    arms = args.arms.split(",")
    print(f"\n| arm | wall s/it (median of {args.reps}) | CPU s/it learner + server (median) | wall ratio "
          "sync/arm (per rep) |")
    print("|---|---|---|---|")
    for arm in arms:
        mine = [r for r in rows if r["arm"] == arm]
        ratios = [next(x for x in rows if x["arm"] == "sync" and x["rep"] == r["rep"])["wall_per_it"] /
                  r["wall_per_it"] for r in mine] if "sync" in arms else []
        print(f"| {arm} | {statistics.median(r['wall_per_it'] for r in mine):.2f} | "
              f"{statistics.median(r['cpu_per_it'] for r in mine):.2f} + "
              f"{statistics.median(r['server_cpu_s'] / r['iterations'] for r in mine):.2f} | "
              f"{', '.join(f'{x:.2f}' for x in ratios)} |")


def sign_test(wins: int, losses: int) -> float:
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


def lock(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "lock.jsonl"
    done = {(r["arm"], r["seed"]) for r in map(json.loads, path.read_text().splitlines())} if path.exists() else set()
    arms = args.arms.split(",")
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for arm in arms:
            if (arm, seed) in done:
                continue
            o = [*LOCK, *ARMS[arm], f"train.iterations={args.iterations}", f"train.seed={seed}",
                 f"train.run_dir={out}/{arm}-s{seed}", "train.overwrite=true"]
            r = {"arm": arm, "seed": seed, **spawn("lock", o)}
            with path.open("a") as f:
                f.write(json.dumps(r) + "\n")
            print(json.dumps(r), flush=True)
    rows = [json.loads(ln) for ln in path.read_text().splitlines()]
    by = {(r["arm"], r["seed"]): r for r in rows}
    seeds = sorted({r["seed"] for r in rows})
    print("\n| arm | greedy held-out success per seed | perfect | wall s/it (median) | CPU s/it |")
    print("|---|---|---|---|---|")
    for arm in arms:
        mine = [by[(arm, s)] for s in seeds if (arm, s) in by]
        succ = " ".join(f"{r['eval_success']:.2f}" for r in mine)
        print(f"| {arm} | {succ} | "
              f"{sum(r['eval_success'] >= 1.0 for r in mine)}/{len(mine)} | "
              f"{statistics.median(r['wall_per_it'] for r in mine):.3f} | "
              f"{statistics.median(r['cpu_per_it'] for r in mine):.3f} |")
    for arm in arms:
        if arm == "sync":
            continue
        pairs = [(by[("sync", s)]["eval_success"], by[(arm, s)]["eval_success"]) for s in seeds
                 if ("sync", s) in by and (arm, s) in by]
        wins = sum(b > a for a, b in pairs)
        losses = sum(b < a for a, b in pairs)
        diff = statistics.mean(b - a for a, b in pairs) if pairs else float("nan")
        speedup = statistics.median(by[("sync", s)]["wall_per_it"] / by[(arm, s)]["wall_per_it"] for s in seeds
                                    if ("sync", s) in by and (arm, s) in by) if pairs else float("nan")
        print(f"sync -> {arm}: {len(pairs)} paired seeds, mean greedy difference {diff:+.3f}, better on {wins}, "
              f"worse on {losses}, sign test p = {sign_test(wins, losses):.3g}; median wall speed-up {speedup:.2f}x")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_one":
        print(json.dumps(run_one(sys.argv[2], sys.argv[3:])))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="study", required=True)
    s = sub.add_parser("speed")
    s.add_argument("--iterations", type=int, default=20)
    s.add_argument("--reps", type=int, default=3)
    s.add_argument("--delay", type=float, default=0.02)
    s.add_argument("--arms", default="sync,async1,async2")
    s.add_argument("--out", default="/tmp/async/speed")
    lk = sub.add_parser("lock")
    lk.add_argument("--seeds", type=int, default=8)
    lk.add_argument("--first-seed", type=int, default=0)
    lk.add_argument("--iterations", type=int, default=150)
    lk.add_argument("--arms", default="sync,async1,async2")
    lk.add_argument("--out", default="/tmp/async/lock")
    sv = sub.add_parser("serve")
    sv.add_argument("--iterations", type=int, default=3)
    sv.add_argument("--reps", type=int, default=3)
    sv.add_argument("--server-threads", type=int, default=1)
    sv.add_argument("--arms", default="sync,async1")
    sv.add_argument("--out", default="/tmp/async/serve")
    args = p.parse_args()
    {"speed": speed, "lock": lock, "serve": serve}[args.study](args)


if __name__ == "__main__":
    main()
