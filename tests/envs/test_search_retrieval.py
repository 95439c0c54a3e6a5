"""BM25 retrieval, `gigpo serve-retriever` ↔ HTTP client round trip over loopback, retries and failures."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gigpo.envs.base import EnvError
from gigpo.envs.search.corpus import build_fictional
from gigpo.envs.search.retrieval import BM25Retriever, HttpRetriever, RetrievalError, load_corpus
from gigpo.envs.search.server import make_server


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fictional(tmp_path_factory.mktemp("search-cache")).corpus_file


def _title(hit: dict) -> str:
    return hit["contents"].split("\n", 1)[0].strip('"')


def test_bm25_finds_entities_and_is_shared(corpus_file: Path) -> None:
    bm25 = BM25Retriever.shared(corpus_file)
    assert BM25Retriever.shared(str(corpus_file)) is bm25  # one index per process, however the path is spelled
    docs = load_corpus(corpus_file)
    cities = [d for d in docs if " is a city in " in d["contents"]][:20]
    queries = [_title(d) + " founded" for d in cities] + ["zzzqqq unknownword", "the of and"]
    hits = bm25.search(queries, topk=3)
    assert len(hits) == len(queries)
    for d, row in zip(cities, hits[:20], strict=True):
        assert 1 <= len(row) <= 3 and row[0]["id"] == d["id"]
        assert [h["score"] for h in row] == sorted((h["score"] for h in row), reverse=True)
        assert set(row[0]) == {"id", "contents", "score"}
    assert hits[-2:] == [[], []]  # no known term / only stopwords: nothing matches
    assert len(bm25.search(["river"], topk=10_000)[0]) <= len(docs)
    assert bm25.search([], topk=3) == []
    with pytest.raises(ValueError):
        bm25.search(["x"], topk=0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server_url(corpus_file: Path) -> Iterator[str]:
    """A real `python -m gigpo.envs.search.server` process on an ephemeral loopback port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gigpo.envs.search.server", "--corpus", str(corpus_file), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout=30)
        assert line and line[0].startswith("serving "), (line, proc.poll())
        yield line[0].split(" on ", 1)[1].strip()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_server_round_trip_matches_in_process_bm25(server_url: str, corpus_file: Path) -> None:
    assert server_url.startswith("http://127.0.0.1:") and server_url.endswith("/retrieve")
    client = HttpRetriever(server_url.removesuffix("/retrieve"), timeout=10, retries=0)  # bare host:port works
    queries = ["Fylais Collective founded", "who trained under", "zzzqqq"]
    remote = client.search(queries, topk=4)
    local = BM25Retriever.shared(corpus_file).search(queries, topk=4)
    assert [[h["id"] for h in r] for r in remote] == [[h["id"] for h in r] for r in local]
    assert [[h["contents"] for h in r] for r in remote] == [[h["contents"] for h in r] for r in local]
    for r, lo in zip(remote, local, strict=True):
        assert [h["score"] for h in r] == pytest.approx([h["score"] for h in lo], rel=1e-6)


def _post(url: str, body: bytes) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_server_speaks_both_search_r1_layouts_and_rejects_bad_requests(server_url: str) -> None:
    status, scored = _post(server_url, json.dumps({"queries": ["Fylais Collective"], "topk": 2,
                                                   "return_scores": True}).encode())
    assert status == 200 and len(scored["result"]) == 1 and len(scored["result"][0]) == 2
    hit = scored["result"][0][0]
    assert set(hit) == {"document", "score"} and set(hit["document"]) == {"id", "contents"}
    status, plain = _post(server_url, json.dumps({"queries": ["Fylais Collective"], "topk": 2}).encode())
    assert status == 200 and plain["result"][0] == [h["document"] for h in scored["result"][0]]
    status, default_k = _post(server_url, json.dumps({"queries": ["river", "city"]}).encode())
    assert status == 200 and [len(r) for r in default_k["result"]] == [3, 3]  # server --topk default
    for bad in (b"{not json", b'{"queries": "one string"}', b'{"queries": [1, 2]}', b"[]",
                b'{"queries": ["x"], "topk": 1000}', b'{"queries": ["x"], "topk": "3"}'):
        status, err = _post(server_url, bad)
        assert status == 400 and err["error"], bad
    status, _ = _post(server_url.replace("/retrieve", "/nope"), b"{}")
    assert status == 404


