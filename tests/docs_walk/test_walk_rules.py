"""The docs walk's rules (docs/docs-test.md) on small pages of a scratch git checkout: fast, in make test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from docs_walk import runner
from docs_walk.blocks import REPOSITORY, Block, all_blocks, page_blocks
from docs_walk.runner import DocsWalk

FENCE = "```"


def _page(*blocks: tuple[str, str]) -> str:
    parts = ["# A page", ""]
    for language, body in blocks:
        parts += [f"{FENCE}{language}", textwrap.dedent(body).strip("\n"), FENCE, "", "Some prose.", ""]
    return "\n".join(parts)


def _checkout(tmp_path: Path, pages: dict[str, str], extra: dict[str, str] | None = None) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    for name, text in {**pages, **(extra or {})}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process: not gone and not a zombie nobody has reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _gone_soon(pid: int, within_s: float = 5.0) -> bool:
    """Whether ``pid`` ends within a few seconds: a signalled process takes a moment to exit."""
    deadline = time.monotonic() + within_s
    while _running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _block(text: str, language: str = "bash") -> Block:
    return Block(
        page="docs/x.md", index=1, line=1, language=language, text=textwrap.dedent(text).lstrip("\n")
    )


def test_blocks_are_the_sh_bash_and_python_fences_numbered_in_page_order(tmp_path: Path) -> None:
    page = _page(
        ("bash", "echo one"),
        ("text", "not run"),
        ("python", "print('two')"),
        ("json", '{"not": "run"}'),
        ("sh", "echo three"),
        ("", "plain"),
        ("python title=x.py", "print('four')"),
    )
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "p.md").write_text(page)
    blocks = page_blocks(tmp_path, "docs/p.md")
    assert [(b.index, b.language, b.text.strip()) for b in blocks] == [
        (1, "bash", "echo one"),
        (2, "python", "print('two')"),
        (3, "sh", "echo three"),
        (4, "python", "print('four')"),
    ]
    assert [b.test_id for b in blocks] == ["docs/p.md:1", "docs/p.md:2", "docs/p.md:3", "docs/p.md:4"]
    lines = page.split("\n")
    assert all(lines[b.line - 1].startswith(FENCE + b.language) for b in blocks)


def test_first_line_markers_and_their_reasons() -> None:
    assert _block("# needs: a CUDA GPU\nnvidia-smi\n").skip_reason() == "needs: a CUDA GPU"
    assert _block("# not run by make test-docs: the whole suite\nmake test\n").skip_reason() == (
        "not run by make test-docs: the whole suite"
    )
    served = _block("# serves http://127.0.0.1:8765/ until stopped (Ctrl-C)\nembodia view runs/\n")
    assert served.serves() == ("http://127.0.0.1:8765/", 8765) and served.skip_reason() is None
    plain = _block("embodia dsr stats\n")
    assert plain.skip_reason() is None and plain.serves() is None
    assert plain.malformed_marker() is None and plain.misplaced_markers() == []


def test_a_marker_not_on_the_first_line_or_of_no_known_form_is_reported() -> None:
    assert _block("echo hi\n# needs: a CUDA GPU\nnvidia-smi\n").misplaced_markers() == [2]
    assert _block("# needs:\nnvidia-smi\n").malformed_marker() == "# needs:"
    assert _block("# Needs a GPU\nnvidia-smi\n").malformed_marker() == "# Needs a GPU"
    assert _block("# serves http://example.com/ until stopped\nx\n").malformed_marker() is not None
    assert _block("# a comment that mentions what it needs\nx\n").malformed_marker() is None


def test_which_blocks_use_the_shared_server_the_vllm_venv_and_make() -> None:
    client = _block("embodia eval dsr --policy openai:http://127.0.0.1:8000/v1?model=tiny-chat\n")
    assert client.uses_shared_server() and client.uses_vllm_venv()
    recipe = _block(
        "# serves http://127.0.0.1:8000/v1/models until stopped\n.venv-vllm/bin/python -m x --port 8000\n"
    )
    assert not recipe.uses_shared_server() and recipe.uses_vllm_venv()
    assert not _block("embodia view runs/ --port 8001\n").uses_shared_server()
    assert _block("echo hi\nmake demo   # the demo\n").runs_make()
    assert not _block("echo make demo\n").runs_make()
    assert not _block("make = 1\n", language="python").runs_make()


def test_the_repository_pages_have_blocks_and_only_first_line_markers() -> None:
    blocks = all_blocks(REPOSITORY)
    assert {"README.md", "docs/viewer.md", "docs/vllm.md"} <= {b.page for b in blocks}
    for block in blocks:
        assert block.misplaced_markers() == [], block.test_id
        assert block.malformed_marker() is None, block.test_id


def test_a_page_runs_in_order_in_a_copy_of_the_checkout(tmp_path: Path) -> None:
    page = _page(
        ("bash", "echo made > data.txt\ntest -f pyproject.toml\ntest -x .venv/bin/python"),
        (
            "python",
            "import sys\nif __name__ == '__main__':\n    print(open('data.txt').read().strip(), sys.prefix)",
        ),
        ("sh", "cat missing.txt"),
        ("bash", "# needs: a CUDA GPU\nnvidia-smi"),
        ("bash", "test -f data.txt"),
    )
    root = _checkout(tmp_path, {"docs/p.md": page}, {"pyproject.toml": "[project]\n"})
    walk = DocsWalk(tmp_path / "walk", root=root)
    run = walk.page("docs/p.md")
    blocks = run.blocks
    # The last block first: the page's earlier blocks run before it, each once.
    assert run.outcome(blocks[4]).status == "passed"
    outcomes = [run.outcome(b) for b in blocks]
    assert [o.status for o in outcomes] == ["passed", "passed", "failed", "skipped", "passed"]
    assert run.checkout != root and (run.checkout / "data.txt").read_text() == "made\n"
    assert not (root / "data.txt").exists()
    log = (run.workdir / "blocks" / "2.log").read_text()
    assert log.split() == ["made", str(runner.running_venv())]
    assert "docs/p.md:3" in outcomes[2].message and "exited with code 1" in outcomes[2].message
    assert "missing.txt" in outcomes[2].message  # the output's tail
    assert outcomes[3].message == "needs: a CUDA GPU"
    assert run.earlier_failures(blocks[4]) == ["docs/p.md:3"]


def test_a_block_past_its_time_is_stopped_with_its_children(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = _page(("bash", "sleep 60 &\necho $! > child.pid\necho waiting\nsleep 60"))
    root = _checkout(tmp_path, {"docs/p.md": page})
    monkeypatch.setattr(runner, "BLOCK_TIMEOUT_S", 2.0)
    run = DocsWalk(tmp_path / "walk", root=root).page("docs/p.md")
    outcome = run.outcome(run.blocks[0])
    assert outcome.status == "failed" and "timed out after 2 s" in outcome.message
    assert "waiting" in outcome.message
    assert _gone_soon(int((run.checkout / "child.pid").read_text()))


def test_a_serving_block_gets_a_free_port_answers_and_is_stopped(tmp_path: Path) -> None:
    page = _page(
        (
            "bash",
            "# serves http://127.0.0.1:8765/ until stopped (Ctrl-C)\n"
            f"{sys.executable} -m http.server 8765 --bind 127.0.0.1",
        ),
        ("bash", "# serves http://127.0.0.1:8766/ until stopped\necho gone"),
    )
    root = _checkout(tmp_path, {"docs/p.md": page})
    run = DocsWalk(tmp_path / "walk", root=root).page("docs/p.md")
    served, exited = (run.outcome(b) for b in run.blocks)
    assert served.status == "passed", served.message
    script = (run.workdir / "blocks" / "1.sh").read_text()
    assert "8765" not in script  # the port it got instead is in the URL and the command alike
    assert exited.status == "failed" and "exited with code 0 before http://127.0.0.1:" in exited.message


def test_make_in_a_block_never_reinstalls_into_the_real_venv(tmp_path: Path) -> None:
    installed = runner.running_venv() / ".installed"
    if shutil.which("make") is None or not installed.exists():
        pytest.skip("needs make and a venv made by make (.venv/.installed)")
    makefile = ".venv/.installed: pyproject.toml\n\techo reinstalling; exit 1\nhello:\n\techo hi > made.txt\n"
    page = _page(("bash", "make hello"))
    root = _checkout(tmp_path, {"docs/p.md": page}, {"Makefile": makefile, "pyproject.toml": "[project]\n"})
    later = installed.stat().st_mtime + 1000
    os.utime(root / "pyproject.toml", (later, later))
    stale = DocsWalk(tmp_path / "stale", root=root).page("docs/p.md")
    outcome = stale.outcome(stale.blocks[0])
    assert outcome.status == "failed" and "older than pyproject.toml" in outcome.message
    assert not (stale.checkout / "made.txt").exists()
    os.utime(root / "pyproject.toml", (0, 0))
    fresh = DocsWalk(tmp_path / "fresh", root=root).page("docs/p.md")
    assert fresh.outcome(fresh.blocks[0]).status == "passed"
    assert (fresh.checkout / "made.txt").read_text() == "hi\n"
