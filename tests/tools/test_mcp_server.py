"""`embodia mcp serve`: an exploration episode driven through the MCP SDK's own client over
stdio, the server a real subprocess."""

from __future__ import annotations

import base64
import io
import json
import sys
from typing import Any

import anyio
import numpy as np
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from PIL import Image

SCENE = "procedural:seed=1,rooms=3"


def _texts(result: Any) -> list[str]:
    return [part.text for part in result.content if part.type == "text"]


def _images(result: Any) -> list[np.ndarray]:
    return [
        np.asarray(Image.open(io.BytesIO(base64.b64decode(part.data))))
        for part in result.content
        if part.type == "image"
    ]


async def _episode(*args: str) -> dict[str, Any]:
    server = StdioServerParameters(command=sys.executable, args=["-m", "embodia.cli", "mcp", "serve", *args])
    seen: dict[str, Any] = {}
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        seen["before"] = sorted(tool.name for tool in (await session.list_tools()).tools)
        early = await session.call_tool("goto_waypoint", {"index": 0})
        seen["early"] = (early.is_error, _texts(early))
        first = await session.call_tool("reset", {"seed": 0})
        seen["first"] = (_texts(first), _images(first))
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        seen["tools"] = sorted(tools)
        seen["bound"] = tools["goto_waypoint"].input_schema["properties"]["index"]["maximum"]
        bad = await session.call_tool("goto_waypoint", {"index": 99})
        seen["bad"] = (bad.is_error, _texts(bad))
        coverage = []
        for _ in range(4):
            walked = await session.call_tool("goto_waypoint", {"index": 0})
            assert not walked.is_error, _texts(walked)
            coverage.append(json.loads(_texts(walked)[-1])["coverage_percent"])
        seen["coverage"] = coverage
        described = await session.call_tool("describe_map", {})
        seen["described"] = json.loads(_texts(described)[0])
        looked = await session.call_tool("look", {"direction_deg": 90})
        seen["look"] = (_texts(looked), _images(looked))
    return seen


def test_an_exploration_episode_is_played_through_the_sdks_client() -> None:
    seen = anyio.run(_episode, "--env", "embodia/ActiveMappingWaypoint-v0", "--scene", SCENE)
    assert seen["before"] == ["observe", "reset"]  # the env's tools come with an episode
    assert seen["early"][0] and "call reset first" in seen["early"][1][0]
    texts, images = seen["first"]
    assert [t for t in texts[:2]] == ["the 360-degree panorama with numbered waypoints", "the map so far"]
    assert len(images) == 2 and images[0].shape[2] == 3
    state = json.loads(texts[-1])
    assert state["steps_left"] == 500 and state["new_m2_by_waypoint"]
    assert seen["tools"] == ["describe_map", "goto_waypoint", "look", "observe", "reset"]
    assert seen["bad"][0] and f"greater than the maximum of {seen['bound']}" in seen["bad"][1][0]
    coverage = seen["coverage"]
    assert coverage == sorted(coverage) and coverage[-1] > coverage[0] > 0  # walking maps the house
    assert seen["described"]["coverage_percent"] == coverage[-1]
    look_texts, look_images = seen["look"]
    assert look_texts[0].startswith("the next image is the view 90 degrees clockwise")
    assert look_images[0].shape == (128, 128, 3)


async def _play(env: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "embodia.cli", "mcp", "serve", "--env", env]
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        results = [await session.call_tool("reset", {"seed": 0})]
        results.append(sorted(tool.name for tool in (await session.list_tools()).tools))
        for name, arguments in calls:
            results.append(await session.call_tool(name, arguments))
        return results


def test_a_dsr_state_is_reported_as_json_arguments_and_scored() -> None:
    """DSRInteractive-v0's first operation on an empty LRU cache is (access, 8): [8]."""
    first, tools, right, wrong = anyio.run(
        _play,
        "embodia/DSRInteractive-v0",
        [("report_state", {"state": [8]}), ("report_state", {"state": [1, 2]})],
    )
    assert "Apply the operation (access, 8)" in _texts(first)[0]
    assert tools == ["observe", "report_state", "reset"]
    assert json.loads(_texts(right)[0])["reward"] == 1.0 and json.loads(_texts(wrong)[0])["reward"] < 1.0


def test_a_text_env_is_played_with_its_step_action() -> None:
    first, tools, stepped = anyio.run(_play, "embodia/Puzzle-v0", [("step", {"action": "I do not know."})])
    assert "step" in tools and not stepped.is_error
    assert set(json.loads(_texts(stepped)[0])) == {"reward", "terminated", "truncated"}


@pytest.mark.parametrize(("args", "message"), [(["--env", "nope"], "unknown env 'nope'")])
def test_a_bad_env_exits_2_with_one_line(args: list[str], message: str) -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "embodia.cli", "mcp", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
