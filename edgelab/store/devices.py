"""Inventory operations on the device table; names and addresses are validated here, once for all callers."""

from __future__ import annotations

import difflib
import re
from datetime import UTC, datetime

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from edgelab.errors import ConfigError, NotFound
from edgelab.safetext import has_control
from edgelab.store.models import Device

NAME_RULE = "1-64 characters: lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
TRANSPORTS = ("ssh", "adb", "local")
SHELLS = ("posix", "toybox", "powershell")
STATES = ("online", "offline", "untrusted", "auth-failed", "unauthorized", "absent", "error", "unknown")

# Fields an upsert may copy onto an existing row: identity and history (id, created_at) stay.
_KEEP_ON_UPSERT = {"id", "name", "created_at"}


def normalize_name(raw: str) -> str:
    """A valid device name derived from ``raw`` (an ssh alias, an adb serial): always passes validate_name."""
    name = raw.strip().lower()
    name = re.sub(r"[^a-z0-9._-]+", "-", name)
    name = re.sub(r"-{2,}", "-", name)
    name = name.lstrip("._-")[:64].rstrip("._-")
    return name or "device"


def validate_name(name: str) -> str:
    """Return ``name`` unchanged if it follows the rule, else raise ConfigError suggesting a valid one."""
    if isinstance(name, str) and _NAME.fullmatch(name):
        return name
    suggestion = normalize_name(str(name))
    raise ConfigError(
        f"invalid device name {name!r}: {NAME_RULE}",
        remedy=f"use a name such as {suggestion!r}",
    )


def _refuse_secret(field: str, value: str | None) -> None:
    """A ``user:password`` in an address would land in the database: refuse it."""
    if value and value.lower().startswith("ssh://"):  # an adb server reached through SSH
        value = value[len("ssh://") :]
    if value and ":" in value.split("@", 1)[0] and "@" in value:
        raise ConfigError(
            f"{field} {value.split(':', 1)[0]}:***@{value.rpartition('@')[2]} holds a password; "
            "edgelab never stores secrets",
            remedy="give only user@host and authenticate with an SSH key or the agent (~/.ssh/config IdentityFile)",
        )


_TEXT_FIELDS = ("device_class", "ssh_user", "ssh_host", "ssh_jump", "adb_serial", "adb_server", "notes")


def _refuse_control(device: Device) -> None:
    """A control character in a stored word would reach every operator's terminal that lists it."""
    for field in _TEXT_FIELDS:
        value = getattr(device, field, None)
        if isinstance(value, str) and has_control(value.replace("\n", "") if field == "notes" else value):
            raise ConfigError(
                f"the {field.replace('_', ' ')} of {device.name} holds a control character ({value!r})",
                remedy="give it as plain text: no escape sequences, tabs or newlines",
            )
    for tag in device.tags or []:
        if isinstance(tag, str) and has_control(tag):
            raise ConfigError(
                f"tag {tag!r} of {device.name} holds a control character",
                remedy="use plain words as tags (letters, digits, '-', ...)",
            )


def validate_device(device: Device) -> Device:
    """Check a row before it is written: name, transport, address fields, shell, no secrets, no
    control characters (a tag with an escape sequence would reach other operators' terminals)."""
    validate_name(device.name)
    _refuse_control(device)
    if device.transport not in TRANSPORTS:
        raise ConfigError(
            f"unknown transport {device.transport!r} for {device.name}",
            remedy=f"use one of {', '.join(TRANSPORTS)}",
        )
    if device.shell not in SHELLS:
        raise ConfigError(
            f"unknown shell {device.shell!r} for {device.name}", remedy=f"use one of {', '.join(SHELLS)}"
        )
    if device.transport == "ssh" and not device.ssh_host:
        raise ConfigError(
            f"{device.name}: an ssh device needs a host", remedy="give --ssh [user@]host[:port]"
        )
    if device.transport == "adb" and not device.adb_serial:
        raise ConfigError(
            f"{device.name}: an adb device needs a serial", remedy="give --adb SERIAL (see `adb devices`)"
        )
    if device.ssh_user and (":" in device.ssh_user or "@" in device.ssh_user):
        raise ConfigError(
            f"the ssh user of {device.name} holds ':' or '@' (a password?); edgelab never stores secrets",
            remedy="give only the user name and authenticate with an SSH key or the agent",
        )
    _refuse_secret("jump host", device.ssh_jump)
    _refuse_secret("adb server", device.adb_server)
    if device.ssh_port is not None and not 0 < device.ssh_port < 65536:
        raise ConfigError(
            f"port {device.ssh_port} of {device.name} is out of range", remedy="use a port in 1-65535"
        )
    tags = sorted({t.strip() for t in (device.tags or []) if t and t.strip()})
    if tags != device.tags:
        device.tags = tags
    return device


