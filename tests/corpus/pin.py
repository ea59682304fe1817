"""Re-pin PARSED.json: what today's parsers read from every capture in this folder, fact by fact.

EXPECTED.yaml is the ground truth taken from each capture's source (SOURCES.md) and lists only the
facts the source supports; PARSED.json pins everything the parsers derive besides (typed facts,
provenance, warnings), so no fact changes without a red test (tests/probe/test_probe_parsers.py).
After a deliberate parser change run ``python tests/corpus/pin.py`` and review the diff before
committing it: every changed line is a changed fact.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from edgelab.probe import detect

HERE = Path(__file__).parent
PINNED = HERE / "PARSED.json"
NOT_CAPTURES = {".md", ".yaml", ".json", ".py"}


def captures() -> list[str]:
    """Every capture file, relative to this folder."""
    return sorted(
        p.relative_to(HERE).as_posix()
        for p in HERE.rglob("*")
        if p.is_file() and p.suffix not in NOT_CAPTURES and "__pycache__" not in p.parts
    )


def pruned(x: Any) -> Any:
    """Drop unset facts (None, empty lists and maps) so the pin lists what was found; a fact that
    appears or disappears is still a difference."""
    if isinstance(x, dict):
        out = {k: pruned(v) for k, v in x.items()}
        return {k: v for k, v in out.items() if v not in (None, [], {})}
    if isinstance(x, list):
        return [pruned(v) for v in x]
    return x


def parse(rel: str) -> dict[str, Any] | None:
    """The detected command's whole result for one capture, as JSON would store it."""
    text = (HERE / rel).read_bytes().decode("utf-8", errors="replace")
    cmd = detect.detect(text)
    if cmd is None:
        return None
    return json.loads(json.dumps(pruned({"parser": cmd.name, **cmd.parse(text).to_dict()})))


def main() -> int:
    pins = {rel: parse(rel) for rel in captures()}
    PINNED.write_text(json.dumps(pins, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"pinned {len(pins)} captures in {PINNED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
