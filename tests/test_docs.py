"""What the README and docs tell a newcomer to run: the venv, the demo's last line, the vLLM recipe."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ACTIVATE = "source .venv/bin/activate"


def _fenced_blocks(text: str, language: str) -> list[tuple[int, str]]:
    """(offset after the closing fence, body) of each ```language block."""
    pattern = re.compile(rf"^```{language}\n(.*?)^```\n", re.MULTILINE | re.DOTALL)
    return [(m.end(), m.group(1)) for m in pattern.finditer(text)]


def test_readme_says_to_activate_the_venv_before_any_embodia_command() -> None:
    readme = (ROOT / "README.md").read_text()
    two_commands = readme.index("## Two commands")
    section_end = readme.index("\n## ", two_commands)
    blocks = [(e, b) for e, b in _fenced_blocks(readme, "bash") if two_commands < e < section_end]
    bodies = "".join(body for _, body in blocks)
    assert "make demo" in bodies and "make test" in bodies
    end = blocks[-1][0]
    next_paragraph = readme[end:].lstrip("\n").split("\n\n")[0]
    assert ACTIVATE in next_paragraph
    first_command = re.search(r"(^|`)embodia (explore|eval|sim|dsr|stream|sxs|view)\b", readme, re.MULTILINE)
    assert first_command is not None and first_command.start() > end


def test_readme_points_only_inside_the_repository() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "../" not in readme
    for doc in set(re.findall(r"`(docs/[\w.-]+\.md)`", readme)):
        assert (ROOT / doc).is_file(), doc


