# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""Qwen3-TTS on llama.cpp's own engine, real processes only: the lab host's build (llama-tts and
edgelab's S3 controller, tests/fixtures/llama_build.py) on small random-weight GGUFs made by
``model synth`` (--scale 0.0625). The parity oracle (the controller's streamed PCM is llama-tts's
WAV, byte for byte), cancel by stdin and by signal, deploy/bench on the virtual lab, and vLLM-Omni's
speech stream fed by the controller."""

from __future__ import annotations

import base64
import hashlib
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from deploy.test_deploy_helpers import deploy_lab, group_members  # noqa: F401 - fixture
from edgelab.adapters.llama_tts import parse_log
from edgelab.protocols.wav import wav_facts

SCALE = 0.0625
TEXT = "Hello from the edge."
RAMP = [2, 4, 8, 16, 25]


@pytest.fixture(scope="module")
def tts(llama_build, tmp_path_factory):
    """(programs by name, talker, mmproj): the build's products and a small Qwen3-TTS pair."""
    from edgelab.models.tts_synth import tts_files

    f = tts_files("qwen3-tts-0.6b", scale=SCALE, seed=0, out_dir=tmp_path_factory.mktemp("tts"))
    return llama_build.products, f.talker, f.mmproj


def _common(talker: Path, mmproj: Path, frames: int, seed: int) -> list[str]:
    return [
        "-m",
        str(talker),
        "--mmproj",
        str(mmproj),
        "-n",
        str(frames),
        "-s",
        str(seed),
        "-t",
        "2",
        "-c",
        "512",
    ]


