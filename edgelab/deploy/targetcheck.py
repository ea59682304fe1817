"""No build on the wrong machine: a plan's runtime builds checked against where they will run.

Before anything is reserved or pushed, each runtime build a process would start is compared with
the machine that starts it: its target's OS (an ELF is not a Windows program), CPU architecture,
ABI (Android's arm64-v8a), instruction set (a ``x86-64-v3`` build dies of SIGILL on a CPU without
AVX2) and, for a CUDA target, the GPU architecture. That machine is the device, from its probed
facts; on a virtual device running ``--lab-host-build``, the lab host. A mismatch is a refusal
with its code, the device, the build, what the device is and what to build instead.
"""

from __future__ import annotations

from edgelab.deploy.artifact_need import ArtifactNeed, ResolvedArtifact
from edgelab.deploy.plan import ExecutionPlan
from edgelab.errors import Refusal, RefusalCode
from edgelab.runtimes.targets import Platform, mismatches, platform_of

CODE = RefusalCode.BUILD_TARGET_MISMATCH


def host_platform() -> Platform:
    """The lab host: where a virtual device's ``--lab-host-build`` runs."""
    import platform as _platform

    from edgelab.runtimes.targets import norm_arch

    flags: list[str] = []
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    flags = line.split(":", 1)[1].split()
                    break
    except OSError:
        pass
    arch = norm_arch(_platform.machine())
    return Platform(_platform.system().lower(), arch, tuple(flags), (), f"the lab host ({arch})")


def _entries(p: ExecutionPlan) -> list[ResolvedArtifact]:
    """The present runtime builds that processes run as programs (not an interpreter's zipapp)."""
    out = []
    for e in p.present_artifacts():
        if not e.build:
            continue
        proc = next((pr for pr in p.processes if pr.name == e.process), None)
        if proc is None or not proc.argv or not str(proc.argv[0]).startswith("{bin}"):
            continue
        out.append(e)
    return out


def check(p: ExecutionPlan, facts, *, lab_host_build: bool = False) -> Refusal | None:
    """The refusal for the first build that cannot run where the plan would start it, else None.

    Each mismatching process also carries the reason as ``unavailable``, so a listing of the plan
    shows it beside the process.
    """
    # --lab-host-build runs the lab host's build on the lab host's CPU; a Windows device starts
    # Windows executables only, so there the device's own facts decide
    on_host = p.virtual and lab_host_build and not _windows_device(facts)
    where = host_platform() if on_host else platform_of(facts)
    first: Refusal | None = None
    for e in _entries(p):
        target = e.target or ""
        problems = mismatches(target, e.isa, where, e.cuda_archs or ())
        if not problems:
            continue
        proc = next(pr for pr in p.processes if pr.name == e.process)
        name = e.name or f"{e.runtime} {target}"
        runs_on = "the lab host (--lab-host-build)" if on_host else p.device
        why = "; ".join(problems)
        proc.unavailable = f"{name} ({target}) cannot run on {runs_on}: {why}"
        if first is None:
            first = Refusal(
                CODE,
                f"build {name} is for {target}; {runs_on} is {where.describe()}: {why}",
                device=p.device,
                strategy=p.strategy,
                remedy=_remedy(e, facts, p.virtual and lab_host_build),
            )
    return first


def _windows_device(facts) -> bool:
    return (facts.os.family or "").lower() == "windows"


def _remedy(entry: ArtifactNeed, facts, lab_host_build: bool) -> str:
    rt = entry.runtime or "RUNTIME"
    if lab_host_build and _windows_device(facts):
        return (
            f"drop --lab-host-build: `edgelab runtime build {rt} --target windows-x64` (runs under wine here)"
        )
    want = own_target(facts)
    if want:
        return f"`edgelab runtime build {rt} --target {want}`, then deploy again (without --target)"
    return "probe the device (`edgelab probe DEVICE`), then build for the target its facts name"


def own_target(facts) -> str | None:
    """The CPU target a device's facts call for (``android-arm64``, ``linux-aarch64``, ``windows-x64``)."""
    plat = platform_of(facts)
    if not (plat.os and plat.arch):
        return None
    arch = {"x86_64": "x86_64", "aarch64": "aarch64"}.get(plat.arch, plat.arch)
    if plat.os == "android":
        return {"aarch64": "android-arm64", "x86_64": "android-x86_64"}.get(plat.arch)
    if plat.os == "windows":
        return {"aarch64": "windows-arm64", "x86_64": "windows-x64"}.get(plat.arch)
    return f"linux-{arch}"


__all__ = ["CODE", "check", "host_platform", "own_target"]
