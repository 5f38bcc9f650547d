"""The viewer's server over real sockets: the API, byte ranges for video, and no way out of
the runs folder."""

from __future__ import annotations

import http.client
import json
import logging
import re
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from embodia.viewer.server import serving


@pytest.fixture(scope="module")
def base(runs_root: Path) -> Iterator[str]:
    with serving(runs_root) as url:
        yield url


def get(base: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """A raw GET: the path goes out exactly as written (no client-side normalisation)."""
    netloc = urlsplit(base).netloc
    connection = http.client.HTTPConnection(netloc, timeout=10)
    connection.putrequest("GET", path, skip_host="Host" in (headers or {}), skip_accept_encoding=True)
    for key, value in (headers or {}).items():
        connection.putheader(key, value)
    connection.endheaders()
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, body


def test_the_page_and_the_api(base: str) -> None:
    status, headers, body = get(base, "/")
    assert status == 200 and headers["content-type"].startswith("text/html") and b"/app.js" in body
    # works offline: the only URL in the page's files is the SVG namespace, which is a name
    for asset in ("/", "/app.js", "/style.css"):
        text = get(base, asset)[2].decode()
        assert set(re.findall(r"https?://[^\s\"'`)]+", text)) <= {"http://www.w3.org/2000/svg"}, asset
    status, _, body = get(base, "/api/runs")
    runs = {r["id"]: r for r in json.loads(body)["runs"]}
    assert status == 200 and runs["house/long"]["kind"] == "explore"
    status, _, body = get(base, "/api/run?id=house/long")
    assert status == 200 and json.loads(body)["video"]["file"] == "episode.mp4"
    status, _, body = get(base, "/api/run?id=broken")
    assert status == 422 and "episodes.jsonl line 2 is not valid JSON" in json.loads(body)["error"]
    status, _, body = get(base, "/api/run?id=nope")
    assert status == 404 and json.loads(body)["error"].startswith("no run 'nope' under ")
    assert get(base, "/nothing-here")[0] == 404


def test_videos_stream_in_byte_ranges(base: str, runs_root: Path) -> None:
    whole = (runs_root / "house" / "long" / "episode.mp4").read_bytes()
    status, headers, body = get(base, "/files/house/long/episode.mp4")
    assert status == 200 and body == whole and headers["accept-ranges"] == "bytes"
    assert headers["content-type"] == "video/mp4"
    status, headers, body = get(base, "/files/house/long/episode.mp4", {"Range": "bytes=100-199"})
    assert status == 206 and body == whole[100:200]
    assert headers["content-range"] == f"bytes 100-199/{len(whole)}"
    status, _, body = get(base, "/files/house/long/episode.mp4", {"Range": "bytes=-50"})
    assert status == 206 and body == whole[-50:]
    assert get(base, "/files/house/long/episode.mp4", {"Range": f"bytes={len(whole)}-"})[0] == 416
    assert get(base, "/files/house/long/episode.mp4", {"Range": "pages=1-2"})[0] == 416


@pytest.mark.parametrize(
    "path",
    [
        "/files/../../../../etc/passwd",
        "/files/house/../../../../../etc/passwd",
        "/files/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/files/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
        "/files//etc/passwd",
        "/files/%2Fetc%2Fpasswd",
        "/files/house/..%5c..%5c..%5cetc%5cpasswd",
        "/files/house/long/%00episode.mp4",
        "/files/house/./long/summary.json",
    ],
)
def test_nothing_outside_the_runs_folder_can_be_read(base: str, path: str) -> None:
    status, _, body = get(base, path)
    assert status == 403 and b"root:" not in body, (path, status, body[:80])
    assert json.loads(body) == {"error": "that path is outside the runs folder"}


def test_a_link_out_of_the_runs_folder_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not serve me")
    root = tmp_path / "runs"
    (root / "run").mkdir(parents=True)
    (root / "run" / "leak.txt").symlink_to(secret)
    (root / "run" / "ok.txt").write_text("fine")
    with serving(root) as url:
        status, _, body = get(url, "/files/run/leak.txt")
        assert status == 403 and b"do not serve me" not in body
        assert get(url, "/files/run/ok.txt")[2] == b"fine"
        assert get(url, "/files/run/missing.txt")[0] == 404


def strict_json(body: bytes) -> object:
    def refuse(constant: str) -> object:
        raise AssertionError(f"{constant} is not JSON a browser can read")

    return json.loads(body, parse_constant=refuse)


def test_a_diverged_training_run_still_gives_readable_json(tmp_path: Path) -> None:
    run = tmp_path / "diverged"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 0, "loss": 1.5}\n{"step": 1, "loss": NaN, "kl": Infinity}\n')
    with serving(tmp_path) as url:
        listing = strict_json(get(url, "/api/runs")[2])
        view = strict_json(get(url, "/api/run?id=diverged")[2])
    assert listing["runs"][0]["summary"] == {"steps": 2, "step": 1, "loss": None, "kl": None}  # type: ignore[index]
    assert view["curves"]["loss"] == [[0, 1.5], [1, None]]  # type: ignore[index]