class _FlakyHandler(BaseHTTPRequestHandler):
    """Answers HTTP 500 for the first ``fail`` requests, then a valid one-hit reply (or sleeps ``delay``)."""

    fail = 0
    delay = 0.0
    seen: list[dict] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        if self.delay:
            time.sleep(self.delay)
        if len(type(self).seen) <= type(self).fail:
            code, reply = 500, {"error": "boom"}
        else:
            code, reply = 200, {"result": [[{"document": {"id": "7", "contents": '"T"\nx'}, "score": 1.5}]
                                           for _ in body["queries"]]}
        data = json.dumps(reply).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out first (the timeout test), as intended


@pytest.fixture
def flaky() -> Iterator[tuple[type[_FlakyHandler], str]]:
    handler = type("Flaky", (_FlakyHandler,), {"seen": [], "fail": 0, "delay": 0.0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield handler, f"http://127.0.0.1:{server.server_address[1]}/retrieve"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_retries_then_succeeds(flaky: tuple[type[_FlakyHandler], str]) -> None:
    handler, url = flaky
    handler.fail = 2
    hits = HttpRetriever(url, timeout=5, retries=2, backoff=0.01).search(["a", "b"], topk=1)
    assert hits == [[{"id": "7", "contents": '"T"\nx', "score": 1.5}]] * 2
    assert len(handler.seen) == 3
    assert handler.seen[0] == {"queries": ["a", "b"], "topk": 1, "return_scores": True}


def test_persistent_500s_are_bounded_and_raise(flaky: tuple[type[_FlakyHandler], str]) -> None:
    handler, url = flaky
    handler.fail = 10**9
    start = time.monotonic()
    with pytest.raises(RetrievalError, match=r"failed after 3 attempt\(s\): HTTP 500") as exc:
        HttpRetriever(url, timeout=5, retries=2, backoff=0.05).search(["a"], topk=1)
    assert isinstance(exc.value, EnvError)
    assert len(handler.seen) == 3  # exactly 1 + retries requests
    assert time.monotonic() - start >= 0.05 + 0.1  # backoff 0.05 · (1 + 2)


def test_timeouts_are_retried_and_bounded(flaky: tuple[type[_FlakyHandler], str]) -> None:
    handler, url = flaky
    handler.delay = 1.0
    start = time.monotonic()
    with pytest.raises(RetrievalError, match="failed after 2 attempt"):
        HttpRetriever(url, timeout=0.2, retries=1, backoff=0.0).search(["a"], topk=1)
    assert time.monotonic() - start < 0.9  # two 0.2 s timeouts, not the server's 1 s


def test_client_errors_are_not_retried_and_dead_server_fails(server_url: str) -> None:
    # topk 1000 is refused by the real server with HTTP 400: retrying cannot help.
    with pytest.raises(RetrievalError, match="rejected the request: HTTP 400"):
        HttpRetriever(server_url, timeout=5, retries=5, backoff=10.0).search(["x"], topk=1000)
    with pytest.raises(RetrievalError, match="failed after 2 attempt"):
        HttpRetriever(f"http://127.0.0.1:{_free_port()}", timeout=1, retries=1, backoff=0.0).search(["x"], 3)
    with pytest.raises(ValueError, match="http"):
        HttpRetriever("localhost:8000")


class _BrokenRetriever(BM25Retriever):
    def __init__(self) -> None:  # no index: every search fails
        self.calls = 0

    def search(self, queries: list[str], topk: int) -> list[list[dict]]:
        self.calls += 1
        raise RuntimeError("index offline")


def test_server_reports_retriever_failure_as_500_and_keeps_serving() -> None:
    broken = _BrokenRetriever()
    server = make_server(broken, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/retrieve"
        with pytest.raises(RetrievalError, match=r"failed after 2 attempt.*HTTP 500"):
            HttpRetriever(url, timeout=5, retries=1, backoff=0.0).search(["x"], 3)
        assert broken.calls == 2  # the server survived the first failure and answered the retry
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_env_over_http_matches_in_process(server_url: str, corpus_file: Path) -> None:
    from gigpo.envs.search import SearchEnv, summarize_by_source
    from gigpo.envs.search.oracle import HopOracle, evaluate

    cache = corpus_file.parent.parent
    remote = SearchEnv(split="test", cache_dir=cache, retriever_url=server_url, data_sources=["fict-multihop"])
    local = SearchEnv(split="test", cache_dir=cache, data_sources=["fict-multihop"])
    rows_remote = evaluate(remote, HopOracle(), range(25))
    rows_local = evaluate(local, HopOracle(), range(25))
    assert [r["observations"] for r in rows_remote] == [r["observations"] for r in rows_local]
    assert summarize_by_source(rows_remote)["fict-multihop"]["em"] >= 0.9