def _find(session: Session, name: str) -> Device | None:
    return session.exec(select(Device).where(Device.name == name)).first()


def add_device(session: Session, device: Device) -> Device:
    """Insert a new device; ConfigError if the name is invalid or already taken."""
    validate_device(device)
    if _find(session, device.name) is not None:
        raise _duplicate(device.name)
    try:
        with session.begin_nested():  # a savepoint: a lost race undoes this row only
            session.add(device)
    except IntegrityError as err:  # another writer took this name first
        raise _duplicate(device.name) from err
    return device


def _duplicate(name: str) -> ConfigError:
    return ConfigError(
        f"a device named {name!r} already exists",
        remedy=f"pick another name, or `edgelab device rm {name}` first",
    )


def upsert_device(session: Session, device: Device) -> Device:
    """Insert, or update the existing row of that name with the fields the caller set explicitly."""
    given = set(device.model_fields_set) - _KEEP_ON_UPSERT
    validate_device(device)
    existing = _find(session, device.name)
    if existing is None:
        session.add(device)
        session.flush()
        return device
    for field in given:
        setattr(existing, field, getattr(device, field))
    existing.updated_at = datetime.now(UTC)
    validate_device(existing)
    session.add(existing)
    session.flush()
    return existing


def get_device(session: Session, name: str) -> Device:
    """The device called ``name``; NotFound (with close names as a hint) otherwise."""
    device = _find(session, name)
    if device is None:
        known = list(session.exec(select(Device.name)).all())
        close = difflib.get_close_matches(name, known, n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise NotFound(
            f"no device named {name!r}",
            remedy=f"{hint}see `edgelab device ls`, or add it with `edgelab device add {normalize_name(name)} --ssh HOST`",
        )
    return device


def list_devices(
    session: Session, *, tag: str | None = None, device_class: str | None = None
) -> list[Device]:
    """Devices ordered by name, optionally those with a tag and/or of a class."""
    query = select(Device).order_by(Device.name)
    if device_class:
        query = query.where(Device.device_class == device_class)
    rows = list(session.exec(query).all())
    if tag:  # tags are a JSON list; filtering here keeps the SQL portable
        rows = [d for d in rows if tag in (d.tags or [])]
    return rows


def remove_device(session: Session, name: str) -> None:
    session.delete(get_device(session, name))
    session.flush()


def record_state(session: Session, name: str, state: str, detail: str | None = None) -> Device:
    """Store the result of a reachability check; ``last_seen`` moves only when the device answered."""
    device = get_device(session, name)
    now = datetime.now(UTC)
    device.state = state[:16]
    device.state_detail = detail
    device.last_checked = now
    if state == "online":
        device.last_seen = now
    device.updated_at = now
    session.add(device)
    session.flush()
    return device


def record_host_key(session: Session, name: str, fingerprint: str, key_type: str) -> Device:
    """Remember the operator-approved SSH host key (a public fingerprint) of a device."""
    device = get_device(session, name)
    device.host_key_fingerprint = fingerprint
    device.host_key_type = key_type
    device.updated_at = datetime.now(UTC)
    session.add(device)
    session.flush()
    return device


def device_names(session: Session) -> list[str]:
    """Every device name, sorted."""
    return list(session.exec(select(Device.name).order_by(Device.name)).all())


def virtual_names(session: Session, names: set[str] | list[str]) -> set[str]:
    """Those of ``names`` that are virtual devices (unknown names are not)."""
    if not names:
        return set()
    return set(
        session.exec(
            select(Device.name).where(col(Device.name).in_(sorted(names)), Device.virtual == True)  # noqa: E712
        ).all()
    )