def test_benchmarks_doc_says_to_activate_before_its_first_command() -> None:
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    assert ACTIVATE in text[: text.index("Command:")]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_demo_ends_by_saying_where_the_runs_are_and_how_to_view_them() -> None:
    # make -n prints the demo's recipe without running it; its last line is what the user reads last.
    recipe = subprocess.run(
        ["make", "-n", "--no-print-directory", "demo"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    last = recipe.splitlines()[-1]
    assert last.startswith("echo ")
    printed = subprocess.run(["sh", "-c", last], capture_output=True, text=True, check=True).stdout
    assert "runs/demo/" in printed and ACTIVATE in printed and "embodia view runs/" in printed


def _requirements(pip_line: str) -> list[str]:
    words = shlex.split(pip_line)
    return words[words.index("install") + 1 :]


def test_vllm_install_list_is_the_makefiles() -> None:
    makefile = (ROOT / "Makefile").read_text()
    pin = re.search(r"^VLLM_PIN := (.+)$", makefile, re.MULTILINE)
    installs = re.search(
        r"^\t\$\(VLLM_BIN\)/python -m pip install --quiet ('\$\(VLLM_PIN\)'.*)$", makefile, re.M
    )
    assert pin is not None and installs is not None
    wanted = _requirements("install " + installs.group(1).replace("$(VLLM_PIN)", pin.group(1)))
    doc = (ROOT / "docs" / "vllm.md").read_text()
    documented = [
        _requirements(line)
        for _, body in _fenced_blocks(doc, "sh")
        for line in body.splitlines()
        if "pip install" in line and "--no-deps" not in line
    ]
    assert documented == [wanted]
    assert "rapidfuzz>=3.5" in wanted


def test_vllm_offline_snippet_builds_no_engine_when_a_worker_imports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # vLLM's worker processes import the user's script as __mp_main__: the snippet must not start
    # an engine then. As __main__ it does start one, and fails here, where models/tiny-chat was never built.
    import runpy

    from embodia.policies import PolicyError

    doc = (ROOT / "docs" / "vllm.md").read_text()
    snippets = [body for _, body in _fenced_blocks(doc, "python") if "VLLMOfflinePolicy(" in body]
    assert len(snippets) == 1
    script = tmp_path / "offline.py"
    script.write_text(snippets[0])
    monkeypatch.chdir(tmp_path)  # where no models/tiny-chat was built
    namespace = runpy.run_path(str(script), run_name="__mp_main__")
    assert "policy" not in namespace
    with pytest.raises(PolicyError, match="no model directory at models/tiny-chat"):
        runpy.run_path(str(script), run_name="__main__")


IMAGE_LINK = re.compile(r"!\[[^\]]*\]\(([^)\s]+)[^)]*\)|<img\s[^>]*src=\"([^\"]+)\"")
IMAGES_BUDGET_BYTES = 300_000


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _tracked(under: str) -> set[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to tell tracked files")
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--", under], capture_output=True, text=True)
    return set(listed.stdout.split())


def test_every_image_a_page_shows_is_a_tracked_file_under_docs() -> None:
    # The repository page renders these from the clone: a link into runs/ (git-ignored) is broken there.
    tracked = _tracked("docs")
    links = []
    for page in _pages():
        for match in IMAGE_LINK.finditer(page.read_text()):
            target = match.group(1) or match.group(2)
            assert "://" not in target, f"{page.name} shows a remote image {target}"
            resolved = (page.parent / target).resolve()
            assert resolved.is_relative_to(ROOT / "docs"), f"{page.name}: {target} is not under docs/"
            assert resolved.relative_to(ROOT).as_posix() in tracked, f"{page.name}: {target} is not tracked"
            links.append(target)
    assert "docs/images/bev.png" in links


def test_docs_images_stay_small() -> None:
    images = [ROOT / name for name in _tracked("docs/images")]
    assert images
    assert sum(image.stat().st_size for image in images) < IMAGES_BUDGET_BYTES


def test_make_images_writes_small_copies_and_names_a_missing_picture(tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image, ImageDraw

    run = tmp_path / "runs" / "demo"
    (run / "stream").mkdir(parents=True)
    sizes = {"bev.png": (1600, 1000), "coverage.png": (600, 400), "stream/timeline.png": (1200, 184)}
    for name, size in sizes.items():
        picture = Image.new("RGBA", size, (0, 0, 0, 0))  # transparent: flattened on white
        draw = ImageDraw.Draw(picture)
        for left in range(0, size[0] - 40, 60):  # flat areas in a few colours, like the demo's plots
            draw.rectangle([left, 10, left + 40, size[1] // 2], fill=(left % 256, 90, 200, 255))
        picture.save(run / name)
    out = tmp_path / "images"
    script = ROOT / "docs" / "make_images.py"
    done = subprocess.run([sys.executable, str(script), str(run), str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    expected = {"bev.png": (800, 500), "coverage.png": (600, 400), "stream-timeline.png": (800, 123)}
    for name, size in expected.items():
        with Image.open(out / name) as copy:
            assert copy.size == size and copy.mode == "P"
            assert copy.convert("RGB").getpixel((0, size[1] - 1)) == (255, 255, 255)
        assert (out / name).stat().st_size < 80_000
    noise = np.random.default_rng(0).integers(0, 256, (1000, 1600, 3), dtype=np.uint8)
    Image.fromarray(noise).save(run / "bev.png")  # no palette keeps this small
    too_big = subprocess.run(
        [sys.executable, str(script), str(run), str(out)], capture_output=True, text=True
    )
    assert too_big.returncode == 2 and "bytes after shrinking, over the 80000 allowed" in too_big.stderr
    (run / "bev.png").unlink()
    missing = subprocess.run(
        [sys.executable, str(script), str(run), str(out)], capture_output=True, text=True
    )
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"error: {run / 'bev.png'} does not exist: run make demo first (make docs-images does)"
    ]


OUTSIDE_THE_REPOSITORY = re.compile(r"\.\./shared|(?<![\w.~-])/(?:work|root)/")
"""A sibling folder of the checkout, or an absolute path on the machine it was written on."""


def test_nothing_outside_tests_points_outside_the_repository() -> None:
    # A clone has neither ../shared nor this machine's /work or /root: the README, the docs,
    # the docstrings and the build files must state what they need instead of pointing there.
    # (tests/ may read ../shared/data, skipping when it is absent.)
    files = sorted(
        name
        for name in _tracked(".")
        if not name.startswith("tests/")
        and (name.endswith((".py", ".md", ".toml")) or name.rsplit("/", 1)[-1] == "Makefile")
    )
    assert "README.md" in files and "pyproject.toml" in files and "envs/registry.py" in files
    found = [
        f"{name}:{number}: {line.strip()}"
        for name in files
        for number, line in enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE_THE_REPOSITORY.search(line)
    ]
    assert found == []


@pytest.mark.parametrize(
    ("line", "points_outside"),
    [
        ("see ../shared/DESIGN.md", True),
        ("Definitions (``/work/shared/reference/active-mapping.md``)", True),
        ("cached under /root/.cache", True),
        ("cd /work/main && make", True),
        ("the sandbox mounts no ``/etc``, ``/root``, ``/proc``", False),
        ("https://github.com/example/work/blob/main/x.py", False),
        ("runs/work/summary.json and ~/work/notes", False),
        ("the network/root node", False),
    ],
)
def test_the_outside_pattern_tells_machine_paths_from_ordinary_text(line: str, points_outside: bool) -> None:
    assert bool(OUTSIDE_THE_REPOSITORY.search(line)) is points_outside