def address(base: str) -> tuple[str, int]:
    url = urlsplit(base)
    return url.hostname or "", url.port or 80


def raw(base: str, request: bytes, timeout: float = 10) -> tuple[int, bytes]:
    """The status and body of a request sent byte for byte (what http.client will not send)."""
    with socket.create_connection(address(base), timeout=timeout) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(1 << 16):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


# fmt: off
ACCEPTED_HOSTS = [
    "localhost", "localhost:{port}", "LocalHost:{port}", "127.0.0.1", "127.0.0.1:{port}", "127.1.2.3:8765",
    "127.255.255.255", "[::1]", "[::1]:{port}", "localhost:1", "localhost:65535", " localhost:{port}\t",
]
REFUSED_HOSTS = [
    "localhost:80@evil", "[::1]evil", "user@localhost", "localhost@evil", "localhost evil",
    "localhost\x00evil", "localhost\tevil",
    "evil.example", "evil.example:80", "rebound.example", "localhost.evil.example", "127.0.0.1.nip.io",
    "localhost:", "localhost:0", "localhost:65536", "localhost:99999999", "localhost:+80", "localhost:0x50",
    "localhost: 80", "localhost:８０", "localhost:80/x", "localhost/", "localhost:80:80", "localhost.",
    "::1", "[::1", "::1]", "[::2]", "[::1]:", "[::1]:x", "[0:0:0:0:0:0:0:1]",
    "127.0.0.256", "127.0.0", "127.1", "0127.0.0.1", "127.0.0.01", "128.0.0.1", "0.0.0.0", "", " ",
]
# fmt: on


@pytest.mark.parametrize("host", ACCEPTED_HOSTS)
def test_a_loopback_host_header_is_answered(base: str, host: str) -> None:
    status, _, body = get(base, "/api/runs", {"Host": host.format(port=urlsplit(base).port)})
    assert status == 200 and "house/long" in {r["id"] for r in json.loads(body)["runs"]}


@pytest.mark.parametrize("host", REFUSED_HOSTS)
def test_any_other_host_header_is_refused(base: str, host: str) -> None:
    request = f"GET /api/runs HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
    status, body = raw(base, request)
    assert status == 421 and b"house" not in body, host
    assert json.loads(body)["error"].startswith("the viewer answers only to")


def test_no_host_header_or_two_of_them_are_refused(base: str) -> None:
    netloc = urlsplit(base).netloc
    for hosts in ([], [netloc, netloc], [netloc, "evil.example"], ["evil.example", netloc]):
        lines = "".join(f"Host: {host}\r\n" for host in hosts)
        status, body = raw(base, f"GET /api/runs HTTP/1.1\r\n{lines}Connection: close\r\n\r\n".encode())
        assert status == 421 and b"house" not in body, hosts
    assert get(base, "/files/house/long/summary.json", {"Host": "rebound.example"})[0] == 421


def test_other_methods_and_odd_requests_get_json_answers(base: str) -> None:
    status, headers, body = get(base, "/files/house/long/summary.json")
    netloc = urlsplit(base).netloc
    connection = http.client.HTTPConnection(netloc, timeout=10)
    connection.request("HEAD", "/files/house/long/summary.json")
    head = connection.getresponse()
    assert head.status == 200 and head.getheader("Content-Length") == str(len(body)) and head.read() == b""
    connection.request("POST", "/api/runs", body=b"x")
    posted = connection.getresponse()
    assert posted.status == 501 and "error" in json.loads(posted.read())
    connection.close()
    assert get(base, "/files/house/" + "x" * 300)[0] == 404
    assert get(base, "/files/house/long/episode.mp4", {"Range": "bytes=" + "9" * 5000 + "-"})[0] == 416
    status, headers, _ = get(base, "/files/house/long/episode.mp4", {"Range": "bytes=999999999-"})
    assert status == 416 and headers["content-range"].startswith("bytes */")
    assert headers_of_a_file(base)["content-security-policy"] == "sandbox; default-src 'none'"


def headers_of_a_file(base: str) -> dict[str, str]:
    return get(base, "/files/house/long/summary.json")[1]


def test_hidden_files_and_files_linked_from_outside_are_refused(
    run_beside_a_secret: tuple[Path, Path],
) -> None:
    run, secret = run_beside_a_secret
    (run / ".env").write_text("TOKEN=1")
    (run / "summary.json").symlink_to(secret)
    with serving(run.parent) as url:
        status, _, body = get(url, "/files/run/.env")
        assert status == 403 and b"TOKEN" not in body
        listing = json.loads(get(url, "/api/runs")[2])
        assert listing["runs"][0]["error"] == "summary.json links outside the runs folder"
        status, _, body = get(url, "/api/run?id=run")
        assert status == 422 and b"hunter2" not in body


