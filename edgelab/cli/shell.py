"""`edgelab shell DEVICE [-- CMD...]`: one command over the device's transport, or an interactive shell."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from edgelab.cli.common import LeaseOpt, fail, open_engine


def shell(
    device: Annotated[str, typer.Argument(help="Device name.")],
    command: Annotated[
        list[str] | None,
        typer.Argument(
            help="After --: the command and its arguments (run exactly, quoted for the device's shell)."
        ),
    ] = None,
    lease: LeaseOpt = None,
) -> None:
    """Run one command on a device and exit with its exit code, or open a shell when none is given.

    \b
    Examples:
      edgelab shell s25 -- getprop ro.product.model
      edgelab shell orin-agx -- sh -c 'free -m | head -2'   (pipes need a shell of their own)
      edgelab shell orin-agx                                (interactive; needs a terminal)

    A device under someone else's lease is refused, naming the holder.
    """
    from edgelab.inventory.console import interactive, run_command

    engine = open_engine()
    try:
        if not command:
            if not sys.stdin.isatty():
                fail(
                    "no command and stdin is not a terminal",
                    f"give one: `edgelab shell {device} -- CMD`",
                    code=2,
                )
            raise typer.Exit(interactive(engine, device, lease_id=lease))

        def out(line: str) -> None:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

        code, err = run_command(engine, device, command, on_stdout=out, lease_id=lease)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    if err:
        sys.stderr.write(err if err.endswith("\n") else err + "\n")
    raise typer.Exit(255 if code is None else code)


def register(app: typer.Typer) -> None:
    app.command("shell")(shell)
