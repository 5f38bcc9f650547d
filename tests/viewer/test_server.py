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
    connection.putrequest("GET", path, skip_accept_encoding=True)
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
