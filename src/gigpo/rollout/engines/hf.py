"""The ``hf`` rollout engine: Hugging Face ``generate`` (and a masked KV-cache loop for constrained decoding) on
the learner's own model — the sampling itself is :mod:`gigpo.rollout.sampling`, imported (with torch) when an
engine is built, so the registry stays light. The engine contract is :mod:`gigpo.rollout.engines`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gigpo.rollout.registry import Capabilities, Generation, register_engine


@register_engine("hf", description="Hugging Face generate on the learner's own model (in-process, nothing pushed)")
class HFEngine:
    """Batched sampling with ``model.generate``: left padding, KV cache, temperature / top-p (no top-k).

    Log-probs are those of the distribution actually sampled from (after temperature and top-p): the draw is
    made by :class:`gigpo.rollout.sampling.Sampler`, which records them. ``temperature == 0`` means greedy.
    ``calls`` and ``prompts_generated`` count work done (tests use them to check that only active envs generate).

    With ``constraints`` (constrained action decoding) a plain KV-cache sampling loop replaces ``generate`` so
    that the mask sits exactly where :mod:`gigpo.agent.constrained` defines it: logits / T, then −inf outside
    the allowed set, then log_softmax, then top-p; the recorded log-prob is that of the final distribution.
    """

    #: one engine per rank on the rank's own model (torchrun); rollout.async samples in a worker process on a
    #: copy of the weights (:meth:`async_worker`), since this engine reads the learner's parameters themselves
    capabilities = Capabilities(async_rollout="worker", data_parallel=True)

    def __init__(self, model: Any, tokenizer: Any, device: Any, batch_size: int = 0,
                 share_prefix_min_tokens: int = 16):
        import torch

        from gigpo.rollout.sampling import eos_ids

        self.model = model
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.batch_size = batch_size  # 0: one batch for all prompts of a turn
        self.calls = 0
        self.prompts_generated = 0
        self.eos_ids = eos_ids(model, tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]
        #: constrained prefill: prompts sharing at least this many leading tokens compute them once (0: off)
        self.share_prefix_min_tokens = share_prefix_min_tokens

    #: samples from the learner's own model object: weights never need pushing, nothing is ever stale
    shares_learner_weights = True

    @classmethod
    def from_config(cls, cfg: Any, bundle: Any, run_dir: Path) -> HFEngine:
        o = cfg.optim  # optim.shared_prefix is the one switch for the learner's passes and this prefill
        return cls(bundle.model, bundle.tokenizer, bundle.device,
                   share_prefix_min_tokens=o.shared_prefix_min_tokens if o.shared_prefix == "auto" else 0)

    @classmethod
    def async_worker(cls, model: Any, tokenizer: Any, threads: int) -> Any:
        """``rollout.async``: the same sampling in a spawned process on a CPU copy of ``model``
        (:class:`gigpo.rollout.engines.hf_worker.WorkerEngine`), probed."""
        from gigpo.rollout.engines.hf_worker import WorkerEngine

        engine = WorkerEngine(model, tokenizer, engine_cls=cls, threads=threads)
        engine.probe()
        return engine

    def probe(self) -> None:
        """Nothing to reach: the model is in this process."""

    def push_weights(self, model: Any, version: int, *, required: bool = False) -> dict[str, float]:
        """Nothing to push: generation reads the learner's parameters themselves."""
        return {}

    def stats(self) -> dict[str, float]:
        return {}  # hf runs' metrics records stay as they were before the engine contract

    def close(self) -> None:
        pass

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, constraints: list[Any] | None = None) -> list[Generation]:
        from gigpo.rollout.sampling import generate

        return generate(self, prompts, max_new_tokens, temperature, top_p, constraints)
