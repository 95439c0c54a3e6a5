"""Hostile clients against `gigpo serve` and `gigpo serve-retriever` (issue 13), on 127.0.0.1 with the tiny model:
connection storms, non-finite and mistyped numbers, lying or missing Content-Length, oversized bodies and prompts,
per-request caps, a long request that must not starve short ones, bad ports and bad corpora."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

from gigpo.envs.search.retrieval import BM25Retriever
from gigpo.envs.search.server import RetrieverLimits
from gigpo.envs.search.server import main as retriever_main
from gigpo.envs.search.server import make_server as make_retriever_server
from gigpo.serve.server import Limits, make_server, serve_main

READ_TIMEOUT = 1.0  # short, so the stalled-body cases answer fast
CHAT_LIMITS = Limits(max_body_bytes=256 * 1024, max_tokens_cap=800, max_n=4, max_prompt_tokens=128,
                     read_timeout_s=READ_TIMEOUT)
RETR_LIMITS = RetrieverLimits(max_body_bytes=64 * 1024, max_queries=20, max_topk=5, read_timeout_s=READ_TIMEOUT)


def _serve(srv):
    th = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    th.start()
    return th


@pytest.fixture(scope="module")
def chat():
    # max_batch=2 and 16-token slices: two long requests fill a pass, so the round-robin test means something.
    srv = make_server("tiny", port=0, device="cpu", max_batch=2, wait_ms=1.0, limits=CHAT_LIMITS, slice_tokens=16)
    th = _serve(srv)
    yield srv
    srv.close()
    th.join(timeout=5)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": str(i), "contents": f'"Doc {i}"\nalpha beta word{i}'}) + "\n"
                            for i in range(30)))
    return path


@pytest.fixture(scope="module")
def retriever(corpus):
    srv = make_retriever_server(BM25Retriever(corpus), port=0, n_docs=30, limits=RETR_LIMITS)
    th = _serve(srv)
    yield srv
    srv.shutdown()
    srv.server_close()
    th.join(timeout=5)


def _addr(srv) -> tuple[str, int]:
    return srv.server_address[0], srv.server_address[1]


def _raw(srv, data: bytes, timeout: float = 10.0) -> tuple[int, dict]:
    """Send raw bytes on a fresh connection; (status, JSON body) of the reply."""
    with socket.create_connection(_addr(srv), timeout=timeout) as s:
        s.sendall(data)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            assert chunk, f"connection closed without a reply after {buf!r}"
            buf += chunk
        head, body = buf.split(b"\r\n\r\n", 1)
        length = int(next(ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")))
        while len(body) < length:
            body += s.recv(65536)
    return int(head.split(b" ")[1]), json.loads(body)


def _post(path: str, body: bytes, headers: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n{headers}\r\n").encode() + body


def _json(srv, path: str, obj=None, raw_body: str | None = None, timeout: float = 30.0) -> tuple[int, dict]:
    c = http.client.HTTPConnection(*_addr(srv), timeout=timeout)
    try:
        data = raw_body if raw_body is not None else (None if obj is None else json.dumps(obj))
        c.request("GET" if data is None else "POST", path, body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, json.loads(r.read())
    finally:
        c.close()


def _msg(body: dict) -> str:
    err = body["error"]
    return err["message"] if isinstance(err, dict) else err


def _chat_body(content: str = "Current observation:\n. P\nG .", **kw) -> dict:
    return {"messages": [{"role": "user", "content": content}], "temperature": 0, **kw}


# --- connection storms ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["chat", "retriever"])
def test_100_concurrent_fresh_connections_are_all_answered(which, request):
    srv = request.getfixturevalue(which)
    path, body = ("/v1/models", None) if which == "chat" else ("/retrieve", json.dumps({"queries": ["alpha"]}))
    errors: list[str] = []
    codes: list[int] = []
    start = threading.Barrier(100)

    def one() -> None:
        try:
            start.wait()  # all connect at once: a backlog of 5 failed 0-84 of these
            c = http.client.HTTPConnection(*_addr(srv), timeout=20)
            c.request("GET" if body is None else "POST", path, body=body)
            r = c.getresponse()
            r.read()
            codes.append(r.status)
            c.close()
        except Exception as e:  # noqa: BLE001 - counted, that is the test
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=one) for _ in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == [] and codes == [200] * 100


# --- request bodies: Content-Length, JSON ----------------------------------------------------------------------------


@pytest.mark.parametrize("which, path", [("chat", "/v1/chat/completions"), ("retriever", "/retrieve")])
@pytest.mark.parametrize("header, status, words", [
    ("Content-Length: -1\r\n", 400, "Content-Length"),
    ("Content-Length: abc\r\n", 400, "Content-Length"),
    ("Content-Length: +2\r\n", 400, "Content-Length"),
    ("Content-Length: 2\r\nContent-Length: 3\r\n", 400, "Content-Length"),
    ("", 411, "Content-Length required"),
    ("Transfer-Encoding: chunked\r\n", 411, "chunked"),
    ("Content-Length: 99999999999\r\n", 413, "--max-body-bytes"),
])
def test_bad_content_length_is_a_clear_4xx_at_once(which, path, header, status, words, request):
    srv = request.getfixturevalue(which)
    t0 = time.monotonic()
    got, body = _raw(srv, f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{header}\r\n{{}}".encode())
    assert (got, words in _msg(body)) == (status, True), body
    assert time.monotonic() - t0 < READ_TIMEOUT  # answered without waiting for a body


@pytest.mark.parametrize("which, path", [("chat", "/v1/chat/completions"), ("retriever", "/retrieve")])
def test_a_body_shorter_than_announced_times_out_with_408(which, path, request):
    srv = request.getfixturevalue(which)
    t0 = time.monotonic()
    status, body = _raw(srv, f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{{}}".encode())
    took = time.monotonic() - t0
    assert status == 408 and "not received" in _msg(body)
    assert READ_TIMEOUT * 0.9 <= took < READ_TIMEOUT + 5  # the thread is freed after the read timeout
    assert _json(srv, "/v1/models" if which == "chat" else "/health")[0] == 200


@pytest.mark.parametrize("which, path", [("chat", "/v1/chat/completions"), ("retriever", "/retrieve")])
def test_an_oversized_body_gets_413_not_a_connection_reset(which, path, request):
    srv = request.getfixturevalue(which)
    big = json.dumps({"queries": ["alpha"] * 200_000, "messages": [{"role": "user", "content": "x" * 1_000_000}]})
    t0 = time.monotonic()
    status, body = _json(srv, path, raw_body=big)  # http.client sends the whole body before reading the reply
    assert status == 413 and "--max-body-bytes" in _msg(body)
    assert time.monotonic() - t0 < 5
    # a client that asks first (Expect: 100-continue) is refused before sending anything
    status, body = _raw(srv, f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(big)}\r\n"
                             "Expect: 100-continue\r\n\r\n".encode())
    assert status == 413


@pytest.mark.parametrize("which, path", [("chat", "/v1/chat/completions"), ("retriever", "/retrieve")])
@pytest.mark.parametrize("raw, words", [
    ('{"queries": ["a"], "messages": [{"role": "user", "content": "x"}], "topk": NaN}', "NaN"),
    ('{"queries": ["a"], "messages": [{"role": "user", "content": "x"}], "max_tokens": Infinity}', "Infinity"),
    ('{"queries": ["a"], "messages": [{"role": "user", "content": "x"}], "n": -Infinity}', "-Infinity"),
    ("[" * 20_000 + "]" * 20_000, "nested too deeply"),
    ('{"queries": ', "not JSON"),
    ("\udcff", "not UTF-8"),
])
def test_non_finite_numbers_and_broken_json_are_400(which, path, raw, words, request):
    srv = request.getfixturevalue(which)
    data = raw.encode("utf-8", "surrogateescape")
    status, body = _raw(srv, _post(path, data))
    assert status == 400 and words in _msg(body), body


@pytest.mark.parametrize("which, path, other", [("chat", "/v1/nope", "/v1/models"), ("retriever", "/nope", "/health")])
def test_a_kept_alive_connection_stays_in_sync_after_an_error(which, path, other, request):
    srv = request.getfixturevalue(which)
    c = http.client.HTTPConnection(*_addr(srv), timeout=10)
    c.request("POST", path, body='{"x": 1}')
    r = c.getresponse()
    assert r.status == 404 and r.read()
    c.request("GET", other)  # same connection: the 404's body was consumed, not parsed as a request
    r = c.getresponse()
    assert r.status == 200 and r.read()
    c.close()


# --- chat: types and per-request caps -------------------------------------------------------------------------------


@pytest.mark.parametrize("extra, status, words", [
    ({"max_tokens": "5"}, 400, "'max_tokens' must be an integer"),
    ({"max_tokens": 1.5}, 400, "'max_tokens' must be an integer"),
    ({"max_tokens": True}, 400, "'max_tokens' must be an integer"),
    ({"max_tokens": 801}, 400, "--max-tokens-cap"),
    ({"max_completion_tokens": 10**12}, 400, "--max-tokens-cap"),
    ({"n": 5}, 400, "--max-n"),
    ({"n": 0}, 400, "'n' must be in [1, 4]"),
    ({"temperature": "0.5"}, 400, "'temperature' must be a number"),
    ({"top_p": "<1e309>"}, 400, "'top_p' must be in (0, 1], got inf"),  # 1e309 parses as inf: caught after
    ({"logprobs": "yes"}, 400, "'logprobs'"),
])
def test_mistyped_or_over_cap_parameters_are_400(chat, extra, status, words):
    raw = json.dumps(_chat_body(**extra)).replace('"<1e309>"', "1e309")
    got, body = _json(chat, "/v1/chat/completions", raw_body=raw)
    assert got == status and words in _msg(body), body


def test_long_prompts_are_refused_before_and_after_tokenising(chat):
    t0 = time.monotonic()
    status, body = _json(chat, "/v1/chat/completions", _chat_body("up " * 50_000, max_tokens=1))  # 150 KB
    assert status == 413 and "--max-prompt-chars" in _msg(body)
    assert time.monotonic() - t0 < 2  # never reaches the tokenizer
    status, body = _json(chat, "/v1/chat/completions", _chat_body("up " * 400, max_tokens=1))  # ~400 tokens
    assert status == 413 and "--max-prompt-tokens" in _msg(body) and "at most 128" in _msg(body)
    status, body = _json(chat, "/v1/chat/completions", {"messages": [{"role": "user", "content": ""}] * 5_000})
    assert status == 413  # many empty messages count too


# --- chat: scheduling ---------------------------------------------------------------------------------------------


def _timed_chat(srv, out: dict, key: str, **kw) -> None:
    status, body = _json(srv, "/v1/chat/completions", _chat_body(**kw), timeout=120)
    out[key] = (time.monotonic(), status, body)


def test_a_short_request_is_not_starved_by_long_ones(chat):
    """Round-robin by slice: with both batch rows taken by 600-token requests, a 1-token request sent after them
    finishes long before either (before the change it waited for both)."""
    done: dict[str, tuple] = {}
    longs = [threading.Thread(target=_timed_chat, args=(chat, done, f"long{i}"),
                              kwargs={"max_tokens": 600}) for i in range(2)]
    for t in longs:
        t.start()
    time.sleep(0.3)
    sent = time.monotonic()
    _timed_chat(chat, done, "short", max_tokens=1)
    for t in longs:
        t.join(timeout=120)
    assert [done[k][1] for k in ("short", "long0", "long1")] == [200, 200, 200]
    assert all(done[k][2]["usage"]["completion_tokens"] == 600 for k in ("long0", "long1"))  # really long
    short_latency = done["short"][0] - sent
    assert done["short"][0] < min(done["long0"][0], done["long1"][0])
    assert short_latency < 0.3 * (max(done["long0"][0], done["long1"][0]) - sent)


def test_sliced_greedy_decoding_equals_one_generate_call(chat):
    """A 100-token response decoded in 16-token slices equals the engine's own uninterrupted greedy decode."""
    status, body = _json(chat, "/v1/chat/completions", _chat_body(max_tokens=100, logprobs=True))
    assert status == 200
    b = chat.batcher
    ids = b.renderer.render([{"role": "user", "content": "Current observation:\n. P\nG ."}])
    direct = b.engine.generate([list(ids)], max_new_tokens=100, temperature=0.0)[0]
    assert body["choices"][0]["message"]["content"] == direct.text
    assert body["usage"]["completion_tokens"] == len(direct.token_ids)


