"""Tools an exploring agent can call: walk to a waypoint, ask about the map, look some way,
and recall where a kind of object was seen."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from embodia.perception.regions import Region
from embodia.perception.views import panorama_view
from embodia.perception.waypoints import WaypointCandidate
from embodia.tools.base import Tool, ToolBox, ToolImage, object_schema

LOOK_SIZE = 128
"""Pixels on a side of a ``look`` view."""
LOOK_HFOV_DEG = 90.0
"""Horizontal field of view of a ``look`` view, in degrees."""


def exploration_tools(
    env: Any,
    regions: list[Region] | None = None,
    *,
    walk: Callable[[WaypointCandidate], Any] | None = None,
) -> ToolBox:
    """Tools over an ``ActiveMappingWaypointEnv`` (unwrapped), as it stands now:
    ``goto_waypoint`` (its index bounded by the waypoints drawn, so a constrained decoder
    cannot pick one that is not there), ``describe_map``, ``look`` (a perspective view out of
    the panorama, some degrees clockwise from the heading) and ``recall`` (the regions whose
    objects include a category). Made again for each decision, as the waypoints change.

    ``walk`` replaces what ``goto_waypoint`` does with a valid waypoint (by default: walk the env
    there). An agent graph that walks in a node of its own passes one that records the choice.
    """

    def goto_waypoint(index: int) -> dict[str, Any]:
        candidates = env.candidates
        if not 0 <= index < len(candidates):
            raise ValueError(
                f"waypoint {index} is not on the image (numbers shown: 0..{len(candidates) - 1})"
            )
        c = candidates[index]
        if walk is not None:
            return walk(c)
        _, reward, terminated, truncated, info = env.step_to_point(c.point)
        return {
            "reached": bool(info["reached"]),
            "newly_covered_m2": round(float(reward), 3),
            "steps_left": env.remaining_steps,
            "done": bool(terminated or truncated),
        }

    def describe_map() -> dict[str, Any]:
        info = env._info()
        return {
            "coverage_percent": round(100 * info["coverage_ratio"], 1),
            "steps_left": env.remaining_steps,
            "frontiers": len(env.bev.frontiers()),
            "regions": [
                {
                    "id": r.id,
                    "area_m2": round(r.area_m2, 1),
                    "objects": [name for name, _ in r.categories],
                    "unexplored_edges": len(r.frontiers),
                }
                for r in (regions or [])
            ],
        }

    def look(direction_deg: float) -> ToolImage:
        panorama = env.panorama
        view = panorama_view(
            np.asarray(panorama["rgb"], dtype=np.uint8),
            np.asarray(panorama["semantic"]),
            direction_deg,
            hfov_deg=LOOK_HFOV_DEG,
            height=LOOK_SIZE,
            width=LOOK_SIZE,
        )
        names = env.simulator.categories
        seen = sorted({names[int(k)] for k in np.unique(view.semantic) if 0 < int(k) < len(names)})
        caption = (
            f"the next image is the view {direction_deg:g} degrees clockwise from ahead "
            f"({LOOK_HFOV_DEG:g} degrees wide); in it: {', '.join(seen) or 'nothing known'}"
        )
        return ToolImage(view.rgb, caption)

    def recall(category: str) -> dict[str, Any]:
        held = [r for r in regions or [] if category in (name for name, _ in r.categories)]
        return {
            "category": category,
            "regions": [
                {"id": r.id, "area_m2": round(r.area_m2, 1), "unexplored_edges": len(r.frontiers)}
                for r in held
            ],
        }

    last = max(len(env.candidates) - 1, 0)
    return ToolBox(
        [
            Tool(
                "goto_waypoint",
                "Walk to the numbered waypoint drawn on the panorama.",
                object_schema({"index": {"type": "integer", "minimum": 0, "maximum": last}}, ["index"]),
                goto_waypoint,
            ),
            Tool(
                "look",
                "See the view some degrees clockwise from ahead (90 is right, -90 left, 180 behind).",
                object_schema(
                    {"direction_deg": {"type": "integer", "minimum": -180, "maximum": 180}}, ["direction_deg"]
                ),
                look,
            ),
            Tool(
                "recall",
                "Which regions of the map hold a kind of object.",
                object_schema(
                    {"category": {"type": "string", "enum": list(env.simulator.categories)}}, ["category"]
                ),
                recall,
            ),
            Tool(
                "describe_map",
                "Coverage so far, steps left, and the regions seen with their objects.",
                object_schema({}),
                describe_map,
            ),
        ]
    )
