"""A scripted OpenAI-compatible loopback server for failure injection (500s, 429s, stalls, auth) in tests."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: ``fault(n, body) -> None | ("status", code) | ("stall", seconds)``; n counts chat requests from 0.
Fault = Callable[[int, dict], Any]


class FakeAPI:
    """Answers every chat request with ``reply(messages)`` unless ``fault`` injects an error for it.

    ``bodies`` keeps every chat request body received (failed attempts included), ``api_key`` (if set) is
    required as a Bearer token on every route. Handler threads are daemons; a stall sleeps at most its seconds.
    """

    def __init__(self, reply: Callable[[list], str] = lambda m: "up", fault: Fault | None = None,
                 api_key: str | None = None, models: bool = True):
        self.reply, self.fault, self.api_key, self.models = reply, fault, api_key, models
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def send(self, status: int, obj: dict, headers: dict | None = None) -> None:
                data = json.dumps(obj).encode()
                try:
                    self.send_response(status)
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (timeout) and closed the socket
                    pass

            def authorized(self) -> bool:
                if fake.api_key and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                    self.send(401, {"error": {"message": "Incorrect API key provided"}})
                    return False
                return True

            def do_GET(self) -> None:  # noqa: N802
                if not self.authorized():
                    return
                if self.path.rstrip("/") == "/v1/models" and fake.models:
                    self.send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
                else:
                    self.send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                if not self.authorized():
                    return
                with fake.lock:
                    n = len(fake.bodies)
                    fake.bodies.append(body)
                act = fake.fault(n, body) if fake.fault else None
                if act and act[0] == "stall":
                    time.sleep(act[1])
                    return self.send(200, _completion("up"))
                if act and act[0] == "status":
                    return self.send(act[1], {"error": {"message": f"injected {act[1]}"}}, {"Retry-After": "0"})
                self.send(200, _completion(fake.reply(body["messages"])))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> FakeAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def _completion(text: str) -> dict:
    return {"id": "x", "object": "chat.completion", "model": "fake-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}
