"""Write the README's pictures to docs/images/: small copies of what `make demo` draws.

`make docs-images` runs the demo, then this script. The copies are committed, a deliberate
exception to "no generated files", so that the repository page shows them before anyone has
run the demo; each is at most MAX_WIDTH pixels wide and a 128-colour PNG, a few tens of KB.

    python docs/make_images.py runs/demo docs/images
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from PIL import Image

MAX_WIDTH = 800
COLOURS = 128
MAX_BYTES = 80_000
"""A copy above this is an error: the README's pictures stay small (docs/docs-test.md)."""
PICTURES = (
    ("bev.png", "bev.png"),
    ("coverage.png", "coverage.png"),
    ("stream/timeline.png", "stream-timeline.png"),
)
"""(file in the demo's run folder, file in docs/images/) for each picture the README shows."""


class PictureError(Exception):
    """A picture is missing, unreadable or too large after shrinking."""


def shrink(source: Path, target: Path, max_width: int = MAX_WIDTH) -> None:
    """Write ``source`` to ``target`` at most ``max_width`` wide, flattened on white, in COLOURS colours."""
    try:
        with Image.open(source) as opened:
            image = opened.convert("RGBA")
    except FileNotFoundError as exc:
        raise PictureError(f"{source} does not exist: run make demo first (make docs-images does)") from exc
    except OSError as exc:
        raise PictureError(f"{source} is not an image PIL can read: {exc}") from exc
    flat = Image.new("RGBA", image.size, "white")
    flat.alpha_composite(image)
    picture = flat.convert("RGB")
    if picture.width > max_width:
        height = max(1, round(picture.height * max_width / picture.width))
        picture = picture.resize((max_width, height), Image.Resampling.LANCZOS)
    target.parent.mkdir(parents=True, exist_ok=True)
    picture.quantize(colors=COLOURS, dither=Image.Dither.NONE).save(target, optimize=True)
    size = target.stat().st_size
    if size > MAX_BYTES:
        raise PictureError(f"{target} is {size} bytes after shrinking, over the {MAX_BYTES} allowed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("run", type=Path, help="the demo's run folder (runs/demo)")
    parser.add_argument("out", type=Path, help="where the copies go (docs/images)")
    args = parser.parse_args(argv)
    try:
        for source, target in PICTURES:
            shrink(args.run / source, args.out / target)
    except PictureError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
