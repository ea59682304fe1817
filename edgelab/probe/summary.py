"""One line of what a probed device is (SoC/model, OS, RAM, accelerators): for tables and reports."""

from __future__ import annotations

from typing import Any

from edgelab.units import gib


def _gib(n: int | None) -> str | None:
    return gib(n or None, missing=None)


def summarize(facts: dict[str, Any] | None) -> dict[str, Any]:
    """Short, display-ready fields from a stored facts dict; missing facts stay None (never guessed)."""
    if not facts:
        return {"soc_model": None, "os": None, "ram": None, "ram_bytes": None, "accelerators": []}
    ident, osi = facts.get("identity") or {}, facts.get("os") or {}
    # a name from the tables, else the raw ID the device printed, marked so (as jetson-stats shows
    # an unknown module's P-number): nothing is hidden because a table lacks a row
    soc = ident.get("soc_name") or (
        f"{ident['soc_part']} (not in the tables)"
        if ident.get("soc_part")
        else (f"platform {ident['board_platform']}" if ident.get("board_platform") else None)
    )
    model = (
        ident.get("module_name")
        or ident.get("model")
        or (f"module {ident['module_pnumber']}" if ident.get("module_pnumber") else None)
        or (facts.get("cpu") or {}).get("model")
    )
    soc_model = " / ".join(x for x in (soc, model) if x) or None
    if osi.get("family") == "android":
        os_text = f"Android {osi.get('android_release') or '?'}" + (
            f" (SDK {osi['android_sdk']})" if osi.get("android_sdk") else ""
        )
    elif osi.get("family") == "windows":
        os_text = osi.get("distro") or "Windows"
        if osi.get("windows_build"):
            os_text += f" (build {osi['windows_build']})"
    else:
        os_text = osi.get("distro") or osi.get("family")
        if osi.get("l4t_version"):
            os_text = f"{os_text or 'Linux'}, L4T {osi['l4t_version']}" + (
                f" (JetPack {osi['jetpack']})" if osi.get("jetpack") else ""
            )
        if osi.get("is_wsl"):
            os_text = f"{os_text or 'Linux'} (WSL{osi.get('wsl_generation') or ''})"
    pools = (facts.get("memory") or {}).get("pools") or []
    ram = next((p for p in pools if p.get("kind") == "ram"), None) or next(
        (p for p in pools if p.get("kind") == "wsl_quota"), None
    )
    accels = []
    for a in facts.get("accelerators") or []:
        label = a.get("name") or a.get("kind")
        if a.get("usable") is False:
            label += " (unusable)"
        accels.append(label)
    ram_bytes = ram.get("total_bytes") if ram else None
    return {
        "soc_model": soc_model,
        "os": os_text,
        "ram": _gib(ram_bytes) + (" quota" if ram and ram.get("kind") == "wsl_quota" else "")
        if ram_bytes
        else None,
        "ram_bytes": ram_bytes,
        "accelerators": accels,
    }
