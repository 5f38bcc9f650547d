"""The viewer's server over real sockets: the API, byte ranges for video, and no way out of
the runs folder."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from pathlib import Path
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
    assert get(base, "/api/run?id=nope")[0] == 422
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


def test_only_loopback_host_names_are_answered(base: str) -> None:
    status, _, body = get(base, "/api/runs", {"Host": "evil.example:80"})
    assert status == 421 and b"house" not in body
    assert get(base, "/files/house/long/summary.json", {"Host": "rebound.example"})[0] == 421
    port = urlsplit(base).port
    assert get(base, "/api/runs", {"Host": f"localhost:{port}"})[0] == 200


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


def test_hidden_files_and_files_linked_from_outside_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text('{"api_key": "hunter2"}')
    run = tmp_path / "runs" / "run"
    run.mkdir(parents=True)
    (run / "episodes.jsonl").write_text('{"choice": {}}\n')
    (run / ".env").write_text("TOKEN=1")
    (run / "summary.json").symlink_to(outside)
    with serving(tmp_path / "runs") as url:
        status, _, body = get(url, "/files/run/.env")
        assert status == 403 and b"TOKEN" not in body
        listing = json.loads(get(url, "/api/runs")[2])
        assert listing["runs"][0]["error"] == "summary.json links outside the runs folder"
        status, _, body = get(url, "/api/run?id=run")
        assert status == 422 and b"hunter2" not in body
