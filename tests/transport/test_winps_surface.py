"""One list of what edgelab sends to Windows (edgelab.transport.winps), checked both ways:
every builder's script (parsed by the persona's own PowerShell parser) uses only listed commands,
parameters, members and variables, and the virtual Windows device answers every listed entry."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from edgelab.probe.collectors import windows as probe_windows
from edgelab.sim.winsim import cmdlets as shim
from edgelab.sim.winsim import psparse as P
from edgelab.sim.winsim.pseval import Interp
from edgelab.transport import winps, winscripts

WORKLOADS = {"C:\\Program Files\\x.exe", "python.exe"}  # the samples' workload programs (not edgelab's own)


def builder_scripts() -> dict[str, str]:
    out = dict(winscripts.samples())
    out["probe"] = probe_windows.build_script(probe_windows.SOURCES, "n0nce", 30)
    out["check"] = "exit 0"
    out["line"] = winscripts.windows_line("'\"quoted\"'", "powershell")  # powershell -EncodedCommand ...
    return out


def used(script: str) -> dict[str, set]:
    got: dict[str, set] = {
        k: set() for k in ("cmdlets", "params", "natives", "static", "members", "vars", "types", "locals")
    }
    for node in P.walk(P.parse(script)):
        if isinstance(node, P.Command):
            if node.invoke:
                name = node.name.value if isinstance(node.name, P.Str) else None
                assert name is not None, f"& of a computed name in {script[:80]!r}"
                if name not in WORKLOADS:
                    got["natives"].add(name if name.endswith(".exe") else name + ".exe")
            elif node.name in winps.NATIVES or node.name + ".exe" in winps.NATIVES:
                got["natives"].add(node.name if node.name.endswith(".exe") else node.name + ".exe")
            elif "-" in node.name:
                got["cmdlets"].add(node.name)
                got["params"] |= {(node.name, a.name) for a in node.args if isinstance(a, P.Param)}
                for k, a in enumerate(node.args[:-1]):
                    nxt = node.args[k + 1]
                    if (
                        isinstance(a, P.Param)
                        and a.name.lower() == "filepath"
                        and isinstance(nxt, P.Str)
                        and nxt.value not in WORKLOADS
                    ):
                        got["natives"].add(nxt.value)  # Start-Process -FilePath 'powershell.exe'

                if node.name == "New-Object":
                    got["types"] |= {a.value for a in node.args if isinstance(a, P.Str)}
            else:
                got["natives"].add(node.name + ".exe")
        elif isinstance(node, (P.Member, P.Call)):
            if node.static:
                got["static"].add(f"[{node.obj.name}]::{node.name}")
            else:
                got["members"].add(node.name)
        elif isinstance(node, P.Var):
            got["vars"].add("env:*" if node.name.lower().startswith("env:") else node.name)
        if isinstance(node, P.Assign) and isinstance(node.target, P.Var):
            got["locals"].add(node.target.name.lower())
        elif isinstance(node, P.Foreach):
            got["locals"].add(node.var.lower())
        elif isinstance(node, P.Cast):
            got["types"].add(node.type)
    return got


@pytest.mark.parametrize("name,script", sorted(builder_scripts().items()))
def test_every_builder_uses_only_listed_commands(name, script):
    u = used(script)
    assert u["cmdlets"] <= set(winps.CMDLETS), (name, u["cmdlets"] - set(winps.CMDLETS))
    for cmdlet, param in u["params"]:
        allowed = {p.lower() for p in winps.CMDLETS[cmdlet]}
        assert param.lower() in allowed, f"{name}: {cmdlet} -{param} is not in winps.CMDLETS"
    assert u["natives"] <= set(winps.NATIVES), (name, u["natives"] - set(winps.NATIVES))
    assert u["static"] <= set(winps.STATIC), (name, u["static"] - set(winps.STATIC))
    assert u["members"] <= set(winps.MEMBERS), (name, u["members"] - set(winps.MEMBERS))
    # automatic/preference variables must be listed; the script's own variables are whatever it assigns
    assert {v.lower() for v in u["vars"]} - {v.lower() for v in winps.VARIABLES} <= u["locals"], (
        name,
        u["vars"],
    )
    assert u["types"] <= set(winps.TYPES), (name, u["types"])


def test_the_builders_together_use_the_whole_list():
    """Nothing listed is dead: each entry is used by some builder."""
    total: dict[str, set] = {}
    for script in builder_scripts().values():
        for k, v in used(script).items():
            total.setdefault(k, set()).update(v)
    assert set(winps.CMDLETS) == total["cmdlets"]
    assert set(winps.NATIVES) == total["natives"]
    assert set(winps.STATIC) == total["static"]


def test_the_shim_answers_every_listed_entry():
    for name in winps.CMDLETS:
        assert name.lower() in shim.CMDLETS, f"the PowerShell shim has no {name}"
    for exe in winps.NATIVES:
        assert exe in shim.NATIVE_BUILTINS or exe == "powershell.exe", f"the shim does not emulate {exe}"
    interp = Interp({}, None)
    examples = {"UtcNow": None, "OpenRead": [__file__], "Min": [1, 2], "Create": []}
    for expr in winps.STATIC:
        typ, member = re.fullmatch(r"\[(.+)\]::(\w+)", expr).groups()
        args = examples[member]
        if args is None:
            assert shim.static_member(interp, shim.TypeRef(typ), member) is not None, expr
        else:
            assert shim.static_call(interp, shim.TypeRef(typ), member, args) is not None, expr
    assert winps.DETECT_LINE == "echo %OS%"


def test_an_unlisted_cmdlet_is_not_recognized_by_the_shim(tmp_path):
    """The other direction of drift: a builder that emits something new fails on the virtual device."""
    env = dict(os.environ, EDGELAB_SIM_LIB=os.path.dirname(os.path.dirname(shim.__file__)))
    shim_path = os.path.join(
        os.path.dirname(os.path.dirname(shim.__file__)), "personas", "_shims", "powershell"
    )
    r = subprocess.run(
        [shim_path, "-NoProfile", "-Command", "Invoke-WebRequest -Uri x"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert r.returncode == 1
    assert (
        "Invoke-WebRequest : The term 'Invoke-WebRequest' is not recognized as the name of a cmdlet, function, "
        "script file, or operable program."
    ) in r.stderr
    assert "CommandNotFoundException" in r.stderr
    assert sys.executable  # the shim runs on the system python, not the venv's
