"""``embodia sim``: render a scene (panorama, pinhole view, top-down map) and print what it holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from embodia.cli.root import (
    HEIGHT_HELP,
    WIDTH_HELP,
    SimOption,
    UpOption,
    bold,
    check_up,
    console,
    sim_app,
    user_errors,
)
from embodia.core.limits import check_image_size

SceneOption = Annotated[
    str,
    typer.Option(
        "--scene",
        help="A mesh file (.glb .gltf .ply .obj) or procedural:seed=N[,rooms=K].",
    ),
]


def _write_yaml(path: Path, data: dict[str, Any]) -> None:
    import yaml

    from embodia.core.runs import write_atomic

    write_atomic(path, yaml.safe_dump(data, sort_keys=False))


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
    height: Annotated[int, typer.Option(help=HEIGHT_HELP)] = 512,
    width: Annotated[int, typer.Option(help=WIDTH_HELP)] = 1024,
    up: UpOption = "auto",
    simulator: SimOption = "embedded",
) -> None:
    """Render a panorama (RGB, depth, semantics), a pinhole view, a top-down map and the scene .glb."""
    import imageio.v3 as iio

    from embodia.core.runs import check_out_folder, write_atomic
    from embodia.sim import Pose
    from embodia.sim.backends import make_simulator
    from embodia.sim.visualize import colorize_depth, colorize_semantic, navigable_image, topdown_image

    with user_errors():
        check_out_folder(out)
        check_image_size("the panorama", height, width)
        start = Pose.parse(pose) if pose is not None else None
        sim: Any = make_simulator(simulator, check_up(up))
        with console.status(f"loading {escape(scene)}"):
            agent = sim.reset(scene, start)
        out.mkdir(parents=True, exist_ok=True)
        pano = sim.panorama(height, width)
        view = sim.pinhole(256, 256, 90.0)
        embedded = simulator == "embedded"
        files = {
            "panorama_rgb.png": pano["rgb"],
            "panorama_depth.png": colorize_depth(pano["depth"]),
            "panorama_semantic.png": colorize_semantic(pano["semantic"], sim.categories),
            "pinhole_rgb.png": view["rgb"],
            "topdown.png": (
                topdown_image(sim.renderer.raycaster, sim.nav, agent)
                if embedded
                else navigable_image(sim.topdown(), agent)
            ),
        }
        for name, image in files.items():
            iio.imwrite(out / name, image)
        written = sorted(files)
        if embedded:  # habitat-sim's scene is the file it loaded
            sim.scene.export(out / "scene.glb")
            written = sorted([*files, "scene.glb"])
        config = {
            "command": "sim render",
            "scene": scene,
            "pose": None if start is None else start.as_dict(),
            "panorama": {"height": height, "width": width},
            "up": up,
            "simulator": simulator,
            "sim": {f: getattr(sim.config, f) for f in sim.config.__slots__},
        }
        _write_yaml(out / "config.yaml", config)
        summary = {
            **_scene_summary(sim, scene),
            "agent_pose": agent.as_dict(),
            "files": written,
        }
        write_atomic(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    console.print(
        f"wrote {len(files) + 1} files to {bold(out)} (navigable {summary['navigable_area_m2']:.1f} m2)"
    )


def _scene_summary(sim: Any, spec: str) -> dict[str, Any]:
    """What a loaded scene holds; from any backend the protocol's view (its categories, the
    agent's floor and navigable area), and from the embedded one its mesh and floors too."""
    from embodia.sim.simulator import EmbeddedSimulator

    if not isinstance(sim, EmbeddedSimulator):
        top = sim.topdown()
        return {
            "scene": spec,
            "simulator": "habitat",
            "floor_height": round(float(top.floor_height), 4),
            "navigable_area_m2": round(float(top.explorable_area_m2), 4),
            "categories": list(sim.categories),
        }
    scene = sim.scene
    lo, hi = scene.bounds
    return {
        "scene": scene.name,
        "simulator": "embedded",
        "source": scene.source,
        "mesh_sha256": scene.mesh_hash(),
        "triangles": int(len(scene.faces)),
        "bounds": {
            "min": [round(float(v), 4) for v in lo],
            "max": [round(float(v), 4) for v in hi],
        },
        "floor_height": round(sim.nav.floor_height, 4),
        "navigable_area_m2": round(sim.nav.navigable_area, 4),
        "floors": [
            {"height": round(height, 4), "navigable_area_m2": round(area, 4)}
            for height, area in zip(sim.nav.floors, sim.nav.floor_areas(), strict=True)
        ],
        "categories": {k: round(v, 3) for k, v in sorted(scene.present_categories().items())},
    }


@sim_app.command("info")
def sim_info(
    scene: SceneOption,
    up: UpOption = "auto",
    simulator: SimOption = "embedded",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
) -> None:
    """Print a scene's bounds, floors, navigable area and categories."""
    from embodia.sim.backends import make_simulator

    with user_errors():
        sim = make_simulator(simulator, check_up(up))
        sim.reset(scene)
        summary = _scene_summary(sim, scene)
    if as_json:
        console.print_json(json.dumps(summary))
        return
    triangles = f" ({summary['triangles']} triangles)" if "triangles" in summary else ""
    table = Table(title=f"{escape(summary['scene'])}{triangles}", show_header=False)
    if "bounds" in summary:
        table.add_row("bounds min (m)", ", ".join(f"{v:.2f}" for v in summary["bounds"]["min"]))
        table.add_row("bounds max (m)", ", ".join(f"{v:.2f}" for v in summary["bounds"]["max"]))
    table.add_row("floor height (m)", f"{summary['floor_height']:.3f}")
    table.add_row("navigable area (m2)", f"{summary['navigable_area_m2']:.2f}")
    for number, floor in enumerate(summary.get("floors", [])):
        table.add_row(
            f"floor {number}", f"at {floor['height']:.2f} m, navigable {floor['navigable_area_m2']:.2f} m2"
        )
    console.print(table)
    categories = summary["categories"]
    if isinstance(categories, dict):
        cats = Table("category", "surface area (m2)", title="categories")
        for name, area in categories.items():
            cats.add_row(escape(name), f"{area:.2f}")
    else:
        cats = Table("category", title="categories")
        for name in categories:
            cats.add_row(escape(name))
    console.print(cats)
