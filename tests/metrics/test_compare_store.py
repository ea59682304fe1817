"""Comparing stored runs on SQLite and PostgreSQL: runs written through the real Ingestor (audio,
text, action) and a llama-bench record give their raw per-request values; sides by id, list,
baseline, tag and last:N; refusals across devices, protocols and virtual/real; every differing
provenance field listed; baselines kept with who and when, history included; a block's evidence
moved into its configuration's run recomputes to the same figures."""

from __future__ import annotations

import numpy as np
import pytest

from edgelab.errors import ConfigError, NotFound
from edgelab.metrics import events as ev
from edgelab.metrics.baseline import describe, set_baseline
from edgelab.metrics.ingest import Ingestor, finalize
from edgelab.metrics.runsets import compare_refs, compare_sets, provenance_diff, resolve, run_values, tag_runs
from edgelab.store import db as dbmod
from edgelab.store.baselines import current_baselines, find_baseline, history
from edgelab.store.db import get_engine, session_scope
from edgelab.store.merge import move_run_rows
from edgelab.store.purge import delete_runs
from edgelab.store.runs import create_run, get_run, requests_of

T0 = 1_800_000_000.0


@pytest.fixture
def engine(db_url):
    dbmod.dispose_engines()
    yield get_engine(db_url)
    dbmod.dispose_engines()


def tts_run(engine, ttfa_ms, *, device="orin-agx", virtual=True, band="short", prov=None, warmup_ms=None):
    """A finished reference-like TTS run: one 2-frame chunk per request, first audio at ``ttfa_ms``."""
    with session_scope(engine) as s:
        rid = create_run(
            s,
            pipeline="qwen3-tts",
            device_name=device,
            runtime="reference",
            strategy="S3",
            virtual=virtual,
            provenance={"runtime_sha256": "a" * 64, "threads": 2, "cache": "warm", **(prov or {})},
            meta={"protocol": "single_request_batch1_v1", "band": band},
        ).id
    ing = Ingestor(engine, rid, flush_s=0.0, live_every_s=0.0)
    t = T0
    reqs = ([("w0", "warmup", warmup_ms)] if warmup_ms else []) + [
        (f"m{i}", "measured", x) for i, x in enumerate(ttfa_ms)
    ]
    for name, phase, ms in reqs:
        ing.feed(ev.RequestStart(t=t, run=rid, request=name, phase=phase, band=band))
        ing.feed(ev.AudioChunk(t=t + ms / 1000, run=rid, request=name, idx=0, samples=3840))
        ing.feed(ev.RequestEnd(t=t + ms / 1000 + 0.01, run=rid, request=name))
        t += 1.0
    ing.close(state="finished")
    return rid


def text_run(engine, tok_s: list[float]):
    with session_scope(engine) as s:
        rid = create_run(
            s, pipeline="spark-x2.5", device_name="orin-agx", runtime="llama.cpp", virtual=True,
            meta={"protocol": "single_request_batch1_v1", "band": "short"},
        ).id  # fmt: skip
    ing = Ingestor(engine, rid, flush_s=0.0, live_every_s=0.0)
    for i, rate in enumerate(tok_s):
        t = T0 + i * 10
        ing.feed(ev.RequestStart(t=t, run=rid, request=f"m{i}"))
        for k in range(9):  # first token at 50 ms, then 8 more at the rate
            ing.feed(ev.TextToken(t=t + 0.05 + k / rate, run=rid, request=f"m{i}", n=1))
        ing.feed(ev.RequestEnd(t=t + 0.05 + 8 / rate, run=rid, request=f"m{i}"))
    ing.close(state="finished")
    return rid


