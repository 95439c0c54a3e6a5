"""Hardening shared by gigpo's two stdlib HTTP servers (`gigpo serve`, `gigpo serve-retriever`); stdlib only.

Both servers face whatever a local (or, with ``--host``, remote) client sends, so every request goes through the
same gate: a deep listen backlog, a socket timeout on every read, a strict ``Content-Length`` with a body cap
checked before reading, strict JSON (no ``NaN``/``Infinity``, bounded nesting) and typed, bounded parameters.
Every refusal is an :class:`HTTPError` the handler turns into one 4xx reply. This module lives outside
``gigpo.serve`` because the search env's server must not import model code.
"""

from __future__ import annotations

import argparse
import hmac
import ipaddress
import json
import logging
import math
import os
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger(__name__)

#: Listen backlog. socketserver's default of 5 drops connections as soon as a few dozen clients connect at once
#: (measured: 0-84 of 100 concurrent loopback clients failed per burst); the kernel caps it at net.core.somaxconn.
BACKLOG = 1024
#: After a 413 the server still reads and discards up to this much of the refused body (never parsing or storing
#: it), within ``DRAIN_S`` seconds, so an ordinary client that sends the whole body before reading gets the 413
#: instead of a connection reset; a larger or slower body is cut off there.
DRAIN_BYTES = 64 * 1024 * 1024
DRAIN_S = 5.0
_DIGITS = re.compile(r"[0-9]{1,18}")


class HTTPError(Exception):
    """A request refused with ``status`` (4xx); ``close``: the connection cannot be reused (body left unread)."""

    def __init__(self, status: int, message: str, *, close: bool = False, drain: int = 0):
        super().__init__(message)
        self.status = status
        self.message = message
        self.close = close
        self.drain = drain  # bytes of an unread body to discard after the reply


class HardenedHTTPServer(ThreadingHTTPServer):
    """A threading server with a deep backlog, daemon handler threads, a per-connection socket timeout
    (``read_timeout_s``, read by :class:`HardenedHandler`) and one log line, not a traceback, for clients that
    hang up or time out."""

    request_queue_size = BACKLOG
    daemon_threads = True
    read_timeout_s: float = 30.0
    max_body_bytes: int = 8 * 1024 * 1024
    api_key: str | None = None  #: every request must carry ``Authorization: Bearer <api_key>`` (None: no check)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError, TimeoutError)):
            log.info("client %s went away or stalled: %s", client_address, exc)
        else:
            super().handle_error(request, client_address)


class HardenedHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive handler whose reads time out after the server's ``read_timeout_s``: a client that
    sends less than it announced, or nothing at all, loses its connection instead of holding a thread forever."""

    protocol_version = "HTTP/1.1"
    server: HardenedHTTPServer

    def setup(self) -> None:
        self.timeout = self.server.read_timeout_s  # StreamRequestHandler.setup applies it to the socket
        super().setup()

    def send_json(self, status: int, obj: Any) -> None:
        body = json.dumps(obj).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def handle_expect_100(self) -> bool:
        # A client that asks first (curl does for large bodies) is refused before it sends the body at all.
        try:
            self._content_length(self.server.max_body_bytes)
        except HTTPError as e:
            self.close_connection = True
            self.send_json(e.status, self.error_shape(e.status, e.message))
            return False
        return super().handle_expect_100()

    def authorized(self) -> bool:
        """Check the ``Host`` header of a loopback server (:func:`check_host`: 403) and the server's key
        (:func:`check_bearer`: 401) before anything else; on a refusal answer (body discarded unread, connection
        closed) and return False."""
        try:
            check_host(self.headers.get_all("Host"), self.server.server_address[0])
            check_bearer(self.headers, self.server.api_key)
        except HTTPError as e:
            length = (self.headers.get("Content-Length") or "").strip()
            e.drain = int(length) if _DIGITS.fullmatch(length) and int(length) <= self.server.max_body_bytes else 0
            self.reply_error(e)
            return False
        return True

    def error_shape(self, status: int, message: str) -> Any:
        """The JSON error body of this server (override)."""
        return {"error": message}

    def _content_length(self, max_bytes: int) -> int:
        if self.headers.get("Transfer-Encoding"):
            raise HTTPError(411, "chunked request bodies are not supported; send a Content-Length", close=True)
        values = self.headers.get_all("Content-Length") or []
        if not values:
            raise HTTPError(411, "Content-Length required", close=True)
        if len({v.strip() for v in values}) != 1 or not _DIGITS.fullmatch(values[0].strip()):
            raise HTTPError(400, f"bad Content-Length {', '.join(values)!r}: expected one non-negative integer",
                            close=True)
        length = int(values[0])
        if length > max_bytes:
            raise HTTPError(413, f"request body of {length} bytes is over this server's limit of {max_bytes} bytes "
                                 "(--max-body-bytes)", close=True, drain=length)
        return length

    def read_body(self, max_bytes: int | None = None) -> bytes:
        """The request body, exactly ``Content-Length`` bytes: missing → 411, not a plain non-negative integer
        (or repeated with different values) → 400, over ``max_bytes`` → 413 without reading it, a chunked body
        → 411, fewer bytes than announced within the read timeout → 408. Every refusal closes the connection:
        an unread body would otherwise be parsed as the next request."""
        length = self._content_length(self.server.max_body_bytes if max_bytes is None else max_bytes)
        try:
            data = self.rfile.read(length)
        except TimeoutError:
            raise HTTPError(408, f"request body not received within {self.server.read_timeout_s:g} s",
                            close=True) from None
        if len(data) != length:
            raise HTTPError(400, f"request body ended after {len(data)} of {length} bytes", close=True)
        return data

    def reply_error(self, err: HTTPError) -> None:
        """Send ``err`` in this server's error layout, then discard what it asks to drain (see ``DRAIN_BYTES``)."""
        if err.close:
            self.close_connection = True
        self.send_json(err.status, self.error_shape(err.status, err.message))
        if err.drain:
            self._discard(min(err.drain, DRAIN_BYTES))

    def _discard(self, n: int) -> None:
        deadline = time.monotonic() + DRAIN_S
        try:
            self.wfile.flush()
            while n > 0 and time.monotonic() < deadline:
                self.connection.settimeout(max(0.05, deadline - time.monotonic()))
                chunk = self.rfile.read1(min(n, 1 << 16))
                if not chunk:
                    break
                n -= len(chunk)
        except OSError:  # the client gave up first: nothing left to protect
            pass


# -------------------------------------------------------------------------------------------- who may call
#: Environment variable read when ``--api-key`` is not given (a key on the command line is visible in ``ps``).
API_KEY_ENV = "GIGPO_API_KEY"


def api_key_from(arg: str | None) -> str | None:
    """The server's key: ``--api-key``, else ``$GIGPO_API_KEY``, else None (no check). An empty or blank key is a
    ValueError (it would look like protection and be none), and so is one that is not printable ASCII: an HTTP
    header carries Latin-1 at most and clients (the openai package) send ASCII only, so such a key could never
    match."""
    key = arg if arg is not None else os.environ.get(API_KEY_ENV)
    if key is None:
        return None
    if not key.strip() or any(c.isspace() for c in key):
        raise ValueError(f"the API key (--api-key or ${API_KEY_ENV}) must be non-empty and contain no whitespace")
    if not (key.isascii() and key.isprintable()):
        raise ValueError(f"the API key (--api-key or ${API_KEY_ENV}) must be printable ASCII (it travels in an "
                         "HTTP header, which no client fills with other characters)")
    return key


#: ``Host`` names a loopback server answers to besides its loopback IP literals
LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost", "ip6-loopback"})


def host_name(header: str) -> str:
    """The host part of a ``Host`` header value: ``[::1]:8000`` -> ``::1``, ``Localhost:80`` -> ``localhost``."""
    h = header.strip().lower()
    if h.startswith("["):
        return h[1:h.find("]")] if "]" in h else h
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


def check_host(values: list[str] | None, bound: str) -> None:
    """A server bound to a loopback address answers only requests whose ``Host`` names a loopback address (or
    ``localhost``): a web page the user opens could otherwise reach it through DNS rebinding (a name of the
    attacker's that resolves to 127.0.0.1), read its data or drive it. 403, connection closed. A server bound to
    another address is protected by its API key instead; a request without ``Host`` (HTTP/1.0) does not come
    from a browser and passes."""
    if not is_loopback(bound) or not values:
        return
    for value in values:
        name = host_name(value)
        try:
            ok = ipaddress.ip_address(name).is_loopback or name == bound
        except ValueError:
            ok = name in LOOPBACK_NAMES
        if len(values) > 1 or not ok:
            raise HTTPError(403, f"Host {value[:100]!r} is not this server's address: a loopback server answers "
                                 "requests for 127.0.0.1, ::1 or localhost only (DNS rebinding refused)",
                            close=True)


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name other than localhost may resolve to anything
        return False


