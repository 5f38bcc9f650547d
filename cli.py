"""The ``embodia`` command line.

Bad input (a missing file, an unknown format, a malformed pose, a mesh with no floor)
ends with exit code 2 and one ``error:`` line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from embodia.errors import EmbodiaError

app = typer.Typer(
    help="embodia: embodied and multimodal agents (simulators, mapping, VLM policies).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
sim_app = typer.Typer(help="The embedded simulator: render and inspect scenes.", no_args_is_help=True)
app.add_typer(sim_app, name="sim")

console = Console()
err_console = Console(stderr=True)

SceneOption = Annotated[
    str,
    typer.Option(
        "--scene",
        help="A mesh file (.glb .gltf .ply .obj) or procedural:seed=N[,rooms=K].",
    ),
]
UpOption = Annotated[
    str,
    typer.Option("--up", help="Up axis of a mesh file: auto (stage config / habitat default), y or z."),
]


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn library errors a user caused into one line and exit code 2."""
    try:
        yield
    except EmbodiaError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@app.callback()
def _root(
    log_level: Annotated[str, typer.Option("--log-level", help="Python logging level.")] = "WARNING",
) -> None:
    from rich.logging import RichHandler

    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        err_console.print(f"[bold red]error:[/] unknown log level {log_level!r}")
        raise typer.Exit(2)
    logging.basicConfig(level=level, handlers=[RichHandler(console=err_console)], format="%(message)s")


def _check_up(up: str) -> Any:
    if up not in ("auto", "y", "z"):
        raise EmbodiaError(f"invalid --up {up!r}: expected auto, y or z")
    return up


def _write_yaml(path: Path, data: dict[str, Any]) -> None:
    import yaml

    path.write_text(yaml.safe_dump(data, sort_keys=False))


@sim_app.command("render")
def sim_render(
    scene: SceneOption,
    out: Annotated[Path, typer.Option("--out", help="Run directory to write into.")],
    pose: Annotated[
        str | None,
        typer.Option(
            "--pose",
            help="Agent floor point and heading: x,y,z,yaw_deg (default: most open point).",
        ),
    ] = None,
    height: Annotated[int, typer.Option(help="Panorama height in pixels.")] = 512,
    width: Annotated[int, typer.Option(help="Panorama width in pixels.")] = 1024,
    up: UpOption = "auto",
) -> None:
    """Render a panorama (RGB, depth, semantics), a pinhole view, a top-down map and the scene .glb."""
    import imageio.v3 as iio

    from embodia.envs.sim import EmbeddedSimulator, Pose
    from embodia.envs.sim.visualize import colorize_depth, colorize_semantic, topdown_image

    with user_errors():
        if height <= 0 or width <= 0:
            raise EmbodiaError(f"panorama size must be positive, got {height}x{width}")
        start = Pose.parse(pose) if pose is not None else None
        sim = EmbeddedSimulator(up=_check_up(up))
        with console.status(f"loading {scene}"):
            agent = sim.reset(scene, start)
        out.mkdir(parents=True, exist_ok=True)
        pano = sim.panorama(height, width)
        view = sim.pinhole(256, 256, 90.0)
        files = {
            "panorama_rgb.png": pano["rgb"],
            "panorama_depth.png": colorize_depth(pano["depth"]),
            "panorama_semantic.png": colorize_semantic(pano["semantic"], sim.categories),
            "pinhole_rgb.png": view["rgb"],
            "topdown.png": topdown_image(sim.renderer.raycaster, sim.nav, agent),
        }
        for name, image in files.items():
            iio.imwrite(out / name, image)
        sim.scene.export(out / "scene.glb")
        config = {
            "command": "sim render",
            "scene": scene,
            "pose": None if start is None else start.as_dict(),
            "panorama": {"height": height, "width": width},
            "up": up,
            "sim": {f: getattr(sim.config, f) for f in sim.config.__slots__},
        }
        _write_yaml(out / "config.yaml", config)
        summary = {
            **_scene_summary(sim),
            "agent_pose": agent.as_dict(),
            "files": sorted([*files, "scene.glb"]),
        }
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    console.print(
        f"wrote {len(files) + 1} files to [bold]{out}[/] (navigable {summary['navigable_area_m2']:.1f} m2)"
    )


def _scene_summary(sim: Any) -> dict[str, Any]:
    scene = sim.scene
    lo, hi = scene.bounds
    return {
        "scene": scene.name,
        "source": scene.source,
        "mesh_sha256": scene.mesh_hash(),
        "triangles": int(len(scene.faces)),
        "bounds": {
            "min": [round(float(v), 4) for v in lo],
            "max": [round(float(v), 4) for v in hi],
        },
        "floor_height": round(sim.nav.floor_height, 4),
        "navigable_area_m2": round(sim.nav.navigable_area, 4),
        "categories": {k: round(v, 3) for k, v in sorted(scene.present_categories().items())},
    }


@sim_app.command("info")
def sim_info(
    scene: SceneOption,
    up: UpOption = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
) -> None:
    """Print a scene's bounds, navigable area and categories."""
    from embodia.envs.sim import EmbeddedSimulator

    with user_errors():
        sim = EmbeddedSimulator(up=_check_up(up))
        sim.reset(scene)
        summary = _scene_summary(sim)
    if as_json:
        console.print_json(json.dumps(summary))
        return
    table = Table(title=f"{summary['scene']} ({summary['triangles']} triangles)", show_header=False)
    table.add_row("bounds min (m)", ", ".join(f"{v:.2f}" for v in summary["bounds"]["min"]))
    table.add_row("bounds max (m)", ", ".join(f"{v:.2f}" for v in summary["bounds"]["max"]))
    table.add_row("floor height (m)", f"{summary['floor_height']:.3f}")
    table.add_row("navigable area (m2)", f"{summary['navigable_area_m2']:.2f}")
    console.print(table)
    cats = Table("category", "surface area (m2)", title="categories")
    for name, area in summary["categories"].items():
        cats.add_row(name, f"{area:.2f}")
    console.print(cats)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
