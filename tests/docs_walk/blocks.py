"""The runnable blocks of README.md and docs/*.md, and the first-line markers that change how they run.

The rules are the ones docs/docs-test.md gives readers; this module is their one implementation.
A block is a fenced code block whose info string starts with ``sh``, ``bash`` or ``python``;
any other block (``text``, ``json``, ``console``, none) is shown only. A block's first line
may be a marker:

- ``# needs: <what>``: it cannot run on a CPU-only, offline machine; it is shown, not run.
- ``# not run by make test-docs: <why>``: it could run, but not inside the docs walk (``make test``
  is the whole suite); shown, not run.
- ``# serves <url> until stopped``: it starts a server that runs until Ctrl-C; the walk runs it
  in the background, waits until ``<url>`` answers, then stops it.

A marker anywhere but the first line is an error: the reader would not see it where it matters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
RUN_LANGUAGES = ("sh", "bash", "python")
SHARED_SERVER = "127.0.0.1:8000"
"""Blocks that talk to this address get the walk's vLLM server (serving ``tiny-chat``) instead."""
SHARED_MODEL = "tiny-chat"

_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_NEEDS = re.compile(r"^# needs: (\S.*)$")
_NOT_RUN = re.compile(r"^# not run by make test-docs: (\S.*)$")
_SERVES = re.compile(r"^# serves (http://127\.0\.0\.1:(\d+)/\S*) until stopped\b")
_MARKER_LIKE = re.compile(r"^\s*#\s*(needs\b|not run by make test-docs|serves\b)", re.IGNORECASE)
_MAKE_LINE = re.compile(r"^\s*make\b", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    page: str
    """Path relative to the repository root, e.g. ``docs/dsr.md``."""
    index: int
    """1-based among the page's runnable blocks: the test id is ``page:index``."""
    line: int
    """Line of the opening fence in the page."""
    language: str
    text: str

    @property
    def test_id(self) -> str:
        return f"{self.page}:{self.index}"

    @property
    def first_line(self) -> str:
        return self.text.split("\n", 1)[0]

    def skip_reason(self) -> str | None:
        """Why the walk shows this block without running it, or None when it runs."""
        needs = _NEEDS.match(self.first_line)
        if needs:
            return f"needs: {needs.group(1)}"
        not_run = _NOT_RUN.match(self.first_line)
        if not_run:
            return f"not run by make test-docs: {not_run.group(1)}"
        return None

    def serves(self) -> tuple[str, int] | None:
        """(URL, port) of a block that serves until stopped, from its first line."""
        found = _SERVES.match(self.first_line)
        return (found.group(1), int(found.group(2))) if found else None

    def misplaced_markers(self) -> list[int]:
        """1-based lines of the block, after the first, that look like a marker."""
        lines = self.text.split("\n")
        return [number for number, line in enumerate(lines[1:], start=2) if _MARKER_LIKE.match(line)]

    def malformed_marker(self) -> str | None:
        """A first line that looks like a marker but matches none of the forms, or None."""
        if not _MARKER_LIKE.match(self.first_line):
            return None
        if self.skip_reason() is None and self.serves() is None:
            return self.first_line
        return None

    def uses_shared_server(self) -> bool:
        """A client of the walk's vLLM server: it names 127.0.0.1:8000 and serves nothing itself."""
        return SHARED_SERVER in self.text and self.serves() is None

    def uses_vllm_venv(self) -> bool:
        return self.uses_shared_server() or ".venv-vllm" in self.text

    def runs_make(self) -> bool:
        return self.language != "python" and _MAKE_LINE.search(self.text) is not None


def page_blocks(root: Path, page: str) -> list[Block]:
    """The runnable blocks of ``root/page`` in page order."""
    text = (root / page).read_text()
    blocks: list[Block] = []
    for found in _FENCE.finditer(text):
        info = found.group(1).strip().split()
        language = info[0] if info else ""
        if language not in RUN_LANGUAGES:
            continue
        blocks.append(
            Block(
                page=page,
                index=len(blocks) + 1,
                line=text.count("\n", 0, found.start()) + 1,
                language=language,
                text=found.group(2),
            )
        )
    return blocks


def doc_pages(root: Path) -> list[str]:
    """README.md first, then docs/*.md by name: the order the walk runs them in."""
    return ["README.md", *sorted(f"docs/{path.name}" for path in (root / "docs").glob("*.md"))]


def all_blocks(root: Path) -> list[Block]:
    return [block for page in doc_pages(root) for block in page_blocks(root, page)]
