"""`edgelab metrics serve`: Prometheus exposition of live runs and device telemetry."""

from __future__ import annotations

from typing import Annotated

import typer

from edgelab.cli.common import console, fail_from, state
from edgelab.errors import ConfigError

app = typer.Typer(help="Export live metrics.", no_args_is_help=True)


@app.command("serve")
def serve(
    port: Annotated[int, typer.Option("--port", help="TCP port (0: pick a free one).")] = 9464,
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback by default).")] = "127.0.0.1",
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="Allow a non-loopback --host.")
    ] = False,
) -> None:
    """Serve GET /metrics until interrupted; each scrape reads the database."""
    from edgelab.metrics.prometheus import make_server
    from edgelab.store.db import get_engine

    try:
        server = make_server(get_engine(state.db), host, port, allow_remote=allow_remote)
    except ConfigError as err:
        fail_from(err, code=2)
    except OSError as err:
        fail_from(
            ConfigError(f"cannot listen on {host}:{port}: {err.strerror}", remedy="pick another --port"),
            code=1,
        )
    h, p = server.server_address[:2]
    console.print(f"serving metrics on http://{h}:{p}/metrics", highlight=False)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