def test_raw_values_of_audio_text_action_and_llama_bench_runs(engine):
    rid = tts_run(engine, [40, 50, 60], warmup_ms=500)
    tid = text_run(engine, [100.0, 200.0])
    with session_scope(engine) as s:
        vla = create_run(s, pipeline="internvla-a1", device_name="orin-agx", runtime="reference").id
        lb = create_run(
            s,
            pipeline="spark-x2.5",
            device_name="orin-agx",
            runtime="llama.cpp",
            strategy="S5",
            meta={
                "llama_bench": [
                    {"test": "tg32", "samples_ts": [50.0, 52.0]},
                    {"test": "pp64", "samples_ts": [900.0]},
                ]
            },
        ).id
    ing = Ingestor(engine, vla, flush_s=0.0, live_every_s=0.0)
    ing.feed(ev.RequestStart(t=T0, run=vla, request="w", phase="warmup"))
    ing.feed(
        ev.ActionChunk(t=T0 + 0.5, run=vla, request="w", idx=0, obs_t=T0, infer_start=T0, infer_end=T0 + 0.5)
    )
    ing.feed(ev.RequestStart(t=T0 + 1, run=vla, request="m", phase="measured"))
    for k in range(3):
        base = T0 + 1 + k
        ing.feed(
            ev.ActionChunk(
                t=base + 0.03,
                run=vla,
                request="m",
                idx=k,
                obs_t=base,
                infer_start=base + 0.01,
                infer_end=base + 0.03,
            )
        )
    ing.close(state="finished")
    with session_scope(engine, write=False) as s:
        tv = run_values(s, get_run(s, rid))
        xv = run_values(s, get_run(s, tid))
        av = run_values(s, get_run(s, vla))
        bv = run_values(s, get_run(s, lb))
    assert tv["ttfa"] == pytest.approx([40, 50, 60], abs=1e-3)  # the warm-up's 500 ms is not in it
    assert len(tv["rtf_total"]) == 3 and len(tv["request_wall"]) == 3
    assert xv["ttft"] == pytest.approx([50, 50], abs=1e-3)
    assert xv["decode_tok_s"] == pytest.approx([100, 200], rel=1e-3)
    assert av["action_latency"] == pytest.approx([20, 20, 20], abs=1e-3)  # the warm-up chunk is left out
    assert av["obs_age"] == pytest.approx([30, 30, 30], abs=1e-3)
    assert bv == {"tok_s_tg32": [50.0, 52.0], "tok_s_pp64": [900.0]}


def test_compare_runs_verdicts_and_provenance_that_differs(engine):
    rng = np.random.default_rng(0)
    a = tts_run(engine, list(100 * rng.lognormal(0, 0.03, 20)))
    same = tts_run(engine, list(100 * rng.lognormal(0, 0.03, 20)))
    slow = tts_run(engine, list(112 * rng.lognormal(0, 0.03, 20)), prov={"threads": 1, "cache": "cold"})
    with session_scope(engine, write=False) as s:
        c = compare_refs(s, a, same)
        assert c.result("ttfa").verdict == "no difference" and not c.refused
        c = compare_refs(s, a, slow)
        r = c.result("ttfa")
        assert r.verdict == "slower" and 1.05 < r.low < r.ratio < r.high
        fields = {d["field"]: d for d in c.differs}
        assert fields["threads"] == {"field": "threads", "a": ["2"], "b": ["1"]} and "cache" in fields
        out = c.to_dict()
        assert out["method"]["seed"] == 0 and out["metrics"][0]["interval"] == [r.low, r.high]
        # seeded: the same call, the same interval
        assert compare_refs(s, a, slow).result("ttfa").low == r.low
        # a set: two runs pooled (40 values)
        both = compare_refs(s, f"{a},{same}", slow)
        assert both.result("ttfa").a.count == 40 and both.a.label == "2 runs"


def test_not_comparable_is_refused_with_every_reason_unless_allowed(engine):
    a = tts_run(engine, [100.0] * 6)
    other_dev = tts_run(engine, [100.0] * 6, device="thor")
    real = tts_run(engine, [100.0] * 6, virtual=False)
    long_band = tts_run(engine, [100.0] * 6, band="long")
    with session_scope(engine, write=False) as s:
        with pytest.raises(ConfigError, match="different device: orin-agx vs thor"):
            compare_refs(s, a, other_dev)
        with pytest.raises(ConfigError, match="virtual device's runs against a real"):
            compare_refs(s, a, real)
        with pytest.raises(ConfigError, match="different protocol: .*short vs .*long"):
            compare_refs(s, a, long_band)
        with pytest.raises(ConfigError, match="both sides hold run"):
            compare_refs(s, a, a)
        allowed = compare_refs(s, a, other_dev, allow=True)
        assert allowed.refused and allowed.result("ttfa").verdict == "no difference"


