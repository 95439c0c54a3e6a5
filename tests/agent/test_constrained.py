"""Constrained action decoding: the token automaton on four tokenizer families, bad actions, and the contract that
the sampler's log-probs equal the learner's recomputed ones (same masks) to 1e-5 in fp32."""

from __future__ import annotations

import pytest
import torch
from tokenizers_for_tests import TOKENIZERS, _restore_torch_rng, small_model  # noqa: F401 - autouse fixture

from gigpo.agent.constrained import (
    ActionConstraint,
    ActionEncodingError,
    ActionTrie,
    ConstraintCache,
    encode_action,
)
from gigpo.rollout.engines.hf import HFEngine
from gigpo.rollout.sampling import top_p_logprobs
from gigpo.train.update.logprobs import policy_forward

ACTIONS = ["go to shelf 1", "go to shelf 10", "take apple from shelf 1", "open the drawer"]


def _walk(c: ActionConstraint, tokens: list[int]):
    s = c.start()
    for tok in tokens:
        assert not s.done
        allowed = c.allowed(s)
        assert allowed is None or tok in allowed, (tok, allowed)
        c.advance(s, tok)
    return s


@pytest.mark.parametrize("name", list(TOKENIZERS))
def test_every_action_and_only_actions_are_reachable(name):
    tok = TOKENIZERS[name]()
    eos = [tok.eos_token_id]
    c = ActionConstraint(tok, ACTIONS, eos_ids=eos)
    for a in ACTIONS:
        for seq in encode_action(tok, a):
            s = _walk(c, seq)
            if not s.done:  # a prefix of a longer action: EOS is allowed and ends it
                assert eos[0] in c.allowed(s)
                c.advance(s, eos[0])
            assert s.done and s.action == a
    # A token sequence that leaves the trie is never allowed: the first token of a non-action.
    bad = tok("close the drawer", add_special_tokens=False)["input_ids"]
    assert bad[0] not in c.allowed(c.start()) or bad[:2] != encode_action(tok, "open the drawer")[0][:2]


@pytest.mark.parametrize("name", list(TOKENIZERS))
def test_prefix_action_allows_end_and_continuation(name):
    tok = TOKENIZERS[name]()
    eos = tok.eos_token_id
    c = ActionConstraint(tok, ["go to shelf 1", "go to shelf 10"], eos_ids=[eos])
    short, long_ = encode_action(tok, "go to shelf 1")[0], encode_action(tok, "go to shelf 10")[0]
    k = next(i for i, (a, b) in enumerate(zip(short + [None], long_)) if a != b)  # where the sequences part
    s = _walk(c, long_[:k])
    allowed = set(c.allowed(s))
    if k == len(short):  # token-level prefix (e.g. WordPiece "1" then "##0"): end here, or continue
        assert {eos, long_[k]} <= allowed
    else:  # BPE merges " 1" / " 10" into different tokens: both branches are open at the fork
        assert {short[k], long_[k]} <= allowed
    s2 = _walk(c, short)
    c.finish(s2)  # cut at the budget right here: the complete shorter action counts
    assert s2.action == "go to shelf 1"
    assert _walk(c, long_).action == "go to shelf 10" or c.finish(_walk(c, long_)) == "go to shelf 10"


def test_leading_space_variant_for_bpe():
    tok = TOKENIZERS["byte-bpe"]()
    seqs = encode_action(tok, "up")
    assert len(seqs) == 2 and seqs[0] != seqs[1]
    root = ActionTrie(tok, ["up"]).root
    assert {seqs[0][0], seqs[1][0]} <= set(root.children)


@pytest.mark.parametrize("name", list(TOKENIZERS))
def test_budget_never_starts_a_spelling_that_cannot_finish(name):
    """A 1-token budget: the tiny vocabulary spells " up" as [" ", "up"] and byte-BPE "left" as two tokens; only
    first tokens that complete an action at once may be offered, or the response is cut into an invalid one."""
    tok = TOKENIZERS[name]()
    words = ["up", "down", "left", "right"]
    c = ActionConstraint(tok, words, eos_ids=[tok.eos_token_id])
    one_token = {seq[0] for w in words for seq in encode_action(tok, w) if len(seq) == 1}
    assert set(c.allowed(c.start(), remaining=1)) == one_token
    for first in c.allowed(c.start(), remaining=1):
        s = c.start()
        c.advance(s, first)
        assert c.finish(s) in words
    # With room for two tokens every spelling may start; unbounded is the same here.
    assert set(c.allowed(c.start(), remaining=2)) == set(c.allowed(c.start())) >= one_token
    # No action fits (budget 1, every spelling 2 tokens): all first tokens stay offered rather than none.
    c2 = ActionConstraint(tok, ["go to shelf 10"], eos_ids=[tok.eos_token_id])
    assert c2.allowed(c2.start(), remaining=1) == c2.allowed(c2.start())


def test_think_action_constrains_inside_the_tag_only():
    tok = TOKENIZERS["wordpiece"]()
    c = ActionConstraint(tok, ["up", "down"], eos_ids=[tok.eos_token_id], fmt="think-action")
    s = c.start()
    think = tok("<think>go up</think><action>", add_special_tokens=False)["input_ids"]
    for t in think[:-1]:
        assert c.allowed(s) is None
        c.advance(s, t)
    c.advance(s, think[-1])
    firsts = {seq[0] for a in ("up", "down") for seq in encode_action(tok, a)}  # incl. the " up" variants
    assert s.phase == "action" and set(c.allowed(s)) == firsts
    c.advance(s, tok.convert_tokens_to_ids("down"))
    close = tok("</action>", add_special_tokens=False)["input_ids"]
    for t in close:
        assert c.allowed(s) == [t]  # the closing tag is forced
        c.advance(s, t)
    assert s.done and s.action == "down"


