"""`gigpo serve`: an OpenAI-compatible /v1/models + /v1/chat/completions server for a checkpoint or local model
(plus /v1/completions, streaming and weight reloads: gigpo.serve.completions, .streaming, .weights)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from gigpo.httputil import (
    HardenedHandler,
    HardenedHTTPServer,
    HTTPError,
    OneLineParser,
    bind_error,
    loads_strict,
    nonnegative_float_arg,
    port_arg,
    positive_float_arg,
    positive_int_arg,
    serve_until_interrupted,
)
from gigpo.serve.batcher import Batcher, RequestError, ShuttingDown
from gigpo.serve.protocol import (  # noqa: F401 - re-exported: the names callers used before protocol.py
    CHARS_PER_TOKEN_BOUND,
    MAX_CHOICE_CHARS,
    MESSAGE_OVERHEAD_CHARS,
    REQUEST_TIMEOUT_S,
    Limits,
    api_key_from,
    error_body,
    parse_chat_request,
    parse_guided_choice,
    require_key_off_loopback,
)


class BindError(OSError):
    """The server could not listen on the address (port taken, address not on this machine): one-line message."""


class ChatServer(HardenedHTTPServer):
    """A threading HTTP server whose handler threads hand jobs to one :class:`Batcher`.

    ``model_id`` is the name listed by ``/v1/models``; requests naming another model (except ``aliases``) get 404,
    so a typo in ``--agent openai:MODEL`` is caught instead of silently served. ``batcher`` may be attached
    after binding (``make_server`` binds first, so a taken port fails before the model loads).

    ``api_key``: every route answers 401 unless the request carries ``Authorization: Bearer <api_key>``.
    ``weights_dir``: the only directory ``/v1/reload_weights`` may read from (None: weight reloads are off).
    """

    def __init__(self, address: tuple[str, int], batcher: Batcher | None, model_id: str,
                 aliases: set[str] | None = None, limits: Limits | None = None, *, api_key: str | None = None,
                 weights_dir: str | Path | None = None):
        super().__init__(address, _Handler)
        self.api_key = api_key
        self.weights_dir = Path(weights_dir).resolve() if weights_dir is not None else None
        self.batcher = batcher
        self.model_id = model_id
        self.aliases = {model_id, *(aliases or ())}
        self.limits = limits or Limits()
        self.read_timeout_s = self.limits.read_timeout_s
        self.max_body_bytes = self.limits.max_body_bytes
        self.created = int(time.time())

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        if self.batcher is not None:
            self.batcher.close()


class _Handler(HardenedHandler):
    server: ChatServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet by default
        pass

    def error_shape(self, status: int, message: str) -> dict[str, Any]:
        return error_body(status, message)

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self.send_json(status, error_body(status, message, kind))

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        if not self.authorized():
            return
        path = self.path.split("?")[0].rstrip("/")
        if path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [
                {"id": self.server.model_id, "object": "model", "created": self.server.created, "owned_by": "gigpo"}
            ]})
        elif path == "/v1/gigpo/stats":  # not OpenAI: batching counters, for tests and tuning
            self.send_json(200, vars(self.server.batcher.stats))
        elif path in ("/health", "/v1/health"):
            self.send_json(200, {"status": "ok"})
        elif path == "/v1/weights":  # not OpenAI: the weights version a learner last pushed (gigpo.serve.weights)
            self.send_json(200, {"version": self.server.batcher.weights_version})
        else:
            self._error(404, f"no route GET {path}")

    def do_POST(self) -> None:  # noqa: N802
        if not self.authorized():
            return
        path = self.path.split("?")[0].rstrip("/")
        try:
            # The body is read (within the caps) before routing, so a kept-alive connection stays in sync.
            raw = self.read_body()
            extra = _extra_post_routes().get(path)
            if extra is not None:  # /v1/completions, weight updates: their own modules
                return extra(self, raw)
            if path != "/v1/chat/completions":
                return self._error(404, f"no route POST {path} (this server has /v1/chat/completions)")
            job = parse_chat_request(loads_strict(raw), self.server.aliases, self.server.limits)
        except HTTPError as e:
            return self.reply_error(e)
        except LookupError as e:
            return self._error(404, str(e), "model_not_found")
        except (ValueError, TypeError) as e:
            return self._error(400, str(e))
        if job.stream:  # server-sent events, one chunk per decoding pass (gigpo.serve.streaming)
            from gigpo.serve.streaming import stream_chat

            return stream_chat(self, job)
        self.server.batcher.submit(job)
        if not job.done.wait(REQUEST_TIMEOUT_S):
            job.cancelled = True  # the worker drops it at its next pass
            return self._error(504, "generation timed out", "server_error")
        if isinstance(job.error, RequestError):
            return self._error(job.error.status, str(job.error))
        if isinstance(job.error, ShuttingDown):
            return self._error(503, str(job.error), "server_error")
        if job.error is not None:
            return self._error(500, f"generation failed: {type(job.error).__name__}: {job.error}", "server_error")
        self.send_json(200, {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.server.model_id,
            "choices": job.choices,
            "usage": {"prompt_tokens": len(job.prompt_ids), "completion_tokens": job.completion_tokens,
                      "total_tokens": len(job.prompt_ids) + job.completion_tokens},
        })


def _extra_post_routes() -> dict[str, Any]:
    from gigpo.serve.completions import handle_completions
    from gigpo.serve.weights import POST_ROUTES

    return {"/v1/completions": handle_completions, **POST_ROUTES}


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
    limits: Limits | None = None, slice_tokens: int = 32, api_key: str | None = None,
    weights_dir: str | Path | None = None,
) -> ChatServer:
    """Bind the server, then load the model (``port=0``: an ephemeral port; see ``server.url``). Not yet serving:
    call ``serve_forever()`` (or run it in a thread). A limit the model cannot honour (``max_prompt_tokens``
    over its context length), a non-loopback ``host`` without ``api_key`` or a ``weights_dir`` that is not a
    directory raise ValueError; a taken port raises OSError before anything loads."""
    limits = limits or Limits()
    require_key_off_loopback(host, api_key, "gigpo serve")
    if weights_dir is not None and not Path(weights_dir).is_dir():
        raise ValueError(f"--weights-dir {weights_dir} is not a directory")
    try:
        server = ChatServer((host, port), None, served_model_name or name_or_path, limits=limits, api_key=api_key,
                            weights_dir=weights_dir)
    except OSError as e:
        raise BindError(bind_error(e, host, port)) from e
    try:
        bundle, target = load_for_serving(name_or_path, device=device, dtype=dtype, seed=seed)
        cfg = getattr(bundle.model, "config", None)
        context = int(getattr(cfg, "max_position_embeddings", 0) or 0) or None
        if limits.max_prompt_tokens and context and limits.max_prompt_tokens >= context:
            raise ValueError(f"--max-prompt-tokens {limits.max_prompt_tokens} leaves no room to generate in the "
                             f"model's context length of {context}")
        prompt_tokens = limits.max_prompt_tokens or (context - 1 if context else None)
        if limits.max_prompt_chars is None and prompt_tokens:
            limits = replace(limits, max_prompt_chars=CHARS_PER_TOKEN_BOUND * prompt_tokens)
        server.limits = replace(limits, max_prompt_tokens=prompt_tokens)
        server.batcher = Batcher(bundle.model, bundle.tokenizer, bundle.device, max_batch=max_batch, wait_ms=wait_ms,
                                 default_max_tokens=min(256, limits.max_tokens_cap), slice_tokens=slice_tokens,
                                 max_prompt_tokens=prompt_tokens)
        server.aliases |= {name_or_path, Path(name_or_path).name, target}
    except BaseException:
        server.server_close()
        raise
    return server


def build_parser() -> argparse.ArgumentParser:
    d = Limits()
    p = OneLineParser(prog="gigpo serve", description="Serve a checkpoint or local model over an "
                                "OpenAI-compatible API (/v1/models, /v1/chat/completions, /v1/completions; live weight reloads for a "
                                "learner), batching requests.")
    p.add_argument("model", metavar="CHECKPOINT_OR_MODEL",
                   help="run dir (newest checkpoint), checkpoint dir, model dir, tiny, smollm2-135m or a cached HF id")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only; any "
                   "other address needs --api-key)")
    p.add_argument("--api-key", default=None, metavar="KEY", help="require 'Authorization: Bearer KEY' on every "
                   "route (default: $GIGPO_API_KEY; none: no check, allowed on loopback only)")
    p.add_argument("--weights-dir", default=None, metavar="DIR", help="POST /v1/reload_weights loads files under "
                   "DIR only (the learner's rollout.openai.weights_dir); without it weight reloads are refused (403)")
    p.add_argument("--port", type=port_arg, default=8000, help="0-65535; 0 = any free port (printed on startup)")
    p.add_argument("--served-model-name", default=None, help="the id clients pass as 'model' (default: the argument)")
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--seed", type=int, default=0, help="weights seed of the tiny model")
    p.add_argument("--max-batch", type=positive_int_arg, default=32, help="most rows per generate call")
    p.add_argument("--batch-wait-ms", type=nonnegative_float_arg, default=5.0, help="how long an idle server gathers a batch")
    p.add_argument("--slice-tokens", type=positive_int_arg, default=32,
                   help="tokens decoded per request before the next request gets a turn (default 32)")
    g = p.add_argument_group("per-request limits (over a limit: HTTP 400/413)")
    g.add_argument("--max-body-bytes", type=positive_int_arg, default=d.max_body_bytes,
                   help=f"largest request body (default {d.max_body_bytes})")
    g.add_argument("--max-tokens-cap", type=positive_int_arg, default=d.max_tokens_cap,
                   help=f"largest max_tokens a request may ask for (default {d.max_tokens_cap})")
    g.add_argument("--max-n", type=positive_int_arg, default=d.max_n, help=f"largest n (default {d.max_n})")
    g.add_argument("--max-prompt-tokens", type=positive_int_arg, default=None,
                   help="longest rendered prompt in tokens (default: the context length - 1)")
    g.add_argument("--max-prompt-chars", type=positive_int_arg, default=None, help="longest prompt in characters, "
                   f"checked before tokenising (default {CHARS_PER_TOKEN_BOUND} x --max-prompt-tokens)")
    g.add_argument("--read-timeout", type=positive_float_arg, default=d.read_timeout_s,
                   help=f"seconds a connection may stall mid-request or sit idle (default {d.read_timeout_s:g})")
    g.add_argument("--max-choices", type=positive_int_arg, default=d.max_choices,
                   help=f"most guided_choice strings in one request (default {d.max_choices})")
    return p


def serve_main(argv: list[str]) -> int:
    """``gigpo serve CHECKPOINT_OR_MODEL [--port P] [--host H] ...``: serve until Ctrl-C / SIGTERM. Prints
    ``gigpo serve: <model id> on http://HOST:PORT/v1`` once listening (tests read the port from it). Bad flags,
    a taken port or a model that does not load: one ``gigpo serve: error: ...`` line, exit 2."""
    args = build_parser().parse_args(argv)
    try:
        api_key = api_key_from(args.api_key)
    except ValueError as e:
        print(f"gigpo serve: error: {e}", file=sys.stderr)
        return 2
    limits = Limits(max_body_bytes=args.max_body_bytes, max_tokens_cap=args.max_tokens_cap, max_n=args.max_n,
                    max_prompt_tokens=args.max_prompt_tokens, max_prompt_chars=args.max_prompt_chars,
                    read_timeout_s=args.read_timeout, max_choices=args.max_choices)
    try:
        server = make_server(args.model, host=args.host, port=args.port, device=args.device, dtype=args.dtype,
                             seed=args.seed, max_batch=args.max_batch, wait_ms=args.batch_wait_ms,
                             served_model_name=args.served_model_name, limits=limits, slice_tokens=args.slice_tokens,
                             api_key=api_key, weights_dir=args.weights_dir)
    except (OSError, ValueError) as e:  # BindError, a missing checkpoint or broken model dir, a bad limit
        print(f"gigpo serve: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2

    def _stop(*_: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop)
    print(f"gigpo serve: {server.model_id} on {server.url}", flush=True)
    return serve_until_interrupted(server, server.batcher.close)