def test_baselines_keep_who_and_when_and_resolve_per_key(engine):
    r1 = tts_run(engine, [100.0] * 6)
    r2 = tts_run(engine, [101.0] * 6)
    thor = tts_run(engine, [90.0] * 6, device="thor")
    with session_scope(engine) as s:
        first = set_baseline(s, "nightly", [r1], set_by="ci@lab (github run 7)", note="first")
        set_baseline(s, "nightly", [r1, r2], set_by="ana@lab")
        set_baseline(s, "nightly", [thor], set_by="ana@lab")
        with pytest.raises(ConfigError, match="different devices"):
            set_baseline(s, "mixed", [r1, thor], set_by="x")
    with session_scope(engine, write=False) as s:
        cur = current_baselines(s, "nightly")
        assert [(b.device, b.runs, b.set_by) for b in cur] == [
            ("orin-agx", [r1, r2], "ana@lab"),
            ("thor", [thor], "ana@lab"),
        ]
        assert [h.runs for h in history(s, "nightly")][-1] == [r1] and first.set_at is not None
        assert find_baseline(s, "nightly", device="thor").runs == [thor]
        with pytest.raises(ConfigError, match="several"):
            find_baseline(s, "nightly")
        with pytest.raises(NotFound):
            find_baseline(s, "nope")
        b = resolve(s, r2)
        side = resolve(s, "baseline:nightly", like=b)  # narrowed by the other side's device
        assert side.ids == [r1, r2] and "set by ana@lab" in side.label
        d = describe(s, "nightly", device="orin-agx")
        assert [h["set_by"] for h in d["history"]] == ["ana@lab", "ci@lab (github run 7)"]
        assert d["runs"][0]["medians"]["ttfa"] == pytest.approx(100.0, abs=1e-3)
    with session_scope(engine) as s, pytest.raises(ConfigError, match="in baseline nightly"):
        delete_runs(s, [r1])


def test_tag_and_last_n_sides(engine):
    old = [tts_run(engine, [100.0 + i] * 6) for i in range(3)]
    new = tts_run(engine, [130.0] * 6)
    with session_scope(engine) as s:
        tag_runs(s, old[:2], ["build-a"])
    with session_scope(engine, write=False) as s:
        assert sorted(resolve(s, "tag:build-a").ids) == sorted(old[:2])
        c = compare_refs(s, None, new, last=2)
        assert c.a.ids == [old[2], old[1]] and c.a.label.startswith("last 2 before")
        assert c.result("ttfa").verdict == "slower"
        with pytest.raises(ConfigError, match="needs a device and a pipeline"):
            resolve(s, "last:3")
        assert len(resolve(s, "last:3", device="orin-agx", pipeline="qwen3-tts").runs) == 3


def test_moving_a_block_into_its_configuration_run_keeps_every_figure(engine):
    b1 = tts_run(engine, [40, 50, 60], warmup_ms=300)
    b2 = tts_run(engine, [45, 55, 65], warmup_ms=300)
    with session_scope(engine) as s:
        point = create_run(
            s, pipeline="qwen3-tts", device_name="orin-agx", runtime="reference", virtual=True
        ).id
        assert move_run_rows(s, b1, point, "b0.") == 4
        assert move_run_rows(s, b2, point, "b1.") == 4
    final = finalize(engine, point)
    with session_scope(engine, write=False) as s:
        names = [r.request for r in requests_of(s, point)]
        assert names == ["b0.w0", "b0.m0", "b0.m1", "b0.m2", "b1.w0", "b1.m0", "b1.m1", "b1.m2"]
        assert sorted(run_values(s, get_run(s, point))["ttfa"]) == pytest.approx(
            [40, 45, 50, 55, 60, 65], abs=1e-3
        )
        with pytest.raises(NotFound):
            get_run(s, b1)
    assert final["audio"]["ttfa_ms"]["count"] == 6 and final["requests"]["by_phase"] == {
        "warmup": 2,
        "measured": 6,
    }