BAD_IDS = ["x" * 60_000, "house/" + "x" * 300, "%00", "house%00", "house/long%00", "%zz", "%ff%fe", "%",
           "%e2%82", "house/%2e%2e/house/long", "a/b/c/d/e/f", "%c0%ae%c0%ae"]  # fmt: skip


@pytest.mark.parametrize("run_id", BAD_IDS, ids=lambda i: i[:20])
def test_an_id_that_names_no_run_is_a_404_without_a_traceback(
    base: str, run_id: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    with caplog.at_level(logging.DEBUG, logger="embodia.viewer"):
        status, _, body = get(base, f"/api/run?id={run_id}")
    assert status == 404 and json.loads(body)["error"].startswith("no run ")
    assert len(body) < 500  # the id is quoted shortened, not echoed whole
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "Traceback" not in capsys.readouterr().err


def test_overlong_request_lines_and_headers_get_their_status_not_a_500(
    base: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    host = urlsplit(base).netloc
    with caplog.at_level(logging.DEBUG, logger="embodia.viewer"):
        status, body = raw(base, f"GET /api/run?id={'x' * 70_000} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        assert status == 414 and "error" in json.loads(body)
        request = f"GET /api/runs HTTP/1.1\r\nHost: {host}\r\nX-Long: {'y' * 70_000}\r\n\r\n"
        status, body = raw(base, request.encode())
        assert status == 431 and "error" in json.loads(body)
        many = "".join(f"X-{n}: {n}\r\n" for n in range(150))
        status, body = raw(base, f"GET /api/runs HTTP/1.1\r\nHost: {host}\r\n{many}\r\n".encode())
        assert status == 431 and "error" in json.loads(body)
        assert get(base, "/files/" + "x" * 60_000)[0] == 404
        assert get(base, "/files/house/long/%ff%00")[0] == 403
        assert get(base, "/api/ru%zzn")[0] == 404
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "Traceback" not in capsys.readouterr().err


def test_fifos_and_other_special_files_never_hang_the_api(
    tmp_path: Path, make_fifo: Callable[[Path], Path], within: Any
) -> None:
    for name in ("fifo", "linked", "fine"):
        (tmp_path / name).mkdir()
    make_fifo(tmp_path / "fifo" / "episodes.jsonl")
    make_fifo(tmp_path / "linked" / "pipe")
    (tmp_path / "linked" / "episodes.jsonl").symlink_to("pipe")
    (tmp_path / "fine" / "episodes.jsonl").write_text('{"choice": {}}\n')
    fifo_error = "episodes.jsonl is a FIFO (named pipe), not a regular file"
    with serving(tmp_path) as url:
        for _ in range(3):  # each request answered: none left a thread blocked behind it
            status, _, body = within(10, lambda: get(url, "/api/runs"))
            runs = {r["id"]: r["error"] for r in json.loads(body)["runs"]}
            assert status == 200 and runs == {"fifo": fifo_error, "linked": fifo_error, "fine": None}
        for name in ("fifo", "linked"):
            status, _, body = within(10, lambda name=name: get(url, f"/api/run?id={name}"))
            assert status == 422 and json.loads(body)["error"] == fifo_error
            assert within(10, lambda name=name: get(url, f"/files/{name}/episodes.jsonl"))[0] == 404
        assert within(10, lambda: get(url, "/api/run?id=fine"))[0] == 200


def test_a_client_that_stalls_is_disconnected(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    with (tmp_path / "run" / "big.bin").open("wb") as sparse:
        sparse.truncate(64 << 20)  # more than the sockets' buffers hold
    with serving(tmp_path, timeout=0.3) as url:
        with socket.create_connection(address(url), timeout=10) as idle:
            idle.sendall(b"GET /api/runs HTTP/1.1\r\nHost: loc")  # and nothing more
            assert idle.recv(100) == b""  # closed by the server, long before this socket's 10 s
        with socket.socket() as reader:
            reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            reader.settimeout(10)
            reader.connect(address(url))
            reader.sendall(
                f"GET /files/run/big.bin HTTP/1.1\r\nHost: {urlsplit(url).netloc}\r\n\r\n".encode()
            )
            time.sleep(1)  # reads nothing while the server writes
            received = 0
            while chunk := reader.recv(1 << 20):
                received += len(chunk)
        assert received < 64 << 20  # the server gave up on the stalled reader
        assert get(url, "/api/runs")[0] == 200  # and still answers everyone else


def test_an_ipv6_loopback_server_answers(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text('{"step": 0, "loss": 1.0}\n')
    with serving(tmp_path, host="::1") as url:
        assert url.startswith("http://[::1]:")
        status, _, body = get(url, "/api/runs")
    assert status == 200 and json.loads(body)["runs"][0]["id"] == "run"
