"""``gigpo view RUN --serve [--port P]``: the report served live on 127.0.0.1 while the run trains.

``/`` is the report, ``/data.json`` the same data re-read from disk on each request (the page polls it every
5 s and redraws only when something changed), ``/samples.json?run=I&it=N`` one iteration's samples read on
demand, so every iteration is reachable however large the run (the page embeds only what fits
``LIVE_MAX_MB``). Bound to 127.0.0.1 only: a report shows prompts and configs, never to the network; requests
whose ``Host`` is not a loopback address are refused (403: DNS rebinding), and secrets in the config are
masked as in the report file.
"""

from __future__ import annotations

import json
import logging
from urllib.parse import parse_qs, urlparse

from gigpo.httputil import HardenedHandler, HardenedHTTPServer, serve_until_interrupted
from gigpo.view.load import load_samples, sample_files
from gigpo.view.report import build_data, render, resolve

HOST = "127.0.0.1"
LIVE_MAX_MB = 5.0  #: the live page re-reads its data every few seconds: embed less, page in the rest
READ_TIMEOUT_S = 10.0  #: a connection that sends nothing for this long is closed (a browser sends at once)
log = logging.getLogger(__name__)


def make_server(paths: list[str], port: int = 0, max_mb: float = LIVE_MAX_MB) -> HardenedHTTPServer:
    """A server for ``paths`` on 127.0.0.1:``port`` (0: a free port); checks the paths first (ViewError). The
    hardened stdlib server of ``gigpo serve`` (gigpo.httputil): a deep listen backlog, a read timeout on every
    connection, and a ``Host`` check (a page on another site cannot read the run through DNS rebinding)."""
    kind, dirs = resolve(paths)
    mb = min(max_mb, LIVE_MAX_MB)

    class Handler(HardenedHandler):
        def log_message(self, fmt, *args):  # quiet: one line per request would drown the training log
            log.debug(fmt, *args)

        def _send(self, code: int, body: str, ctype: str) -> None:
            raw = body.encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(raw)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(raw)

        def do_POST(self):  # noqa: N802 - the http.server API
            self.close_connection = True  # the body is not read
            if self.authorized():
                self.send_json(405, {"error": "this server answers GET only"})

        def do_GET(self):  # noqa: N802 - the http.server API
            if not self.authorized():  # the Host check (no key on this loopback-only server)
                return
            url = urlparse(self.path)
            try:
                if url.path in ("/", "/index.html"):
                    return self._send(200, render(build_data(paths, mb, live=True)), "text/html; charset=utf-8")
                if url.path == "/data.json":
                    return self._send(200, json.dumps(build_data(paths, mb, live=True), default=str),
                                      "application/json")
                if url.path == "/samples.json" and kind == "runs":
                    q = parse_qs(url.query)
                    run, it = int(q["run"][0]), int(q["it"][0])
                    files = sample_files(dirs[run]) if 0 <= run < len(dirs) else {}
                    if it not in files:
                        return self._send(404, json.dumps({"error": f"no samples for iteration {it}"}),
                                          "application/json")
                    return self._send(200, json.dumps(load_samples(files[it])), "application/json")
                return self._send(404, json.dumps({"error": f"no route GET {url.path}"}), "application/json")
            except (KeyError, ValueError) as e:
                return self._send(400, json.dumps({"error": f"bad request: {e}"}), "application/json")
            except OSError as e:  # a run directory removed while served
                return self._send(500, json.dumps({"error": str(e)}), "application/json")

    server = HardenedHTTPServer((HOST, port), Handler)
    server.read_timeout_s = READ_TIMEOUT_S
    return server


def serve(paths: list[str], port: int, max_mb: float) -> int:
    server = make_server(paths, port, max_mb)
    print(f"gigpo view: serving http://{HOST}:{server.server_address[1]}/ (re-read live; Ctrl-C stops)", flush=True)
    return serve_until_interrupted(server)
