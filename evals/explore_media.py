"""The pictures and video of an exploration run: ``bev.png`` (the BEV with frontiers and
regions), ``coverage.png`` (the coverage curve), ``tree.json`` and ``tree.png`` (the dfs
explorer's tree over the BEV) and ``episode.mp4`` (panorama and BEV side by side)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from embodia.core.runs import write_json

FRAME_HEIGHT = 256
"""Pixel height of a video frame: the panorama at twice that width, the BEV in a square."""


def write_tree(out: Path, env: Any, state: dict[str, Any]) -> None:
    """``tree.json`` (networkx node-link) and ``tree.png``: the tree drawn over the BEV."""
    import imageio.v3 as iio
    from PIL import Image, ImageDraw

    from embodia.agents.explorer import tree_of
    from embodia.perception.bev_image import bev_image

    tree = tree_of(state)  # type: ignore[arg-type]
    write_json(out / "tree.json", state.get("tree", {}), indent=1)
    scale = 4
    bev = env.bev
    picture = Image.fromarray(bev_image(bev, scale=scale, crop_to_explored=False, trajectory=bev.trajectory))
    draw = ImageDraw.Draw(picture)

    def pixel(position: list[float]) -> tuple[float, float]:
        row, col = bev.to_grid(np.asarray(position, dtype=np.float64))
        return (float(col) + 0.5) * scale, (float(row) + 0.5) * scale

    where = {}
    for node, data in tree.nodes(data=True):
        if data.get("kind") == "waypoint":
            where[node] = pixel(data["position"])
        elif data.get("kind") == "region":
            where[node] = pixel(data["centroid"])
    for a, b in tree.edges():
        if a in where and b in where:
            draw.line([where[a], where[b]], fill=(120, 60, 200), width=2)
    for node, (x, y) in where.items():
        data = tree.nodes[node]
        if data.get("kind") == "region":
            colour = (40, 160, 60) if data.get("status") == "open" else (200, 60, 60)
            draw.rectangle([x - 6, y - 6, x + 6, y + 6], fill=colour, outline=(0, 0, 0))
            draw.text((x + 8, y - 6), str(data.get("region")), fill=(0, 0, 0))
        else:
            draw.ellipse([x - 4, y - 4, x + 4, y + 4], fill=(250, 200, 0), outline=(0, 0, 0))
    iio.imwrite(out / "tree.png", np.asarray(picture))


def write_pictures(out: Path, env: Any, curve: list[float], summary: dict[str, Any]) -> None:
    """``bev.png`` and ``coverage.png`` (``curve``: the coverage ratio after each step)."""
    import imageio.v3 as iio
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    iio.imwrite(out / "bev.png", bev_picture(env, scale=4, with_regions=True))
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=110)
    ax.plot(np.arange(len(curve)), np.asarray(curve) * 100.0, color="#1f77b4")
    ax.set_xlabel("primitive steps")
    ax.set_ylabel("coverage (% of explorable)")
    ax.set_ylim(0, 101)
    ax.set_xlim(0, max(len(curve) - 1, 1))
    ax.grid(alpha=0.3)
    auc = summary.get("coverage_auc")
    title = f"{summary['agent']} on {summary['scene']}"
    if auc is not None:
        title += f"  (AUC {100 * float(auc):.1f}%)"
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "coverage.png")
    plt.close(fig)


def bev_picture(env: Any, scale: int = 2, with_regions: bool = False) -> NDArray[np.uint8]:
    """The env's BEV with its frontiers (and regions), the agent and its trajectory."""
    from embodia.perception.bev_image import bev_image
    from embodia.perception.regions import RegionTracker

    bev = env.bev
    frontiers = bev.frontiers()
    regions = RegionTracker().update(bev, frontiers) if with_regions else None
    image: NDArray[np.uint8] = bev_image(
        bev,
        scale=scale,
        frontiers=frontiers,
        regions=regions,
        agent=env.simulator.pose,
        trajectory=bev.trajectory,
    )
    return image


class VideoWriter:
    """MP4 of panorama | BEV frames at a fixed size (the BEV is letterboxed as it grows)."""

    def __init__(self, path: Path, fps: int = 10) -> None:
        import imageio.v2 as imageio

        self._writer = imageio.get_writer(path, fps=fps, codec="libx264", quality=7, macro_block_size=16)

    def add(self, panorama_rgb: NDArray[np.uint8], env: Any) -> None:
        from PIL import Image

        h = FRAME_HEIGHT
        resampling = Image.Resampling
        pano = Image.fromarray(np.ascontiguousarray(panorama_rgb)).resize((2 * h, h), resampling.BILINEAR)
        bev = Image.fromarray(bev_picture(env))
        box = Image.new("RGB", (h, h), (24, 24, 24))
        ratio = min(h / bev.width, h / bev.height)
        size = (max(1, int(bev.width * ratio)), max(1, int(bev.height * ratio)))
        bev = bev.resize(size, resampling.NEAREST)
        box.paste(bev, ((h - bev.width) // 2, (h - bev.height) // 2))
        frame = Image.new("RGB", (3 * h, h))
        frame.paste(pano, (0, 0))
        frame.paste(box, (2 * h, 0))
        self._writer.append_data(np.asarray(frame))

    def close(self) -> None:
        self._writer.close()