# --- bad ports and corpora: one line, exit 2 -----------------------------------------------------------------------


def _one_error_line(err: str, prog: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("main, prog, args", [
    (serve_main, "gigpo serve", ["tiny"]), (retriever_main, "gigpo serve-retriever", ["--corpus", "CORPUS"])])
def test_bad_or_taken_port_is_one_line_and_exit_2(main, prog, args, corpus, capsys):
    args = [str(corpus) if a == "CORPUS" else a for a in args]
    for port in ("99999", "-1", "http"):
        with pytest.raises(SystemExit) as e:
            main([*args, "--port", port])
        assert e.value.code == 2
        assert "--port" in _one_error_line(capsys.readouterr().err, prog)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        t0 = time.monotonic()
        assert main([*args, "--port", str(taken.getsockname()[1])]) == 2
        assert "Address already in use" in _one_error_line(capsys.readouterr().err, prog)
        assert time.monotonic() - t0 < 5  # bound before the model loads / the index is built


@pytest.mark.parametrize("main, prog, args, words", [
    (serve_main, "gigpo serve", ["tiny", "--max-n", "0"], "--max-n"),
    (serve_main, "gigpo serve", ["tiny", "--max-body-bytes", "1e9"], "--max-body-bytes"),
    (serve_main, "gigpo serve", ["tiny", "--read-timeout", "inf"], "--read-timeout"),
    (serve_main, "gigpo serve", ["tiny", "--batch-wait-ms", "-1"], "--batch-wait-ms"),
    (serve_main, "gigpo serve", ["tiny", "--port", "0", "--max-prompt-tokens", "1024"], "context length of 1024"),
    (retriever_main, "gigpo serve-retriever", ["--corpus", "CORPUS", "--topk", "101"], "--max-topk"),
    (retriever_main, "gigpo serve-retriever", ["--corpus", "CORPUS", "--max-queries", "-5"], "--max-queries"),
])
def test_bad_limits_fail_at_start_in_one_line(main, prog, args, words, corpus, capsys):
    args = [str(corpus) if a == "CORPUS" else a for a in args]
    try:
        rc = main(args)
    except SystemExit as e:  # argparse: flag type errors
        rc = e.code
    assert rc == 2 and words in _one_error_line(capsys.readouterr().err, prog)


@pytest.mark.parametrize("text, words", [
    (None, "no such file"),
    ("", "empty corpus"),
    ('{"id": "1", "contents": "a"}\nnot json\n', ":2: not valid JSON"),
    ('{"id": "1", "contents": "a"}\n\n{"id": "2", "text": "b"}\n', ":3: every row needs a non-empty string 'contents'"),
    ('{"id": "1", "contents": 7}\n', ":1: every row needs a non-empty string 'contents'"),
    ('{"id": "1", "contents": "  "}\n', ":1: every row needs"),
    ('["a"]\n', ":1: expected a JSON object"),
    ('{"id": [1], "contents": "a"}\n', ":1: 'id' must be"),
])
def test_bad_corpus_fails_at_start_naming_file_and_line(text, words, tmp_path, capsys):
    path = tmp_path / "corpus.jsonl"
    if text is not None:
        path.write_text(text)
    assert retriever_main(["--corpus", str(path), "--port", "0"]) == 2
    line = _one_error_line(capsys.readouterr().err, "gigpo serve-retriever")
    assert str(path) in line and words in line, line


def test_retriever_caps_and_types(retriever):
    ok = _json(retriever, "/retrieve", {"queries": ["alpha word3"] * 20, "topk": 5, "return_scores": True})
    assert ok[0] == 200 and len(ok[1]["result"]) == 20 and len(ok[1]["result"][0]) == 5
    for req, status, words in [
        ({"queries": ["alpha"] * 21}, 413, "--max-queries"),
        ({"queries": ["alpha"], "topk": 6}, 400, "--max-topk"),
        ({"queries": ["alpha"], "topk": "3"}, 400, "'topk' must be an integer"),
        ({"queries": ["alpha"], "topk": 2.5}, 400, "'topk' must be an integer"),
        ({"queries": ["alpha"], "return_scores": "yes"}, 400, "'return_scores'"),
        ({"queries": "alpha"}, 400, "'queries' must be a list"),
    ]:
        got, body = _json(retriever, "/retrieve", req)
        assert got == status and words in _msg(body), (req, body)
