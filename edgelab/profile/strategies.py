"""Strategy eligibility S1-S5 per pipeline (DESIGN §3). A refusal always says why.

S1 direct port (vLLM-Omni on the device): where the probe saw vllm and vllm_omni import (a venv
``edgelab runtime install`` made, any class), or Jetson-class CUDA with enough memory.
S2 backend substitution: never chosen automatically (the study does not recommend it).
S3 light orchestration: every class, given a runtime target and a fitting budget.
S4 hybrid: only with a configured server endpoint; for VLA only as a re-planning tier.
S5 edge-native baseline: every class with a runtime target; the measurement floor.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from edgelab.catalog.devices import DeviceEntry
from edgelab.catalog.pipelines import PipelineSpec
from edgelab.errors import RefusalCode
from edgelab.probe.parsers.vllm import importable
from edgelab.profile.defaults import GIB
from edgelab.profile.fit import Fit

S1_MIN_RAM_GIB = 28  # AGX Orin 32 GB reports ~30 GiB; smaller Jetsons cannot hold vLLM-Omni's server


@dataclass
class StrategyDecision:
    strategy: str
    eligible: bool
    reason: str
    code: str | None = None  # refusal code: class_not_supported, budget_exceeds_device, no_endpoint, ...

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide(
    spec: PipelineSpec,
    device_class: str,
    entry: DeviceEntry | None,
    fit: Fit,
    device_fit: Fit | None,
    runtime_target: str | None,
    ram_bytes: int | None,
    endpoint_configured: bool,
    software: dict[str, str] | None = None,
) -> list[StrategyDecision]:
    out = [_s1(spec, device_class, entry, fit, ram_bytes, software or {})]
    out.append(
        StrategyDecision(
            "S2",
            False,
            "S2 backend substitution is never chosen automatically: the study "
            "does not recommend a foreign worker inside vLLM's process model",
            "not_recommended",
        )
    )
    out.append(_local("S3", spec, fit, runtime_target, "light orchestration over llama.cpp/MNN/ExecuTorch"))
    out.append(_s4(spec, device_fit, endpoint_configured))
    out.append(
        _local("S5", spec, fit, runtime_target, "edge-native baseline, reported beside every strategy")
    )
    return out


def _installed(software: dict[str, str]) -> str:
    """vLLM-Omni as the probe saw it: versions, the torch build, the venv."""
    dist = software.get("vllm_dist") or "vllm"
    return (
        f"vllm-omni {software.get('vllm_omni')} with {dist} {software.get('vllm')} "
        f"(torch {software.get('torch')}, {software.get('torch_build') or 'build unknown'}) "
        f"in {software.get('vllm_venv')}"
    )


def _s1(
    spec: PipelineSpec,
    device_class: str,
    entry: DeviceEntry | None,
    fit: Fit,
    ram_bytes: int | None,
    software: dict[str, str],
) -> StrategyDecision:
    installed = bool(software.get("vllm_omni"))
    if device_class != "jetson" and not installed:
        return StrategyDecision(
            "S1",
            False,
            f"class {device_class}: S1 needs vLLM-Omni on the device (none installed: "
            f"`edgelab runtime install vllm-omni`) or a Jetson-class CUDA server",
            "class_not_supported",
        )
    if not spec.vllm_omni:
        return StrategyDecision(
            "S1", False, f"pipeline {spec.id} has no vLLM-Omni serving path", "not_served"
        )
    if installed and device_class != "jetson":
        if not importable(software):
            bad = next(
                f"{m} does not import ({software.get(k)})"
                for m, k in (("vllm", "vllm_import"), ("vllm_omni", "vllm_omni_import"))
                if software.get(k) != "ok"
            )
            return StrategyDecision("S1", False, f"{_installed(software)}: {bad}", "runtime_broken")
        return _s1_memory(fit, f"{_installed(software)} imports")
    if entry is not None and not entry.capabilities.get("vllm_omni"):
        return StrategyDecision(
            "S1",
            False,
            f"{entry.id}: S1 needs AGX Orin 32/64 GB or Thor-class memory for the vLLM-Omni server",
            "class_not_supported",
        )
    if entry is None and (ram_bytes is None or ram_bytes < S1_MIN_RAM_GIB * GIB):
        have = f"{ram_bytes / GIB:.1f} GiB" if ram_bytes else "unknown RAM"
        return StrategyDecision(
            "S1",
            False,
            f"unknown Jetson with {have}: S1 needs at least {S1_MIN_RAM_GIB} GiB",
            RefusalCode.BUDGET_EXCEEDS_DEVICE,
        )
    return _s1_memory(fit, "Jetson-class CUDA", " (expect 95-355 s cold start)")


def _s1_memory(fit: Fit, what: str, tail: str = "") -> StrategyDecision:
    """vLLM-Omni serves the checkpoint's 16-bit weights: they and their KV must fit the pool."""
    first = fit.tried[0] if fit.tried else None
    if first is None or not first.fits:
        why = (
            f"{first.pool}: {first.quantization} weights leave {first.kv_budget_bytes / GIB:.2f} GiB for KV"
            if first
            else "memory pool unknown"
        )
        return StrategyDecision(
            "S1",
            False,
            f"budget_exceeds_device: vLLM-Omni serves 16-bit weights; {why}",
            RefusalCode.BUDGET_EXCEEDS_DEVICE,
        )
    return StrategyDecision(
        "S1",
        True,
        f"{what} with {first.pool_bytes / GIB:.1f} GiB; {first.quantization} "
        f"weights fit with {first.kv_budget_bytes / GIB:.1f} GiB KV budget{tail}",
    )


def _local(sid: str, spec: PipelineSpec, fit: Fit, runtime_target: str | None, what: str) -> StrategyDecision:
    if not runtime_target:
        return StrategyDecision(
            sid, False, "no runtime target for this device (OS/architecture unknown)", "no_runtime_target"
        )
    if not fit.fits:
        b = fit.budget
        why = (
            f"{b.pool}: even {b.quantization} weights {b.weights_bytes / GIB:.2f} GiB leave "
            f"{b.kv_budget_bytes / GIB:.2f} GiB for KV"
            if b
            else "memory pool unknown"
        )
        return StrategyDecision(
            sid, False, f"budget_exceeds_device: {why}", RefusalCode.BUDGET_EXCEEDS_DEVICE
        )
    return StrategyDecision(sid, True, f"{what} on {runtime_target} with {fit.quantization} weights")


def _s4(spec: PipelineSpec, device_fit: Fit | None, endpoint_configured: bool) -> StrategyDecision:
    if not endpoint_configured:
        return StrategyDecision(
            "S4", False, "no S4 server endpoint configured (a reachable vLLM-Omni server)", "no_endpoint"
        )
    if not spec.device_stages_s4:
        return StrategyDecision(
            "S4", False, f"pipeline {spec.id} has no stage to run on the device side", "no_device_stage"
        )
    if device_fit is not None and not device_fit.fits:
        return StrategyDecision(
            "S4",
            False,
            f"budget_exceeds_device: device-side stages {', '.join(spec.device_stages_s4)} do not fit",
            RefusalCode.BUDGET_EXCEEDS_DEVICE,
        )
    tier = " as a re-planning tier only, never in the control loop" if spec.kind == "vla" else ""
    return StrategyDecision(
        "S4", True, f"device runs {', '.join(spec.device_stages_s4)}; the rest on the configured server{tier}"
    )
