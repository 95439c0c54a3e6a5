"""Live weight updates of `gigpo serve`: what a learner calls after each update (gigpo.train.collect.weight_sync).

``POST /v1/reload_weights`` ``{"path": FILE_OR_DIR, "version": INT}``
    Full weights: a safetensors file written by the learner (or a directory holding ``model.safetensors``) is
    loaded into the served model in place (``strict``: every parameter must be there with its shape), between
    two decoding passes (the batcher's ``model_lock``), and ``version`` becomes the server's weights version,
    reported by every completion (``weights_version``) and by ``GET /v1/weights``. Loading the very tensors the
    learner holds makes the served model equal to the learner's, bit for bit, when both use the same dtype.

``POST /v1/load_lora_adapter`` / ``POST /v1/unload_lora_adapter`` (vLLM's routes and bodies)
    are answered 501 with a message pointing to full-weight sync: this server merges no adapters (the learner
    pushes its merged weights instead). A vLLM server does implement them (``VLLM_ALLOW_RUNTIME_LORA_UPDATING``).

The path is read on the server's machine: a learner and a server on one host (or a shared filesystem). Who may
push: a client with the server's ``--api-key`` (every route checks it), and only files under ``--weights-dir``
(every link resolved first, the ``model.safetensors`` inside a named directory included; a relative path is
taken under it). Without ``--weights-dir`` the route answers 403.
A path outside the directory gets the same 403 whether or not it exists, so the route reveals nothing about the
rest of the host. A file that is not safetensors, does not fit the model (names, shapes) or holds a NaN/Inf is
refused with 400 and the served weights stay as they were.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gigpo.httputil import as_int, loads_strict
from gigpo.serve.protocol import error_body


class OutsideWeightsDir(PermissionError):
    """A path the server may not read (weight reloads off, or outside ``--weights-dir``): 403."""


def resolve_weights_file(path: Any, weights_dir: Path | None) -> Path:
    """The safetensors file named by ``path`` (a file, or a directory with ``model.safetensors``), which must
    lie under ``weights_dir`` once symlinks are resolved (checked before anything about the path is looked at)."""
    if weights_dir is None:
        raise OutsideWeightsDir("weight reloads are off on this server (start it with --weights-dir DIR, the "
                                "directory the learner pushes to)")
    if not isinstance(path, str) or not path or "\0" in path:
        raise ValueError("'path' must be a non-empty string (a .safetensors file or a directory holding one)")
    outside = OutsideWeightsDir("'path' is not under this server's --weights-dir")
    p = (weights_dir / path).resolve()  # an absolute path replaces weights_dir; ".." and links are resolved
    if not p.is_relative_to(weights_dir):
        raise outside
    if p.is_dir():
        # the file inside is resolved whole too: DIR/sub/model.safetensors may itself be a link out of DIR
        p = (p / "model.safetensors").resolve()
        if not p.is_relative_to(weights_dir):
            raise outside
    if not p.is_file():
        raise FileNotFoundError(f"no weights file at {p}")
    return p


def check_finite(sd: dict[str, Any]) -> None:
    """ValueError naming the first floating tensor that holds a NaN or an infinity (a model with such weights
    answers empty text or fails every sampled request)."""
    import torch

    bad = [k for k, v in sd.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        raise ValueError(f"non-finite values (NaN or Inf) in {bad[0]}{more}")


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
    check_finite(sd)
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
        path = resolve_weights_file(body.get("path"), handler.server.weights_dir)
    except OutsideWeightsDir as e:
        return handler.send_json(403, error_body(403, str(e), "permission_error"))
    except FileNotFoundError as e:
        return handler.send_json(404, error_body(404, str(e), "not_found_error"))
    except (ValueError, TypeError) as e:
        return handler.send_json(400, error_body(400, str(e)))
    try:
        out = reload_weights(handler.server.batcher, path, version)
    # shapes or names that do not fit this model, non-finite values, a file that is not safetensors
    # (safetensors raises its own SafetensorError, an Exception subclass: caught so the client always gets a reply)
    except Exception as e:  # noqa: BLE001
        return handler.send_json(400, error_body(400, f"cannot load {path} into the served model: "
                                                      f"{' '.join(str(e).split())[:500]}; the served weights are "
                                                      "unchanged"))
    handler.send_json(200, out)


def handle_lora(handler: Any, raw: bytes) -> None:
    handler.send_json(501, error_body(501, (
        "gigpo serve does not load LoRA adapters; push merged full weights with POST /v1/reload_weights "
        "(rollout.openai.weight_sync=full), or serve with vLLM for adapter updates"), "not_implemented"))


POST_ROUTES = {"/v1/reload_weights": handle_reload, "/v1/load_lora_adapter": handle_lora,
               "/v1/unload_lora_adapter": handle_lora}
