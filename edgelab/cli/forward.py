"""`edgelab forward DEVICE PORT`: a port on the device's loopback, reached from the lab host."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from edgelab.cli.common import LeaseOpt, open_engine


def forward(
    device: Annotated[str, typer.Argument(help="Device name.")],
    remote_port: Annotated[int, typer.Argument(help="Port on the device's loopback (127.0.0.1).")],
    local: Annotated[int | None, typer.Option("--local", help="Lab-side port (default: a free one).")] = None,
    lease: LeaseOpt = None,
) -> None:
    """Reach a port on the device from the lab host (127.0.0.1 only) until Ctrl-C.

    \b
    Example:
      edgelab forward orin-agx 8091 --local 8091   then e.g. curl http://127.0.0.1:8091/health
    """
    from edgelab.inventory.console import forward as do_forward

    def ready(port: int) -> None:
        sys.stdout.write(f"forwarding 127.0.0.1:{port} -> {device}:{remote_port} (Ctrl-C ends)\n")
        sys.stdout.flush()

    try:
        do_forward(open_engine(), device, remote_port, local_port=local, lease_id=lease, on_ready=ready)
    except KeyboardInterrupt:
        return


def register(app: typer.Typer) -> None:
    app.command("forward")(forward)
