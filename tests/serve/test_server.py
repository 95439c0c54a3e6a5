"""`gigpo serve` in a thread on an ephemeral loopback port: routes, request validation, sampling parameters,
usage, stop strings and batching of concurrent requests."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from gigpo.serve import make_server
from gigpo.serve.server import parse_chat_request


@pytest.fixture(scope="module")
def server(chaotic_checkpoint):
    srv = make_server(str(chaotic_checkpoint), port=0, served_model_name="chaos", wait_ms=50.0, max_batch=8)
    th = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    th.start()
    yield srv
    srv.close()
    th.join(timeout=5)


def _call(srv, path: str, body: dict | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(srv.url.removesuffix("/v1") + path, method="POST" if body is not None else "GET",
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _chat(srv, content: str = "Current observation:\n. P\nG .", **kw) -> tuple[int, dict]:
    return _call(srv, "/v1/chat/completions", {"model": "chaos", "messages": [
        {"role": "system", "content": "rules"}, {"role": "user", "content": content}], **kw})


def test_models_route_and_model_name_check(server):
    status, body = _call(server, "/v1/models")
    assert status == 200 and [m["id"] for m in body["data"]] == ["chaos"]
    status, body = _call(server, "/v1/chat/completions", {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "x"}]})
    assert status == 404 and "not served here" in body["error"]["message"]
    assert _call(server, "/v1/embeddings", {})[0] == 404  # /v1/completions exists: tests/serve/test_completions.py


def test_greedy_completion_usage_and_max_tokens(server):
    status, body = _chat(server, temperature=0, max_tokens=5, logprobs=True)
    assert status == 200 and body["object"] == "chat.completion"
    choice = body["choices"][0]
    toks = choice["logprobs"]["content"]
    assert body["usage"]["completion_tokens"] == len(toks) <= 5
    assert choice["finish_reason"] == ("length" if len(toks) == 5 else "stop")
    assert choice["message"]["content"] == "".join(t["token"] for t in toks)
    # prompt tokens = the plain rendering training uses (the tiny tokenizer has no chat template)
    tok = server.batcher.tokenizer
    text = "rules\n\nCurrent observation:\n. P\nG .\nAction:"
    assert body["usage"]["prompt_tokens"] == len(tok(text, add_special_tokens=False)["input_ids"])
    again = _chat(server, temperature=0, max_tokens=5)[1]
    assert again["choices"][0]["message"]["content"] == choice["message"]["content"]  # greedy is deterministic


def test_stop_strings_and_n(server):
    full = _chat(server, temperature=0, max_tokens=8)[1]["choices"][0]["message"]["content"]
    assert len(full) >= 3
    stop = full[2:4]
    body = _chat(server, temperature=0, max_tokens=8, stop=[stop])[1]
    cut = body["choices"][0]
    assert cut["message"]["content"] == full[:full.find(stop)] and cut["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] <= _chat(server, temperature=0, max_tokens=8)[1]["usage"][
        "completion_tokens"]
    body = _chat(server, temperature=1.0, top_p=0.9, max_tokens=3, n=3, logprobs=True)[1]
    assert [c["index"] for c in body["choices"]] == [0, 1, 2]
    lengths = [len(c["logprobs"]["content"]) for c in body["choices"]]
    assert all(1 <= n <= 3 for n in lengths) and body["usage"]["completion_tokens"] == sum(lengths)


@pytest.mark.parametrize("bad, message", [
    ({"messages": []}, "non-empty list"),
    ({"messages": [{"role": "user", "content": 3}]}, "content must be"),
    ({"messages": [{"role": "user", "content": "x"}], "temperature": 3}, "temperature"),
    ({"messages": [{"role": "user", "content": "x"}], "top_p": 0}, "top_p"),
    ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens"),
    ({"messages": [{"role": "user", "content": "x"}], "stream": "yes"}, "stream"),  # stream=true: test_completions
    ({"messages": [{"role": "user", "content": "x"}], "stop": ["a"] * 5}, "stop"),
])
def test_bad_requests_are_400(server, bad, message):
    status, body = _call(server, "/v1/chat/completions", bad)
    assert status == 400 and message in body["error"]["message"]
    with pytest.raises((ValueError, TypeError)):
        parse_chat_request(bad, {"chaos"})


def test_context_overflow_is_400(server):
    status, body = _chat(server, content="up " * 600, max_tokens=10)
    assert status == 400 and "context length" in body["error"]["message"]


def test_concurrent_requests_share_generate_calls(server):
    before = dict(vars(server.batcher.stats))
    results: dict[int, str] = {}

    def one(i: int) -> None:
        results[i] = _chat(server, content=f"observation number {i}", temperature=0, max_tokens=2)[1][
            "choices"][0]["message"]["content"]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    stats = vars(server.batcher.stats)
    assert len(results) == 8 and stats["requests"] - before["requests"] == 8
    assert stats["generate_calls"] - before["generate_calls"] < 8 and stats["largest_batch"] > 1
    # batched answers equal one-at-a-time answers (rows are independent under left padding)
    assert all(_chat(server, content=f"observation number {i}", temperature=0, max_tokens=2)[1][
        "choices"][0]["message"]["content"] == results[i] for i in range(8))