def require_key_off_loopback(host: str, key: str | None, prog: str) -> None:
    """A server bound to a non-loopback address must check a key: ValueError naming the flags otherwise."""
    if key is None and not is_loopback(host):
        raise ValueError(f"{prog} --host {host} is reachable from other machines: give --api-key KEY (or set "
                         f"${API_KEY_ENV}) so that only clients with the key can use it")


def check_bearer(headers: Any, key: str | None) -> None:
    """Refuse a request without ``Authorization: Bearer <key>`` (as the OpenAI API does): 401, connection closed
    (its body is not read). Compared in constant time. No key configured: every request passes."""
    if key is None:
        return
    given = headers.get("Authorization") or ""
    scheme, _, token = given.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HTTPError(401, "missing API key: send 'Authorization: Bearer <key>'", close=True)
    if not hmac.compare_digest(token.strip().encode("utf-8", "surrogateescape"), key.encode("utf-8")):
        raise HTTPError(401, "invalid API key", close=True)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (numbers must be finite)")


def loads_strict(raw: bytes) -> Any:
    """Parse a request body: UTF-8 JSON without ``NaN``/``Infinity`` and without nesting that would exhaust the
    stack; anything else → ``HTTPError(400)``."""
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError as e:
        raise HTTPError(400, f"request body is not UTF-8: {e}") from None
    except RecursionError:
        raise HTTPError(400, "request body is nested too deeply") from None
    except ValueError as e:  # JSONDecodeError and _no_constant
        raise HTTPError(400, f"request body is not JSON: {e}") from None


def as_int(value: Any, name: str, lo: int, hi: int, *, flag: str = "") -> int:
    """``value`` as an int in [lo, hi]: a JSON integer (or a float with an integral value, as some clients send);
    booleans, strings, fractions and out-of-range values raise ValueError naming ``name`` (and the server flag
    that sets ``hi``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"'{name}' must be an integer, got {type(value).__name__}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ValueError(f"'{name}' must be an integer, got {value!r}")
    v = int(value)
    if not lo <= v <= hi:
        where = f" (this server's limit; {flag})" if flag and v > hi else ""
        raise ValueError(f"'{name}' must be in [{lo}, {hi}]{where}, got {v}")
    return v


def as_float(value: Any, name: str, lo: float, hi: float, *, low_open: bool = False) -> float:
    """``value`` as a finite number in [lo, hi] (``(lo, hi]`` with ``low_open``); else ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"'{name}' must be a number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or v > hi or v < lo or (low_open and v == lo):
        raise ValueError(f"'{name}' must be in {'(' if low_open else '['}{lo:g}, {hi:g}], got {value!r}")
    return v


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, ``PROG: error: MESSAGE (see PROG --help)``, exit 2: a server
    started by a script fails with the reason, not a screenful of usage."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def port_arg(text: str) -> int:
    """argparse type of ``--port``: an integer in [0, 65535] (0 = any free port)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {text!r}: not an integer") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {port}: must be in [0, 65535] (0 = any free port)")
    return port


def positive_int_arg(text: str) -> int:
    """argparse type of a cap: an integer >= 1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v} must be >= 1")
    return v


def positive_float_arg(text: str, *, zero_ok: bool = False) -> float:
    """argparse type of a duration: a finite number > 0 (>= 0 with ``zero_ok``)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(v) and (v > 0 or (zero_ok and v == 0))):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number {'>=' if zero_ok else '>'} 0")
    return v


def nonnegative_float_arg(text: str) -> float:
    """argparse type of a wait that may be zero: a finite number >= 0."""
    return positive_float_arg(text, zero_ok=True)


def bind_error(e: OSError, host: str, port: int) -> str:
    """One line for a failed bind (port in use, address not on this machine, no permission)."""
    reason = e.strerror or str(e)
    return f"cannot listen on {host}:{port}: {reason}"


def serve_until_interrupted(server: Any, *closing: Any) -> int:
    """``server.serve_forever()`` until shut down or Ctrl-C (a KeyboardInterrupt is the way out, not an error),
    then close the socket and each of ``closing`` (callables), in order. Returns the exit code 0."""
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        for close in closing:
            close()
    return 0

