"""Re-make the collector fixtures in this folder: one JSON per (family, source, persona), as pyinfra
keeps its fact fixtures: ``{"command", "body", "output", "fact"}``.

Each output is what the family's real collection script printed for that source when run here in
a virtual lab persona (edgelab/sim/personas, entered with edgelab.sim.persona_exec on the lab
host: a VIRTUAL device, its files and shims; a source the persona reads from the host, /proc/meminfo
say, printed the lab host's). ``fact`` is what the source's parser makes of that output alone, as
``parse_sections`` merges it. tests/probe/test_probe_collect.py asserts each fixture exactly; after a
deliberate change run ``python tests/collectors/capture.py`` and review the diff: every changed
line is a changed command or fact, except the personas' live readings (the phones' battery
temperature moves between captures; keep the old file where only such a reading changed).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from edgelab.probe.collectors import COLLECTORS, Collector, Section, parse_sections, split_sections
from edgelab.sim.persona_exec import persona_argv
from edgelab.sim.personas import PERSONAS_DIR

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, when run as a script
from corpus.pin import pruned  # noqa: E402 - unset facts left out, as in the corpus pins

HERE = Path(__file__).parent
CASES = [("linux", "orin-agx"), ("linux", "wsl-hx370"), ("android", "s25"), ("windows", "win-hx370-rtx5090")]
# Sources no persona answers here, from the probe corpus (tests/corpus, real captures; SOURCES.md).
CORPUS = {("linux", "hostnamectl"): "jetson/agx-orin-devkit-industrial_l4t36.4.3_hostnamectl.txt"}
NONCE = "f1x7ure0f1x7"


def fact(collector: Collector, name: str, output: str) -> dict[str, Any]:
    """What the collector makes of this one source's output (a finished section, status 0)."""
    facts = parse_sections(collector, {name: Section(name, output, 0)})
    return json.loads(json.dumps(pruned(facts.to_dict())))


def capture(family: str, persona: str) -> dict[str, str]:
    collector = COLLECTORS[family]
    argv = persona_argv(PERSONAS_DIR / persona, collector.argv(NONCE, 3.0))
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    sections, _ = split_sections(res.stdout, NONCE)
    # a source that failed here (hostnamectl without systemd on the lab host) is no fixture
    return {n: s.output for n, s in sections.items() if s.exit_code == 0 and s.output.strip()}


def write(family: str, name: str, case: str, output: str, origin: dict[str, str]) -> None:
    collector = COLLECTORS[family]
    src = collector.source(name)
    assert src is not None, name
    doc = {
        "command": src.command,
        "body": src.body,
        **origin,
        "output": output.split("\n"),
        "fact": fact(collector, name, output),
    }
    path = HERE / family / f"{name}.{case}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> int:
    for old in HERE.glob("*/*.json"):
        old.unlink()
    for family, persona in CASES:
        for name, output in capture(family, persona).items():
            write(family, name, persona, output, {"persona": persona})
    for (family, name), rel in CORPUS.items():
        text = (HERE.parent / "corpus" / rel).read_bytes().decode("utf-8", errors="replace")
        write(family, name, "corpus", text, {"corpus": rel})
    print(f"{len(list(HERE.glob('*/*.json')))} fixtures in {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
