"""Start and stop a real vLLM OpenAI-compatible server as a subprocess, for the vLLM suite.

The server runs ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console script
fails on the CPU build, DESIGN.md) in its own process group, because vLLM forks an engine-core
and a worker process that outlive a killed API server otherwise. Its output goes to a log file
whose tail is quoted in every start failure.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

LOOPBACK = "127.0.0.1"
REQUIRE_VLLM_ENV = "EMBODIA_REQUIRE_VLLM"
"""Set to 1 by ``make test-vllm``: a missing vllm then fails the suite instead of skipping it."""

# Nothing may leave this machine: no usage statistics, no hub look-ups.
OFFLINE_ENV = {
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}
# The CPU backend reserves its KV cache up front; 1 GiB holds thousands of 512-token requests.
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}
# Native tool calls (docs/vllm.md): the server reads the Hermes <tool_call> markup the tiny
# models' Qwen-style template teaches, and decodes a forced call under its schema.
TOOL_CALL_ARGS = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")


def vllm_installed() -> bool:
    """Whether this interpreter can import vllm (without paying for the import)."""
    return importlib.util.find_spec("vllm") is not None


def vllm_required() -> bool:
    return os.environ.get(REQUIRE_VLLM_ENV) == "1"


def skip_reason() -> str | None:
    """Why the vLLM suite cannot run in this interpreter, or None when it can (or must)."""
    if vllm_installed() or vllm_required():
        return None
    return f"vllm is not installed in {sys.executable}; `make test-vllm` runs this suite in .venv-vllm"


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class VLLMServerError(RuntimeError):
    """The server did not come up (or died); the message quotes the end of its log."""


class VLLMServer:
    """A vLLM server on ``host:port`` serving one local model directory.

    ``start`` blocks until ``/health`` answers 200 (or raises :class:`VLLMServerError`);
    ``kill`` is a crash (SIGKILL to the whole process group); ``stop`` shuts down politely
    first. The port stays fixed across restarts, so a client can reconnect to the same URL.
    """

    def __init__(
        self,
        model_dir: Path | str,
        log_path: Path | str,
        *,
        python: str = sys.executable,
        host: str = LOOPBACK,
        port: int | None = None,
        max_model_len: int = 512,
        dtype: str = "float32",
        served_model_name: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.model_dir = Path(model_dir)
        if not (self.model_dir / "config.json").is_file():
            raise VLLMServerError(f"{self.model_dir} is not a model directory (no config.json)")
        self.log_path = Path(log_path)
        self.python = python
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.max_model_len = max_model_len
        self.dtype = dtype
        self.served_model_name = served_model_name or str(self.model_dir)
        self.extra_args = tuple(extra_args)
        self._process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.last_start_s = 0.0
        """Seconds the latest ``start`` took until the server answered /health."""

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API root, e.g. ``http://127.0.0.1:8000/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def command(self) -> list[str]:
        return [
            self.python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            "--served-model-name",
            self.served_model_name,
            "--dtype",
            self.dtype,
            "--gpu-memory-utilization",
            "0.1",
            "--max-model-len",
            str(self.max_model_len),
            "--host",
            self.host,
            "--port",
            str(self.port),
            # Sampling defaults come from the request, not the model's generation_config.json.
            "--generation-config",
            "vllm",
            *TOOL_CALL_ARGS,
            *self.extra_args,
        ]

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def healthy(self, timeout_s: float = 2.0) -> bool:
        """Whether ``/health`` answers 200 right now."""
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.port}/health", timeout=timeout_s) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return False

    def running_requests(self) -> float:
        """How many requests the engine is generating for now (vLLM's Prometheus gauge)."""
        with urllib.request.urlopen(f"http://{self.host}:{self.port}/metrics", timeout=5.0) as reply:
            text = reply.read().decode()
        values = [
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("vllm:num_requests_running")
        ]
        if not values:
            raise VLLMServerError("the server's /metrics has no vllm:num_requests_running gauge")
        return sum(values)

    def start(self, timeout_s: float = 600.0) -> None:
        """Launch the server and wait until it is ready; raise with its log tail if it is not."""
        if self.is_running():
            raise VLLMServerError(f"a server is already running on port {self.port} (pid {self.pid})")
        if self.healthy(timeout_s=0.5):
            raise VLLMServerError(f"something else already answers on {self.host}:{self.port}")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **OFFLINE_ENV, **CPU_ENV}
        began = time.monotonic()
        with self.log_path.open("ab") as log:
            log.write(f"\n=== start {self.starts + 1}: {' '.join(self.command())}\n".encode())
            log.flush()
            self._process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group: kill() reaches the engine too
            )
        self.starts += 1
        deadline = began + timeout_s
        while time.monotonic() < deadline:
            if not self.is_running():
                code = self._process.returncode
                self._process = None
                raise VLLMServerError(
                    f"vLLM server exited with code {code} before it was ready; log {self.log_path}:\n"
                    + self.log_tail()
                )
            if self.healthy():
                self.last_start_s = time.monotonic() - began
                return
            time.sleep(0.5)
        self.kill()
        raise VLLMServerError(
            f"vLLM server was not ready after {timeout_s:.0f} s; log {self.log_path}:\n" + self.log_tail()
        )

    def kill(self) -> None:
        """Crash the server: SIGKILL to its whole process group, then reap it."""
        self._signal_group(signal.SIGKILL)
        self._reap(timeout_s=30.0)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Shut down with SIGTERM; SIGKILL whatever is left after ``timeout_s``."""
        if self._process is None:
            return
        self._signal_group(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=timeout_s)
        # The engine processes may outlive the API server by a moment: clear the group.
        self._signal_group(signal.SIGKILL)
        self._reap(timeout_s=30.0)

    def _signal_group(self, signum: signal.Signals) -> None:
        if self._process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signum)

    def _reap(self, timeout_s: float) -> None:
        if self._process is None:
            return
        self._process.wait(timeout=timeout_s)
        self._process = None
        # The group's other members are children of the API server: once it is gone they
        # are re-parented; wait until none of them still holds the port.
        deadline = time.monotonic() + timeout_s
        while self._port_in_use() and time.monotonic() < deadline:
            time.sleep(0.2)

    def _port_in_use(self) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((self.host, self.port))
            except OSError:
                return True
            return False

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log written)"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> VLLMServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
