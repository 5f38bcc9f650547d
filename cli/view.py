"""``embodia view``: a local web page over run folders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from embodia.cli.root import app, bold, console, user_errors
from embodia.errors import EmbodiaError


@app.command("view")
def view(
    runs: Annotated[
        Path, typer.Argument(help="The runs folder to look at (every run below it is listed).")
    ] = Path("runs"),
    host: Annotated[str, typer.Option("--host", help="Loopback address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port; 0 picks a free one.")] = 8765,
) -> None:
    """A local web page over run folders: panoramas, BEV, tree, prompts and answers, streams, curves."""
    from embodia.viewer.server import LOOPBACK, base_url, make_server

    with user_errors():
        if host.lower() not in LOOPBACK:
            raise EmbodiaError(
                f"--host {host} is not a loopback address: the viewer serves your runs to this machine only "
                "(127.0.0.1, ::1 or localhost)"
            )
        if not runs.is_dir():
            raise EmbodiaError(f"{runs} is not a folder of runs")
        if not 0 <= port <= 65535:
            raise EmbodiaError(f"--port must be 0-65535, got {port}")
        try:
            server = make_server(runs, host, port)
        except OSError as error:
            raise EmbodiaError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    address = base_url(host, server.server_address[1])
    console.print(
        f"viewing {bold(runs)} at {escape(address)}/ (Ctrl-C stops)", highlight=False, soft_wrap=True
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
