"""Engine selection for the trainer (``rollout.engine``) and the per-iteration hook of remote engines.

``hf``: :class:`gigpo.rollout.engine.HFEngine` on the learner's own model (no hook). ``openai``: a
:class:`gigpo.rollout.engine_openai.CompletionsEngine` over ``rollout.engine_urls`` plus a
:class:`gigpo.train.weight_sync.FullWeightSync`; :meth:`RemoteRollout.start` probes every server and pushes the
learner's weights before the first rollout, :meth:`RemoteRollout.after_update` pushes them after each update and
returns the iteration's metrics. ``vllm``: :class:`gigpo.rollout.engine_vllm.VLLMEngine` (CUDA only).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from gigpo.rollout import HFEngine
from gigpo.train.config_rollout import engine_urls

log = logging.getLogger(__name__)


def logprob_gap(old: dict[int, Any], sampling: list[list[float]]) -> tuple[float, float]:
    """``(mean, max)`` over response tokens of |learner log-prob − rollout log-prob|, ``old`` per row."""
    diffs = [np.abs(np.asarray(old[r], dtype=np.float64) - np.asarray(sampling[r], dtype=np.float64))
             for r in old if len(sampling[r])]
    if not diffs:
        return 0.0, 0.0
    flat = np.concatenate(diffs)
    return float(flat.mean()), float(flat.max())


class RemoteRollout:
    """The remote engine and its weight sync, as the trainer drives them."""

    def __init__(self, engine: Any, sync: Any):
        self.engine, self.sync = engine, sync

    def start(self, version: int) -> None:
        """Before the first rollout: every server reachable, and serving the learner's weights (``version``).
        A server that cannot take them (down, another architecture) is a ConfigError naming rollout.engine_urls:
        one line and exit 2 from ``gigpo train``."""
        from gigpo.rollout.engine_openai import RemoteEngineError
        from gigpo.train.config_error import ConfigError

        try:
            self.engine.probe()
            self.sync.push(version, required=True)
        except RemoteEngineError as e:
            raise ConfigError(f"rollout.engine_urls: {' '.join(str(e).split())}") from None

    def after_update(self, it: int, batch: Any, prep: dict) -> dict[str, float]:
        """Push the updated weights (version ``it``); the rollout-vs-learner log-prob gap of this iteration's
        batch (``prep["old"]``: the learner's log-probs before the update) and the staleness counters."""
        rec: dict[str, float] = {}
        if prep.get("old"):
            mean, mx = logprob_gap(prep["old"], batch.sampling_logprobs)
            rec.update({"rollout/logprob_gap_mean": mean, "rollout/logprob_gap_max": mx})
        s = self.engine.stats
        rec.update({"rollout/stale_generations": float(s.stale_generations), "rollout/max_weights_lag": float(s.max_lag),
                    "rollout/engine_retries": float(s.retries)})
        rec.update(self.sync.push(it))
        return rec

    def close(self) -> None:
        self.engine.close()


def build_engine(cfg: Any, bundle: Any, run_dir: Path) -> tuple[Any, RemoteRollout | None]:
    """``(engine, remote hook or None)`` for ``rollout.engine``."""
    r = cfg.rollout
    if r.engine == "hf":
        return HFEngine(bundle.model, bundle.tokenizer, bundle.device), None
    eos = HFEngine(bundle.model, bundle.tokenizer, bundle.device).eos_ids
    config = getattr(bundle.model, "config", None)
    if r.engine == "vllm":
        from gigpo.rollout.engine_vllm import VLLMEngine, VLLMSync

        engine = VLLMEngine(bundle, eos_ids=eos, seed=cfg.train.seed)
        return engine, RemoteRollout(engine, VLLMSync(bundle.model, engine))
    from gigpo.rollout.engine_openai import CompletionsEngine
    from gigpo.train.weight_sync import FullWeightSync

    engine = CompletionsEngine(engine_urls(cfg), r.engine_model or cfg.model.name, eos_ids=eos,
                               model_config=config, max_staleness=r.max_staleness, seed=cfg.train.seed,
                               timeout_s=r.engine_timeout_s, max_retries=r.engine_max_retries)
    shared = Path(r.weights_dir) if r.weights_dir else run_dir / "pushed_weights"
    return engine, RemoteRollout(engine, FullWeightSync(bundle.model, engine, shared))


def check_engine_urls(cfg: Any) -> None:
    """``rollout.engine=openai``: every URL answers before any model loads (a ConfigError otherwise)."""
    if cfg.rollout.engine != "openai":
        return
    from gigpo.rollout.engine_openai import CompletionsEngine, RemoteEngineError
    from gigpo.train.config_error import ConfigError

    engine = CompletionsEngine(engine_urls(cfg), "?", eos_ids=[], max_retries=0)
    try:
        engine.probe()
    except RemoteEngineError as e:
        raise ConfigError(f"rollout.engine_urls: {e}") from None
    finally:
        engine.close()
