"""/etc/os-release (KEY="value" lines, shell quoting)."""

from __future__ import annotations

import re
import shlex

from edgelab.probe.parsers.base import ParseResult, parser

_LINE = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")


@parser("cat /etc/os-release")
def parse_os_release(text: str, res: ParseResult) -> None:
    v, f = res.values, res.facts
    for line in text.split("\n"):
        m = _LINE.match(line.strip())
        if not m:
            continue
        raw = m[2].strip()
        try:
            parts = shlex.split(raw, comments=False, posix=True)
            val = " ".join(parts) if parts else ""
        except ValueError:
            val = raw.strip("\"'")
            res.warnings.append(f"bad quoting in {m[1]}")
        v.setdefault(m[1].lower(), val)
    if not v:
        return
    f.os.family = "linux"
    f.os.distro = v.get("pretty_name") or " ".join(x for x in (v.get("name"), v.get("version")) if x) or None
    f.os.distro_version = v.get("version_id")
