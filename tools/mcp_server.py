"""An environment episode as a Model Context Protocol server (``embodia mcp serve``).

Any MCP client (an IDE assistant, an agent framework, the SDK's own ``ClientSession``) can
play an embodia episode through tools:

- ``reset(seed?)`` starts the episode (on ``--scene`` when given) and returns the first
  observation; ``observe()`` returns the current one again. An observation is images
  (PNG) and text: for the waypoint env, the panorama with its numbered waypoints, the map so
  far and the candidates' gains; for other envs, every RGB array of the observation as an
  image and the rest as JSON text.
- the env's own tools: for ``embodia/ActiveMappingWaypoint-v0`` the explorer's
  (``goto_waypoint`` walks there, ``describe_map``, ``look``; ``tools/exploration.py``),
  listed with the waypoint bound of the moment; for the DSR envs the answer as JSON
  arguments (``report_state`` / ``final_answer``, ``tools/dsr.py``); for the others
  ``step(action)``, the env's text action.

A call is validated against its tool's JSON schema (``ToolBox``); a bad one comes back as
an MCP tool error naming the problem, and a call before ``reset`` says so. Built on the
official Python SDK's low-level server, so each tool keeps its own JSON schema.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from embodia.errors import EmbodiaError
from embodia.tools.base import Tool, ToolBox, ToolImage, ToolResult, object_schema

WAYPOINT_ENV = "embodia/ActiveMappingWaypoint-v0"
DSR_ENVS = ("embodia/DSR-v0", "embodia/DSRInteractive-v0")
ARRAY_ITEMS_SHOWN = 64
"""Arrays of an observation up to this many items go into its text whole; larger ones by shape."""


class EpisodeServer:
    """One environment and its episode, behind the tools an MCP client calls."""

    def __init__(
        self, env_id: str, scene: str | None = None, env_kwargs: dict[str, Any] | None = None
    ) -> None:
        import gymnasium

        import embodia.envs  # noqa: F401  (registers the ids)

        self.env: Any  # the env's own methods (step_to_point, panorama, ...) are used by id
        try:
            self.env = gymnasium.make(env_id, **(env_kwargs or {}))
        except gymnasium.error.Error as error:
            raise EmbodiaError(f"cannot make env {env_id!r}: {error}") from None
        self.env_id = env_id
        self.scene = scene
        self.observation: Any = None
        self.info: dict[str, Any] = {}

    def tools(self) -> ToolBox:
        """The tools of the moment: ``reset``, ``observe`` and the env's own."""
        common = [
            Tool(
                "reset",
                "Start a new episode and see its first observation.",
                object_schema({"seed": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}}),
                self._reset,
            ),
            Tool(
                "observe",
                "See the current observation again.",
                object_schema({}),
                lambda: self._observation(),
            ),
        ]
        if self.observation is None:
            return ToolBox(common)
        return ToolBox([*common, *self._env_tools()])

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        box = self.tools()
        if name not in box.tools and self.observation is None:
            return ToolResult(name, False, error=f"call reset first: {name} needs an episode")
        return box.call(name, arguments)

    def close(self) -> None:
        self.env.close()

    # ------------------------------------------------------------------ the episode

    def _reset(self, seed: int = 0) -> list[Any]:
        options = {"scene": self.scene} if self.scene else None
        self.observation, self.info = self.env.reset(seed=seed, options=options)
        return self._observation()

    def _env_tools(self) -> list[Tool]:
        if self.env_id == WAYPOINT_ENV:
            from embodia.tools.exploration import exploration_tools

            return [
                t
                for t in exploration_tools(self.env.unwrapped, walk=self._walk).tools.values()
                if t.name != "recall"
            ]
        if self.env_id in DSR_ENVS:
            from embodia.tools.dsr import dsr_answer_tool

            interactive = self.env_id == "embodia/DSRInteractive-v0"
            return [dsr_answer_tool(interactive, lambda reply: self._step(lambda: self.env.step(reply)))]
        return [
            Tool(
                "step",
                "Act in the environment with its text action; see what follows.",
                object_schema({"action": {"type": "string"}}, ["action"]),
                lambda action: self._step(lambda: self.env.step(action)),
            )
        ]

    def _walk(self, candidate: Any) -> list[Any]:
        return self._step(lambda: self.env.unwrapped.step_to_point(candidate.point))

    def _step(self, act: Callable[[], tuple[Any, Any, bool, bool, dict[str, Any]]]) -> list[Any]:
        self.observation, reward, terminated, truncated, self.info = act()
        outcome = {
            "reward": round(float(reward), 4),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
        }
        return [json.dumps(outcome), *self._observation()]

    def _observation(self) -> list[Any]:
        """The observation as parts: :class:`ToolImage` pictures and JSON text."""
        if self.observation is None:
            raise EmbodiaError("no episode yet: call reset first")
        if self.env_id == WAYPOINT_ENV:
            return self._waypoint_view()
        if isinstance(self.observation, str):
            return [self.observation]
        if isinstance(self.observation, dict):
            images = [
                ToolImage(np.asarray(value), key) for key, value in self.observation.items() if _is_rgb(value)
            ]
            rest = {key: _plain(value) for key, value in self.observation.items() if not _is_rgb(value)}
            return [*images, json.dumps({"observation": rest, "info": _plain(self.info)}, default=str)]
        return [json.dumps({"observation": _plain(self.observation), "info": _plain(self.info)}, default=str)]

    def _waypoint_view(self) -> list[Any]:
        from embodia.perception.bev_image import bev_image
        from embodia.perception.waypoints import draw_candidates

        env = self.env.unwrapped
        panorama = draw_candidates(np.asarray(env.panorama["rgb"], dtype=np.uint8), env.candidates)
        top_down = bev_image(
            env.bev, frontiers=env.bev.frontiers(), agent=env.simulator.pose, trajectory=env.bev.trajectory
        )
        gains = {str(i): round(float(c.gain_m2), 2) for i, c in enumerate(env.candidates)}
        text = {
            "waypoints": "numbered on the panorama; goto_waypoint(index) walks there",
            "new_m2_by_waypoint": gains,
            "coverage_percent": round(100 * float(self.info.get("coverage_ratio", 0.0)), 1),
            "steps_left": env.remaining_steps,
        }
        return [
            ToolImage(panorama, "the 360-degree panorama with numbered waypoints"),
            ToolImage(top_down, "the map so far"),
            json.dumps(text),
        ]


