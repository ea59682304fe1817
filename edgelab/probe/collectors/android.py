"""Android collector (phones, Qualcomm kits): one toybox/mksh script over ADB."""

from __future__ import annotations

from edgelab.probe.collectors import posix
from edgelab.probe.collectors.base import Collector, Source
from edgelab.probe.facts import Facts

# The accelerator libraries a vendor image ships say which APIs an app can reach.
LIBS = (
    "/vendor/lib64/libOpenCL.so /system/vendor/lib64/libOpenCL.so "
    "/vendor/lib64/libQnnHtp*.so /vendor/lib64/libQnnSystem.so /vendor/lib64/libcdsprpc.so "
    "/vendor/lib64/hw/vulkan.*.so /system/lib64/libvulkan.so"
)


def apply_vendor_libs(facts: Facts, text: str, label: str) -> None:
    """Which accelerator libraries exist: OpenCL and Vulkan on the GPU, QNN HTP on the Hexagon NPU."""
    found: dict[str, str] = {}
    paths = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("/")]
    names = [p.rsplit("/", 1)[-1] for p in paths]
    for n, p in zip(names, paths, strict=True):
        if n == "libOpenCL.so":
            found.setdefault("opencl", p)
        elif n.startswith("libQnnHtp") and n.endswith(".so"):
            found.setdefault("qnn_htp", p)
        elif n.startswith("vulkan.") or n == "libvulkan.so":
            found.setdefault("vulkan", p)
        elif n == "libcdsprpc.so":
            found.setdefault("fastrpc", p)
    for key, value in found.items():
        if key not in facts.software:
            facts.software[key] = value
            facts.provenance[f"software.{key}"] = label


# One entry per source, in merge order: section name, what an operator would type, the parser,
# then what the script runs (body, guard).
SOURCES = (
    Source("getprop", "getprop", "getprop", "t $TO getprop", "have getprop"),
    posix.UNAME,
    posix.PROC_VERSION,
    posix.CPUINFO,
    posix.CPUFREQ,
    posix.MEMINFO,
    posix.THERMAL,
    Source("dumpsys_battery", "dumpsys battery", "dumpsys_battery", "t 5 dumpsys battery", "have dumpsys"),
    Source(
        "vendor_libs",
        "ls /vendor/lib64 (OpenCL, QNN, Vulkan)",
        apply_vendor_libs,
        f'for f in {LIBS}; do [ -e "$f" ] && echo "$f"; done; true',
    ),
)


def _post(facts: Facts, sections) -> None:
    """Mark GPU/NPU APIs usable or not from the libraries actually present on the image."""
    if "vendor_libs" not in sections or sections["vendor_libs"].exit_code is None:
        return
    sw = facts.software
    for acc in facts.accelerators:
        if acc.kind == "gpu":
            found = [api for api, key in (("OpenCL", "opencl"), ("Vulkan", "vulkan")) if key in sw]
            for api in found:
                if api not in acc.apis:
                    acc.apis.append(api)
            missing = [api for api in ("OpenCL", "Vulkan") if api in acc.apis and api not in found]
            acc.usable = bool(found)
            acc.reason = (
                f"{', '.join(sw[k] for k in ('opencl', 'vulkan') if k in sw)} present"
                if found
                else "no OpenCL or Vulkan library on the vendor image"
            )
            if missing:
                acc.reason += f"; {', '.join(missing)} library not found"
        elif acc.kind == "npu":
            acc.usable = "qnn_htp" in sw
            acc.reason = (
                f"{sw['qnn_htp']} present"
                if acc.usable
                else "no libQnnHtp*.so on the vendor image (push the QNN runtime with the artifact)"
            )


COLLECTOR = Collector("android", 1, SOURCES, posix.script, _post)
