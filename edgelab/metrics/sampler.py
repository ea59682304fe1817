"""Telemetry beside every run: a sampler on the device while a deployment or bench runs.

Which sampler runs follows the device's latest probe facts:

- Jetson (L4T/JetPack or a Tegra SoC): ``tegrastats --interval MS``, one sample per line;
- Android: a shell loop printing a marked block per interval with every thermal zone
  (``grep . thermal_zoneN/type thermal_zoneN/temp``), ``dumpsys battery`` and MemAvailable;
- Linux/WSL with an NVIDIA GPU: an ``nvidia-smi --query-gpu=...`` loop (the full field list,
  falling back to a short one on drivers that refuse a field), plus the /proc loop's CPU and memory;
- other Linux: the /proc loop (CPU %, MemAvailable);
- Windows: the CIM / performance-counter and nvidia-smi sampler of ``edgelab.metrics.wintelemetry``
  (through PowerShell), or one registered in :data:`SAMPLERS`; none means no telemetry, said so.

The sampler opens its own transport connection (a second session beside the follower's or
the bench's), hands every sample to the run's :class:`~edgelab.metrics.ingest.Ingestor` through
``offer()`` (one writer thread) and stops with the run. Samples from a virtual device say so.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from edgelab.logs import Phases, swallowed
from edgelab.metrics.events import ResourceSample
from edgelab.metrics.telemetry import (
    BLOCK_MARK,
    NVSMI_FULL,
    NVSMI_MIN,
    from_dumpsys_battery,
    from_nvidia_smi_csv,
    from_tegrastats,
    from_thermal,
    parse_proc_block,
    proc_sample,
)
from edgelab.transport.base import Capability, Transport

log = logging.getLogger(__name__)

Parse = Callable[[list[str], float, str | None], list[ResourceSample]]


@dataclass
class SamplerPlan:
    """What to run on the device and how to read it: per line, or per block between marks."""

    source: str
    argv: list[str]
    mode: str  # line | block
    parse: Parse
    ps_script: str | None = (
        None  # Windows: the PowerShell script (streamed with stream_ps where the transport has it)
    )


# extra samplers by OS family (the Windows CIM sampler registers here)
SAMPLERS: dict[str, Callable[[dict[str, Any], float], SamplerPlan | None]] = {}


def _loop(body: str, interval_s: float) -> list[str]:
    """A sampling loop that never outlives its reader: it ends when the mark cannot be written
    (the reader is gone, even where SIGPIPE is ignored) and when the session that started it is
    gone (its parent, ``$PPID``, no longer exists: a killed adbd or sshd)."""
    return [
        "sh",
        "-c",
        f'P=$PPID; while kill -0 "$P" 2>/dev/null; do echo {BLOCK_MARK} || exit 0; {body} '
        f"sleep {float(interval_s):g}; done",
    ]


def _tegrastats(lines: list[str], t: float, device: str | None) -> list[ResourceSample]:
    return [s for s in (from_tegrastats(ln, t=t, device=device) for ln in lines) if s is not None]


def _android(lines: list[str], t: float, device: str | None) -> list[ResourceSample]:
    """One block: thermal zones, dumpsys battery, MemAvailable -> one sample."""
    thermal = "\n".join(ln for ln in lines if "thermal_zone" in ln)
    battery_lines = [ln for ln in lines if "thermal_zone" not in ln and not ln.startswith("MemAvailable:")]
    s = from_thermal(thermal, t=t, device=device)
    b = from_dumpsys_battery("\n".join(battery_lines), t=t, device=device)
    from edgelab.probe.parsers.android import parse_dumpsys_battery

    raw = {k: v for k, v in parse_dumpsys_battery("\n".join(battery_lines)).values.items()}
    s.temps_c.update(b.temps_c)
    s.power_w.update(b.power_w)
    for ln in lines:
        if ln.startswith("MemAvailable:") and len(ln.split()) >= 2 and ln.split()[1].isdigit():
            s.mem_available_bytes = int(ln.split()[1]) * 1024
    s.source = "android-thermal+battery"
    s.raw = {"battery": raw} if raw else {}
    return [s]


def _nvidia(lines: list[str], t: float, device: str | None, _state: dict[str, Any]) -> list[ResourceSample]:
    gpu_lines = [ln for ln in lines if ln.count(",") >= len(NVSMI_MIN) - 1]
    proc_lines = [ln for ln in lines if ln not in gpu_lines]
    out: list[ResourceSample] = []
    for ln in gpu_lines:
        fields = NVSMI_FULL if ln.count(",") == len(NVSMI_FULL) - 1 else NVSMI_MIN
        out += from_nvidia_smi_csv(ln, t=t, device=device, fields=fields)
    now = parse_proc_block("\n".join(proc_lines))
    if now is not None:
        out.append(proc_sample(_state.get("prev"), now, t=t, device=device))
        _state["prev"] = now
    return out


def _proc(lines: list[str], t: float, device: str | None, _state: dict[str, Any]) -> list[ResourceSample]:
    now = parse_proc_block("\n".join(lines))
    if now is None:
        return []
    s = proc_sample(_state.get("prev"), now, t=t, device=device)
    _state["prev"] = now
    return [s]


def _with_state(fn: Callable[..., list[ResourceSample]]) -> Parse:
    state: dict[str, Any] = {}
    return lambda lines, t, device: fn(lines, t, device, state)


PROC_BODY = "head -1 /proc/stat; grep MemAvailable /proc/meminfo;"


def is_jetson(facts: dict[str, Any]) -> bool:
    os_, ident = facts.get("os") or {}, facts.get("identity") or {}
    return bool(
        os_.get("l4t_version")
        or os_.get("jetpack")
        or ident.get("module_pnumber")
        or "tegra" in str(ident.get("soc_part") or "").lower()
    )


def _windows_plan(facts: dict[str, Any], interval_s: float) -> SamplerPlan | None:
    """CIM / performance counters and nvidia-smi through PowerShell (``edgelab.metrics.wintelemetry``)."""
    from edgelab.metrics import wintelemetry
    from edgelab.transport.quoting import encode_powershell

    script = wintelemetry.windows_sampler(interval_s)

    def parse(lines: list[str], t: float, device: str | None) -> list[ResourceSample]:
        ws = wintelemetry.parse_sample("\n".join(lines), t=t, device=device)
        ws.resource.raw = {**(ws.raw or {}), "memory": ws.memory, "adapters": ws.adapters, "npus": ws.npus}
        return [ws.resource, *ws.gpus]

    return SamplerPlan("windows-cim", encode_powershell(script), "block", parse, ps_script=script)


def plan_for(facts: dict[str, Any], *, interval_s: float = 1.0) -> SamplerPlan | None:
    """The sampler for a device with these probe facts; None when there is none for it."""
    family = (facts.get("os") or {}).get("family")
    if family in SAMPLERS:
        return SAMPLERS[family](facts, interval_s)
    if family == "windows":
        return _windows_plan(facts, interval_s)
    if family == "android":
        body = (
            'for z in /sys/class/thermal/thermal_zone*; do grep . "$z/type" "$z/temp" 2>/dev/null; done; '
            "dumpsys battery 2>/dev/null; grep MemAvailable /proc/meminfo;"
        )
        return SamplerPlan("android", _loop(body, interval_s), "block", _android)
    if family != "linux":
        return None
    if is_jetson(facts):
        return SamplerPlan(
            "tegrastats", ["tegrastats", "--interval", str(int(interval_s * 1000))], "line", _tegrastats
        )
    if any(str(a.get("vendor") or "").lower() == "nvidia" for a in facts.get("accelerators") or []):
        full, short = ",".join(NVSMI_FULL), ",".join(NVSMI_MIN)
        body = (
            f"nvidia-smi --query-gpu={full} --format=csv,noheader,nounits 2>/dev/null || "
            f"nvidia-smi --query-gpu={short} --format=csv,noheader,nounits; {PROC_BODY}"
        )
        return SamplerPlan("nvidia-smi", _loop(body, interval_s), "block", _with_state(_nvidia))
    return SamplerPlan("proc", _loop(PROC_BODY, interval_s), "block", _with_state(_proc))


def read_samples(
    lines: Iterator[str],
    plan: SamplerPlan,
    *,
    device: str | None,
    virtual: bool | None,
    clock: Callable[[], float] = time.time,
) -> Iterator[ResourceSample]:
    """Samples from the sampler's output lines (stamped on the lab clock at arrival)."""
    block: list[str] = []
    for line in lines:
        line = line.rstrip("\r\n")
        if plan.mode == "line":
            batch = plan.parse([line], clock(), device)
        elif line.strip() == BLOCK_MARK:
            batch, block = (plan.parse(block, clock(), device) if block else []), []
        else:
            block.append(line)
            continue
        for s in batch:
            s.virtual = virtual
            yield s


