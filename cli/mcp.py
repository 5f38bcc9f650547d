"""``embodia mcp serve``: an environment episode as a Model Context Protocol server over stdio."""

from __future__ import annotations

from typing import Annotated

import typer

from embodia.cli.root import app, user_errors
from embodia.errors import EmbodiaError

mcp_app = typer.Typer(
    help="Serve embodia to Model Context Protocol clients (docs/tools.md).", no_args_is_help=True
)
app.add_typer(mcp_app, name="mcp")


@mcp_app.command("serve")
def serve(
    env: Annotated[str, typer.Option("--env", help="A gymnasium id, e.g. embodia/ActiveMappingWaypoint-v0.")],
    scene: Annotated[
        str | None,
        typer.Option("--scene", help="The scene each reset loads (mapping envs), e.g. procedural:seed=3."),
    ] = None,
) -> None:
    """Serve an episode of ENV over stdio: reset, observe (images and text) and the env's tools."""
    from embodia.envs.registry import ENTRY_POINTS
    from embodia.tools.mcp_server import EpisodeServer, serve_stdio

    with user_errors():
        if env not in ENTRY_POINTS:
            raise EmbodiaError(f"unknown env {env!r}: expected one of {', '.join(sorted(ENTRY_POINTS))}")
        episode = EpisodeServer(env, scene)
    serve_stdio(episode)