def test_provenance_diff_lists_within_side_differences_too(engine):
    a1 = tts_run(engine, [100.0] * 5, prov={"runtime_sha256": "b" * 64})
    a2 = tts_run(engine, [100.0] * 5)
    b = tts_run(engine, [100.0] * 5)
    with session_scope(engine, write=False) as s:
        diff = provenance_diff(resolve(s, f"{a1},{a2}"), resolve(s, b))
        sha = next(d for d in diff if d["field"] == "runtime_sha256")
        assert sha["a"] == ["b" * 64, "a" * 64] and sha["b"] == ["a" * 64]
        c = compare_sets(s, resolve(s, a1), resolve(s, b))
        assert c.result("ttfa").verdict == "no difference"


def test_trend_of_a_device_and_pipeline_draws_the_runs_and_the_baseline_line(engine):
    from edgelab.views.trend import load_trend

    runs = [tts_run(engine, [100.0 + 10 * i] * 5) for i in range(4)]
    with session_scope(engine) as s:
        set_baseline(s, "nightly", runs[:1], set_by="ci")
    view = load_trend(engine, "orin-agx")
    assert view is not None and view.metric == "ttfa" and view.pipeline == "qwen3-tts"
    assert [round(p["median"]) for p in view.points] == [100, 110, 120, 130]  # oldest first
    assert (
        view.baseline == pytest.approx(100.0, abs=1e-3) and view.baseline_name == "nightly" and view.virtual
    )
    text = view.text(width=60, height=12)
    assert "baseline nightly" in text and "TTFA median, qwen3-tts, last 4 (VIRTUAL)" in text
    assert load_trend(engine, "thor") is None


def _study(path, scale: float, n: int = 8):
    """A study results directory (requests.jsonl + report.json) of ``n`` measured requests whose
    chunk times are the fixture's first request's, times ``scale`` (a little jitter each)."""
    import hashlib
    import json

    path.mkdir(parents=True)
    (path / "report.json").write_text(
        json.dumps(
            {
                "protocol": "single_request_batch1_v1",
                "model": "qwen3-tts-0.6b",
                "device": "rtx5090-laptop-wsl",
            }
        )
    )
    lines = []
    for i in range(n):
        t0 = 1_750_000_000.0 + 10 * i
        times = [x * scale * (1 + 0.01 * (i % 3)) for x in (412.5, 1650.0, 2900.0)]
        chunks = [
            {"idx": k, "t_ms": t, "samples": s, "sr": 24000, "terminal": False,
             "sha256": hashlib.sha256(f"{i}-{k}".encode()).hexdigest()}
            for k, (t, s) in enumerate(zip(times, (1920, 48000, 48000), strict=True))
        ]  # fmt: skip
        lines.append(
            json.dumps(
                {
                    "request_id": f"short-{i}",
                    "phase": "measured",
                    "length_band": "short",
                    "submitted_unix": t0,
                    "finished_unix": t0 + times[-1] / 1000 + 0.1,
                    "sr": 24000,
                    "chunks_all": chunks,
                }
            )  # fmt: skip
        )
    (path / "requests.jsonl").write_text("\n".join(lines) + "\n")
    return path


def test_imported_study_runs_compare_like_any_run(engine, tmp_path):
    from edgelab.metrics.results import import_study

    before = import_study(engine, _study(tmp_path / "before", 1.0))
    after = import_study(engine, _study(tmp_path / "after", 1.3))
    with session_scope(engine, write=False) as s:
        c = compare_refs(s, before, after)
    assert not c.refused and c.a.key()["protocol"] == "single_request_batch1_v1"
    r = c.result("ttfa")
    assert r.a.count == r.b.count == 8 and r.verdict == "slower" and r.ratio == pytest.approx(1.3, rel=1e-3)
