"""`gigpo serve-retriever`: a Search-R1-compatible ``POST /retrieve`` server over BM25, stdlib http.server only."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gigpo.envs.search.retrieval import BM25Retriever, Retriever, corpus_lines
from gigpo.httputil import (
    HardenedHandler,
    HardenedHTTPServer,
    HTTPError,
    OneLineParser,
    api_key_from,
    as_int,
    bind_error,
    loads_strict,
    port_arg,
    positive_float_arg,
    positive_int_arg,
    require_key_off_loopback,
    serve_until_interrupted,
)

log = logging.getLogger(__name__)

#: Requests larger than this are refused (413); a batch of a few thousand queries fits comfortably.
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_TOPK = 100
#: Most queries per request. A rollout step sends one query per active env (Search-R1's largest setting is
#: 512 prompts x 5 samples = 2560); unbounded, 200k queries held the index lock for 12-22 s and made a 33 MB reply.
MAX_QUERIES = 4096


@dataclass(frozen=True)
class RetrieverLimits:
    """Per-request caps of the retrieval server (CLI flags ``--max-body-bytes``, ``--max-queries``,
    ``--max-topk``, ``--read-timeout``)."""

    max_body_bytes: int = MAX_BODY_BYTES
    max_queries: int = MAX_QUERIES
    max_topk: int = MAX_TOPK
    read_timeout_s: float = 30.0


def make_server(retriever: Retriever, host: str = "127.0.0.1", port: int = 8000, default_topk: int = 3,
                n_docs: int | None = None, limits: RetrieverLimits | None = None,
                api_key: str | None = None) -> RetrievalServer:
    """Bind (not start) a threaded server answering the Search-R1 retrieval API with ``retriever``.

    ``POST /retrieve`` with ``{"queries": [str, ...], "topk": int | null, "return_scores": bool}`` returns
    ``{"result": [[{"document": {"id", "contents"}, "score": s}, ...], ...]}`` when ``return_scores`` is true, else
    ``{"result": [[{"id", "contents"}, ...], ...]}`` (Search-R1's two layouts). ``topk`` missing/null/0 means
    ``default_topk``. Bad requests get HTTP 400 with ``{"error": ...}`` (413 over ``max_body_bytes`` or
    ``max_queries``, 411/408 for a missing or stalled body); ``GET /health`` returns ``{"status": "ok", "docs": n}``.
    ``port=0`` picks a free port (read ``server.server_address``). ``api_key``: every route answers 401 unless
    the request carries ``Authorization: Bearer <api_key>``; required for a non-loopback ``host`` (ValueError).
    """
    limits = limits or RetrieverLimits()
    require_key_off_loopback(host, api_key, "gigpo serve-retriever")
    if not 1 <= default_topk <= limits.max_topk:
        raise ValueError(f"--topk {default_topk} must be in [1, {limits.max_topk}] (--max-topk)")
    server = RetrievalServer((host, port), _Handler)
    server.retriever, server.default_topk, server.n_docs, server.limits = retriever, default_topk, n_docs, limits
    server.read_timeout_s, server.max_body_bytes = limits.read_timeout_s, limits.max_body_bytes
    server.api_key = api_key
    return server


class RetrievalServer(HardenedHTTPServer):
    """The bound server; ``retriever``, ``default_topk``, ``n_docs`` and ``limits`` are set by :func:`make_server`."""

    retriever: Retriever
    default_topk: int
    n_docs: int | None
    limits: RetrieverLimits


class _Handler(HardenedHandler):
    server: RetrievalServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s - %s", self.address_string(), format % args)

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        if not self.authorized():
            return
        if self.path.rstrip("/") == "/health":
            self.send_json(200, {"status": "ok", "docs": self.server.n_docs})
        else:
            self.send_json(404, {"error": f"no route GET {self.path}; use POST /retrieve"})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        if not self.authorized():
            return
        srv = self.server
        try:
            raw = self.read_body()  # read before routing: keeps keep-alive in sync
            if self.path.rstrip("/") != "/retrieve":
                self.send_json(404, {"error": f"no route POST {self.path}; use POST /retrieve"})
                return
            queries, topk, scores = _parse_request(loads_strict(raw), srv.default_topk, srv.limits)
        except HTTPError as e:
            self.reply_error(e)
            return
        except ValueError as e:
            self.send_json(400, {"error": str(e)})
            return
        try:
            hits = srv.retriever.search(queries, topk)
        except Exception as e:  # report, keep serving: one bad batch must not kill the server
            log.exception("retrieval failed")
            self.send_json(500, {"error": f"retrieval failed: {type(e).__name__}: {e}"})
            return
        strip = [[{"id": h["id"], "contents": h["contents"]} for h in row] for row in hits]
        if scores:
            result = [[{"document": d, "score": h["score"]} for d, h in zip(ds, row, strict=True)]
                      for ds, row in zip(strip, hits, strict=True)]
        else:
            result = strip
        self.send_json(200, {"result": result})


def _parse_request(req: Any, default_topk: int, limits: RetrieverLimits) -> tuple[list[str], int, bool]:
    if not isinstance(req, dict):
        raise ValueError("body must be a JSON object")
    queries = req.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise ValueError("'queries' must be a list of strings")
    if len(queries) > limits.max_queries:
        raise HTTPError(413, f"{len(queries)} queries in one request; this server answers at most "
                             f"{limits.max_queries} (--max-queries): split the batch")
    topk = req.get("topk") or default_topk  # Search-R1 clients send null/0 for "the server's default"
    topk = as_int(topk, "topk", 1, limits.max_topk, flag="--max-topk")
    scores = req.get("return_scores", False)
    if not isinstance(scores, bool):
        raise ValueError(f"'return_scores' must be true or false, got {type(scores).__name__}")
    return queries, topk, scores


def check_corpus(path: str | Path) -> int:
    """Validate a corpus before indexing it: every non-blank line a JSON object with a non-empty string
    ``contents`` (the field every Search-R1 client reads) and, if present, a string or integer ``id``.
    Returns the number of documents; raises ValueError naming the file and line of the first bad row (a missing
    file: FileNotFoundError). Stricter than :func:`~gigpo.envs.search.retrieval.load_corpus`, which also joins
    ``title``/``text`` rows: a server should not silently make up the passages its clients get."""
    n = 0
    for lineno, line in corpus_lines(path):  # a line that is not UTF-8: ValueError naming file, line and byte
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: not valid JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{where}: expected a JSON object {{\"id\", \"contents\"}}, got {type(row).__name__}")
        contents = row.get("contents")
        if not isinstance(contents, str) or not contents.strip():
            got = "no 'contents'" if contents is None else f"'contents' = {json.dumps(contents)[:60]}"
            hint = " (a title/text row: write contents as '\"Title\"\\ntext')" if "text" in row else ""
            raise ValueError(f"{where}: every row needs a non-empty string 'contents'; got {got}{hint}")
        if "id" in row and (isinstance(row["id"], bool) or not isinstance(row["id"], (str, int))):
            raise ValueError(f"{where}: 'id' must be a string or an integer")
        n += 1
    if not n:
        raise ValueError(f"{path}: empty corpus (no documents)")
    return n


def build_parser() -> argparse.ArgumentParser:
    d = RetrieverLimits()
    p = OneLineParser(prog="gigpo serve-retriever", description=(
        "Serve BM25 retrieval over a JSONL corpus with Search-R1's API (POST /retrieve)."))
    p.add_argument("--corpus", required=True, help='JSONL corpus, one {"id", "contents": "\\"Title\\"\\ntext"} a line')
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only; any "
                   "other address needs --api-key)")
    p.add_argument("--api-key", default=None, metavar="KEY", help="require 'Authorization: Bearer KEY' on every "
                   "route (default: $GIGPO_API_KEY; none: no check, allowed on loopback only)")
    p.add_argument("--port", type=port_arg, default=8000, help="0-65535 (default 8000, as Search-R1; 0 = any free)")
    p.add_argument("--topk", type=positive_int_arg, default=3, help="passages per query when a request gives no topk")
    g = p.add_argument_group("per-request limits (over a limit: HTTP 400/413)")
    g.add_argument("--max-body-bytes", type=positive_int_arg, default=d.max_body_bytes,
                   help=f"largest request body (default {d.max_body_bytes})")
    g.add_argument("--max-queries", type=positive_int_arg, default=d.max_queries,
                   help=f"most queries per request (default {d.max_queries})")
    g.add_argument("--max-topk", type=positive_int_arg, default=d.max_topk,
                   help=f"largest topk a request may ask for (default {d.max_topk})")
    g.add_argument("--read-timeout", type=positive_float_arg, default=d.read_timeout_s,
                   help=f"seconds a connection may stall mid-request or sit idle (default {d.read_timeout_s:g})")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``gigpo serve-retriever`` / ``python -m gigpo.envs.search.server``; runs until Ctrl-C.

    Prints one line ``serving N passages on http://HOST:PORT/retrieve`` (flushed) once it accepts requests. A bad
    flag, port or corpus: one ``gigpo serve-retriever: error: ...`` line on stderr, exit 2, before indexing
    (the port is bound first, so a taken port does not wait for the index).
    """
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    limits = RetrieverLimits(max_body_bytes=args.max_body_bytes, max_queries=args.max_queries,
                             max_topk=args.max_topk, read_timeout_s=args.read_timeout)

    def fail(msg: str) -> int:
        print(f"gigpo serve-retriever: error: {msg}", file=sys.stderr)
        return 2

    if not args.topk <= args.max_topk:
        return fail(f"--topk {args.topk} is over --max-topk {args.max_topk}")
    try:
        api_key = api_key_from(args.api_key)
        require_key_off_loopback(args.host, api_key, "gigpo serve-retriever")
    except ValueError as e:
        return fail(str(e))
    try:
        n_docs = check_corpus(args.corpus)
    except FileNotFoundError:
        return fail(f"corpus {args.corpus}: no such file")
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return fail(f"corpus {e}" if isinstance(e, ValueError) else f"corpus {args.corpus}: {e}")

    class _Pending(Retriever):  # the index is built after binding; nothing is served before serve_forever
        def search(self, queries: list[str], topk: int) -> list:
            raise RuntimeError("index not built yet")

    try:
        server = make_server(_Pending(), args.host, args.port, args.topk, n_docs=n_docs, limits=limits,
                             api_key=api_key)
    except OSError as e:
        return fail(bind_error(e, args.host, args.port))
    try:
        server.retriever = BM25Retriever(args.corpus)
    except BaseException:
        server.server_close()
        raise
    host, port = server.server_address[:2]
    print(f"serving {n_docs} passages on http://{host}:{port}/retrieve", flush=True)
    return serve_until_interrupted(server)


if __name__ == "__main__":
    sys.exit(main())
