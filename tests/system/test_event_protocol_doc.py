"""The README documents the JSON-lines event protocol a team's controller emits: every kind is in
its table and its example lines are valid events."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from edgelab.metrics import events as ev

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_every_event_kind_and_field_is_documented():
    section = README.split("## The edgelab event protocol")[1].split("\n## ")[0]
    for kind, cls in ev.EVENT_TYPES.items():
        row = next((line for line in section.splitlines() if line.startswith(f"| `{kind}` |")), None)
        assert row is not None, kind
        for name in (f.name for f in fields(cls)):
            if name not in ("t", "run"):
                assert f"`{name}`" in row, (kind, name)


def test_the_example_lines_decode():
    block = README.split("## The edgelab event protocol")[1].split("```json\n")[1].split("```")[0]
    kinds = [ev.decode(line).kind for line in block.strip().splitlines()]
    assert kinds[0] == "run.start" and kinds[-1] == "run.end" and "text.token" in kinds
