"""Run the blocks of one docs page in order, in a fresh copy of the checkout (docs/docs-test.md).

Each page gets its own copy of the repository's files (what ``git ls-files`` lists, tracked and
untracked-but-not-ignored, modification times kept) with ``.venv`` and ``.venv-vllm`` linked to
the real environments: the reader runs these commands from their checkout's root, after
``source .venv/bin/activate``. Python blocks run as script files kept outside that folder, so
``if __name__ == "__main__"`` guards work and the checkout's top-level modules shadow nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from docs_walk.blocks import REPOSITORY, SHARED_MODEL, SHARED_SERVER, Block, page_blocks
from vllm_suite.server import OFFLINE_ENV, VLLMServer, VLLMServerError, free_port, vllm_required

BLOCK_TIMEOUT_S = 300.0
SERVER_MAX_MODEL_LEN = 4096
"""The shared server's context, as in docs/vllm.md's CPU recipe."""
OUTPUT_TAIL_LINES = 40
# Variables of an enclosing `make test-docs` that would change how a block's own `make` behaves.
_MAKE_ENV = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")


class WalkSetupError(RuntimeError):
    """The walk cannot prepare a page (no venv, not a git checkout)."""


def running_venv() -> Path:
    """The venv whose Python runs the walk: the blocks' ``.venv``."""
    if sys.prefix == sys.base_prefix:
        raise WalkSetupError(f"{sys.executable} is not a venv's Python: run the walk with make test-docs")
    return Path(sys.prefix)


def vllm_venv() -> Path:
    """``.venv-vllm`` beside the running venv, as ``make test-vllm`` lays them out in the checkout."""
    return running_venv().parent / ".venv-vllm"


