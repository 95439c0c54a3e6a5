"""Who may change a server (issue 29): `gigpo serve --api-key` on every route, `--weights-dir` confining weight
reloads without revealing other paths, refused weights leaving the served ones in place; the same key on
`gigpo serve-retriever`; and the probes that used to get no reply at all (stream_options "x", /etc/passwd) or a
500 (an empty prompt). Servers run on 127.0.0.1 with the tiny model."""

from __future__ import annotations

import http.client
import json
import threading

import pytest
import torch
from safetensors.torch import save_file

from gigpo.envs.search.retrieval import BM25Retriever, HttpRetriever, RetrievalError
from gigpo.envs.search.server import main as retriever_main
from gigpo.envs.search.server import make_server as make_retriever_server
from gigpo.serve.server import make_server, serve_main

KEY = "sk-test-0123456789"


@pytest.fixture(scope="module")
def weights_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("pushes")


@pytest.fixture(scope="module")
def served(weights_dir):
    srv = make_server("tiny", port=0, device="cpu", wait_ms=1.0, api_key=KEY, weights_dir=weights_dir)
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    yield srv
    srv.close()


def call(srv, method: str, path: str, body=None, key: str | None = KEY, raw: bytes | None = None):
    host, port = srv.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=30)
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    conn.request(method, path, body=data, headers=headers)
    resp = conn.getresponse()
    out = resp.status, json.loads(resp.read() or b"null")
    conn.close()
    return out


def state(srv) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in srv.batcher.engine.model.state_dict().items()}


def greedy(srv) -> str:
    status, reply = call(srv, "POST", "/v1/completions", {"prompt": [5, 6, 7], "max_tokens": 6, "temperature": 0})
    assert status == 200, reply
    return reply["choices"][0]["text"]


@pytest.mark.parametrize("key", [None, "wrong", ""])
@pytest.mark.parametrize("method,path", [("GET", "/v1/models"), ("GET", "/health"), ("GET", "/v1/weights"),
                                         ("POST", "/v1/chat/completions"), ("POST", "/v1/reload_weights")])
def test_every_route_needs_the_key(served, method, path, key):
    body = {"messages": [{"role": "user", "content": "hi"}]} if method == "POST" else None
    status, reply = call(served, method, path, body, key=key)
    assert status == 401 and reply["error"]["code"] == 401 and "API key" in reply["error"]["message"]


