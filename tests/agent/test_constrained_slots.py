"""Free-text slots in constrained decoding: ``name[<placeholder>]`` admissible actions (WebShop's search box) let the
policy write the argument, on four tokenizer families; the sampler's log-probs equal the learner's with the same
(large, shared) slot sets; a budget closes the slot in time; the server's literal choices are untouched."""

from __future__ import annotations

import pytest
import torch
from tokenizers_for_tests import TOKENIZERS, _restore_torch_rng, small_model  # noqa: F401 - autouse fixture

from gigpo.agent.constrained import (
    TEMPLATE,
    ActionConstraint,
    ConstraintCache,
    encode_action,
    slot_vocabulary,
)
from gigpo.rollout.engines.hf import HFEngine
from gigpo.train.update.logprobs import policy_forward

SEARCH = "search[<your query>]"
PAGE = [SEARCH, "click[buy now]", "click[< prev]"]


def _ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def test_template_pattern_is_a_whole_bracketed_placeholder():
    assert TEMPLATE.fullmatch(SEARCH) and TEMPLATE.fullmatch("answer[<text>]")
    for literal in ("click[< prev]", "click[next >]", "click[buy now]", "search[<>]", "go to <room>", "up"):
        assert not TEMPLATE.fullmatch(literal), literal


@pytest.mark.parametrize("name", list(TOKENIZERS))
def test_slot_vocabulary_is_printable_and_cannot_close_or_end(name):
    tok = TOKENIZERS[name]()
    ids = slot_vocabulary(tok)
    assert ids and not set(ids) & set(tok.all_special_ids)
    for i in ids:
        text = tok.decode([i])  # "" for SentencePiece's lone word-start piece, which adds a space after a word
        assert text.isascii() and not set(text) & set("[]<>\n\r\t"), (i, text)
    trie = ConstraintCache(tok, [tok.eos_token_id], "plain", slots=True).get([SEARCH]).trie
    slot = next(n for n in _nodes(trie.root) if n.slot is not None).slot
    assert slot.suffix_ids[0] not in ids  # the closing token is never a slot token (a space must not close it)


def _nodes(root):
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children.values())


@pytest.mark.parametrize("name", list(TOKENIZERS))
def test_written_query_becomes_the_action(name):
    tok = TOKENIZERS[name]()
    c = ActionConstraint(tok, PAGE, eos_ids=[tok.eos_token_id], slots=True)
    prefix = encode_action(tok, "search[")[0]
    words = _ids(tok, " hair clip")
    close = next(n for n in _nodes(c.trie.root) if n.slot is not None).slot.suffix_ids
    s = c.start()
    for t in prefix:
        assert t in c.allowed(s)
        c.advance(s, t)
    assert s.phase == "slot"
    assert close[0] not in c.allowed(s)  # an empty query is not an action: "]" needs a word first
    for t in words:
        assert t in c.allowed(s)
        c.advance(s, t)
    assert close[0] in c.allowed(s) and tok.eos_token_id not in c.allowed(s)
    for t in close:
        c.advance(s, t)
    assert s.done and s.action == "search[hair clip]"
    # literal actions on the same page still work
    s = c.start()
    for t in encode_action(tok, "click[buy now]")[0]:
        c.advance(s, t)
    assert (s.action or c.finish(s)) == "click[buy now]"


@pytest.mark.parametrize("name", list(TOKENIZERS))
def test_budget_forces_the_close_and_a_cut_slot_is_no_action(name):
    tok = TOKENIZERS[name]()
    c = ActionConstraint(tok, [SEARCH], eos_ids=[tok.eos_token_id], slots=True)
    s = c.start()
    for t in encode_action(tok, "search[")[0] + _ids(tok, " shoes"):
        c.advance(s, t)
    close = next(n for n in _nodes(c.trie.root) if n.slot is not None).slot.suffix_ids
    assert c.allowed(s, remaining=len(close)) == [close[0]]
    assert len(c.allowed(s, remaining=len(close) + 1)) > 1
    assert c.finish(s) is None  # cut inside the slot: a partial query is not chosen
    if name == "sentencepiece":
        return  # its 300-token test vocabulary cannot spell the literal hint
    # Without slots (the server's guided_choice) the template is a literal string like any other.
    lit = ActionConstraint(tok, [SEARCH], eos_ids=[tok.eos_token_id])
    s = lit.start()
    for t in encode_action(tok, SEARCH)[0]:
        lit.advance(s, t)
    assert (s.action or lit.finish(s)) == SEARCH


def test_think_action_slot_then_forced_close_tag():
    tok = TOKENIZERS["wordpiece"]()
    c = ActionConstraint(tok, PAGE, eos_ids=[tok.eos_token_id], fmt="think-action", slots=True)
    s = c.start()
    for t in _ids(tok, "<think>find it</think><action>") + encode_action(tok, "search[")[0] + _ids(tok, "red mug]"):
        c.advance(s, t)
    for t in c.close_ids:
        assert c.allowed(s) == [t]
        c.advance(s, t)
    assert s.done and s.action == "search[red mug]"


@pytest.mark.parametrize("name", ["wordpiece", "byte-bpe", "sentencepiece", "smollm2"])
def test_sampled_queries_logprobs_equal_recomputed(name):
    tok = TOKENIZERS[name]()
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = small_model(tok)
    engine = HFEngine(model, tok, "cpu")
    cache = ConstraintCache(tok, engine.eos_ids, "plain", slots=True)
    prompts = [_ids(tok, p) for p in ("Current observation: search", "You are P on a grid.", "go to shelf")]
    constraints = [cache.get(PAGE), cache.get([SEARCH]), cache.get(["up", "down"])]
    torch.manual_seed(0)
    queries = 0
    for temperature in (1.0, 0.7):
        gens = engine.generate(prompts, max_new_tokens=12, temperature=temperature, top_p=1.0,
                               constraints=constraints)
        for g in gens[:2]:
            if g.action is not None and g.action.startswith("search["):
                queries += 1
                assert g.action.endswith("]") and g.action != SEARCH and g.action[7:-1].strip()
        assert gens[2].action in ("up", "down")
        # rows share the slot's set object: the recording costs a reference, not a copy of the vocabulary
        slot_sets = {id(a) for g in gens for a in g.allowed if a is not None and len(a) > 10}
        assert len(slot_sets) <= 2
        lp, *_ = policy_forward(model, prompts, [g.token_ids for g in gens], pad_id=engine.pad_id,
                                device=torch.device("cpu"), temperature=temperature, allowed=[g.allowed for g in gens])
        for j, g in enumerate(gens):
            got = lp[j, lp.shape[1] - len(g.token_ids):]
            assert torch.allclose(got, torch.tensor(g.logprobs), atol=1e-5), (name, got, g.logprobs)
    assert queries >= 1  # the [SEARCH]-only row always starts a query; within 12 tokens it is closed by the budget
