"""Keeping remote rollout servers on the learner's weights: full weights through a shared directory + a reload.

After each update (and once before the first rollout) :meth:`FullWeightSync.push` writes the learner's weights
to ``shared_dir/weights-v{N}.safetensors`` (``safetensors.torch.save_model``: tied embeddings stored once;
written to a temporary name and renamed, so a server never reads half a file), then asks every server to load it
(``POST {url}/reload_weights {"path", "version": N}``, :mod:`gigpo.serve.weights`). Version N is the number of
updates behind those weights (the iteration); the engine compares it with what each server reports.

A LoRA learner pushes the *merged* weights ``W + (α/r)·B·A`` per adapted layer (computed into new tensors; the
learner's own modules are untouched), so the server needs no adapter support; the served model then equals the
learner's up to float rounding (merged vs. separate matmuls), which the log-prob gap measures.

A push that fails (after the client's retries) is tolerated while the server's lag stays within
``rollout.max_staleness`` (one warning, counted in ``weights/push_failures``); beyond it the run stops with
:class:`gigpo.rollout.engine_openai.RemoteEngineError`. Only the newest ``keep`` files stay in ``shared_dir``.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any

import torch

from gigpo.apiclient import APIError
from gigpo.models.merged_weights import merged_state_dict
from gigpo.rollout.engine_openai import CompletionsEngine, RemoteEngineError

log = logging.getLogger(__name__)


def save_weights(model: Any, path: Path) -> None:
    """``path`` (safetensors) holds ``model``'s weights (merged for LoRA); written atomically."""
    from safetensors.torch import save_file

    sd = merged_state_dict(model)
    # save_file refuses tensors that share memory (tied embeddings): store each storage once, as its first name
    seen: dict[tuple[int, int], str] = {}
    unique: dict[str, torch.Tensor] = {}
    for k, v in sd.items():
        key = (v.untyped_storage().data_ptr(), v.storage_offset())
        if key in seen:
            continue
        seen[key] = k
        unique[k] = v.contiguous()
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    save_file(unique, str(tmp))
    os.replace(tmp, path)


class FullWeightSync:
    """Pushes ``model``'s weights to every server of ``engine`` (see the module docstring)."""

    def __init__(self, model: Any, engine: CompletionsEngine, shared_dir: str | Path, *, keep: int = 2):
        self.model, self.engine = model, engine
        self.dir = Path(shared_dir).expanduser().absolute()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.keep = max(1, keep)
        self.push_failures = 0
        self._written: list[Path] = []

    def push(self, version: int, *, required: bool = False) -> dict[str, float]:
        """Write version ``version`` and have every server load it; the engine's versions follow. ``required``
        (the push before the first rollout): any failure raises, since a server that never loaded the learner's
        weights serves a different model whatever version it reports."""
        t0 = time.perf_counter()
        path = self.dir / f"weights-v{version}.safetensors"
        save_weights(self.model, path)
        t_write = time.perf_counter() - t0
        self.engine.learner_version = version
        for i, client in enumerate(self.engine.clients):
            try:
                res = client.request_json("POST", "/reload_weights", {"path": str(path), "version": version})
                self.engine.server_versions[i] = int(res.data.get("version", version))
            except APIError as e:
                lag = version - self.engine.server_versions[i]
                self.push_failures += 1
                if required or lag > self.engine.max_staleness:
                    raise RemoteEngineError(
                        f"cannot push weights version {version} to {client.base_url} ({e}); " + (
                            "it never received the learner's weights" if required else
                            f"it would serve weights {lag} versions old (rollout.max_staleness="
                            f"{self.engine.max_staleness})")) from e
                log.warning("weights push to %s failed (%s); it serves version %d, %d behind (allowed by "
                            "rollout.max_staleness=%d)", client.base_url, e, self.engine.server_versions[i], lag,
                            self.engine.max_staleness)
        self._written.append(path)
        while len(self._written) > self.keep:
            old = self._written.pop(0)
            old.unlink(missing_ok=True)
        return {"weights/version": float(version), "weights/push_s": time.perf_counter() - t0,
                "weights/write_s": t_write, "weights/push_failures": float(self.push_failures)}