def checkout_files(root: Path) -> list[str]:
    """The checkout's files as a fresh clone (plus uncommitted work) has them, without venvs."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise WalkSetupError(f"cannot list the checkout's files with git in {root}: {exc}") from exc
    names = [name for name in listed.decode().split("\0") if name]
    return [
        name for name in names if not name.split("/", 1)[0].startswith(".venv") and (root / name).is_file()
    ]


def copy_checkout(root: Path, target: Path) -> None:
    for name in checkout_files(root):
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        # copy2 keeps modification times: make compares them (.venv/.installed vs pyproject.toml).
        shutil.copy2(root / name, destination, follow_symlinks=False)
    (target / ".venv").symlink_to(running_venv())
    if vllm_venv().is_dir():
        (target / ".venv-vllm").symlink_to(vllm_venv())


def block_env() -> dict[str, str]:
    """The environment of a shell after ``source .venv/bin/activate``, offline."""
    env = {key: value for key, value in os.environ.items() if key not in _MAKE_ENV}
    env.pop("PYTHONHOME", None)
    venv = running_venv()
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.update(OFFLINE_ENV)
    return env


def tail(text: str, lines: int = OUTPUT_TAIL_LINES) -> str:
    return "\n".join(text.rstrip("\n").split("\n")[-lines:])


@dataclass
class Outcome:
    status: str
    """"passed", "failed" or "skipped"."""
    message: str = ""
    seconds: float = 0.0


class SharedServer:
    """The vLLM server of blocks that name 127.0.0.1:8000: started on first use, once a session.

    It serves the tiny random-weight chat model under the name ``tiny-chat`` on a free port; the
    walk rewrites 127.0.0.1:8000 in a block's text to that port. A failed start is remembered,
    so every later block reports the same error instead of waiting for another start.
    """

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._server: VLLMServer | None = None
        self._error: str | None = None

    def unavailable_reason(self) -> str | None:
        """Why the server cannot exist here (no .venv-vllm), or None."""
        python = vllm_venv() / "bin" / "python"
        if python.exists():
            return None
        return f"needs {python} for the vLLM server at {SHARED_SERVER} (make test-vllm builds .venv-vllm)"

    def address(self) -> str:
        """``127.0.0.1:PORT`` of the running server, starting it the first time."""
        if self._error is not None:
            raise VLLMServerError(self._error)
        if self._server is None:
            try:
                self._server = self._start()
            except (VLLMServerError, OSError) as exc:
                self._error = f"the docs walk's vLLM server did not start: {exc}"
                raise VLLMServerError(self._error) from exc
        return f"{self._server.host}:{self._server.port}"

    def _start(self) -> VLLMServer:
        # torch + transformers: only when a block needs it
        from embodia.policies.tiny_models import build_tiny_chat_lm

        model = build_tiny_chat_lm(self.workdir / SHARED_MODEL, seed=0)
        server = VLLMServer(
            model,
            self.workdir / "vllm-server.log",
            python=str(vllm_venv() / "bin" / "python"),
            served_model_name=SHARED_MODEL,
            max_model_len=SERVER_MAX_MODEL_LEN,
        )
        server.start(timeout_s=BLOCK_TIMEOUT_S)
        return server

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


@dataclass
class PageRun:
    """One page's scratch checkout and the outcome of each block run so far."""

    root: Path
    workdir: Path
    blocks: list[Block]
    server: SharedServer
    outcomes: dict[int, Outcome] = field(default_factory=dict)

    @property
    def checkout(self) -> Path:
        return self.workdir / "checkout"

    def outcome(self, block: Block) -> Outcome:
        """Run the page's blocks up to ``block`` (each at most once) and return ``block``'s outcome."""
        if not self.checkout.exists():
            copy_checkout(self.root, self.checkout)
            (self.workdir / "blocks").mkdir()
        for earlier in self.blocks[: block.index]:
            if earlier.index not in self.outcomes:
                began = time.monotonic()
                result = self._run(earlier)
                result.seconds = time.monotonic() - began
                self.outcomes[earlier.index] = result
        return self.outcomes[block.index]

    def earlier_failures(self, block: Block) -> list[str]:
        return [
            self.blocks[index - 1].test_id
            for index, result in sorted(self.outcomes.items())
            if index < block.index and result.status == "failed"
        ]

    def _run(self, block: Block) -> Outcome:
        reason = block.skip_reason()
        if reason is not None:
            return Outcome("skipped", reason)
        text = block.text
        if block.uses_vllm_venv():
            unavailable = self.server.unavailable_reason()
            if unavailable is not None:
                if vllm_required():
                    return Outcome("failed", f"{unavailable}, and EMBODIA_REQUIRE_VLLM=1")
                return Outcome("skipped", unavailable)
        if block.uses_shared_server():
            try:
                text = text.replace(SHARED_SERVER, self.server.address())
            except VLLMServerError as exc:
                return Outcome("failed", f"{self._describe(block, text)}\n{exc}")
        if block.runs_make():
            stale = self._stale_venv()
            if stale is not None:
                return Outcome("failed", stale)
        served = block.serves()
        if served is not None:
            url, port = served
            # A port of its own, wherever the block names it (the URL, --port N), so that nothing
            # else listening on the documented port can answer for it.
            number = re.compile(rf"(?<![\d.]){port}(?!\d)")
            mine = str(free_port())
            return self._serve(block, number.sub(mine, text), number.sub(mine, url))
        return self._run_to_end(block, text)

    def _command(self, block: Block, text: str) -> tuple[list[str], Path]:
        suffix = ".py" if block.language == "python" else ".sh"
        script = self.workdir / "blocks" / f"{block.index}{suffix}"
        script.write_text(text)
        if block.language == "python":
            return [str(running_venv() / "bin" / "python"), str(script)], script.with_suffix(".log")
        return ["bash", "-e", str(script)], script.with_suffix(".log")

    def _describe(self, block: Block, text: str) -> str:
        return (
            f"{block.test_id} ({block.language} block at line {block.line}), run in {self.checkout}:\n{text}"
        )

    def _start(self, command: list[str], log: IO[str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            command,
            cwd=self.checkout,
            env=block_env(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopping it stops its children too
        )

    def _run_to_end(self, block: Block, text: str) -> Outcome:
        command, log_path = self._command(block, text)
        with log_path.open("w") as log:
            process = self._start(command, log)
            try:
                code = process.wait(timeout=BLOCK_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                return Outcome(
                    "failed",
                    f"{self._describe(block, text)}\ntimed out after {BLOCK_TIMEOUT_S:.0f} s; "
                    f"output (stdout and stderr) tail:\n{tail(log_path.read_text(errors='replace'))}",
                )
            finally:
                # What the block left running in the background goes with it.
                _stop_group(process)
        if code != 0:
            return Outcome(
                "failed",
                f"{self._describe(block, text)}\nexited with code {code}; "
                f"output (stdout and stderr) tail:\n{tail(log_path.read_text(errors='replace'))}",
            )
        return Outcome("passed")

    def _serve(self, block: Block, text: str, url: str) -> Outcome:
        """Start a block that serves until stopped, wait until ``url`` answers 200, then stop it."""
        command, log_path = self._command(block, text)
        with log_path.open("w") as log:
            process = self._start(command, log)
            try:
                problem = _wait_for_answer(process, url, BLOCK_TIMEOUT_S)
            finally:
                _stop_group(process)
        if problem is None:
            return Outcome("passed")
        return Outcome(
            "failed",
            f"{self._describe(block, text)}\n{problem}; output (stdout and stderr) tail:\n"
            f"{tail(log_path.read_text(errors='replace'))}",
        )

    def _stale_venv(self) -> str | None:
        """Why running make in the copy would reinstall into the real venv, or None when it would not.

        ``.venv/.installed`` older than pyproject.toml makes ``make`` run ``pip install -e .`` from
        the current folder, which would point the user's venv at this scratch copy.
        """
        question = subprocess.run(
            ["make", "-q", ".venv/.installed"], cwd=self.checkout, env=block_env(), capture_output=True
        )
        if question.returncode == 0:
            return None
        if question.returncode == 1:
            return (
                f"{running_venv()}/.installed is older than pyproject.toml: make here would reinstall "
                "embodia into that venv from the walk's copy; bring the venv up to date in the checkout "
                "first (make test-fast)"
            )
        return f"make -q .venv/.installed failed: {question.stderr.decode(errors='replace')}"


class DocsWalk:
    """A session's pages, each run in a scratch checkout of its own, and the one shared server."""

    def __init__(self, workdir: Path, root: Path = REPOSITORY) -> None:
        self.workdir = workdir
        self.root = root
        self.server = SharedServer(workdir / "server")
        self.pages: dict[str, PageRun] = {}

    def page(self, name: str) -> PageRun:
        if name not in self.pages:
            workdir = self.workdir / name.replace("/", "_")
            workdir.mkdir(parents=True)
            self.pages[name] = PageRun(self.root, workdir, page_blocks(self.root, name), self.server)
        return self.pages[name]

    def close(self) -> None:
        self.server.close()


def _wait_for_answer(process: subprocess.Popen[bytes], url: str, timeout_s: float) -> str | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return f"exited with code {process.returncode} before {url} answered"
        try:
            with urllib.request.urlopen(url, timeout=2.0) as reply:
                if reply.status == 200:
                    return None
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        time.sleep(0.5)
    return f"{url} did not answer 200 within {timeout_s:.0f} s"


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the block's process group, then SIGKILL what is left of it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=15.0)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