def test_unencodable_action_names_env_and_action():
    tok = TOKENIZERS["wordpiece"]()  # the tiny vocabulary has no CJK characters
    with pytest.raises(ActionEncodingError, match=r"env 'myenv'.*'買う'"):
        ActionTrie(tok, ["up", "買う"], env_name="myenv")
    with pytest.raises(ActionEncodingError, match="no admissible actions"):
        ConstraintCache(tok, [tok.eos_token_id], "plain", "myenv").get([])


def test_top_p_keeps_the_nucleus_and_renormalises():
    lp = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    out = top_p_logprobs(lp, 0.7).exp()
    assert torch.allclose(out, torch.tensor([[0.625, 0.375, 0.0, 0.0]]), atol=1e-6)


def _engine_and_model(name):
    tok = TOKENIZERS[name]()
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = small_model(tok)
    return HFEngine(model, tok, "cpu"), model, tok


@pytest.mark.parametrize("name", list(TOKENIZERS))
@pytest.mark.parametrize("fmt", ["plain", "think-action"])
def test_sampling_logprobs_equal_recomputed(name, fmt):
    engine, model, tok = _engine_and_model(name)
    if name == "smollm2" and fmt == "think-action":
        pytest.skip("one SmolLM2 case is enough (a 49k vocabulary makes the free tokens slow)")
    # Admissible lists differ across prompts (as they change from step to step); one prompt is free.
    lists = [ACTIONS, ["up", "down", "left", "right"], ["open the drawer", "go to shelf 10"], None]
    cache = ConstraintCache(tok, engine.eos_ids, fmt)
    prompt_text = ["Current observation: . . P", "You are P on a grid.", "Reach the goal G.", "go to shelf"]
    if fmt == "think-action":  # the random model would rarely open the tag itself: it is in the prompt's end
        prompt_text = [p + " <think>x</think><action>" for p in prompt_text]
    prompts = [tok(p, add_special_tokens=False)["input_ids"] for p in prompt_text]
    constraints = [cache.get(a) if a is not None else None for a in lists]
    torch.manual_seed(0)
    for temperature in (1.0, 0.7, 0.0):
        gens = engine.generate(prompts, max_new_tokens=24, temperature=temperature, top_p=1.0,
                               constraints=constraints)
        for g, a in zip(gens[:3], lists[:3]):
            if fmt == "plain":
                assert g.action in a, (g.text, a)
        allowed = [g.allowed for g in gens]
        lp, mask, ent, _ = policy_forward(model, prompts, [g.token_ids for g in gens], pad_id=engine.pad_id,
                                          device=torch.device("cpu"), temperature=temperature or 1.0,
                                          with_entropy=True, allowed=allowed)
        assert torch.isfinite(ent).all()
        for j, g in enumerate(gens):
            n = len(g.token_ids)
            got = lp[j, lp.shape[1] - n:]
            assert torch.allclose(got, torch.tensor(g.logprobs), atol=1e-5), (name, temperature, got, g.logprobs)
        # Without the masks the recomputed log-probs differ: the mask is what makes them agree.
        lp_free, *_ = policy_forward(model, prompts[:3], [g.token_ids for g in gens[:3]], pad_id=engine.pad_id,
                                     device=torch.device("cpu"), temperature=temperature or 1.0)
        if fmt == "plain" and temperature:
            assert (lp_free[:, -1] < lp[:3, -1] - 1e-3).any()


@pytest.mark.parametrize("name", ["wordpiece", "byte-bpe", "sentencepiece"])
def test_learner_renormalises_over_the_allowed_set_in_think_action(name):
    """Teacher-forced think-action response: free tokens keep log_softmax(z/T); tokens inside <action>…</action>
    get log_softmax over the automaton's allowed ids, i.e. log p(y) − log Σ_{v∈A} p(v)."""
    engine, model, tok = _engine_and_model(name)
    c = ActionConstraint(tok, ["up", "down"], eos_ids=engine.eos_ids, fmt="think-action")
    # the tokens the sampler would emit: free text up to the tag, then the trie's and the closing tag's tokens
    resp = (tok("<think>down</think><action>", add_special_tokens=False)["input_ids"]
            + encode_action(tok, "down")[0] + c.close_ids)
    s, allowed = c.start(), []
    for t in resp:
        allowed.append(c.allowed(s))
        c.advance(s, t)
    assert s.done and s.action == "down" and any(a is not None for a in allowed)
    prompt = [tok("Reach the goal G.", add_special_tokens=False)["input_ids"]]
    kw = dict(pad_id=engine.pad_id, device=torch.device("cpu"), temperature=0.8)
    lp, *_ = policy_forward(model, prompt, [resp], allowed=[allowed], **kw)
    with torch.no_grad():
        ids = torch.tensor([prompt[0] + resp])
        z = model(input_ids=ids).logits[0, len(prompt[0]) - 1:-1] / 0.8
    full = torch.log_softmax(z, -1)
    for t, (tok_id, a) in enumerate(zip(resp, allowed)):
        want = full[t, tok_id] - (torch.logsumexp(full[t, a], -1) if a is not None else 0.0)
        assert abs(float(lp[0, t]) - float(want)) < 1e-5
