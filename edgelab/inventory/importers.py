"""Bring devices in from what a lab already has: an OpenSSH config, or an adb server's device list."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path

from sqlmodel import Session, select

from edgelab.errors import ConfigError, EdgelabError
from edgelab.inventory.address import parse_adb_serial, parse_adb_server, parse_jump, parse_ssh_address
from edgelab.store.devices import add_device, normalize_name, record_state
from edgelab.store.models import Device
from edgelab.transport.ssh.config import ConfigText, expand_includes

_WILDCARDS = set("*?!")
ADB_STATES = {"device": "online", "offline": "offline", "unauthorized": "unauthorized"}


@dataclass
class ImportReport:
    """What an import did, row by row, so the CLI can show it and exit accordingly."""

    added: list[Device] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name or source, why)
    notes: list[str] = field(default_factory=list)  # what was left out of the source, and why

    def as_dict(self) -> dict:
        return {
            "added": [d.name for d in self.added],
            "skipped": [{"name": n, "reason": r} for n, r in self.skipped],
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class SshConfigHost:
    alias: str
    hostname: str
    user: str | None
    port: int | None
    proxyjump: str | None


def strip_match_blocks(text: str, path: Path | str) -> tuple[str, list[str]]:
    """The config without its ``Match`` blocks, and a note per block left out.

    A Match block's conditions depend on the moment it is evaluated (``Match exec`` even runs a
    command, which an import must never do), so the inventory cannot hold what it decides.
    """
    out, notes = [], []
    skipping = False
    for n, line in enumerate(text.splitlines(), 1):
        word = line.strip().split(None, 1)[0].lower() if line.strip() else ""
        word = word.split("=", 1)[0]
        if word == "match":
            skipping = True
            notes.append(
                f"{path}:{n}: skipped the Match block ({line.strip()[:80]}): its conditions are "
                "evaluated at connect time; add such hosts with `edgelab device add`"
            )
            continue
        if word == "host":
            skipping = False
        out.append("" if skipping else line)
    return "\n".join(out) + "\n", notes


def read_ssh_config(
    path: Path, pattern: str | None = None, notes: list[str] | None = None
) -> list[SshConfigHost]:
    """Every concrete ``Host`` alias of an OpenSSH config (wildcards, negations and Match blocks
    skipped, each Match block with a note in ``notes``), resolved."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError as err:
        raise ConfigError(f"no ssh config at {path}", remedy="give an existing file with --file") from err
    except OSError as err:
        raise ConfigError(
            f"cannot read ssh config {path}: {err.strerror or err}",
            remedy="fix that file or pass another --file",
        ) from err
    if b"\0" in data:
        line = data[: data.index(b"\0")].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: binary data, not an ssh config", remedy="pass another --file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text", remedy="save the file as UTF-8") from None
    if any(ln.strip().lower().startswith("include") for ln in text.splitlines()):
        text = expand_includes(Path(path), notes)  # as OpenSSH reads it: the included hosts too
    text, skipped = strip_match_blocks(text, path)
    if notes is not None:
        notes.extend(skipped)
    try:
        cfg = ConfigText(text)
    except ValueError as err:
        raise ConfigError(
            f"cannot read ssh config {path}: {err}", remedy="fix that file or pass another --file"
        ) from err
    hosts = []
    for alias in sorted(cfg.hostnames()):
        if _WILDCARDS & set(alias):
            continue
        if pattern and not fnmatch.fnmatchcase(alias, pattern):
            continue
        try:
            c = cfg.lookup(alias)
        except Exception as err:  # the parser raises assorted errors for Match/exec it cannot evaluate
            raise ConfigError(
                f"cannot resolve Host {alias} in {path}: {err}", remedy="simplify that block"
            ) from err
        port = c.get("port")
        jump = c.get("proxyjump")
        hosts.append(
            SshConfigHost(
                alias=alias,
                hostname=c.get("hostname", alias),
                user=c.get("user"),
                port=int(port) if port and str(port).isdigit() else None,
                proxyjump=None if not jump or jump.lower() == "none" else jump,
            )
        )
    return hosts


def import_ssh_config(session: Session, path: Path, pattern: str | None = None) -> ImportReport:
    """Add a device per concrete Host; names already in the inventory are left as they are."""
    report = ImportReport()
    for host in read_ssh_config(path, pattern, report.notes):
        name = normalize_name(host.alias)
        if _name_taken(session, name):
            report.skipped.append((name, f"a device named {name} already exists"))
            continue
        try:
            addr = parse_ssh_address(host.hostname)
            device = Device(
                name=name,
                transport="ssh",
                ssh_user=host.user,
                ssh_host=addr.host,
                ssh_port=host.port,
                ssh_jump=parse_jump(host.proxyjump) if host.proxyjump else None,
                notes=f"imported from {path} (Host {host.alias})",
            )
            report.added.append(add_device(session, device))
        except EdgelabError as err:
            report.skipped.append((name, str(err)))
    return report


def import_adb(session: Session, adb_server: str | None = None) -> ImportReport:
    """Add every device the adb server sees, named from its serial, unless that serial is already known."""
    from edgelab.transport.adb import list_adb_devices  # lazy: adbutils only when asked

    server = parse_adb_server(adb_server) if adb_server else None
    report = ImportReport()
    for serial, state in list_adb_devices(server):
        try:
            serial = parse_adb_serial(serial)
        except ConfigError as err:  # e.g. a serial carrying user:password@: never stored
            report.skipped.append(("(an adb device)", str(err)))
            continue
        known = session.exec(
            select(Device).where(Device.adb_serial == serial, Device.adb_server == server)
        ).first()
        if known is not None:
            report.skipped.append((known.name, f"serial {serial} is already known as {known.name}"))
            continue
        name = _free_name(session, normalize_name(serial))
        device = Device(
            name=name,
            transport="adb",
            adb_serial=serial,
            adb_server=server,
            shell="toybox",
            notes=f"imported from adb server {server or 'local'}",
        )
        add_device(session, device)
        report.added.append(record_state(session, name, ADB_STATES.get(state, state), f"adb: {state}"))
    return report


def _name_taken(session: Session, name: str) -> bool:
    return session.exec(select(Device.id).where(Device.name == name)).first() is not None


def _free_name(session: Session, base: str) -> str:
    name, n = base, 2
    while _name_taken(session, name):
        suffix = f"-{n}"
        name, n = base[: 64 - len(suffix)] + suffix, n + 1
    return name
