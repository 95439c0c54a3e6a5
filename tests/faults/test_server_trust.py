"""What gigpo's servers trust (issue 39): the Host header of a loopback server (DNS rebinding), a weights path
whose model.safetensors links out of --weights-dir, keys no client can send, and `gigpo view --serve`'s read
timeout and listen backlog. Servers run on 127.0.0.1 with the tiny model."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from pathlib import Path

import pytest
from safetensors.torch import save_file
from small_run import SMALL

from gigpo.httputil import BACKLOG, api_key_from, check_host, host_name
from gigpo.serve.server import make_server, serve_main
from gigpo.train.config import load_config
from gigpo.train.trainer import Trainer
from gigpo.view.serve import make_server as make_view_server

KEY = "sk-test-0123456789"


def _start(srv):
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    return srv


def _get(srv, path: str, host: str | None = None, key: str | None = None, method: str = "GET", body=None):
    h, port = srv.server_address[:2]
    conn = http.client.HTTPConnection(h, port, timeout=30)
    headers = {"Host": host} if host is not None else {}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    return resp.status, raw


@pytest.fixture(scope="module")
def weights_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("pushes")


@pytest.fixture(scope="module")
def served(weights_dir):
    srv = _start(make_server("tiny", port=0, device="cpu", wait_ms=1.0, weights_dir=weights_dir))
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("served") / "run"
    Trainer(load_config(None, SMALL + [f"train.run_dir={run}", "train.iterations=1"])).train()
    return run


@pytest.fixture
def view_server(run):
    srv = _start(make_view_server([str(run)], 0))
    yield srv
    srv.shutdown()
    srv.server_close()


# ------------------------------------------------------------------------------------------------ Host header
@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.nip.io", "localhost.evil.com",
                                  "[::ffff:7f00:1]:80x", ""])
def test_a_loopback_chat_server_refuses_a_foreign_host(served, host):
    status, raw = _get(served, "/v1/models", host=host)
    assert status == 403, raw
    assert "DNS rebinding" in json.loads(raw)["error"]["message"]


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8000", "localhost", "LOCALHOST:1", "[::1]:8000",
                                  "127.5.6.7"])
def test_a_loopback_chat_server_answers_its_own_names(served, host):
    status, raw = _get(served, "/v1/models", host=host)
    assert status == 200, raw


def test_the_host_check_covers_weight_reloads_and_generation(served):
    for path, body in [("/v1/reload_weights", {"path": "x", "version": 1}),
                       ("/v1/completions", {"prompt": [1, 2], "max_tokens": 1})]:
        status, _ = _get(served, path, host="attacker.test", method="POST", body=body)
        assert status == 403


@pytest.mark.parametrize("path", ["/", "/data.json", "/samples.json?run=0&it=1"])
def test_view_serve_refuses_a_foreign_host(view_server, path):
    status, raw = _get(view_server, path, host="rebind.attacker.test:8050")
    assert status == 403 and "DNS rebinding" in json.loads(raw)["error"]
    assert _get(view_server, path, host="127.0.0.1:8050")[0] == 200


def test_the_retriever_checks_the_host_too(tmp_path):
    from gigpo.envs.search.retrieval import BM25Retriever
    from gigpo.envs.search.server import make_server as make_retriever_server

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(i), "contents": f"doc {i} alpha"}) + "\n" for i in range(5)))
    srv = _start(make_retriever_server(BM25Retriever(corpus), port=0, n_docs=5))
    try:
        body = {"queries": ["alpha"], "topk": 1}
        assert _get(srv, "/retrieve", host="evil.example", method="POST", body=body)[0] == 403
        assert _get(srv, "/retrieve", host="localhost", method="POST", body=body)[0] == 200
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_host_parser():
    assert host_name("[::1]:8000") == "::1" and host_name("LocalHost:80") == "localhost"
    assert host_name("::1") == "::1" and host_name("a.b") == "a.b"
    check_host(["evil.example"], "0.0.0.0")  # a server open to the network is guarded by its key instead
    check_host(None, "127.0.0.1")  # HTTP/1.0 without Host: not a browser


# ------------------------------------------------------------------------------- view --serve: timeout, backlog
def test_view_serve_has_a_read_timeout_and_a_deep_backlog(view_server):
    assert view_server.request_queue_size == BACKLOG >= 128
    view_server.read_timeout_s = 1.0  # the test's: the default is 10 s
    host, port = view_server.server_address[:2]
    stalled = [socket.create_connection((host, port)) for _ in range(20)]
    for s in stalled:
        s.sendall(b"GET /data.json HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers never finished
    try:
        t0 = time.perf_counter()
        assert _get(view_server, "/data.json")[0] == 200  # served meanwhile
        time.sleep(2.5)
        for s in stalled:  # each was dropped by its read timeout
            s.settimeout(5)
            assert s.recv(1) == b""
        assert time.perf_counter() - t0 < 15
    finally:
        for s in stalled:
            s.close()


def test_view_serve_answers_a_burst(view_server):
    results = []

    def one():
        results.append(_get(view_server, "/data.json")[0])

    threads = [threading.Thread(target=one) for _ in range(50)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == [200] * 50 and time.perf_counter() - t0 < 60


# ----------------------------------------------------------------------------------------------- weights dir
def _tiny_weights(srv) -> dict:
    return {k: v.detach().clone().contiguous() for k, v in srv.batcher.engine.model.state_dict().items()
            if k != "lm_head.weight"}


def test_a_model_safetensors_link_out_of_the_weights_dir_is_403_whatever_it_points_to(served, weights_dir,
                                                                                        tmp_path):
    outside = tmp_path / "outside.safetensors"
    save_file(_tiny_weights(served), str(outside))
    answers = {}
    for name, target in [("real", outside), ("passwd", Path("/etc/passwd")), ("missing", tmp_path / "nope")]:
        sub = weights_dir / f"sub-{name}"
        sub.mkdir()
        (sub / "model.safetensors").symlink_to(target)
        status, raw = _get(served, "/v1/reload_weights", method="POST", body={"path": f"sub-{name}", "version": 3})
        answers[name] = (status, json.loads(raw)["error"]["message"])
    assert {s for s, _ in answers.values()} == {403}, answers
    assert len({m for _, m in answers.values()}) == 1  # the same answer: no existence oracle
    status, raw = _get(served, "/v1/weights")
    assert json.loads(raw)["version"] != 3


def test_a_model_safetensors_inside_the_weights_dir_still_loads(served, weights_dir):
    sub = weights_dir / "ok"
    sub.mkdir()
    save_file(_tiny_weights(served), str(sub / "model.safetensors"))
    status, raw = _get(served, "/v1/reload_weights", method="POST", body={"path": "ok", "version": 5})
    assert status == 200, raw


# ------------------------------------------------------------------------------------------------- API keys
@pytest.mark.parametrize("key", ["ключ-секрет", "sk-é123", "sk-\x07bell", "sk-\x7f"])
def test_a_key_no_client_can_send_is_refused_at_start(key, capsys, monkeypatch):
    with pytest.raises(ValueError, match="printable ASCII"):
        api_key_from(key)
    assert serve_main(["tiny", "--port", "0", "--api-key", key]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gigpo serve: error: the API key") and "printable ASCII" in err
    monkeypatch.setenv("GIGPO_API_KEY", key)
    from gigpo.envs.search.server import main as retriever_main

    assert retriever_main(["--corpus", "x.jsonl", "--port", "0"]) == 2
    assert "printable ASCII" in capsys.readouterr().err


def test_an_ascii_key_still_works():
    assert api_key_from(KEY) == KEY and api_key_from("A-z_0.9~!") == "A-z_0.9~!"