def test_the_right_key_is_served(served):
    assert call(served, "GET", "/v1/models")[0] == 200
    status, reply = call(served, "POST", "/v1/chat/completions",
                         {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    assert status == 200 and reply["choices"]


def test_a_non_loopback_address_needs_a_key(capsys, monkeypatch):
    monkeypatch.delenv("GIGPO_API_KEY", raising=False)
    with pytest.raises(ValueError, match="--api-key"):  # refused before binding: nothing listens off loopback
        make_server("tiny", host="0.0.0.0", port=0)
    assert serve_main(["tiny", "--host", "0.0.0.0", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gigpo serve: error: gigpo serve --host 0.0.0.0 is reachable") and err.count("\n") == 1
    monkeypatch.setenv("GIGPO_API_KEY", " ")
    assert serve_main(["tiny", "--port", "0"]) == 2
    assert "must be non-empty" in capsys.readouterr().err


def test_reloads_outside_the_weights_dir_reveal_nothing(served, tmp_path):
    outside = tmp_path / "exists.safetensors"
    save_file({"x": torch.zeros(1)}, str(outside))
    replies = [call(served, "POST", "/v1/reload_weights", {"path": p, "version": 1})
               for p in ("/etc/passwd", str(outside), str(tmp_path / "missing"), "../../etc", "/root/.ssh/id_rsa")]
    assert {(s, r["error"]["message"]) for s, r in replies} == {(403, "'path' is not under this server's --weights-dir")}
    assert call(served, "GET", "/v1/weights")[1]["version"] == 0


def test_a_link_out_of_the_weights_dir_is_refused(served, weights_dir, tmp_path):
    target = tmp_path / "real.safetensors"
    save_file({"x": torch.zeros(1)}, str(target))
    (weights_dir / "link.safetensors").symlink_to(target)
    status, reply = call(served, "POST", "/v1/reload_weights", {"path": "link.safetensors", "version": 1})
    assert status == 403


def test_reloads_are_off_without_a_weights_dir():
    srv = make_server("tiny", port=0, device="cpu")
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    try:
        status, reply = call(srv, "POST", "/v1/reload_weights", {"path": "/etc/passwd", "version": 1}, key=None)
        assert status == 403 and "--weights-dir" in reply["error"]["message"]
    finally:
        srv.close()


def test_bad_weights_are_refused_and_the_served_ones_kept(served, weights_dir):
    before, text = state(served), greedy(served)
    good = state(served)
    nan = {k: torch.full_like(v, float("nan")) for k, v in good.items()}
    wrong = {k: torch.zeros(3, 3) for k in good}
    (weights_dir / "garbage.safetensors").write_bytes(b"\xff" * 4096)
    save_file(nan, str(weights_dir / "nan.safetensors"))
    save_file(wrong, str(weights_dir / "wrong.safetensors"))
    for name, why in [("garbage.safetensors", "cannot load"), ("nan.safetensors", "non-finite"),
                      ("wrong.safetensors", "size mismatch")]:
        status, reply = call(served, "POST", "/v1/reload_weights", {"path": name, "version": 5})
        assert status == 400 and why in reply["error"]["message"] and "unchanged" in reply["error"]["message"], reply
    after = state(served)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert call(served, "GET", "/v1/weights")[1]["version"] == 0 and greedy(served) == text
    # a file under the directory that does not exist: 404 (only the directory's own contents are revealed)
    assert call(served, "POST", "/v1/reload_weights", {"path": "nope.safetensors", "version": 1})[0] == 404
    save_file(good, str(weights_dir / "good.safetensors"))
    status, reply = call(served, "POST", "/v1/reload_weights", {"path": str(weights_dir / "good.safetensors"),
                                                                "version": 3})
    assert status == 200 and call(served, "GET", "/v1/weights")[1]["version"] == 3


@pytest.mark.parametrize("body,why", [
    ({"prompt": [5, 6], "stream": True, "stream_options": "x"}, "'stream_options' must be an object"),
    ({"prompt": [5, 6], "stream_options": 3}, "'stream_options' must be an object"),
    ({"prompt": ""}, "the prompt is empty"),
    ({"prompt": ["ab", ""]}, "the prompt is empty"),
])
def test_bad_completions_get_a_400(served, body, why):
    status, reply = call(served, "POST", "/v1/completions", body)
    assert status == 400 and why in reply["error"]["message"], reply


# ------------------------------------------------------------------------------------------------- serve-retriever
@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": str(i), "contents": f'"Doc {i}"\nalpha word{i}'}) + "\n"
                            for i in range(5)))
    return path


def test_the_retriever_checks_the_key(corpus, monkeypatch):
    srv = make_retriever_server(BM25Retriever(corpus), port=0, n_docs=5, api_key=KEY)
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    try:
        assert call(srv, "GET", "/health", key=None)[0] == 401
        assert call(srv, "POST", "/retrieve", {"queries": ["alpha"]}, key="nope")[0] == 401
        assert call(srv, "POST", "/retrieve", {"queries": ["alpha"]})[0] == 200
        url = f"http://127.0.0.1:{srv.server_address[1]}/retrieve"
        monkeypatch.delenv("GIGPO_API_KEY", raising=False)
        with pytest.raises(RetrievalError, match="401"):  # a 4xx is not retried
            HttpRetriever(url, retries=0).search(["alpha"], 1)
        monkeypatch.setenv("GIGPO_API_KEY", KEY)  # the env's client reads the variable the server reads
        assert len(HttpRetriever(url).search(["alpha"], 2)[0]) == 2
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_retriever_off_loopback_needs_a_key(corpus, capsys, monkeypatch):
    monkeypatch.delenv("GIGPO_API_KEY", raising=False)
    assert retriever_main(["--corpus", str(corpus), "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "--api-key" in capsys.readouterr().err


def test_a_binary_corpus_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(json.dumps({"contents": "ok"}).encode() + b"\n\xff\xfe binary\n")
    assert retriever_main(["--corpus", str(bad), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2: not UTF-8 text (byte 0xff at column 1)" in err and err.count("\n") == 1
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not UTF-8"):
        BM25Retriever(bad)


# ---------------------------------------------------------------------------------- the learner and a keyed server
LEARNER = ["model.tiny={english_words: false, hidden_size: 32, intermediate_size: 64}", "env.size=3",
           "env.max_steps=3", "rollout.groups=2", "rollout.group_size=2", "rollout.max_response_tokens=3",
           "optim.micro_batch_size=8", "optim.mini_batches=1", "optim.ppo_epochs=1", "train.eval_episodes=0",
           "train.progress=false", "train.iterations=1", "train.checkpoint_every=0", "rollout.engine=openai",
           "rollout.openai.model=tiny"]


def test_a_learner_pushes_to_a_keyed_server_only_with_the_key(tmp_path, capsys, monkeypatch):
    from gigpo.cli import main as cli_main
    from gigpo.models import load_model, save_pretrained

    monkeypatch.delenv("GIGPO_API_KEY", raising=False)
    save_pretrained(load_model("tiny", device="cpu", seed=99, tiny={"english_words": False, "hidden_size": 32,
                                                                     "intermediate_size": 64}), tmp_path / "served")
    pushes = tmp_path / "pushes"
    pushes.mkdir()
    srv = make_server(str(tmp_path / "served"), port=0, device="cpu", served_model_name="tiny", api_key=KEY,
                      weights_dir=pushes)
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    try:
        common = [*LEARNER, f"rollout.openai.urls={srv.url}", f"rollout.openai.weights_dir={pushes}"]
        assert cli_main(["train", *common, f"train.run_dir={tmp_path / 'nokey'}"]) == 2
        assert "refused the API key" in capsys.readouterr().err
        assert call(srv, "GET", "/v1/weights")[1]["version"] == 0  # nothing was pushed without the key
        monkeypatch.setenv("GIGPO_API_KEY", KEY)  # the learner reads the variable the server reads
        assert cli_main(["train", *common, f"train.run_dir={tmp_path / 'keyed'}"]) == 0
        assert call(srv, "GET", "/v1/weights")[1]["version"] == 1
    finally:
        srv.close()
