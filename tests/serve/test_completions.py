"""`gigpo serve` /v1/completions (token ids and log-probs equal the in-process engine's), weight reloads, and
stream=true for chat and completions through the official openai client."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import numpy as np
import pytest

from gigpo.models import load_model
from gigpo.rollout import HFEngine
from gigpo.rollout.engines.openai import CompletionsEngine, StaleWeightsError
from gigpo.serve.server import make_server
from gigpo.train.collect.weight_sync import save_weights

PROMPTS = [[5, 17, 42, 7], [99, 3], [12, 13, 14, 15, 16, 8]]


@pytest.fixture(scope="module")
def served(chaotic_checkpoint, tmp_path_factory):
    # weight reloads read under --weights-dir only: the session's temp root holds every test's tmp_path
    srv = make_server(str(chaotic_checkpoint), port=0, device="cpu", served_model_name="m", wait_ms=20.0,
                      slice_tokens=4, weights_dir=tmp_path_factory.getbasetemp())
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv, load_model(str(chaotic_checkpoint), device="cpu")
    srv.close()


def post(srv, path, body):
    req = urllib.request.Request(srv.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_token_id_prompts_give_the_in_process_engines_tokens_and_logprobs(served):
    srv, bundle = served
    local = HFEngine(bundle.model, bundle.tokenizer, "cpu").generate(PROMPTS, max_new_tokens=9, temperature=0.0)
    remote = CompletionsEngine([srv.url], "m", eos_ids=[0]).generate(PROMPTS, max_new_tokens=9, temperature=0.0)
    for a, b in zip(local, remote, strict=True):
        assert a.token_ids == b.token_ids and a.text == b.text
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
    # two servers: the prompts are split between them, the answers come back in order
    two = CompletionsEngine([srv.url, srv.url + "/"], "m", eos_ids=[0]).generate(PROMPTS, max_new_tokens=9,
                                                                                 temperature=0.0)
    assert [g.token_ids for g in two] == [g.token_ids for g in local]
    status, body = post(srv, "/completions", {"prompt": PROMPTS[1], "max_tokens": 3, "logprobs": 0,
                                              "return_tokens_as_token_ids": True, "temperature": 0})
    assert status == 200 and body["choices"][0]["logprobs"]["tokens"] == [f"token_id:{t}" for t in local[1].token_ids[:3]]


@pytest.mark.parametrize("body, status, words", [
    ({"prompt": [1, 2, 10**6]}, 400, "vocabulary"),
    ({"prompt": [1, 2], "echo": True}, 400, "echo"),
    ({"prompt": []}, 400, "prompt"),
    ({"prompt": [1.5, 2]}, 400, "prompt"),
    ({"prompt": [1], "model": "other"}, 404, "not served"),
    ({"prompt": [1], "max_tokens": 10**9}, 400, "max_tokens"),
    ({"prompt": [1], "logprobs": 9}, 400, "logprobs"),
])
def test_bad_completion_requests_are_4xx(served, body, status, words):
    got, reply = post(served[0], "/completions", body)
    assert got == status and words in reply["error"]["message"]


def test_reload_weights_changes_what_is_served_and_its_version(served, tmp_path):
    srv, bundle = served
    other = load_model("tiny", device="cpu", seed=11, tiny={"initializer_range": 1.0})
    path = tmp_path / "w.safetensors"
    save_weights(other.model, path)
    engine = CompletionsEngine([srv.url], "m", eos_ids=[0])
    before = engine.generate(PROMPTS[:1], max_new_tokens=6, temperature=0.0)[0]
    try:
        assert post(srv, "/reload_weights", {"path": str(path), "version": 7})[0] == 200
        engine.learner_version = 7
        after = engine.generate(PROMPTS[:1], max_new_tokens=6, temperature=0.0)[0]
        want = HFEngine(other.model, other.tokenizer, "cpu").generate(PROMPTS[:1], max_new_tokens=6, temperature=0.0)[0]
        assert after.token_ids == want.token_ids and before.logprobs != after.logprobs
        np.testing.assert_allclose(after.logprobs, want.logprobs, atol=1e-5)
        with urllib.request.urlopen(srv.url + "/weights") as r:
            assert json.loads(r.read())["version"] == 7
        engine.learner_version = 9  # the learner moved on but this server did not: 2 behind
        with pytest.raises(StaleWeightsError, match="2 behind"):
            engine.generate(PROMPTS[:1], max_new_tokens=2, temperature=0.0)
        engine.max_staleness = 2  # allowed: counted
        engine.generate(PROMPTS[:2], max_new_tokens=2, temperature=0.0)
        assert engine.counters.stale_generations == 2 and engine.counters.max_lag == 2
    finally:
        save_weights(bundle.model, path)
        assert post(srv, "/reload_weights", {"path": str(path), "version": 0})[0] == 200
    assert post(srv, "/reload_weights", {"path": str(tmp_path / "missing"), "version": 1})[0] == 404
    wrong = load_model("tiny", device="cpu", seed=1, tiny={"hidden_size": 16, "intermediate_size": 32})
    save_weights(wrong.model, tmp_path / "wrong.safetensors")
    status, reply = post(srv, "/reload_weights", {"path": str(tmp_path / "wrong.safetensors"), "version": 1})
    assert status == 400 and "size mismatch: model.embed_tokens.weight" in reply["error"]["message"]
    after_refusal = CompletionsEngine([srv.url], "m", eos_ids=[0]).generate(PROMPTS[:1], max_new_tokens=6,
                                                                              temperature=0.0)[0]
    assert after_refusal.logprobs == before.logprobs  # a refused file changed nothing
    status, reply = post(srv, "/load_lora_adapter", {"lora_name": "a", "lora_path": str(tmp_path)})
    assert status == 501 and "reload_weights" in reply["error"]["message"]
    with urllib.request.urlopen(srv.url + "/weights") as r:
        assert json.loads(r.read())["version"] == 0


@pytest.mark.peers("openai")
def test_streaming_with_the_openai_client(served):
    openai = pytest.importorskip("openai")
    srv, bundle = served
    client = openai.OpenAI(base_url=srv.url, api_key="none", max_retries=0)
    full = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi there"}],
                                          max_tokens=10, temperature=0)
    chunks = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi there"}],
                                                 max_tokens=10, temperature=0, stream=True,
                                                 stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full.choices[0].message.content
    assert len([c for c in chunks if c.choices]) >= 2  # slice_tokens=4: more than one chunk for 10 tokens
    assert chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == full.choices[0].finish_reason

    want = HFEngine(bundle.model, bundle.tokenizer, "cpu").generate(PROMPTS[:1], max_new_tokens=10, temperature=0.0)[0]
    parts = list(client.completions.create(model="m", prompt=PROMPTS[0], max_tokens=10, temperature=0, stream=True,
                                           logprobs=1, extra_body={"return_token_ids": True}))
    ids = [t for p in parts for t in (p.choices[0].model_extra or {}).get("token_ids", [])]
    lps = [x for p in parts for x in p.choices[0].logprobs.token_logprobs]
    assert ids == want.token_ids and "".join(p.choices[0].text for p in parts) == want.text
    np.testing.assert_allclose(lps, want.logprobs, atol=1e-5)
    stopped = client.completions.create(model="m", prompt=PROMPTS[0], max_tokens=10, temperature=0, stop=[want.text[2:4]])
    streamed = list(client.completions.create(model="m", prompt=PROMPTS[0], max_tokens=10, temperature=0,
                                              stop=[want.text[2:4]], stream=True))
    assert "".join(p.choices[0].text for p in streamed) == stopped.choices[0].text
