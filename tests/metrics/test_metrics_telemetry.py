"""Telemetry: corpus captures -> ResourceSample; a real /proc sampler over the local transport;
Prometheus exposition served over loopback HTTP."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from edgelab.errors import ConfigError
from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor
from edgelab.metrics.prometheus import exposition, make_server, serve_in_thread
from edgelab.metrics.telemetry import (
    from_dumpsys_battery,
    from_nvidia_smi_csv,
    from_tegrastats,
    from_thermal,
    parse_proc_block,
    proc_sample,
    sample_proc,
)
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.runs import create_run
from edgelab.transport.local import LocalTransport

CORPUS = Path(__file__).parents[1] / "corpus"


def test_tegrastats_line_from_the_corpus():
    line = (CORPUS / "jetson" / "jetson-12cpu-62801MB_tegrastats.txt").read_text().splitlines()[0]
    s = from_tegrastats(line, t=5.0, device="orin")
    assert s.source == "tegrastats" and s.cpu_pct == 0.0
    assert s.mem_available_bytes == (62801 - 4321) * 1024 * 1024  # RAM 4321/62801MB
    assert s.temps_c["CPU"] == 44.562 and "CV0" not in s.temps_c  # -256C = sensor off: left out
    assert s.power_w["VDD_GPU_SOC"] == pytest.approx(2.34)  # 2340mW
    assert s.clocks_mhz == {"cpu": 729.0, "emc": 2133.0} and s.gpu_util_pct == 0.0
    assert s.rss_bytes is None  # tegrastats has no per-process RSS: unknown, not zero
    assert from_tegrastats("not a tegrastats line", t=0) is None


def test_android_battery_and_thermal_zones():
    b = from_dumpsys_battery((CORPUS / "android" / "samsung_dumpsys-battery.txt").read_text(), t=1.0)
    assert b.temps_c == {"battery": 30.9}  # temperature: 309 (deci-degrees)
    assert b.power_w == {}  # "current now: 0": no power figure rather than 0 W
    z = from_thermal(
        "/sys/class/thermal/thermal_zone0/type:cpu-0-0\n/sys/class/thermal/thermal_zone0/temp:48200\n"
        "/sys/class/thermal/thermal_zone1/type:battery\n/sys/class/thermal/thermal_zone1/temp:31000\n",
        t=1.0,
    )
    assert z.temps_c == {"cpu-0-0": 48.2, "battery": 31.0}


def test_nvidia_smi_query_csv():
    out = from_nvidia_smi_csv(
        "0, 87, 71, 245.32, 2520, 10501, 15000, 16376\n1, [N/A], 40, [N/A], 210, 405, 1, 8188\n",
        t=2.0,
        device="rtx",
    )
    assert [s.source for s in out] == ["nvidia-smi:gpu0", "nvidia-smi:gpu1"]
    assert out[0].gpu_util_pct == 87 and out[0].temps_c == {"gpu0": 71} and out[0].power_w == {"gpu0": 245.32}
    assert out[1].gpu_util_pct is None and out[1].power_w == {}  # [N/A] is unknown


def test_proc_cpu_percent_from_two_readings():
    a = parse_proc_block("cpu  100 0 100 800 0 0 0 0 0 0\nMemAvailable:    1000 kB\n")
    b = parse_proc_block("cpu  150 0 150 850 50 0 0 0 0 0\nMemAvailable:    900 kB\nVmRSS:  2048 kB\n")
    # jiffies: total 1000 -> 1200 (+200), idle (idle + iowait) 800 -> 900 (+100): 50 % busy
    s = proc_sample(a, b, t=0.0)
    assert (
        s.cpu_pct == pytest.approx(50.0)
        and s.mem_available_bytes == 900 * 1024
        and s.rss_bytes == 2048 * 1024
    )
    assert proc_sample(None, a, t=0.0).cpu_pct is None  # one reading gives no rate


def test_proc_sampler_runs_over_a_real_transport():
    with LocalTransport() as tr:
        samples = list(sample_proc(tr, interval_s=0.05, count=3, pid=1, device="lab-host"))
    assert len(samples) == 3
    assert samples[0].cpu_pct is None and all(s.cpu_pct is not None for s in samples[1:])
    assert all(0.0 <= s.cpu_pct <= 100.0 for s in samples[1:])
    assert all(s.mem_available_bytes and s.mem_available_bytes > 0 for s in samples)
    assert all(s.device == "lab-host" and s.source == "proc" for s in samples)


@pytest.fixture
def engine(tmp_path):
    dbmod.dispose_engines()
    yield get_engine(str(tmp_path / "lab.db"))
    dbmod.dispose_engines()


def test_prometheus_exposition_of_a_live_run_and_telemetry(engine):
    with session_scope(engine) as s:
        rid = create_run(s, pipeline="qwen3-tts", device_name="orin", runtime="reference", virtual=True).id
    ing = Ingestor(engine, rid)
    ing.feed_all(
        [
            ev.RunStart(t=0.0),
            ev.RequestStart(t=10.0, request="a"),
            ev.AudioChunk(t=10.25, request="a", samples=1920),
            ev.AudioChunk(t=10.3, request="a", samples=1920),
            ev.ResourceSample(
                t=10.3, device="orin", source="tegrastats", temps_c={"CPU": 44.5}, power_w={"VDD_IN": 7.25}
            ),
        ]
    )
    ing.flush(live=True)
    try:
        text = exposition(engine)
        assert (
            f'edgelab_run_up{{run="{rid}",pipeline="qwen3-tts",device="orin",runtime="reference",virtual="true"}} 1.0'
            in text
        )
        assert "edgelab_audio_ttfa_ms{" in text and 'quantile="50"} 250.0' in text
        assert (
            'edgelab_device_temperature_celsius{device="orin",source="tegrastats",sensor="CPU"} 44.5' in text
        )
        assert "edgelab_device_cpu_percent" not in text  # unknown: absent, never 0
        assert "# TYPE edgelab_audio_underruns gauge" in text
        server = make_server(engine, "127.0.0.1", 0)
        serve_in_thread(server)
        try:
            host, port = server.server_address[:2]
            with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as resp:
                assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain")
                assert "edgelab_run_up" in resp.read().decode()
        finally:
            server.shutdown()
            server.server_close()
    finally:
        ing.close()
    assert "edgelab_run_up" not in exposition(engine)  # finished runs are no longer live
    with pytest.raises(ConfigError):
        make_server(engine, "0.0.0.0", 0)
