"""Live weight updates of `gigpo serve`: what a learner calls after each update (gigpo.train.weight_sync).

``POST /v1/reload_weights`` ``{"path": FILE_OR_DIR, "version": INT}``
    Full weights: a safetensors file written by the learner (or a directory holding ``model.safetensors``) is
    loaded into the served model in place (``strict``: every parameter must be there with its shape), between
    two decoding passes (the batcher's ``model_lock``), and ``version`` becomes the server's weights version,
    reported by every completion (``weights_version``) and by ``GET /v1/weights``. Loading the very tensors the
    learner holds makes the served model equal to the learner's, bit for bit, when both use the same dtype.

``POST /v1/load_lora_adapter`` / ``POST /v1/unload_lora_adapter`` (vLLM's routes and bodies)
    are answered 501 with a message pointing to full-weight sync: this server merges no adapters (the learner
    pushes its merged weights instead). A vLLM server does implement them (``VLLM_ALLOW_RUNTIME_LORA_UPDATING``).

The path is read on the server's machine: a learner and a server on one host (or a shared filesystem). Anyone
who can reach the port can make the server load a file it can read, so keep ``--host`` at 127.0.0.1 unless the
network is trusted.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gigpo.httputil import as_int, loads_strict
from gigpo.serve.server import _error_body


def resolve_weights_file(path: Any) -> Path:
    """The safetensors file named by ``path`` (a file, or a directory with ``model.safetensors``)."""
    if not isinstance(path, str) or not path:
        raise ValueError("'path' must be a non-empty string (a .safetensors file or a directory holding one)")
    p = Path(path)
    if p.is_dir():
        p = p / "model.safetensors"
    if not p.is_file():
        raise FileNotFoundError(f"no weights file at {p}")
    return p


def check_fits(model: Any, sd: dict[str, Any]) -> None:
    """ValueError unless ``sd`` holds every parameter of ``model`` (a tied one once is enough) with its shape and
    nothing else — checked before anything is copied, so a refused file leaves the served weights untouched."""
    current = model.state_dict()
    storage = {k: (v.untyped_storage().data_ptr(), v.storage_offset()) for k, v in current.items()}
    present = {storage[k] for k in sd if k in storage}
    unexpected = [k for k in sd if k not in current]
    missing = [k for k in current if k not in sd and storage[k] not in present]
    shapes = [f"{k} {tuple(v.shape)} vs {tuple(current[k].shape)}" for k, v in sd.items()
              if k in current and tuple(v.shape) != tuple(current[k].shape)]
    problems = ([f"size mismatch: {', '.join(shapes[:3])}"] if shapes else []) + \
        ([f"missing: {', '.join(missing[:3])}"] if missing else []) + \
        ([f"unexpected: {', '.join(unexpected[:3])}"] if unexpected else [])
    if problems:
        raise ValueError("; ".join(problems))


def reload_weights(batcher: Any, path: Path, version: int) -> dict[str, Any]:
    """Load ``path`` into the batcher's model between passes; ``version`` becomes the served version."""
    from safetensors.torch import load_file

    t0 = time.perf_counter()
    model = batcher.engine.model
    sd = load_file(str(path), device=str(batcher.engine.device))
    check_fits(model, sd)
    with batcher.model_lock:
        model.load_state_dict(sd, strict=False)  # strict=False: tied weights come once; check_fits did the rest
        batcher.weights_version = version
    return {"status": "ok", "version": version, "seconds": round(time.perf_counter() - t0, 4)}


def handle_reload(handler: Any, raw: bytes) -> None:
    try:
        body = loads_strict(raw)
        if not isinstance(body, dict):
            raise ValueError("request body must be a JSON object")
        version = as_int(body.get("version"), "version", 0, 2**62)
        path = resolve_weights_file(body.get("path"))
    except FileNotFoundError as e:
        return handler.send_json(404, _error_body(404, str(e), "not_found_error"))
    except (ValueError, TypeError) as e:
        return handler.send_json(400, _error_body(400, str(e)))
    try:
        out = reload_weights(handler.server.batcher, path, version)
    except (RuntimeError, OSError, ValueError) as e:  # shapes or names that do not fit this model, a bad file
        return handler.send_json(400, _error_body(400, f"cannot load {path} into the served model: "
                                                       f"{' '.join(str(e).split())[:500]}"))
    handler.send_json(200, out)


def handle_lora(handler: Any, raw: bytes) -> None:
    handler.send_json(501, _error_body(501, (
        "gigpo serve does not load LoRA adapters; push merged full weights with POST /v1/reload_weights "
        "(rollout.weight_sync=full), or serve with vLLM for adapter updates"), "not_implemented"))


POST_ROUTES = {"/v1/reload_weights": handle_reload, "/v1/load_lora_adapter": handle_lora,
               "/v1/unload_lora_adapter": handle_lora}
