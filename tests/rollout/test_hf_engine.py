"""HFEngine's free (unconstrained) sampling: recorded log-probs are those of the distribution sampled from
(logits / T, then top-p), rows end at their first EOS, and the draw is the one HF's own sampler makes."""

import pytest
import torch

from gigpo.models import load_model
from gigpo.rollout import HFEngine
from gigpo.rollout.sampling import top_p_logprobs


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", tiny={"english_words": False})


def _prompts(tok):
    texts = ["go up", "you are P on a grid, reach G", "a", "open the drawer then go to shelf 10"]
    return [tok(t, add_special_tokens=False)["input_ids"] for t in texts]  # different lengths: left padding


def _teacher_forced(model, prompt, response, temperature, top_p):
    """Log-probs of ``response`` after ``prompt`` under the sampling distribution, one unpadded full forward."""
    with torch.no_grad():
        z = model(input_ids=torch.tensor([prompt + response])).logits[0, len(prompt) - 1:-1].float()
    logp = torch.log_softmax(z / (temperature or 1.0), dim=-1)
    if temperature > 0:
        logp = top_p_logprobs(logp, top_p)
    return logp.gather(-1, torch.tensor(response).unsqueeze(-1)).squeeze(-1), logp


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9), (1.3, 0.5), (0.0, 1.0)])
def test_logprobs_are_those_of_the_distribution_sampled_from(tiny, temperature, top_p):
    engine = HFEngine(tiny.model, tiny.tokenizer, "cpu")
    prompts = _prompts(tiny.tokenizer)
    torch.manual_seed(0)
    gens = engine.generate(prompts, max_new_tokens=12, temperature=temperature, top_p=top_p)
    assert engine.calls == 1 and engine.prompts_generated == len(prompts)
    for p, g in zip(prompts, gens):
        assert len(g.token_ids) == len(g.logprobs) >= 1
        want, full = _teacher_forced(tiny.model, p, g.token_ids, temperature, top_p)
        assert torch.isfinite(want).all()  # every drawn token lies inside its nucleus
        assert torch.allclose(torch.tensor(g.logprobs), want, atol=1e-5), (g.logprobs, want)
        if temperature == 0:
            assert g.token_ids == full.argmax(-1).tolist()
        assert g.text == tiny.tokenizer.decode(g.token_ids, skip_special_tokens=True)


def test_rows_end_at_their_first_eos(tiny):
    """An EOS bias makes rows finish at different steps: each keeps its tokens up to its first EOS (included),
    the log-probs of exactly those, and a row without EOS runs the full budget."""
    model, tok = tiny.model, tiny.tokenizer
    engine = HFEngine(model, tok, "cpu")
    bias = torch.zeros(model.config.vocab_size)
    bias[engine.eos_ids] = 2.5
    hook = model.lm_head.register_forward_hook(lambda _m, _i, out: out + bias)
    try:
        torch.manual_seed(1)
        prompts = _prompts(tok) * 4
        gens = engine.generate(prompts, max_new_tokens=10, temperature=1.0)
        lengths = {len(g.token_ids) for g in gens}
        assert len(lengths) > 1  # the batch really finished rows at different steps
        for p, g in zip(prompts, gens):
            eos_at = [i for i, t in enumerate(g.token_ids) if t in engine.eos_ids]
            assert eos_at in ([], [len(g.token_ids) - 1])
            assert eos_at or len(g.token_ids) == 10
            want, _ = _teacher_forced(model, p, g.token_ids, 1.0, 1.0)
            assert torch.allclose(torch.tensor(g.logprobs), want, atol=1e-5)
    finally:
        hook.remove()


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_the_draw_is_hf_samplers_draw(tiny, temperature):
    """Same seed, same tokens as ``generate(do_sample=True)``: one multinomial per step over the same
    probabilities, so switching the sampler in did not change what a seeded run samples."""
    model, tok = tiny.model, tiny.tokenizer
    engine = HFEngine(model, tok, "cpu")
    prompt = _prompts(tok)[1]
    torch.manual_seed(3)
    mine = engine.generate([prompt] * 3, max_new_tokens=12, temperature=temperature)
    torch.manual_seed(3)
    with torch.no_grad():
        seq = model.generate(input_ids=torch.tensor([prompt] * 3), attention_mask=torch.ones(3, len(prompt),
                             dtype=torch.long), max_new_tokens=12, do_sample=True, top_k=0, top_p=1.0,
                             temperature=temperature, pad_token_id=engine.pad_id, eos_token_id=engine.eos_ids)
    for g, row in zip(mine, seq[:, len(prompt):].tolist()):
        assert row[:len(g.token_ids)] == g.token_ids
