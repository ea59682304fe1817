"""SSHTransport against every SSH persona of the virtual lab: POSIX and PowerShell devices alike.

The Windows personas parse the command line as Windows OpenSSH with a PowerShell
default shell would: only ``powershell -EncodedCommand <base64>`` crosses it.
"""

from __future__ import annotations

import pytest
from fixtures.ssh_lab import lab_endpoint

from edgelab.sim.sshd import SshLabInfo
from edgelab.transport.quoting import Shell
from edgelab.transport.ssh import SSHTransport

NASTY = ["a b", "it's", "‘curly’", '"q"', "$(id)", "`n", "a;b", "*", "x\ny", "\\", "$env:PATH", "-n"]


def test_every_persona_is_online(ssh_lab: SshLabInfo) -> None:
    states = {d.name: SSHTransport.check(lab_endpoint(ssh_lab, d.name), timeout=30) for d in ssh_lab.devices}
    assert states and all(s == ("online", None) for s in states.values()), states


@pytest.mark.parametrize("name", ["win-hx370-rtx5090", "xelite-pc"])
def test_powershell_persona_runs_argv_exactly(ssh_lab: SshLabInfo, name: str) -> None:
    ep = lab_endpoint(ssh_lab, name)
    assert ep.shell is Shell.POWERSHELL
    with SSHTransport.connect(ep, timeout=30) as t:
        r = t.run(["printf", "%s\\0", *NASTY], timeout=60)
        assert r.ok, r.stderr
        assert r.stdout.split("\0")[:-1] == NASTY
        bad = t.run(["edgelab-no-such-command"], timeout=60)
        assert bad.exit_code != 0 and "edgelab-no-such-command" in bad.stderr
