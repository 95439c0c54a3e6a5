"""Tests of the tiny random-init Llama: determinism from seed, RNG hygiene, overrides, generation."""

from __future__ import annotations

import pytest
import torch

from gigpo.models import load_model


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_deterministic_from_seed_and_global_rng_untouched() -> None:
    torch.manual_seed(1234)
    before = torch.random.get_rng_state()
    a = load_model("tiny", seed=3)
    assert torch.equal(before, torch.random.get_rng_state())
    b = load_model("tiny", seed=3)
    c = load_model("tiny", seed=4)
    assert _same_weights(a.model, b.model)
    assert not _same_weights(a.model, c.model)


def test_bundle_fields_and_defaults() -> None:
    b = load_model("tiny")
    cfg = b.model.config
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == (64, 2, 4)
    assert (cfg.intermediate_size, cfg.max_position_embeddings) == (128, 1024)
    assert cfg.vocab_size == len(b.tokenizer) == 632
    assert b.device == torch.device("cpu") and b.dtype == torch.float32
    assert next(b.model.parameters()).dtype == torch.float32
    assert not b.model.training
    assert b.has_chat_template is False and b.lora is None
    assert b.source.startswith("tiny")
    assert sum(p.numel() for p in b.model.parameters()) == 122_688


def test_overrides_and_bad_overrides() -> None:
    b = load_model("tiny", tiny={"hidden_size": 32, "num_hidden_layers": 1, "english_words": False})
    assert b.model.config.hidden_size == 32 and b.model.config.num_hidden_layers == 1
    assert b.model.config.vocab_size == len(b.tokenizer) == 274
    with pytest.raises(ValueError, match="unknown tiny model option"):
        load_model("tiny", tiny={"hidden": 32})
    with pytest.raises(ValueError, match="divisible"):
        load_model("tiny", tiny={"hidden_size": 30})
    with pytest.raises(ValueError, match="tiny options given"):
        load_model("smollm2-135m", tiny={"hidden_size": 32})


def test_generates_batched_left_padded() -> None:
    b = load_model("tiny", seed=0)
    tok = b.tokenizer
    enc = tok(["<action>", "go up now <action>"], return_tensors="pt", padding=True)
    out = b.model.generate(**enc, max_new_tokens=5, min_new_tokens=5, do_sample=False)
    assert out.shape == (2, enc["input_ids"].shape[1] + 5)
    # logits of a left-padded row equal those of the unpadded prompt (padding is masked out)
    with torch.no_grad():
        padded = b.model(**enc).logits[0, -1]
        alone = b.model(**tok(["<action>"], return_tensors="pt")).logits[0, -1]
    torch.testing.assert_close(padded, alone, rtol=1e-4, atol=1e-5)


def test_dtype_option() -> None:
    b = load_model("tiny", dtype="bfloat16")
    assert b.dtype == torch.bfloat16 and next(b.model.parameters()).dtype == torch.bfloat16
