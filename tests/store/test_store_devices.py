"""Inventory operations on a real SQLite file: names, duplicates, upsert, state, and no secrets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgelab.errors import ConfigError, NotFound
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.devices import (
    add_device,
    get_device,
    list_devices,
    normalize_name,
    record_host_key,
    record_state,
    remove_device,
    upsert_device,
    validate_name,
)
from edgelab.store.models import Device


@pytest.fixture
def engine(db_url):
    """The same tests on SQLite and on the tests' own PostgreSQL server."""
    dbmod.dispose_engines()
    yield get_engine(db_url)
    dbmod.dispose_engines()


def ssh(name: str, **kw) -> Device:
    return Device(name=name, transport="ssh", ssh_host=kw.pop("ssh_host", "127.0.0.11"), **kw)


@pytest.mark.parametrize("name", ["a", "orin-agx", "s25", "orin.nano_2", "0", "x" * 64, "127.0.0.1-5586"])
def test_valid_names(name):
    assert validate_name(name) == name


@pytest.mark.parametrize("name", ["", "Orin", "-x", ".x", "_x", "a b", "a/b", "x" * 65, "é", "a:b", "a\n"])
def test_invalid_names_name_the_rule_and_suggest(name):
    with pytest.raises(ConfigError) as err:
        validate_name(name)
    assert "lowercase" in str(err.value)
    suggestion = normalize_name(name)
    assert repr(suggestion) in err.value.remedy
    validate_name(suggestion)


@given(st.text(max_size=200))
def test_normalize_always_gives_a_valid_name(raw):
    name = normalize_name(raw)
    assert validate_name(name) == name
    assert normalize_name(name) == name  # idempotent


@given(st.from_regex(r"[a-z0-9][a-z0-9._-]{0,63}", fullmatch=True))
def test_normalize_keeps_names_that_are_mostly_valid(name):
    stripped = name.rstrip("._-")
    if "--" not in name and stripped:
        assert normalize_name(name) == stripped


def test_add_get_list_remove(engine):
    with session_scope(engine) as s:
        add_device(s, ssh("orin-agx", device_class="jetson", tags=["lab1", "gpu", "gpu"]))
        add_device(
            s,
            Device(
                name="s25",
                transport="adb",
                adb_serial="127.0.0.1:5586",
                shell="toybox",
                device_class="npu_phone",
                tags=["lab1"],
            ),
        )
    with session_scope(engine) as s:
        assert [d.name for d in list_devices(s)] == ["orin-agx", "s25"]
        assert [d.name for d in list_devices(s, tag="gpu")] == ["orin-agx"]
        assert [d.name for d in list_devices(s, device_class="npu_phone")] == ["s25"]
        assert [d.name for d in list_devices(s, tag="lab1", device_class="jetson")] == ["orin-agx"]
        assert get_device(s, "orin-agx").tags == ["gpu", "lab1"]
        remove_device(s, "orin-agx")
    with session_scope(engine) as s:
        assert [d.name for d in list_devices(s)] == ["s25"]
        with pytest.raises(NotFound) as err:
            remove_device(s, "orin-agx")
        assert "device ls" in err.value.remedy


def test_duplicate_name_is_refused(engine):
    with session_scope(engine) as s:
        add_device(s, ssh("thor"))
    with pytest.raises(ConfigError) as err, session_scope(engine) as s:
        add_device(s, ssh("thor", ssh_host="127.0.0.13"))
    assert "already exists" in str(err.value) and "device rm thor" in err.value.remedy


def test_not_found_suggests_close_names(engine):
    with session_scope(engine) as s:
        add_device(s, ssh("orin-nano"))
    with pytest.raises(NotFound) as err, session_scope(engine) as s:
        get_device(s, "orin-nan")
    assert "orin-nano" in err.value.remedy


@pytest.mark.parametrize(
    "kw",
    [
        {"transport": "ssh"},  # no host
        {"transport": "adb"},  # no serial
        {"transport": "telnet", "ssh_host": "h"},
        {"transport": "ssh", "ssh_host": "h", "shell": "cmd"},
        {"transport": "ssh", "ssh_host": "h", "ssh_port": 70000},
    ],
)
def test_invalid_rows_are_refused(engine, kw):
    with pytest.raises(ConfigError), session_scope(engine) as s:
        add_device(s, Device(name="bad", **kw))


@pytest.mark.parametrize(
    "kw",
    [
        {"ssh_user": "root:hunter2"},
        {"ssh_jump": "admin:hunter2@jump.example"},
        {"adb_server": "u:hunter2@10.0.0.1:5037"},
    ],
)
def test_secrets_are_refused(engine, kw):
    with pytest.raises(ConfigError) as err, session_scope(engine) as s:
        add_device(s, ssh("leaky", **kw))
    assert "password" in str(err.value) and "hunter2" not in str(err.value)
    with session_scope(engine) as s:
        assert list_devices(s) == []


def test_no_column_is_meant_for_a_secret():
    forbidden = ("password", "passwd", "secret", "token", "private", "identity", "passphrase", "credential")
    for column in Device.__table__.columns:
        assert not any(word in column.name for word in forbidden), column.name


def test_upsert_updates_only_given_fields(engine):
    with session_scope(engine) as s:
        upsert_device(s, ssh("wsl-hx370", ssh_port=2222, tags=["x"], notes="first", virtual=True))
        record_state(s, "wsl-hx370", "online")
    with session_scope(engine) as s:
        row = upsert_device(
            s, Device(name="wsl-hx370", transport="ssh", ssh_host="127.0.0.14", ssh_port=2223)
        )
        first_id = row.id
    with session_scope(engine) as s:
        row = get_device(s, "wsl-hx370")
        assert (row.id, row.ssh_host, row.ssh_port) == (first_id, "127.0.0.14", 2223)
        assert (row.tags, row.notes, row.virtual, row.state) == (["x"], "first", True, "online")
        assert len(list_devices(s)) == 1


def test_record_state_moves_last_seen_only_when_online(engine):
    with session_scope(engine) as s:
        add_device(s, ssh("orin-agx"))
        online = record_state(s, "orin-agx", "online")
        seen = online.last_seen
        assert seen is not None and seen.tzinfo is not None
    with session_scope(engine) as s:
        off = record_state(s, "orin-agx", "offline", "connection refused")
    assert (off.state, off.state_detail, off.last_seen) == ("offline", "connection refused", seen)
    assert off.last_checked > seen


def test_record_host_key(engine):
    with session_scope(engine) as s:
        add_device(s, ssh("thor"))
        record_host_key(s, "thor", "SHA256:abc", "ssh-ed25519")
    with session_scope(engine) as s:
        row = get_device(s, "thor")
    assert (row.host_key_fingerprint, row.host_key_type) == ("SHA256:abc", "ssh-ed25519")
    assert row.endpoint().host_key_fingerprint == "SHA256:abc"
