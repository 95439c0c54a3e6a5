"""Identical rows are computed once: the sampler's shared prefill (a group's N copies of the first prompt) and the
learner's forward over duplicate (prompt, response, allowed) rows. Both must equal the row-by-row result."""

from __future__ import annotations

import torch
from tokenizers_for_tests import TOKENIZERS, _restore_torch_rng, small_model  # noqa: F401 - autouse fixture

from gigpo.agent.constrained import ConstraintCache
from gigpo.rollout.engines.hf import HFEngine
from gigpo.train.update.logprobs import policy_forward, unique_rows
from gigpo.train.update.value import ValueHead

WORDS = ["up", "down", "left", "right"]
PHRASES = ["go to shelf 1", "go to shelf 10", "take apple from shelf 1", "open the drawer"]  # multi-token: uses the KV cache


def _setup():
    tok = TOKENIZERS["byte-bpe"]()
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = small_model(tok)
    return tok, model, HFEngine(model, tok, "cpu")


def _count_prefill_rows(model):
    seen: list[int] = []
    handle = model.register_forward_pre_hook(lambda _m, _a, kw: seen.append(kw["input_ids"].shape), with_kwargs=True)
    return seen, handle


def test_unique_rows_inverts():
    p, r = [[1, 2], [1, 2], [3], [1, 2]], [[5], [5], [5], [6]]
    rows, inv = unique_rows(p, r, None)
    assert rows == [0, 2, 3] and inv == [0, 0, 1, 2]
    # the allowed sets are part of the row: the same tokens under another mask are a different distribution
    rows, inv = unique_rows(p[:2], r[:2], [[[5, 6]], [[5, 7]]])
    assert rows == [0, 1]


def test_shared_prefill_runs_each_distinct_prompt_once_and_samples_the_same():
    tok, model, engine = _setup()
    a, b = (tok(t, add_special_tokens=False)["input_ids"] for t in ("You are P on a grid.", "room 1 code up"))
    prompts = [a, a, a, b, a, b]  # two groups' copies, mixed
    cache = ConstraintCache(tok, engine.eos_ids, "plain")
    cons = [cache.get(PHRASES) for _ in prompts]
    seen, h = _count_prefill_rows(model)
    try:
        gens = engine.generate(prompts, max_new_tokens=8, temperature=0.0, top_p=1.0, constraints=cons)
    finally:
        h.remove()
    assert seen[0][0] == 2  # the prefill forward saw the 2 distinct prompts, not 6
    assert all(s[0] == len(prompts) for s in seen[1:])  # every later token step runs all rows
    for p, g in zip(prompts, gens):  # greedy: each row equals generating its prompt alone
        alone = engine.generate([p], max_new_tokens=8, temperature=0.0, top_p=1.0,
                                constraints=[cache.get(PHRASES)])[0]
        assert g.token_ids == alone.token_ids and g.action == alone.action and len(g.token_ids) > 1
        assert torch.allclose(torch.tensor(g.logprobs), torch.tensor(alone.logprobs), atol=1e-5)
    # sampled rows of one prompt still draw independently (the copies are not tied to one sample)
    torch.manual_seed(0)
    many = engine.generate([a] * 32, max_new_tokens=4, temperature=1.0, top_p=1.0,
                           constraints=[cache.get(WORDS) for _ in range(32)])
    assert len({g.action for g in many}) > 1


def test_learner_forward_of_duplicate_rows_equals_row_by_row():
    tok, model, engine = _setup()
    model.train()
    head = ValueHead(model.config.hidden_size)

    def enc(text):
        return tok(text, add_special_tokens=False)["input_ids"]

    prompts = [enc("room 0 code up"), enc("room 0 code up"), enc("room 1 code up"), enc("room 0 code up")]
    resp = [enc("up"), enc("up"), enc("left"), enc(" down")]
    allowed = [[sorted(set(sum((enc(w) + enc(" " + w) for w in WORDS), [])))] * len(r) for r in resp]
    kw = dict(pad_id=engine.pad_id, device=torch.device("cpu"), temperature=0.7, with_entropy=True, head=head)
    weights = torch.tensor([0.3, -1.2, 0.5, 2.0])

    def loss_and_grads(fn):
        model.zero_grad()
        head.zero_grad()
        lp, mask, ent, val = fn()
        ent = ent * mask  # entropy is only defined at response positions (padding columns are not masked)
        loss = ((lp * mask).sum(-1) * weights).sum() + (ent * mask).sum() * 0.1 + (val * weights).sum()
        loss.backward()
        grads = [p.grad.clone() for p in list(model.parameters()) + list(head.parameters()) if p.grad is not None]
        return (lp * mask).detach(), ent.detach(), val.detach(), grads

    got = loss_and_grads(lambda: policy_forward(model, prompts, resp, allowed=allowed, **kw))

    def one_by_one():
        outs = [policy_forward(model, [p], [r], allowed=[a], **kw) for p, r, a in zip(prompts, resp, allowed)]
        width = max(o[0].shape[1] for o in outs)

        def pad(t):  # right-aligned rows
            return torch.nn.functional.pad(t, (width - t.shape[1], 0))

        return (torch.cat([pad(o[0]) for o in outs]), torch.cat([pad(o[1]) for o in outs]),
                torch.cat([pad(o[2]) for o in outs]), torch.cat([o[3] for o in outs]))

    want = loss_and_grads(one_by_one)
    for g, w in zip(got[:3], want[:3]):
        assert torch.allclose(g, w, atol=1e-5)
    assert len(got[3]) == len(want[3]) > 0
    for g, w in zip(got[3], want[3]):
        assert torch.allclose(g, w, atol=1e-5, rtol=1e-4)
