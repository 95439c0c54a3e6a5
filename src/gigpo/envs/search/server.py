"""`gigpo serve-retriever`: a Search-R1-compatible ``POST /retrieve`` server over BM25, stdlib http.server only."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from gigpo.envs.search.retrieval import BM25Retriever, Retriever

log = logging.getLogger(__name__)

#: Requests larger than this are refused (413); a batch of a few thousand queries fits comfortably.
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_TOPK = 100


def make_server(retriever: Retriever, host: str = "127.0.0.1", port: int = 8000, default_topk: int = 3,
                n_docs: int | None = None) -> ThreadingHTTPServer:
    """Bind (not start) a threaded server answering the Search-R1 retrieval API with ``retriever``.

    ``POST /retrieve`` with ``{"queries": [str, ...], "topk": int | null, "return_scores": bool}`` returns
    ``{"result": [[{"document": {"id", "contents"}, "score": s}, ...], ...]}`` when ``return_scores`` is true, else
    ``{"result": [[{"id", "contents"}, ...], ...]}`` (Search-R1's two layouts). ``topk`` missing/null/0 means
    ``default_topk``. Bad requests get HTTP 400 with ``{"error": ...}``; ``GET /health`` returns
    ``{"status": "ok", "docs": n}``. ``port=0`` picks a free port (read ``server.server_address``).
    """

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            log.debug("%s - %s", self.address_string(), format % args)

        def _reply(self, code: int, obj: Any) -> None:
            data = json.dumps(obj).encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - stdlib naming
            if self.path.rstrip("/") == "/health":
                self._reply(200, {"status": "ok", "docs": n_docs})
            else:
                self._reply(404, {"error": f"no route GET {self.path}; use POST /retrieve"})

        def do_POST(self) -> None:  # noqa: N802 - stdlib naming
            if self.path.rstrip("/") != "/retrieve":
                self._reply(404, {"error": f"no route POST {self.path}; use POST /retrieve"})
                return
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                self._reply(411, {"error": "Content-Length required"})
                return
            if length > MAX_BODY_BYTES:
                self.close_connection = True  # the unread body would corrupt a kept-alive connection
                self._reply(413, {"error": f"request body over {MAX_BODY_BYTES} bytes"})
                return
            try:
                queries, topk, scores = _parse_request(self.rfile.read(length), default_topk)
            except ValueError as e:
                self._reply(400, {"error": str(e)})
                return
            try:
                hits = retriever.search(queries, topk)
            except Exception as e:  # report, keep serving: one bad batch must not kill the server
                log.exception("retrieval failed")
                self._reply(500, {"error": f"retrieval failed: {type(e).__name__}: {e}"})
                return
            strip = [[{"id": h["id"], "contents": h["contents"]} for h in row] for row in hits]
            if scores:
                result = [[{"document": d, "score": h["score"]} for d, h in zip(ds, row, strict=True)]
                          for ds, row in zip(strip, hits, strict=True)]
            else:
                result = strip
            self._reply(200, {"result": result})

    server = _Server((host, port), Handler)
    server.daemon_threads = True
    return server


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up is routine for a retrieval server: one log line, no traceback.
        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError)):
            log.info("client %s went away before the reply: %s", client_address, exc)
        else:
            super().handle_error(request, client_address)


def _parse_request(raw: bytes, default_topk: int) -> tuple[list[str], int, bool]:
    try:
        req = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"body is not JSON: {e}") from e
    if not isinstance(req, dict):
        raise ValueError("body must be a JSON object")
    queries = req.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise ValueError("'queries' must be a list of strings")
    topk = req.get("topk") or default_topk
    if not isinstance(topk, int) or isinstance(topk, bool) or not 1 <= topk <= MAX_TOPK:
        raise ValueError(f"'topk' must be an integer in [1, {MAX_TOPK}]")
    return queries, topk, bool(req.get("return_scores", False))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gigpo serve-retriever", description=(
        "Serve BM25 retrieval over a JSONL corpus with Search-R1's API (POST /retrieve)."))
    p.add_argument("--corpus", required=True, help='JSONL corpus, one {"id", "contents": "\\"Title\\"\\ntext"} a line')
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000, as Search-R1; 0 = any free port)")
    p.add_argument("--topk", type=int, default=3, help="passages per query when a request gives no topk")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``gigpo serve-retriever`` / ``python -m gigpo.envs.search.server``; runs until Ctrl-C.

    Prints one line ``serving N passages on http://HOST:PORT/retrieve`` (flushed) once it accepts requests.
    """
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    retriever = BM25Retriever(args.corpus)
    server = make_server(retriever, args.host, args.port, args.topk, n_docs=len(retriever.docs))
    host, port = server.server_address[:2]
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("listening on %s: reachable from other machines; there is no authentication", args.host)
    print(f"serving {len(retriever.docs)} passages on http://{host}:{port}/retrieve", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