class TelemetrySampler(threading.Thread):
    """Runs a sampler plan over its own transport and offers each sample to a sink until stopped."""

    def __init__(
        self,
        connect: Callable[[], Transport],
        plan: SamplerPlan,
        *,
        device: str | None,
        virtual: bool | None,
        sink: Callable[[ResourceSample], None],
        run: str | None = None,
    ):
        super().__init__(name=f"telemetry-{device}", daemon=True)
        self.connect, self.plan, self.device, self.virtual = connect, plan, device, virtual
        self.sink, self.run_id = sink, run
        self.samples = 0
        self.error: str | None = None
        self._stop_evt = threading.Event()
        self._proc: Any = None
        self._t: Transport | None = None

    def run(self) -> None:
        phases = Phases(log, f"telemetry {self.device} {self.run_id or ''}".rstrip())
        try:
            self._t = self.connect()
            phases("connected", source=self.plan.source)
            if self._stop_evt.is_set():
                return
            if self.plan.ps_script and self._t.supports(Capability.WINDOWS_SHELL):
                proc = self._t.stream_ps(self.plan.ps_script)
            else:
                proc = self._t.stream(self.plan.argv)
            with proc:
                self._proc = proc
                if self._stop_evt.is_set():
                    proc.cancel()
                    return
                for s in read_samples(proc.lines(), self.plan, device=self.device, virtual=self.virtual):
                    if self._stop_evt.is_set():
                        break
                    s.run = self.run_id
                    self.sink(s)
                    self.samples += 1
        except Exception as err:  # noqa: BLE001 - telemetry never fails the run; the reason is kept
            if not self._stop_evt.is_set():
                self.error = f"{type(err).__name__}: {err}"[:300]
                log.debug("telemetry %s: %s", self.device, self.error, exc_info=True)
        finally:
            self._close()
            phases("ended", samples=self.samples, total_s=round(phases.total(), 2))

    def _close(self) -> None:
        if self._proc is not None:
            with swallowed(log, "cancelling the telemetry command"):
                self._proc.cancel()
        if self._t is not None:
            with swallowed(log, "closing the device connection"):
                self._t.close()
            self._t = None

    def stop(self, timeout: float = 10.0) -> None:
        self._stop_evt.set()
        if self._proc is not None:
            with swallowed(log, "cancelling the telemetry command"):
                self._proc.cancel()
        if self.is_alive():
            self.join(timeout)

    def report(self) -> dict[str, Any]:
        return {
            "source": self.plan.source,
            "samples": self.samples,
            "error": self.error,
            "virtual": self.virtual,
        }