def _is_rgb(value: Any) -> bool:
    return (
        isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 3 and value.shape[2] == 3
    )


def _plain(value: Any) -> Any:
    """``value`` as JSON-able data: small arrays whole, large ones by shape and dtype."""
    if isinstance(value, np.ndarray):
        if value.size <= ARRAY_ITEMS_SHOWN:
            return value.tolist()
        return {"shape": list(value.shape), "dtype": str(value.dtype)}
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def mcp_content(result: ToolResult) -> tuple[list[Any], bool]:
    """A tool result as MCP content parts (text, PNG images) and whether it is an error."""
    from mcp import types

    from embodia.policies.openai_compat import png_base64

    if not result.ok:
        return [types.TextContent(text=result.message())], True
    value = result.value if isinstance(result.value, list) else [result.value]
    parts: list[Any] = []
    for part in value:
        if isinstance(part, ToolImage):
            parts.append(types.TextContent(text=part.caption))
            parts.append(types.ImageContent(data=png_base64(part.image), mime_type="image/png"))
        else:
            parts.append(
                types.TextContent(text=part if isinstance(part, str) else json.dumps(part, default=str))
            )
    return parts, False


def build_server(episode: EpisodeServer) -> Any:
    """The SDK's low-level MCP server over ``episode``: tools listed with their own schemas."""
    from mcp import types
    from mcp.server.lowlevel import Server

    async def list_tools(context: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=tool.name, description=tool.description, input_schema=tool.parameters)
                for tool in episode.tools().tools.values()
            ]
        )

    async def call_tool(context: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        result = episode.call(params.name, dict(params.arguments or {}))
        content, error = mcp_content(result)
        return types.CallToolResult(content=content, is_error=error)

    return Server(
        "embodia",
        instructions=f"An episode of {episode.env_id}: call reset, then act with the tools.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve_stdio(episode: EpisodeServer) -> None:
    """Serve ``episode`` over standard input and output until the client goes."""
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(episode)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(run)
    finally:
        episode.close()
