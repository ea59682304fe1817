"""Prometheus text exposition of live runs and device telemetry, read from the database.

The exporter holds no state of its own: each scrape reads the runs that are running (and
the latest telemetry sample per device and source), so it can run on any host that sees
the database. Unknown figures are left out (Prometheus has no null), never written as 0.
"""

from __future__ import annotations

import ipaddress
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sqlalchemy import Engine, func
from sqlalchemy import select as sa_select
from sqlmodel import select

from edgelab.errors import ConfigError
from edgelab.states import RunState
from edgelab.store.db import session_scope
from edgelab.store.runs import Run, RunSummary, TelemetrySample

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _esc(v: Any) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(d: dict[str, Any]) -> str:
    return "{" + ",".join(f'{k}="{_esc(v)}"' for k, v in d.items() if v is not None) + "}"


class _Out:
    def __init__(self) -> None:
        self.families: dict[str, tuple[str, str, list[str]]] = {}

    def add(
        self, name: str, kind: str, help_: str, labels: dict[str, Any], value: float | int | None
    ) -> None:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return
        fam = self.families.setdefault(name, (kind, help_, []))
        fam[2].append(f"{name}{_labels(labels)} {float(value)!r}")

    def text(self) -> str:
        lines = []
        for name, (kind, help_, samples) in self.families.items():
            lines += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}", *samples]
        return "\n".join(lines) + "\n"


def exposition(engine: Engine, *, states: tuple[str, ...] = (RunState.RUNNING,)) -> str:
    """The exposition text: per live run its headline figures, per device its latest telemetry."""
    out = _Out()
    with session_scope(engine, write=False) as s:
        runs = s.exec(select(Run).where(Run.state.in_(states)).order_by(Run.id)).all()
        for run in runs:
            base = {
                "run": run.id,
                "pipeline": run.pipeline,
                "device": run.device_name,
                "runtime": run.runtime,
                "virtual": str(bool(run.virtual)).lower(),
            }
            out.add("edgelab_run_up", "gauge", "1 while the run is running", base, 1)
            summ = s.exec(
                select(RunSummary).where(RunSummary.run_id == run.id, RunSummary.kind == "live")
            ).first()
            if summ is None:
                continue
            m = summ.metrics
            out.add(
                "edgelab_run_requests", "gauge", "requests seen", base, (m.get("requests") or {}).get("total")
            )
            for cls, n in (m.get("errors") or {}).items():
                out.add("edgelab_run_errors", "gauge", "errors by class", {**base, "class": cls}, n)
            a = m.get("audio")
            if a:
                for q in ("p50", "p95"):
                    lab = {**base, "quantile": q[1:]}
                    out.add(
                        "edgelab_audio_ttfa_ms",
                        "gauge",
                        "time to first audio (nearest rank)",
                        lab,
                        a["ttfa_ms"][q],
                    )
                    out.add(
                        "edgelab_audio_rtf_streamed",
                        "gauge",
                        "streamed real-time factor",
                        lab,
                        a["rtf_streamed"][q],
                    )
                    out.add(
                        "edgelab_audio_chunk_gap_ms",
                        "gauge",
                        "audio chunk arrival gaps",
                        lab,
                        a["chunk_gaps_ms"][q],
                    )
                out.add(
                    "edgelab_audio_underruns",
                    "gauge",
                    "underruns when starting at TTFA",
                    base,
                    a["underruns_at_ttfa"],
                )
            act = m.get("action")
            if act:
                for q in ("p50", "p95"):
                    lab = {**base, "quantile": q[1:]}
                    out.add(
                        "edgelab_action_latency_ms",
                        "gauge",
                        "action inference latency",
                        lab,
                        act["latency_ms"][q],
                    )
                    out.add(
                        "edgelab_action_age_ms", "gauge", "observation-to-action age", lab, act["age_ms"][q]
                    )
                out.add(
                    "edgelab_action_deadline_misses",
                    "gauge",
                    "chunks later than one control period",
                    base,
                    act["deadline_misses"],
                )
        latest = sa_select(
            TelemetrySample.device_name, TelemetrySample.source, func.max(TelemetrySample.id)
        ).group_by(TelemetrySample.device_name, TelemetrySample.source)
        ids = [row[2] for row in s.connection().execute(latest).all()]
        rows = (
            s.exec(
                select(TelemetrySample)
                .where(TelemetrySample.id.in_(ids))
                .order_by(TelemetrySample.device_name, TelemetrySample.source)
            ).all()
            if ids
            else []
        )
        for t in rows:
            lab = {"device": t.device_name, "source": t.source}
            if t.virtual:
                lab["virtual"] = "true"  # a virtual device's shim: machinery, not a device figure
            out.add("edgelab_device_cpu_percent", "gauge", "CPU busy %", lab, t.cpu_pct)
            out.add("edgelab_device_rss_bytes", "gauge", "resident set of the workload", lab, t.rss_bytes)
            out.add(
                "edgelab_device_mem_available_bytes",
                "gauge",
                "memory the OS reports available",
                lab,
                t.mem_available_bytes,
            )
            out.add("edgelab_device_gpu_util_percent", "gauge", "GPU utilisation %", lab, t.gpu_util_pct)
            for k, v in (t.temps_c or {}).items():
                out.add(
                    "edgelab_device_temperature_celsius",
                    "gauge",
                    "temperature sensors",
                    {**lab, "sensor": k},
                    v,
                )
            for k, v in (t.clocks_mhz or {}).items():
                out.add("edgelab_device_clock_mhz", "gauge", "clocks", {**lab, "clock": k}, v)
            for k, v in (t.power_w or {}).items():
                out.add("edgelab_device_power_watts", "gauge", "power rails", {**lab, "rail": k}, v)
    return out.text()


def check_bind_host(host: str, allow_remote: bool = False) -> str:
    """Loopback unless the operator explicitly allows another address."""
    try:
        loop = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loop = host == "localhost"
    if not loop and not allow_remote:
        raise ConfigError(
            f"refusing to serve metrics on non-loopback address {host}",
            remedy="use 127.0.0.1, or pass --allow-remote to expose them on purpose",
        )
    return host


def make_server(
    engine: Engine, host: str = "127.0.0.1", port: int = 9464, *, allow_remote: bool = False
) -> ThreadingHTTPServer:
    """An HTTP server answering GET /metrics (port 0 picks a free one; see server_address)."""
    check_bind_host(host, allow_remote)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404)
                return
            body = exposition(engine).encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:  # quiet: scrapes every few seconds
            pass

    return ThreadingHTTPServer((host, port), Handler)


def serve_in_thread(server: ThreadingHTTPServer) -> threading.Thread:
    th = threading.Thread(target=server.serve_forever, name="edgelab-metrics", daemon=True)
    th.start()
    return th
