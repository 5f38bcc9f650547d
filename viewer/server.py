"""The viewer's HTTP server: the page, a JSON API over run folders, and the runs' own files.

Routes (all GET, 127.0.0.1 by default):

- ``/``, ``/app.js``, ``/style.css``: the page, shipped in the package (no external assets).
- ``/api/runs``: every run under the root with its kind, summary and any error.
- ``/api/run?id=ID``: the view model of one run (:func:`embodia.viewer.runs.view_of`); a
  malformed run answers 422 with ``{"error": ...}`` naming the file and the problem, an id
  that names no run (too long, a NUL byte, ...) 404.
- ``/files/ID/NAME``: a file of a run, with HTTP range requests, so videos stream and seek
  instead of being inlined.

Only files inside the runs root are ever served: a path is resolved (symlinks too) and
refused unless it stays under the root, and names with ``..``, absolute paths, backslashes
or NUL bytes are refused before any resolution. Only regular files are opened (a FIFO would
block a read forever), only requests whose ``Host`` is a loopback name are answered (see
:func:`loopback_host`), and a client that stops sending or reading for
:data:`REQUEST_TIMEOUT` seconds is disconnected, so no request holds a thread forever.
"""

from __future__ import annotations

import json
import logging
import math
import mimetypes
import os
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import SplitResult, parse_qs, unquote, urlsplit

from embodia.viewer.runs import NoSuchRun, RunError, discover, find, open_regular, view_of

logger = logging.getLogger(__name__)
STATIC = {
    "/": ("index.html", "text/html"),
    "/app.js": ("app.js", "text/javascript"),
    "/style.css": ("style.css", "text/css"),
}
CHUNK = 1 << 16
REQUEST_TIMEOUT = 30.0
"""Seconds a client may go without sending a request's bytes or taking the answer's (a paused
video's connection too: the browser asks again for the rest with a range request)."""


class Refused(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def safe_path(root: Path, relative: str) -> Path:
    """``root / relative`` when it names a file inside ``root``; Refused otherwise. Hidden
    names (``.env``, ``.git``) are refused too: runs never write them for the page."""
    outside = Refused(HTTPStatus.FORBIDDEN, "that path is outside the runs folder")
    if not relative or "\x00" in relative or "\\" in relative or relative.startswith("/"):
        raise outside
    parts = relative.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise outside
    if any(p.startswith(".") for p in parts):
        raise Refused(HTTPStatus.FORBIDDEN, "hidden files are not served")
    base = root.resolve()
    try:
        target = (base / relative).resolve()
        if not target.is_relative_to(base):
            raise outside
        if not target.is_file():
            raise Refused(HTTPStatus.NOT_FOUND, f"no file {relative}")
    except OSError:  # a name too long for the file system, and the like: no such file
        raise Refused(HTTPStatus.NOT_FOUND, f"no file {relative[:80]}") from None
    return target


def finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None: browsers' JSON has no such numbers (a
    diverged training run writes NaN losses)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "::1")
"""The addresses ``embodia view --host`` accepts."""
_LOOPBACK_HOST = re.compile(
    r"(?:localhost|127(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}|\[::1\])(?::([0-9]{1,5}))?",
    re.ASCII | re.IGNORECASE,
)


def loopback_host(value: str) -> bool:
    """Whether a ``Host`` header value names this machine's loopback and nothing else:
    ``localhost``, ``127.x.y.z`` (no leading zeros) or ``[::1]``, with an optional port of
    1-65535 in digits. Anything more (``localhost:80@evil``, ``[::1]evil``, a path, a bare
    ``::1``, an empty value) is refused: a name is either exactly loopback or it is not."""
    found = _LOOPBACK_HOST.fullmatch(value.strip(" \t"))  # RFC 9110 allows spaces around values
    return found is not None and (found.group(1) is None or 1 <= int(found.group(1)) <= 65535)


def _range(header: str | None, size: int) -> tuple[int, int] | None:
    """``(start, end)`` inclusive of a single ``bytes=`` range; None for the whole file."""
    if not header:
        return None
    found = re.fullmatch(r"bytes=(\d{0,18})-(\d{0,18})", header.strip())
    if not found or not (found.group(1) or found.group(2)):
        raise Refused(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE, f"bad range {header[:40]!r}")
    first, last = found.group(1), found.group(2)
    if first:
        start, end = int(first), min(int(last), size - 1) if last else size - 1
    else:
        start, end = max(0, size - int(last)), size - 1
    if start >= size or start > end:
        raise Refused(
            HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE, f"range {header[:40]!r} outside {size} bytes"
        )
    return start, end


