"""Deploy and bench open a device the same way: a device that does not answer refuses the run
(``device_unreachable``) with the transport's own remedy, before anything is pushed."""

from __future__ import annotations

import socket

import pytest

from edgelab.deploy.options import Options, connect_device
from edgelab.errors import Refusal, RefusalCode
from edgelab.transport.base import Endpoint


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


def test_a_device_that_refuses_the_connection_refuses_the_run() -> None:
    ep = Endpoint("gone", "ssh", ssh_user="lab", ssh_host="127.0.0.1", ssh_port=_closed_port())
    with pytest.raises(Refusal) as info:
        connect_device(ep, Options(transport={"timeout": 5}), "gone")
    r = info.value
    assert r.code is RefusalCode.DEVICE_UNREACHABLE and r.device == "gone"
    assert r.remedy and isinstance(r.__cause__, Exception)


def test_an_unknown_refusal_code_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown refusal code 'no_such_code'"):
        Refusal("no_such_code", "x", device="d", remedy="r")
