"""Tools an exploring agent can call: walk to a waypoint, and ask about the map."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from embodia.perception.regions import Region
from embodia.perception.waypoints import WaypointCandidate
from embodia.tools.base import Tool, ToolBox


def exploration_tools(
    env: Any,
    regions: list[Region] | None = None,
    *,
    walk: Callable[[WaypointCandidate], dict[str, Any]] | None = None,
) -> ToolBox:
    """Tools over an ``ActiveMappingWaypointEnv`` (unwrapped): ``goto_waypoint``, ``describe_map``.

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

    return ToolBox(
        [
            Tool(
                "goto_waypoint",
                "Walk to the numbered waypoint drawn on the panorama.",
                {
                    "type": "object",
                    "properties": {"index": {"type": "integer", "minimum": 0}},
                    "required": ["index"],
                    "additionalProperties": False,
                },
                goto_waypoint,
            ),
            Tool(
                "describe_map",
                "Coverage so far, steps left, and the regions seen with their objects.",
                {"type": "object", "properties": {}, "additionalProperties": False},
                describe_map,
            ),
        ]
    )
