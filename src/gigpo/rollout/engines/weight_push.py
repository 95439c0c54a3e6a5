"""Keeping the openai engine's servers on the learner's weights, the way each server kind supports it.

After each update (and once before the first rollout) :meth:`WeightPusher.push` writes the learner's weights
under ``engine.weights_dir`` and asks every server to load them:

* `gigpo serve` (full): ``weights-v{N}.safetensors`` (``save_weights``: tied embeddings stored once), then
  ``POST /v1/reload_weights {"path", "version": N}`` (:mod:`gigpo.serve.weights`).
* vLLM, full: a directory ``weights-v{N}/model.safetensors`` (HF names), then ``POST /collective_rpc
  {"method": "reload_weights", "kwargs": {"weights_path": DIR}}`` (``VLLM_SERVER_DEV_MODE=1``).
* vLLM, LoRA: the learner's PEFT adapter as ``lora-v{N}/`` (``adapter_config.json`` + safetensors), then
  ``POST /v1/load_lora_adapter {"lora_name": "<model>-gigpo-v{N}", "lora_path": DIR}``; requests name the new
  adapter from then on and the previous one is unloaded (``/v1/unload_lora_adapter``).

Everything is written to a temporary name and renamed, so a server never reads half a file. A LoRA learner
pushing *full* weights pushes the merged ``W + (α/r)·B·A`` (the served model then equals the learner's up to
float rounding, which the log-prob gap measures). Version N is the number of updates behind the weights.

A push that fails (after the client's retries) is tolerated while the server's lag stays within
``rollout.max_staleness`` (one warning, counted in ``weights/push_failures``); beyond it, or for the push before
the first rollout, :class:`gigpo.rollout.engines.RemoteEngineError`. Only the newest push stays on disk
(and none of a push that failed before the first rollout).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import torch

from gigpo.apiclient import APIError
from gigpo.models.merged_weights import merged_state_dict
from gigpo.rollout.registry import RemoteEngineError

log = logging.getLogger(__name__)


def save_weights(model: Any, path: Path, *, every_name: bool = False) -> None:
    """``path`` (safetensors) holds ``model``'s weights (merged for LoRA); written atomically. Tied tensors
    (embeddings = LM head) are stored once under their first name, or, with ``every_name``, under each name:
    vLLM's CPU backend keeps its own copy of a tied LM head, which a reload without ``lm_head.weight`` leaves
    at the old values (measured: greedy tokens then differ from HF's on the new weights)."""
    from safetensors.torch import save_file

    sd = merged_state_dict(model)
    # save_file refuses tensors that share memory: keep each storage once, or copy the repeats
    seen: set[tuple[int, int]] = set()
    unique: dict[str, torch.Tensor] = {}
    for k, v in sd.items():
        key = (v.untyped_storage().data_ptr(), v.storage_offset())
        if key in seen:
            if every_name:
                unique[k] = v.clone().contiguous()
            continue
        seen.add(key)
        unique[k] = v.contiguous()
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    save_file(unique, str(tmp))
    os.replace(tmp, path)


def _atomic_dir(final: Path, fill: Any) -> Path:
    """Create directory ``final`` by filling a temporary sibling (``fill(tmp)``) and renaming it."""
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    tmp.mkdir(parents=True)
    try:
        fill(tmp)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def save_adapter(model: Any, final: Path) -> Path:
    """The PEFT adapter of LoRA ``model`` as a directory vLLM's ``load_lora_adapter`` reads."""
    return _atomic_dir(final, lambda d: model.save_pretrained(str(d)))


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def check_receiver(engine: Any, i: int) -> None:
    """Server ``i`` of ``engine`` (probed: ``engine.kinds``) can receive weights as ``engine.sync_mode(i)``;
    RemoteEngineError naming the flag to add otherwise."""

    kind, mode, url = engine.kinds[i], engine.sync_mode(i), engine.urls[i]
    if kind == "gigpo":
        if mode == "lora":
            raise RemoteEngineError(f"{url} is gigpo serve, which loads full weights only: use "
                                    "rollout.openai.weight_sync=full (or auto), or serve with vLLM --enable-lora")
        return
    if kind != "vllm":
        if mode == "lora":
            raise RemoteEngineError(f"{url} is neither vLLM nor gigpo serve: rollout.openai.weight_sync=lora needs vLLM")
        return  # another server: assume gigpo serve's /v1/reload_weights (a 404 there is the push's error)
    try:  # a dev-mode-only route: its config tells LoRA support too
        info = engine.admin[i].request_json("GET", "/server_info?config_format=json", max_retries=1).data
    except APIError as e:
        if e.status == 404 and mode == "full":
            raise RemoteEngineError(
                f"{url} is vLLM without its development routes, so it cannot reload weights: start it with "
                "VLLM_SERVER_DEV_MODE=1 (full-weight sync through /collective_rpc reload_weights), or train LoRA "
                "with rollout.openai.weight_sync=lora") from None
        if e.status != 404:
            raise RemoteEngineError(f"{url}: GET /server_info failed ({e})") from None
        info = None
    if mode == "lora":
        lora_cfg = ((info or {}).get("vllm_config") or {}).get("lora_config") if info else "unknown"
        if lora_cfg is None:
            raise RemoteEngineError(f"{url} is vLLM without LoRA: start it with --enable-lora --max-lora-rank R "
                                    "(R >= lora.r) and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True")
        try:  # the runtime-update route exists only with VLLM_ALLOW_RUNTIME_LORA_UPDATING
            engine.clients[i].request_json("POST", "/unload_lora_adapter", {"lora_name": "gigpo-probe"},
                                           max_retries=0)
        except APIError as e:  # vLLM's own 404 for an unknown adapter says "cannot be found"; a missing route not
            if e.status == 404 and "cannot be found" not in str(e):
                raise RemoteEngineError(f"{url} is vLLM without runtime LoRA updates: start it with "
                                        "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora --max-lora-rank R "
                                        "(R >= lora.r)") from None


def post_expecting_text(client: Any, path: str, payload: dict) -> None:
    """POST to a route that answers 200 with plain text (vLLM's LoRA routes): a 2xx is success whatever its body;
    connection errors and 5xx are retried as the client retries (a non-JSON 2xx must not be: a retried load
    fails with "already loaded")."""
    for attempt in range(client.max_retries + 1):
        try:
            client.request_json("POST", path, payload, max_retries=0)
            return
        except APIError as e:
            if e.status is not None and 200 <= e.status < 300:
                return
            if not e.retryable or attempt == client.max_retries:
                raise
            time.sleep(min(client.backoff_max, client.backoff_base * 2.0**attempt))


class WeightPusher:
    """Pushes a learner's weights to every server of a :class:`gigpo.rollout.engines.openai.CompletionsEngine`."""

    def __init__(self, engine: Any):
        import tempfile

        self.engine = engine
        if engine.weights_dir is None:  # a temporary place, removed with the pusher
            self._tmp = tempfile.TemporaryDirectory(prefix="gigpo-weights-")
            engine.weights_dir = Path(self._tmp.name)
        self.dir = Path(engine.weights_dir).expanduser().absolute()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.push_failures = 0
        self.run_tag = uuid.uuid4().hex[:6]
        self._written: list[Path] = []
        self._adapters: list[set[str]] = [set() for _ in engine.urls]

    def _write(self, model: Any, version: int, kinds: set[str]) -> dict[str, Path]:
        """The files this push needs, by format: "file" (gigpo serve), "dir" (vLLM full), "lora"."""
        out: dict[str, Path] = {}
        if "file" in kinds:
            out["file"] = self.dir / f"weights-v{version}.safetensors"
            save_weights(model, out["file"])
        if "dir" in kinds:
            out["dir"] = _atomic_dir(self.dir / f"weights-v{version}",
                                     lambda d: save_weights(model, d / "model.safetensors", every_name=True))
        if "lora" in kinds:
            if not hasattr(model, "peft_config"):
                raise ValueError("rollout.openai.weight_sync=lora needs a LoRA learner (lora.enabled=true)")
            out["lora"] = save_adapter(model, self.dir / f"lora-v{version}")
        return out

    def _format(self, i: int) -> str:
        e = self.engine
        return "lora" if e.sync_mode(i) == "lora" else "dir" if e.kinds[i] == "vllm" else "file"

    def _load(self, i: int, fmt: str, path: Path, version: int) -> None:
        """Server ``i`` loads ``path``; raises APIError (or RemoteEngineError for a refusal in a 200)."""
        e = self.engine
        if fmt == "file":
            res = e.clients[i].request_json("POST", "/reload_weights", {"path": str(path), "version": version})
            e.server_versions[i] = int(res.data.get("version", version))
            return
        if fmt == "dir":
            e.admin[i].request_json("POST", "/collective_rpc", {"method": "reload_weights",
                                                                "kwargs": {"weights_path": str(path)}})
            e.server_versions[i] = version
            return
        name = f"{e.served_model}-gigpo-{self.run_tag}-v{version}"  # unique per run: two runs share a server
        post_expecting_text(e.clients[i], "/load_lora_adapter", {"lora_name": name, "lora_path": str(path)})
        old, e.request_model[i], e.server_versions[i] = set(self._adapters[i]), name, version
        self._adapters[i] = {name}
        for stale in old - {name}:  # the previous version: nothing will request it again
            try:
                post_expecting_text(e.clients[i], "/unload_lora_adapter", {"lora_name": stale})
            except APIError as err:
                log.warning("could not unload LoRA adapter %s from %s (%s)", stale, e.urls[i], err)

    def unload_adapters(self) -> None:
        """At close: the servers forget this run's adapters (a server outlives many runs)."""
        for i, names in enumerate(self._adapters):
            for name in names:
                try:
                    post_expecting_text(self.engine.clients[i], "/unload_lora_adapter", {"lora_name": name})
                except APIError as err:
                    log.warning("could not unload LoRA adapter %s from %s (%s)", name, self.engine.urls[i], err)
            names.clear()

    def push(self, model: Any, version: int, *, required: bool = False) -> dict[str, float]:
        """Write version ``version`` and have every server load it; the engine's versions follow. ``required``
        (the push before the first rollout): any failure raises, since a server that never loaded the learner's
        weights serves a different model whatever version it reports."""

        e = self.engine
        t0 = time.perf_counter()
        formats = [self._format(i) for i in range(len(e.urls))]
        paths = self._write(model, version, set(formats))
        t_write = time.perf_counter() - t0
        e.learner_version = version
        failed = None
        for i, client in enumerate(e.clients):
            try:
                self._load(i, formats[i], paths[formats[i]], version)
            except APIError as err:
                lag = version - e.server_versions[i]
                self.push_failures += 1
                if required or lag > e.max_staleness:
                    failed = RemoteEngineError(
                        f"cannot push weights version {version} to {client.base_url} ({err}); " + (
                            "it never received the learner's weights" if required else
                            f"it would serve weights {lag} versions old (rollout.max_staleness={e.max_staleness})"))
                    break
                log.warning("weights push to %s failed (%s); it serves version %d, %d behind (allowed by "
                            "rollout.max_staleness=%d)", client.base_url, err, e.server_versions[i], lag,
                            e.max_staleness)
        if failed is not None and required:
            for p in paths.values():  # no half-used weights left behind by a run that never started
                _remove(p)
            raise failed
        self._written.extend(p for p in paths.values() if p not in self._written)
        while len(self._written) > len(paths):  # only the newest push stays
            _remove(self._written.pop(0))
        if failed is not None:
            raise failed
        return {"weights/version": float(version), "weights/push_s": time.perf_counter() - t0,
                "weights/write_s": t_write, "weights/push_failures": float(self.push_failures)}
