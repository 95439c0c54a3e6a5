"""Large data (issue 29): huge observations make small sample files (cut, one warning), an API server that ignores
max_tokens cannot make an agent write hundreds of MB, and a reply over the client's byte limit is refused unread.
The API server here is a real stdlib HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from gigpo.apiclient import APIError, ChatClient
from gigpo.rollout.batch import RolloutBatch, Trajectory
from gigpo.serve.engine import OpenAIEngine
from gigpo.train.reporting import samples


def _batch(obs: str, n_traj: int = 3, steps: int = 2) -> RolloutBatch:
    b = RolloutBatch()
    for t in range(n_traj):
        tr = Trajectory(traj_id=t, group_id=0, seed=t)
        tr.transcript = [(obs, "go", "go", 0.0) for _ in range(steps)]
        tr.length = steps
        b.trajectories.append(tr)
    return b


def test_huge_observations_make_small_sample_files(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(samples, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="gigpo.train.reporting.samples"):
        samples.write_samples(tmp_path / "iter_000001.txt", _batch("x" * 5_000_000), np.zeros(0), 3)
        samples.write_samples(tmp_path / "iter_000002.txt", _batch("y" * 200_000), np.zeros(0), 3)
    for f in ("iter_000001.txt", "iter_000002.txt"):
        text = (tmp_path / f).read_text()
        assert len(text) < 3 * 2 * (samples.MAX_STEP_CHARS + 200)
        assert "characters cut ...]" in text and text.count("=== trajectory") == 3
    assert caplog.text.count("sample files are capped") == 1  # once per run, no source line echoed


def test_a_sample_file_stops_at_its_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(samples, "MAX_FILE_CHARS", 10_000)
    samples.write_samples(tmp_path / "s.txt", _batch("z" * 3000, n_traj=20), np.zeros(0), 20)
    text = (tmp_path / "s.txt").read_text()
    assert "more trajectories left out" in text and len(text) < 20_000


class _Flood(BaseHTTPRequestHandler):
    """A chat server that answers every request with ``server.reply_chars`` characters, whatever max_tokens."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *a):  # quiet
        pass

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "a" * self.server.reply_chars}}],
                           "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def flood():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Flood)
    srv.reply_chars = 9_000_000
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_a_server_ignoring_max_tokens_gets_its_replies_cut(flood, caplog):
    client = ChatClient(f"http://127.0.0.1:{flood.server_address[1]}/v1", max_retries=0)
    engine = OpenAIEngine(client, "m")
    with caplog.at_level(logging.WARNING, logger="gigpo.serve.engine"):
        gens = engine.generate([[{"role": "user", "content": "hi"}]] * 2, max_new_tokens=16)
    assert [len(g.text) for g in gens] == [4096, 4096]
    assert caplog.text.count("replies are cut to 4096 characters") == 1


def test_a_reply_over_the_byte_limit_is_refused_unread(flood):
    client = ChatClient(f"http://127.0.0.1:{flood.server_address[1]}/v1", max_retries=3, max_response_bytes=1 << 20)
    with pytest.raises(APIError, match="over the 1048576-byte limit") as err:
        client.chat({"messages": []})
    assert err.value.attempts == 1  # not retried: the same server would send the same reply
