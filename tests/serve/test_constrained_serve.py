"""`gigpo serve` with ``guided_choice``: the reply is one of the choices, decoded with the training path's masked
distribution (same tokens as HFEngine's constrained greedy, same log-probs as the learner's recomputation), bad
choice lists are 400s, and a guided request batched with an unconstrained one leaves that one's reply unchanged."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import numpy as np
import pytest
import torch

from gigpo.agent.constrained import ActionConstraint
from gigpo.models import load_model
from gigpo.rollout import HFEngine
from gigpo.serve.batcher import Job
from gigpo.serve.server import Limits, make_server
from gigpo.train.update.logprobs import policy_forward

#: the tiny tokenizer spells these in 1-5 tokens; "move" is a prefix of "move up" (EOS or " up" may follow it)
CHOICES = ["go north", "take key", "move", "move up", "left"]
PROMPTS = [[5, 17, 42, 7], [99, 3], [12, 13, 14, 15, 16, 8], [60, 61]]


@pytest.fixture(scope="module")
def served(chaotic_checkpoint):
    # slice_tokens=2: multi-token choices span slices, so the trie state must carry over between them
    srv = make_server(str(chaotic_checkpoint), port=0, device="cpu", served_model_name="m", wait_ms=20.0,
                      slice_tokens=2, limits=Limits(max_choices=8))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv, load_model(str(chaotic_checkpoint), device="cpu")
    srv.close()


def post(srv, path, body):
    req = urllib.request.Request(srv.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            raw = r.read()
            if r.headers.get("Content-Type") == "text/event-stream":
                return r.status, [json.loads(line[6:]) for line in raw.decode().splitlines()
                                  if line.startswith("data: ") and line != "data: [DONE]"]
            return r.status, json.loads(raw)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def constraint(bundle, engine):
    return ActionConstraint(bundle.tokenizer, CHOICES, eos_ids=engine.eos_ids)


def test_sampled_replies_are_always_choices_on_both_endpoints(served):
    srv, _ = served
    status, body = post(srv, "/completions", {"prompt": PROMPTS, "guided_choice": CHOICES, "n": 12,
                                              "temperature": 1.0, "return_token_ids": True})
    assert status == 200 and len(body["choices"]) == 48
    texts = [c["text"] for c in body["choices"]]
    assert set(texts) <= set(CHOICES) and len(set(texts)) >= 3  # sampled, not one constant answer
    assert all(c["finish_reason"] == "stop" for c in body["choices"])
    status, chat = post(srv, "/chat/completions", {"messages": [{"role": "user", "content": "where now?"}],
                                                   "guided_choice": CHOICES, "n": 8, "temperature": 1.0})
    assert status == 200 and {c["message"]["content"] for c in chat["choices"]} <= set(CHOICES)
    # streamed: the whole choice arrives with the finish_reason, never a partial one
    status, events = post(srv, "/chat/completions", {"messages": [{"role": "user", "content": "go"}], "n": 2,
                                                     "guided_choice": CHOICES, "stream": True, "temperature": 1.0})
    assert status == 200
    for k in range(2):
        deltas = [e["choices"][0] for e in events if e["choices"] and e["choices"][0]["index"] == k]
        assert "".join(d["delta"].get("content", "") for d in deltas) in CHOICES
        assert deltas[-1]["finish_reason"] == "stop"


def test_structured_outputs_choice_is_guided_choice(served):
    """vLLM >= 0.12 spells it ``structured_outputs: {"choice": [...]}``: the same reply, token for token."""
    srv, _ = served
    req = {"prompt": PROMPTS, "temperature": 0, "return_token_ids": True}
    s1, a = post(srv, "/completions", {**req, "guided_choice": CHOICES})
    s2, b = post(srv, "/completions", {**req, "structured_outputs": {"choice": CHOICES}})
    assert s1 == s2 == 200
    assert [c["token_ids"] for c in a["choices"]] == [c["token_ids"] for c in b["choices"]]
    assert {c["text"] for c in b["choices"]} <= set(CHOICES)


def test_greedy_reply_is_the_engines_constrained_greedy_choice(served):
    srv, bundle = served
    engine = HFEngine(bundle.model, bundle.tokenizer, "cpu")
    want = engine.generate(PROMPTS, max_new_tokens=8, temperature=0.0,
                           constraints=[constraint(bundle, engine) for _ in PROMPTS])
    status, body = post(srv, "/completions", {"prompt": PROMPTS, "guided_choice": CHOICES, "temperature": 0,
                                              "return_token_ids": True, "logprobs": 0})
    assert status == 200
    for g, c in zip(want, body["choices"], strict=True):
        assert c["text"] == g.action and c["token_ids"] == g.token_ids
        np.testing.assert_allclose(c["logprobs"]["token_logprobs"], g.logprobs, atol=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampled_logprobs_are_the_learners_masked_logprobs(served, temperature):
    """log π = log_softmax over the allowed set of logits / T, as gigpo.train.update.logprobs recomputes it."""
    srv, bundle = served
    status, body = post(srv, "/completions", {"prompt": PROMPTS, "guided_choice": CHOICES, "n": 3,
                                              "temperature": temperature, "return_token_ids": True, "logprobs": 0})
    assert status == 200
    prompts = [p for p in PROMPTS for _ in range(3)]
    responses = [c["token_ids"] for c in body["choices"]]
    engine = HFEngine(bundle.model, bundle.tokenizer, "cpu")
    allowed = []
    for resp in responses:  # the allowed set at each token, replayed through the same automaton
        con = constraint(bundle, engine)
        s, sets = con.start(), []
        for t in resp:
            sets.append(con.allowed(s))
            assert t in sets[-1]
            con.advance(s, t)
        assert s.done
        allowed.append(sets)
    with torch.no_grad():
        logp, mask, _, _ = policy_forward(bundle.model, prompts, responses, pad_id=engine.pad_id,
                                          device=torch.device("cpu"), temperature=temperature, allowed=allowed)
    for r, c in enumerate(body["choices"]):
        n = len(responses[r])
        np.testing.assert_allclose(c["logprobs"]["token_logprobs"], logp[r, -n:].tolist(), atol=1e-5)


@pytest.mark.parametrize("extra, words", [
    ({"guided_choice": "go north"}, "non-empty list of strings"),
    ({"guided_choice": []}, "non-empty list of strings"),
    ({"guided_choice": ["up", 3]}, "non-empty list of strings"),
    ({"guided_choice": ["up", "  "]}, "must be non-empty"),
    ({"guided_choice": ["up", "left", "up"]}, "'up' twice"),
    ({"guided_choice": [f"c{i}" for i in range(9)]}, "at most 8 (--max-choices)"),
    ({"guided_choice": ["x" * 300]}, "at most 256"),
    ({"guided_choice": ["up", "€€€"]}, "guided_choice '€€€' cannot be encoded"),
    ({"guided_choice": CHOICES, "max_tokens": 2}, "max_tokens (2) is less than the 6 tokens"),
    ({"guided_choice": CHOICES, "stop": "\n"}, "'stop' cannot be combined"),
    ({"guided_regex": "up|down"}, "guided_regex: not supported"),
    ({"structured_outputs": ["up"]}, "'structured_outputs' must be an object"),
    ({"structured_outputs": {"regex": "up|down"}}, "structured_outputs.regex: not supported"),
    ({"structured_outputs": {"choice": []}}, "non-empty list of strings"),
    ({"structured_outputs": {"choice": ["up"]}, "guided_choice": ["up"]}, "not both"),
])
@pytest.mark.parametrize("route", ["/completions", "/chat/completions"])
def test_bad_guided_choice_is_400_with_a_clear_message(served, route, extra, words):
    base = {"prompt": [5, 17]} if route == "/completions" else {"messages": [{"role": "user", "content": "hi"}]}
    status, reply = post(served[0], route, {**base, **extra})
    assert status == 400 and words in reply["error"]["message"], reply


def test_a_guided_request_in_the_batch_leaves_an_unconstrained_reply_unchanged(served):
    srv = served[0]
    batcher = srv.batcher

    def free() -> Job:
        job = Job([], 8, 0.0, 1.0, logprobs=True)
        job.prompt_token_ids = list(PROMPTS[0])
        return job

    alone = batcher.submit(free())
    assert alone.done.wait(60) and alone.error is None
    passes = batcher.stats.passes
    mixed, guided = free(), Job([], None, 0.0, 1.0, n=2, guided_choice=CHOICES)
    guided.prompt_token_ids = list(PROMPTS[0])
    batcher.submit(guided)
    batcher.submit(mixed)  # within the 20 ms gathering window: admitted into the same passes
    assert mixed.done.wait(60) and guided.done.wait(60) and mixed.error is None and guided.error is None
    assert batcher.stats.passes - passes == 4  # 8 tokens in slices of 2, the guided rows riding along
    assert [g.text for g in guided.outputs] == [guided.outputs[0].text] * 2 and guided.outputs[0].text in CHOICES
    a, b = alone.outputs[0], mixed.outputs[0]
    assert a.token_ids == b.token_ids and a.text == b.text
    np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-6)
