"""`edgelab sim up | down | status | ssh-config`: the virtual device lab."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from edgelab.cli.common import console, err_console, fail, print_json, state

if TYPE_CHECKING:
    from rich.table import Table

    from edgelab.sim import lab

app = typer.Typer(
    help="The virtual lab: real sshd and adb server in front of emulated devices.", no_args_is_help=True
)

StateDir = typer.Option(
    None, "--state-dir", envvar="EDGELAB_SIM_DIR", help="Lab state directory (default ~/.edgelab/sim)."
)


def _say(msg: str) -> None:
    err_console.print(f"[dim]sim:[/] {msg}", highlight=False)


def _table(status: lab.LabStatus) -> Table:
    from rich.table import Table

    from edgelab.sim import lab

    data = lab.status_json(status)
    table = Table(title=f"virtual lab ({data['state_dir']})", title_justify="left")
    for col in ("name", "transport", "address", "class", "shell", "state"):
        table.add_column(col)
    for d in data["devices"]:
        addr = d["serial"] if "serial" in d else f"{d['user']}@{d['address']}:{d['port']}"
        table.add_row(d["name"], d["transport"], addr, d["device_class"] or "", d["shell"], d["state"])
    return table


@app.command()
def up(
    state_dir: Path = StateDir,
    ssh_port: int = typer.Option(
        None, "--ssh-port", help="Port of the lab's sshd (default 2222, or a free one)."
    ),
    adb_port: int = typer.Option(
        None, "--adb-port", help="Port of the lab's own adb server (default: a free one)."
    ),
    clones: int = typer.Option(
        0, "--clones", min=0, help="Extra orin-agx clones on 127.0.0.17+ for benchmarks."
    ),
    no_adb: bool = typer.Option(False, "--no-adb", help="Start only the SSH lab."),
    no_ssh: bool = typer.Option(False, "--no-ssh", help="Start only the ADB lab."),
    as_json: bool = typer.Option(False, "--json", help="Print the lab status as JSON on stdout."),
) -> None:
    """Start the virtual lab (idempotent) and register its devices in the inventory."""
    from edgelab.sim import lab

    status = lab.lab_up(
        state_dir,
        db_url=state.db,
        ssh=not no_ssh,
        adb=not no_adb,
        ssh_port=ssh_port,
        adb_port=adb_port,
        clones=clones,
        progress=_say,
    )
    for name in status.skipped or []:
        _say(f"[yellow]{name}: a real device of that name exists; left it alone[/]")
    if as_json:
        print_json(lab.status_json(status))
    else:
        console.print(_table(status))
        if status.ssh:
            console.print(
                f"plain ssh: [bold]ssh -F {status.ssh.ssh_config_path} orin-agx[/]", highlight=False
            )


@app.command()
def down(state_dir: Path = StateDir) -> None:
    """Stop the virtual lab (no process or mount left); its devices stay in the inventory, offline."""
    from edgelab.sim import lab

    marked = lab.lab_down(state_dir, db_url=state.db, progress=_say)
    _say(f"lab stopped; {len(marked)} virtual devices marked offline")


@app.command()
def status(
    state_dir: Path = StateDir, as_json: bool = typer.Option(False, "--json", help="JSON on stdout.")
) -> None:
    """Each virtual device's address and state, and the lab's adb server host:port."""
    from edgelab.sim import lab

    st = lab.lab_status(state_dir)
    if as_json:
        print_json(lab.status_json(st))
        return
    if not st.running:
        fail("the virtual lab is not running", "start it with `edgelab sim up`")
    console.print(_table(st))
    if st.adb:
        console.print(
            f"adb server: [bold]{st.adb.adb_server}[/]  (adb -H/-P, or ADB_SERVER_SOCKET=tcp:{st.adb.adb_server})",
            highlight=False,
        )


@app.command("ssh-config")
def ssh_config(state_dir: Path = StateDir) -> None:
    """Print an OpenSSH config block so plain ssh, scp and rsync reach the virtual SSH devices."""
    from edgelab.sim import lab
    from edgelab.sim.sshd import client_config

    st = lab.lab_status(state_dir)
    if st.ssh is None:
        fail("the virtual SSH lab is not running", "start it with `edgelab sim up`")
    typer.echo(client_config(st.ssh), nl=False)