def start_beside(
    engine: Any,
    run_id: str,
    device: str,
    ingestor: Any,
    *,
    transport: dict[str, Any] | None = None,
    interval_s: float = 1.0,
) -> TelemetrySampler | None:
    """Start the device's sampler for a run, its samples offered to ``ingestor``; None (with the
    reason stored in the run's meta ``telemetry``) when the device has no sampler or no probe."""
    from edgelab.errors import NotFound
    from edgelab.store.db import session_scope
    from edgelab.store.devices import get_device
    from edgelab.store.runs import get_run
    from edgelab.store.snapshots import latest_snapshot
    from edgelab.transport import open_transport

    why = None
    plan = None
    with session_scope(engine, write=False) as s:
        dev = get_device(s, device)
        endpoint, virtual = dev.endpoint(), bool(dev.virtual)
        try:
            facts = latest_snapshot(s, device).facts or {}
        except NotFound:
            facts, why = {}, f"{device} was never probed: its sampler is chosen from its facts"
    if why is None:
        plan = plan_for(facts, interval_s=interval_s)
        if plan is None:
            why = f"no telemetry sampler for {(facts.get('os') or {}).get('family') or 'this'} devices yet"
    with session_scope(engine) as s:
        run = get_run(s, run_id)
        run.meta = {
            **run.meta,
            "telemetry": {
                "source": plan.source if plan else None,
                "virtual": virtual,
                "interval_s": interval_s,
                "why_none": why,
            },
        }
        s.add(run)
    if plan is None:
        return None
    opts = dict(transport or {})
    sampler = TelemetrySampler(
        lambda: open_transport(endpoint, **opts),
        plan,
        device=device,
        virtual=virtual,
        sink=ingestor.offer,
        run=run_id,
    )
    sampler.start()
    return sampler
