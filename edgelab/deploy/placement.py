"""Placement honesty: what each stage actually ran on, as observed, with every fallback flagged.

Observations come from the process's own output: edgelab events that name a stage's device,
and runtime log lines (llama.cpp's layer offload count, OpenCL/QNN/CUDA backend banners). A stage
with no evidence is ``unobserved``, never assumed to be where it was planned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.strategies.common import REFERENCE, REFERENCE_PLACEMENT
from edgelab.runtimes.spec import PlacementSource

_PATTERNS: list[tuple[re.Pattern[str], Any]] = [
    (re.compile(r"offloaded (\d+)/(\d+) layers to GPU"), lambda m: "gpu" if int(m.group(1)) > 0 else "cpu"),
    (re.compile(r"QnnHtp|HTP backend|using QNN", re.I), "npu"),
    (re.compile(r"ggml_opencl|OpenCL backend|using OpenCL", re.I), "gpu"),
    (re.compile(r"ggml_cuda_init|using CUDA|CUDA0", re.I), "gpu"),
    (re.compile(r"ggml_vulkan|using Vulkan", re.I), "gpu"),
    (re.compile(r"falling back to CPU|using CPU backend|CPU only", re.I), "cpu"),
    (re.compile(r"\bCPU_Mapped model buffer size|CPU_REPACK model buffer size|CPU model buffer size"), "cpu"),
]


def _from_event(line: str) -> list[tuple[str | None, str, bool | None, str]] | None:
    """[(stage or None for all, placement word, fallback the runtime reported or None, evidence)]
    from an event line that states placement: a word (``"gpu"``), or, as edgelab's controller
    reports it, one record per stage (``{"action_head": {"observed": "cpu", "fallback": false,
    "detail": ...}}``)."""
    try:
        ev = json.loads(line)
    except ValueError:
        return None
    if not isinstance(ev, dict):
        return None
    where = ev.get("placement") or ev.get("device_kind") or (ev.get("meta") or {}).get("placement")
    if not where:
        return None
    if isinstance(where, dict):
        out: list[tuple[str | None, str, bool | None, str]] = []
        for stage, rep in where.items():
            if isinstance(rep, dict) and rep.get("observed"):
                fb = rep.get("fallback")
                detail = (
                    f"{rep.get('runtime') or 'runtime'} reports {rep['observed']}: {rep.get('detail') or ''}"
                )
                out.append(
                    (str(stage), str(rep["observed"]), bool(fb) if fb is not None else None, detail[:200])
                )
        return out or None
    return [(ev.get("stage"), str(where), None, line.strip()[:200])]


def observe(plan: ExecutionPlan, lines_by_process: Mapping[str, Iterable[str]]) -> list[dict[str, Any]]:
    """One record per stage: planned, observed (with its evidence), and whether it fell back."""
    seen: dict[str, tuple[str, str]] = {}
    reported_fallback: dict[str, bool] = {}  # stage -> the runtime's own word (requested vs observed)
    load_log = {pr.name for pr in plan.processes if pr.placement == PlacementSource.LLAMA_LOAD_LOG}
    for proc in load_log & set(lines_by_process):
        from edgelab.adapters.llama_placement import parse_placement

        pl = parse_placement(list(lines_by_process[proc]))
        if pl.observed:
            ev = ", ".join(f"{k} {v:.0f} MiB" for k, v in pl.model_mib.items())
            if pl.layers_total is not None:
                ev += f"; offloaded {pl.layers_offloaded}/{pl.layers_total} layers to GPU"
            for st in plan.stages:
                if st.process == proc:
                    seen[st.name] = (pl.observed, f"llama.cpp load log: model buffers {ev}")
    for proc, lines in lines_by_process.items():
        for line in lines:
            got = _from_event(line)
            if got:
                for stage, where, fb, evidence in got:
                    for st in plan.stages:
                        if st.process == proc and (stage is None or stage == st.name):
                            seen[st.name] = (where, evidence)
                            if fb is not None:
                                reported_fallback[st.name] = fb
                continue
            for pat, res in _PATTERNS:
                m = pat.search(line)
                if m:
                    where = res(m) if callable(res) else res
                    for st in plan.stages:
                        if st.process == proc and st.name not in seen:
                            seen[st.name] = (where, line.strip()[:200])
                    break
    out = []
    for st in plan.stages:
        if st.placement == "server":
            out.append(
                {
                    "stage": st.name,
                    "planned": "server",
                    "observed": "server",
                    "evidence": "S4 remote stage",
                    "fallback": False,
                }
            )
            continue
        hit = seen.get(st.name)
        observed, where_from = (hit[0], hit[1]) if hit else (None, None)
        if observed is None and st.runtime == REFERENCE and st.process in lines_by_process:
            observed, where_from = REFERENCE_PLACEMENT, "reference runtime: CPU only, random weights"
        planned_kind = st.placement.split(" ")[0]
        fallback = reported_fallback.get(
            st.name, observed is not None and observed.split(" ")[0] != planned_kind
        )
        out.append(
            {
                "stage": st.name,
                "planned": st.placement,
                "observed": observed or "unobserved",
                "evidence": where_from,
                "fallback": fallback,
            }
        )
    return out