def llama_tts(tts, out: Path, *, frames: int, seed: int, text: str = TEXT) -> tuple[bytes, str]:
    bins, talker, mmproj = tts
    res = subprocess.run(
        [str(bins["llama-tts"]), *_common(talker, mmproj, frames, seed), "-p", text, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return out.read_bytes(), res.stderr


def controller(tts, *extra: str, frames: int, seed: int, stdin=subprocess.DEVNULL) -> subprocess.Popen:
    bins, talker, mmproj = tts
    argv = [str(bins["s3-controller"]), *_common(talker, mmproj, frames, seed), "--text", TEXT, *extra]
    return subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def events(proc: subprocess.Popen, timeout: float = 300) -> list[dict]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def pcm_of(evs: list[dict], request: str) -> bytes:
    return b"".join(
        base64.b64decode(e["pcm"]) for e in evs if e["kind"] == "audio.chunk" and e["request"] == request
    )


def test_llama_tts_loads_the_synth_files_and_writes_1920_samples_a_frame(tts, tmp_path):
    wav, log_text = llama_tts(tts, tmp_path / "a.wav", frames=12, seed=1)
    facts = wav_facts(wav)
    assert facts is not None and (facts.sample_rate, facts.channels, facts.bits) == (24000, 1, 16)
    log = parse_log(log_text)
    assert log.complete and log.frames == 12 and facts.samples == 12 * 1920 == log.audio_s * 24000
    assert log.load_s is not None and log.load_s > 0 and log.total_s > 0
    again, _ = llama_tts(tts, tmp_path / "b.wav", frames=12, seed=1)
    assert again == wav  # the same seed, the same bytes
    other, _ = llama_tts(tts, tmp_path / "c.wav", frames=12, seed=2)
    assert other != wav
    pcm = wav[44:]
    assert pcm.count(0) < len(pcm) // 2  # a signal, not silence: the parity below compares real audio


def test_parity_the_streamed_pcm_is_llama_tts_wav_byte_for_byte(tts, tmp_path):
    """The study's parity oracle for S3 against S5: 80 frames (past code2wav's 72-frame window) on
    the edge ramp, two requests (seeds 5 and 6), each equal to llama-tts's WAV for its seed."""
    proc = controller(
        tts, "--pcm", "--requests", "2", "--schedule", "ramp", "--run", "par", frames=80, seed=5
    )
    evs = events(proc)
    assert proc.returncode == 0
    for i, seed in enumerate((5, 6)):
        rid = f"par-r{i:03d}"
        wav, _ = llama_tts(tts, tmp_path / f"s5-{seed}.wav", frames=80, seed=seed)
        assert pcm_of(evs, rid) == wav[44:], f"request {rid}: the stream is not llama-tts's audio"
        chunks = [e for e in evs if e["kind"] == "audio.chunk" and e["request"] == rid]
        assert [c["frames"] for c in chunks] == [2, 4, 8, 16, 25, 25]  # the ramp, the last 25 cut to 80
        assert [c["samples"] for c in chunks] == [c["frames"] * 1920 for c in chunks]
        assert chunks[-1]["terminal"] and not any(c["terminal"] for c in chunks[:-1])
        for c in chunks:
            assert hashlib.sha256(base64.b64decode(c["pcm"])).hexdigest() == c["sha256"]
        (end,) = [e for e in evs if e["kind"] == "request.end" and e["request"] == rid]
        assert end["ok"] and end["frames"] == 80 and end["stop"] == "budget"
    start = evs[0]
    assert start["kind"] == "run.start" and start["runtime"] == "llama.cpp" and start["strategy"] == "S3"
    assert start["meta"]["placement"]["talker"]["observed"] == "cpu" and start["meta"]["window_frames"] == 72
    assert any(e["kind"] == "resource" and e["rss_bytes"] > 1 << 20 for e in evs)
    assert evs[-1] == {**evs[-1], "kind": "run.end", "state": "finished"}
    summary = json.loads(next(e["line"] for e in evs if e["kind"] == "log" and e.get("level") == "summary"))
    assert summary["frames"] == 160 and summary["wav_calls"] == 2 * 7  # 6 chunks + the window commit


def test_cancel_on_stdin_ends_the_utterance_and_the_run_goes_on(tts):
    proc = controller(tts, "--requests", "2", "--run", "c", frames=400, seed=1, stdin=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None
    evs, cancels = [], 0
    for line in proc.stdout:  # each utterance cancelled after its first audio
        evs.append(json.loads(line))
        if evs[-1]["kind"] == "audio.chunk":
            proc.stdin.write("cancel\n" if cancels == 0 else json.dumps({"cancel": True}) + "\n")
            proc.stdin.flush()
            cancels += 1
        if evs[-1]["kind"] == "run.end":
            break
    evs += events(proc)
    ends = [e for e in evs if e["kind"] == "request.end"]
    assert [(e["request"], e["ok"], e["error"], e["stop"]) for e in ends] == [
        ("c-r000", False, "cancelled", "cancelled"),
        ("c-r001", False, "cancelled", "cancelled"),
    ]
    assert all(e["frames"] < 400 for e in ends)
    (second,) = [e for e in evs if e["kind"] == "request.start" and e["request"] == "c-r001"]
    assert second["phase"] == "after_cancel"  # the study's phase for the request after a cancel
    assert not [e for e in evs if e["kind"] == "error"]  # a cancel is no failure
    assert evs[-1]["kind"] == "run.end" and evs[-1]["state"] == "finished" and proc.returncode == 0


def test_sigterm_ends_the_utterance_and_the_run_as_stopped(tts):
    proc = controller(tts, "--requests", "5", "--schedule", "1", "--run", "t", frames=400, seed=1)
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(json.loads(line))
        if seen[-1]["kind"] == "audio.chunk":
            proc.send_signal(signal.SIGTERM)
            break
    evs = seen + events(proc)
    ends = [e for e in evs if e["kind"] == "request.end"]
    assert len(ends) == 1 and ends[0]["error"] == "cancelled"
    assert evs[-1]["kind"] == "run.end" and evs[-1]["state"] == "stopped" and proc.returncode == 130


def test_vllm_omni_stream_fed_by_the_controller_is_the_engine_audio(tts, tmp_path):
    """vLLM-Omni's /v1/audio/speech/stream in front of the controller: a client written to its
    protocol gets llama.cpp's audio for the session's seed (equal to llama-tts's), and
    input.cancel stops an utterance on its way."""
    from websockets.sync.client import connect

    from edgelab.protocols.controller_feed import ControllerSpec, ControllerTTS
    from edgelab.protocols.speech_ws import PATH, ServerOptions, SpeechServer

    bins, talker, mmproj = tts
    engine = ControllerTTS(ControllerSpec(bins["s3-controller"], talker, mmproj, threads=2, ctx=512))
    srv = SpeechServer(ServerOptions(schedule="server", engine=engine, frames=30)).start()
    try:
        with connect(srv.url + PATH) as ws:
            ws.send(
                json.dumps(
                    {"type": "session.config", "response_format": "pcm", "stream_audio": True, "seed": 3}
                )
            )
            ws.send(json.dumps({"type": "input.text", "text": TEXT}))
            ws.send(json.dumps({"type": "input.done"}))
            msgs = _utterance(ws)
            start = next(m for m in msgs if isinstance(m, dict) and m["type"] == "audio.start")
            assert (
                start["runtime"] == "llama.cpp"
                and start["weights"] == "random"
                and start["sample_rate"] == 24000
            )
            pcm = b"".join(m for m in msgs if isinstance(m, bytes))
            assert len([m for m in msgs if isinstance(m, bytes)]) == 3  # 1 frame, then 25, then the last 4
            wav, _ = llama_tts(tts, tmp_path / "srv.wav", frames=30, seed=3)
            assert pcm == wav[44:]
            # a long utterance, cancelled after its first audio
            ws.send(json.dumps({"type": "session.config", "response_format": "pcm", "stream_audio": True}))
            ws.send(
                json.dumps({"type": "input.text", "text": "A much longer sentence that would take a while."})
            )
            ws.send(json.dumps({"type": "input.done"}))
            while not isinstance(ws.recv(timeout=120), bytes):
                pass
            ws.send(json.dumps({"type": "input.cancel"}))
            done = next(m for m in _utterance(ws) if isinstance(m, dict) and m["type"] == "audio.done")
            assert done["cancelled"] is True
    finally:
        srv.stop()
        engine.close()
    assert engine.proc.returncode == 0


def _utterance(ws) -> list:
    out: list = []
    while True:
        m = ws.recv(timeout=120)
        out.append(m if isinstance(m, bytes) else json.loads(m))
        if isinstance(out[-1], dict) and out[-1]["type"] in ("session.done", "error"):
            return out


# ------------------------------------------------------------------ the virtual lab


@pytest.fixture(scope="module")
def tts_lab(deploy_lab, llama_build, tts):
    """The deploy lab with the build and the small model registered (so qwen3-tts defaults to llama.cpp)."""
    from edgelab.artifacts.registry import add_artifact
    from edgelab.models.tts_synth import TTSFiles
    from edgelab.runtimes import load_runtimes
    from edgelab.runtimes.build import register_build
    from edgelab.store.db import session_scope

    url, engine, opts = deploy_lab
    _bins, talker, mmproj = tts
    from edgelab.models import qwen3tts_gguf as q3

    files = TTSFiles(
        "qwen3-tts-0.6b", talker, talker, mmproj, "f16", q3.resolved(q3.geometry("qwen3-tts-0.6b", SCALE))
    )
    with session_scope(engine) as s:
        register_build(s, load_runtimes()["llama.cpp"], llama_build, prefix="test-llama")
        for name, path, role in (
            ("qwen3-tts-0.6b", talker, "talker"),
            ("qwen3-tts-0.6b-mmproj", mmproj, "mmproj"),
        ):
            add_artifact(
                s, name, [path], kind="model", target="any", component="qwen3-tts-0.6b",
                meta=files.meta(role), replace=True,
            )  # fmt: skip
    return url, engine, opts


def test_deploy_qwen3_tts_defaults_to_llama_cpp_s3_streams_live_and_stops_clean(tts_lab):
    from edgelab.deploy import control, follow, launch, planning
    from edgelab.deploy.planning import DeployRequest
    from edgelab.store.db import session_scope
    from edgelab.store.deployments import processes
    from edgelab.store.runs import get_summary

    _url, engine, opts = tts_lab
    req = DeployRequest("s25", "qwen3-tts", values={"frames": 12, "threads": 2}, lab_host_build=True)
    planned = planning.plan(engine, req)
    p = planned.plan
    assert (p.strategy, p.runtime) == ("S3", "llama.cpp") and planned.virtual
    assert "runtime llama.cpp: the lab host's build (virtual device)" in p.reason  # the chooser's pick
    assert any("virtual device: lab host build" in n for n in p.notes)
    proc = p.processes[0]
    assert proc.template == "llama.cpp:tts:S3" and proc.argv[0] == "{bin}/s3-controller"
    dep = launch.deploy(engine, req, opts=opts)
    th = None
    try:
        assert dep.state == "running"
        assert {pl["stage"]: pl["observed"] for pl in dep.placement} == {
            "text_frontend": "cpu", "talker": "cpu", "code_predictor": "cpu", "code2wav": "cpu",
        }  # fmt: skip
        with session_scope(engine, write=False) as s:
            (row,) = processes(s, dep.id)
        th = follow.ensure_follower(engine, dep.run_id, transport=opts.transport)
        end, audio = time.monotonic() + 180, {}
        while time.monotonic() < end:
            with session_scope(engine, write=False) as s:
                summ = get_summary(s, dep.run_id, "live")
                audio = ((summ.metrics if summ else None) or {}).get("audio") or {}
            if (audio.get("ttfa_ms") or {}).get("count", 0) >= 2:
                break
            time.sleep(0.5)
        assert audio["ttfa_ms"]["count"] >= 2 and audio["rtf_total"]["p50"] > 0
        assert audio.get("underruns_at_ttfa") is not None
        pgid = row.pid
        assert group_members(pgid)
    finally:
        stopped = control.stop(engine, dep.run_id, opts=opts)
        if th is not None:
            th.join(60)
    assert stopped.state == "stopped" and group_members(pgid) == []
    from edgelab.store.runs import get_run

    with session_scope(engine, write=False) as s:
        run = get_run(s, dep.run_id)
    assert run.runtime == "llama.cpp" and run.virtual
    prov = run.provenance
    assert prov["weights"] == "random" and prov["virtual"] is True
    assert len(prov["artifacts"]["talker.model"]) == 64 and len(prov["artifacts"]["mmproj.model"]) == 64
    ref = planning.plan(engine, DeployRequest("s25", "qwen3-tts", runtime="reference")).plan
    assert ref.runtime == "reference"  # the imitation stays, when asked for
    own = planning.plan(engine, DeployRequest("s25", "qwen3-tts")).plan  # the phone's own build: none here
    assert own.runtime == "reference" and "no real runtime can launch here (S3 llama.cpp:" in own.reason
    assert any("edgelab runtime build llama.cpp --target android-arm64" in n for n in own.notes)


def test_deploy_s5_runs_llama_tts_once_and_reports_its_log_and_wav(tts_lab):
    from edgelab.deploy import control, launch
    from edgelab.deploy.planning import DeployRequest
    from edgelab.store.db import session_scope
    from edgelab.store.runs import get_run, get_summary

    _url, engine, opts = tts_lab
    dep = launch.deploy(
        engine,
        DeployRequest(
            "orin-agx", "qwen3-tts", strategy="S5", values={"frames": 10, "seed": 4}, lab_host_build=True
        ),
        opts=opts,
    )
    try:
        end = time.monotonic() + 180
        while time.monotonic() < end and dep.state == "running":
            time.sleep(0.5)
            dep = control.refresh(engine, dep.run_id, opts=opts)
        assert dep.state == "finished", (dep.state, dep.error)
        with session_scope(engine, write=False) as s:
            res = get_run(s, dep.run_id).meta["results"]["native"]
            summ = get_summary(s, dep.run_id, "final").metrics
    finally:
        control.stop(engine, dep.run_id, opts=opts)
    assert res["adapter"] == "llama-tts" and res["placement"] == "cpu"
    # what llama-tts printed is the run's figures: one utterance, like any one-shot runtime's
    assert summ["requests"]["total"] == 1
    rep = summ["reported"]
    assert rep["source"] == "llama-tts timings"
    assert (
        rep["bands"]["all"]["total_ms"]["p50"] == res["ttfa_ms"]
        and rep["bands"]["all"]["frames"]["p50"] == 10
    )
    assert res["tts"]["frames"] == 10 and res["ttfa_ms"] == res["tts"]["total_s"] * 1000
    assert res["wav"]["samples"] == 10 * 1920 and res["wav"]["sample_rate"] == 24000
    assert len(res["wav"]["pcm_sha256"]) == 64


@pytest.mark.parametrize("strategy", ["S3", "S5"])
def test_bench_s3_and_s5_give_audio_figures_with_provenance(tts_lab, strategy):
    from edgelab.bench import BenchRequest, run_bench

    _url, engine, opts = tts_lab
    res = run_bench(
        engine,
        BenchRequest(
            "orin-agx",
            "qwen3-tts",
            runtime="llama.cpp",
            strategy=strategy,
            warmup=1,
            requests=2,
            frames=10,
            threads=2,
            lab_host_build=True,
        ),
        opts=opts,
    )
    rep = res.report()
    assert res.state == "finished" and rep["virtual"]
    assert rep["note"].startswith("virtual device: lab host build") and not rep["emulated"]
    assert res.provenance["execution"]["mode"] == "lab-host-build"
    assert rep["requests"]["by_phase"] == {"warmup": 1, "measured": 2} and rep["requests"]["failed"] == 0
    audio = rep["audio"]
    assert audio["ttfa_ms"]["count"] == 2 and audio["rtf_total"]["count"] == 2
    prov = res.provenance
    assert prov["weights"] == "random" and prov["virtual"] is True
    assert len(prov["runtime_sha256"]) == 64
    assert set(prov["artifacts"]) == {"runtime.llama.cpp", "talker.model", "mmproj.model"}
    assert {role: (m["weights"], len(m["sha256"])) for role, m in prov["models"].items()} == {
        "talker.model": ("random", 64),
        "mmproj.model": ("random", 64),
    }
    program = "llama-tts" if strategy == "S5" else "s3-controller"
    assert prov["program"]["name"] == program and len(prov["program"]["sha256"]) == 64
    if strategy == "S5":  # whole-utterance audio: TTFA is the total, streamed RTF is total RTF
        assert audio["ttfa_ms"]["p50"] == audio["playback_start_ms"]["p50"]
        assert audio["rtf_streamed"]["p50"] == pytest.approx(audio["rtf_total"]["p50"])
        assert rep["llama_tts"]["runs"] == 3 and rep["llama_tts"]["peak_rss_bytes"] > 1 << 20
        assert rep["llama_tts"]["frames"] == [10] and prov["runtime_build"].endswith("llama-tts")
    else:
        assert rep["controller"]["frames"] == 30 and rep["placement"]["talker"]["observed"] == "cpu"
        assert prov["runtime_build"].endswith("s3-controller")


def test_the_phone_runs_its_own_android_build_of_the_controller_under_qemu(tts_lab, llama_build_android):
    """With the phone's own build registered (android-arm64: the controller is built with the tree
    there too), an unqualified deploy runs it on the virtual s25 under qemu, labelled emulated, and
    streams real audio."""
    from edgelab.deploy import control, follow, launch, planning
    from edgelab.deploy.planning import DeployRequest
    from edgelab.runtimes import load_runtimes
    from edgelab.runtimes.build import register_build
    from edgelab.store.db import session_scope
    from edgelab.store.deployments import processes
    from edgelab.store.runs import get_summary

    _url, engine, opts = tts_lab
    assert {"s3-controller", "s3-bare", "llama-tts"} <= set(llama_build_android.products)
    with session_scope(engine) as s:
        register_build(s, load_runtimes()["llama.cpp"], llama_build_android, prefix="test-llama-android")
    req = DeployRequest("s25", "qwen3-tts", values={"frames": 6, "threads": 1})
    p = planning.plan(engine, req).plan
    assert (p.runtime, p.processes[0].target) == ("llama.cpp", "android-arm64")
    assert p.execution and p.execution["emulated"]
    dep = launch.deploy(engine, req, opts=opts)
    th = None
    try:
        with session_scope(engine, write=False) as s:
            (row,) = processes(s, dep.id)
        th = follow.ensure_follower(engine, dep.run_id, transport=opts.transport)
        end, audio = time.monotonic() + 300, {}
        while time.monotonic() < end:
            with session_scope(engine, write=False) as s:
                summ = get_summary(s, dep.run_id, "live")
                audio = ((summ.metrics if summ else None) or {}).get("audio") or {}
            if (audio.get("ttfa_ms") or {}).get("count", 0) >= 1:
                break
            time.sleep(1)
        assert audio["ttfa_ms"]["count"] >= 1
        pgid = row.pid
    finally:
        stopped = control.stop(engine, dep.run_id, opts=opts)
        if th is not None:
            th.join(60)
    assert stopped.state == "stopped" and group_members(pgid) == []
