"""`gigpo serve`: an OpenAI-compatible /v1/models + /v1/chat/completions server for a checkpoint or local model."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gigpo.serve.batcher import Batcher, Job, RequestError

#: Longest a request waits for the batcher before the server answers 504.
REQUEST_TIMEOUT_S = 600.0


class ChatServer(ThreadingHTTPServer):
    """A threading HTTP server whose handler threads hand jobs to one :class:`Batcher`.

    ``model_id`` is the name listed by ``/v1/models``; requests naming another model (except ``aliases``) get 404,
    so a typo in ``--agent openai:MODEL`` is caught instead of silently served.
    """

    daemon_threads = True

    def __init__(self, address: tuple[str, int], batcher: Batcher, model_id: str, aliases: set[str] | None = None):
        super().__init__(address, _Handler)
        self.batcher = batcher
        self.model_id = model_id
        self.aliases = {model_id, *(aliases or ())}
        self.created = int(time.time())

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self.batcher.close()


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse one connection per thread

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet by default
        pass

    def _send(self, status: int, obj: dict[str, Any]) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self._send(status, {"error": {"message": message, "type": kind, "code": status}})

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        path = self.path.split("?")[0].rstrip("/")
        if path == "/v1/models":
            self._send(200, {"object": "list", "data": [
                {"id": self.server.model_id, "object": "model", "created": self.server.created, "owned_by": "gigpo"}
            ]})
        elif path == "/v1/gigpo/stats":  # not OpenAI: batching counters, for tests and tuning
            self._send(200, vars(self.server.batcher.stats))
        elif path in ("/health", "/v1/health"):
            self._send(200, {"status": "ok"})
        else:
            self._error(404, f"no route GET {path}")

    def do_POST(self) -> None:  # noqa: N802
        path = self.path.split("?")[0].rstrip("/")
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            return self._error(400, "request body is not JSON")
        if path != "/v1/chat/completions":
            return self._error(404, f"no route POST {path} (this server has /v1/chat/completions)")
        try:
            job = parse_chat_request(body, self.server.aliases)
        except LookupError as e:
            return self._error(404, str(e), "model_not_found")
        except (ValueError, TypeError) as e:
            return self._error(400, str(e))
        self.server.batcher.submit(job)
        if not job.done.wait(REQUEST_TIMEOUT_S):
            return self._error(504, "generation timed out", "server_error")
        if isinstance(job.error, RequestError):
            return self._error(400, str(job.error))
        if job.error is not None:
            return self._error(500, f"generation failed: {type(job.error).__name__}: {job.error}", "server_error")
        self._send(200, {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.server.model_id,
            "choices": job.choices,
            "usage": {"prompt_tokens": len(job.prompt_ids), "completion_tokens": job.completion_tokens,
                      "total_tokens": len(job.prompt_ids) + job.completion_tokens},
        })


def parse_chat_request(body: Any, models: set[str]) -> Job:
    """Validate an OpenAI chat request into a :class:`Job` (ValueError/TypeError → 400, LookupError → 404).

    Supported: ``messages`` (string content or text parts), ``temperature`` ∈ [0, 2] (0 = greedy; default 1),
    ``top_p`` ∈ (0, 1], ``max_tokens`` / ``max_completion_tokens`` ≥ 1, ``stop`` (string or up to 4 strings),
    ``n`` ∈ [1, 16], ``logprobs``. Streaming, tools and ``seed`` are rejected or ignored as documented.
    """
    if not isinstance(body, dict):
        raise ValueError("request body must be a JSON object")
    model = body.get("model")
    if model is not None and model not in models:
        raise LookupError(f"model {model!r} is not served here; this server serves {sorted(models)[0]!r}")
    if body.get("stream"):
        raise ValueError("stream=true is not supported by gigpo serve")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise ValueError("'messages' must be a non-empty list")
    messages = []
    for m in msgs:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ValueError("each message needs a 'role' and a 'content'")
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        if not isinstance(content, str):
            raise ValueError(f"message content must be a string or text parts, got {type(content).__name__}")
        messages.append({"role": m["role"], "content": content})
    temperature = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
    top_p = float(body.get("top_p", 1.0) if body.get("top_p") is not None else 1.0)
    if not 0.0 <= temperature <= 2.0:
        raise ValueError("temperature must be in [0, 2]")
    if not 0.0 < top_p <= 1.0:
        raise ValueError("top_p must be in (0, 1]")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (isinstance(max_tokens, bool) or int(max_tokens) < 1):
        raise ValueError("max_tokens must be >= 1")
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) for s in stop):
        raise ValueError("stop must be a string or a list of up to 4 strings")
    n = int(body.get("n") or 1)
    if not 1 <= n <= 16:
        raise ValueError("n must be in [1, 16]")
    return Job(messages, None if max_tokens is None else int(max_tokens), temperature, top_p, n=n, stop=stop,
               logprobs=bool(body.get("logprobs")))


def load_for_serving(name_or_path: str, *, device: str = "auto", dtype: str = "auto", seed: int = 0) -> tuple[Any, str]:
    """``(ModelBundle, resolved source)``: a run dir / checkpoint dir via ``locate_checkpoint``, else a model name
    (``tiny``, ``smollm2-135m``, a local HF dir or a cached HF id)."""
    from gigpo.models import load_model
    from gigpo.train.evaluate import locate_checkpoint

    target = name_or_path
    if Path(name_or_path).exists():
        target = str(locate_checkpoint(name_or_path)[0])
    bundle = load_model(target, device=device, dtype=dtype, seed=seed)
    return bundle, target


def make_server(
    name_or_path: str, *, host: str = "127.0.0.1", port: int = 8000, device: str = "auto", dtype: str = "auto",
    seed: int = 0, max_batch: int = 32, wait_ms: float = 5.0, served_model_name: str | None = None,
) -> ChatServer:
    """Load the model and bind the server (``port=0``: an ephemeral port; see ``server.url``). Not yet serving:
    call ``serve_forever()`` (or run it in a thread)."""
    bundle, target = load_for_serving(name_or_path, device=device, dtype=dtype, seed=seed)
    batcher = Batcher(bundle.model, bundle.tokenizer, bundle.device, max_batch=max_batch, wait_ms=wait_ms)
    model_id = served_model_name or name_or_path
    try:
        return ChatServer((host, port), batcher, model_id, {name_or_path, Path(name_or_path).name, target})
    except OSError:
        batcher.close()
        raise


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gigpo serve", description="Serve a checkpoint or local model over an "
                                "OpenAI-compatible API (/v1/models, /v1/chat/completions), batching requests.")
    p.add_argument("model", metavar="CHECKPOINT_OR_MODEL",
                   help="run dir (newest checkpoint), checkpoint dir, model dir, tiny, smollm2-135m or a cached HF id")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="0 = any free port (printed on startup)")
    p.add_argument("--served-model-name", default=None, help="the id clients pass as 'model' (default: the argument)")
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--seed", type=int, default=0, help="weights seed of the tiny model")
    p.add_argument("--max-batch", type=int, default=32, help="most rows per generate call")
    p.add_argument("--batch-wait-ms", type=float, default=5.0, help="how long to gather requests into one batch")
    return p


def serve_main(argv: list[str]) -> int:
    """``gigpo serve CHECKPOINT_OR_MODEL [--port P] [--host H] ...``: serve until Ctrl-C / SIGTERM. Prints
    ``gigpo serve: <model id> on http://HOST:PORT/v1`` once listening (tests read the port from it)."""
    args = build_parser().parse_args(argv)
    try:
        server = make_server(args.model, host=args.host, port=args.port, device=args.device, dtype=args.dtype,
                             seed=args.seed, max_batch=args.max_batch, wait_ms=args.batch_wait_ms,
                             served_model_name=args.served_model_name)
    except (FileNotFoundError, ValueError, OSError) as e:
        print(f"gigpo serve: error: {e}", file=sys.stderr)
        return 2
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"gigpo serve: warning: listening on {args.host} without authentication", file=sys.stderr)

    def _stop(*_: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop)
    print(f"gigpo serve: {server.model_id} on {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        server.batcher.close()
    return 0
