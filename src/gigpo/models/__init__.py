"""Model loading: the tiny random-init Llama, the bundled SmolLM2-135M (GGUF -> cached safetensors), local dirs
and cached HF ids (never downloads); LoRA; saving in HF format."""

from gigpo.models.loader import (
    ModelBundle,
    check_load_options,
    load_model,
    resolve_model_source,
    save_pretrained,
)
from gigpo.models.tokenizer import tiny_tokenizer

__all__ = [
    "ModelBundle",
    "check_load_options",
    "load_model",
    "resolve_model_source",
    "save_pretrained",
    "tiny_tokenizer",
]