class RunsHandler(BaseHTTPRequestHandler):
    """Answers the viewer's requests for the runs under :attr:`root` (see the module's routes);
    :func:`make_handler` makes one for a root."""

    root: Path
    """The runs folder, resolved."""
    server_version = "embodia-viewer"
    # the socket timeout of each connection: a stalled client frees its thread
    timeout = REQUEST_TIMEOUT
    _head_only = False

    def log_message(self, format: str, *args: Any) -> None:
        return  # quiet: the CLI prints the address once

    def do_HEAD(self) -> None:
        self._head_only = True
        try:
            self.do_GET()
        finally:
            self._head_only = False  # a kept-alive connection's next request has a body

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # the base class answers in HTML; the page reads JSON everywhere
        self.close_connection = True
        self._json(HTTPStatus(code), {"error": message or HTTPStatus(code).phrase})

    def _host_ok(self) -> bool:
        """Only a request with one loopback ``Host`` reaches the runs: a page elsewhere
        cannot read them by pointing its own host name at 127.0.0.1 (DNS rebinding)."""
        hosts = self.headers.get_all("Host") or []
        return len(hosts) == 1 and loopback_host(hosts[0])

    def do_GET(self) -> None:
        try:
            if not self._host_ok():
                raise Refused(
                    HTTPStatus.MISDIRECTED_REQUEST,
                    "the viewer answers only to one Host header of localhost, 127.0.0.1 or [::1]",
                )
            self._route(urlsplit(self.path))
        except Refused as refused:
            self._json(refused.status, {"error": str(refused)})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser stopped reading (a seek in a video): nothing to answer
        except TimeoutError:  # the client took nothing for REQUEST_TIMEOUT seconds
            self.close_connection = True
        except Exception as error:  # never a dropped connection: say what went wrong
            logger.exception("viewer request %s failed", self.path[:200])
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(error).__name__}: {error}"})

    def _route(self, url: SplitResult) -> None:
        """Answer the request for ``url`` from a loopback host; Refused when there is nothing
        to answer with."""
        path = unquote(url.path)
        if path in STATIC:
            name, kind = STATIC[path]
            body = resources.files("embodia.viewer").joinpath("static", name).read_bytes()
            self._send(HTTPStatus.OK, body, f"{kind}; charset=utf-8")
        elif path == "/favicon.ico":
            self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
        elif path == "/api/runs":
            self._json(
                HTTPStatus.OK, {"root": str(self.root), "runs": [r.listing() for r in discover(self.root)]}
            )
        elif path == "/api/run":
            self._run_view(parse_qs(url.query).get("id", [""])[0])
        elif path.startswith("/files/"):
            relative = path.removeprefix("/files/")
            self._file(safe_path(self.root, relative), relative[:80])
        else:
            raise Refused(HTTPStatus.NOT_FOUND, f"no page {path}")

    def _run_view(self, run_id: str) -> None:
        """The view model of run ``run_id``: 404 for no such run, 422 naming what is wrong
        with a run whose files cannot be read."""
        try:
            self._json(HTTPStatus.OK, view_of(find(self.root, run_id)))
        except NoSuchRun as error:
            self._json(HTTPStatus.NOT_FOUND, {"error": str(error)})
        except RunError as error:
            self._json(HTTPStatus.UNPROCESSABLE_ENTITY, {"id": run_id, "error": str(error)})

    def _json(self, status: HTTPStatus, value: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(finite(value), default=str, allow_nan=False).encode()
        self._send(status, body, "application/json", headers)

    def _send(
        self, status: HTTPStatus, body: bytes, kind: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if not self._head_only:
            self.wfile.write(body)

    def _file(self, target: Path, name: str) -> None:
        try:
            handle = open_regular(target, name)
        except RunError as error:  # replaced by a FIFO or the like since safe_path looked
            raise Refused(HTTPStatus.NOT_FOUND, str(error)) from None
        with handle:
            self._send_file(handle, target.name)

    def _send_file(self, handle: BinaryIO, name: str) -> None:
        size = os.fstat(handle.fileno()).st_size
        try:
            span = _range(self.headers.get("Range"), size)
        except Refused as refused:
            self._json(refused.status, {"error": str(refused)}, {"Content-Range": f"bytes */{size}"})
            return
        start, end = span if span else (0, size - 1)
        self.send_response(HTTPStatus.PARTIAL_CONTENT if span else HTTPStatus.OK)
        self.send_header("Content-Type", mimetypes.guess_type(name)[0] or "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(max(0, end - start + 1)))
        # a run's files are data: never run as a page on the viewer's origin
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", "sandbox; default-src 'none'")
        if span:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if self._head_only:
            return
        handle.seek(start)
        left = end - start + 1
        while left > 0:
            data = handle.read(min(CHUNK, left))
            if not data:
                break
            self.wfile.write(data)
            left -= len(data)


def make_handler(root: Path, request_timeout: float = REQUEST_TIMEOUT) -> type[BaseHTTPRequestHandler]:
    """A :class:`RunsHandler` for the runs under ``root``, whose connections may stall for
    ``request_timeout`` seconds."""
    resolved = root.resolve()

    class Handler(RunsHandler):
        root = resolved
        timeout = request_timeout

    return Handler


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def make_server(
    root: Path, host: str = "127.0.0.1", port: int = 0, timeout: float = REQUEST_TIMEOUT
) -> ThreadingHTTPServer:
    """A server for ``root`` bound to ``host:port`` (port 0: any free one), not yet serving;
    ``timeout`` is how long a connection may stall (:data:`REQUEST_TIMEOUT`)."""
    kind = _IPv6Server if ":" in host else ThreadingHTTPServer
    server = kind((host, port), make_handler(root, timeout))
    server.daemon_threads = True
    return server


def base_url(host: str, port: int) -> str:
    """The address a browser opens: IPv6 literals go in brackets."""
    name = f"[{host}]" if ":" in host else host
    return f"http://{name}:{port}"


@contextmanager
def serving(
    root: Path, host: str = "127.0.0.1", port: int = 0, timeout: float = REQUEST_TIMEOUT
) -> Iterator[str]:
    """Serve ``root`` in a background thread; yields the base URL."""
    server = make_server(root, host, port, timeout)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield base_url(host, server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
