"""The llama.cpp output adapters on real captured output (tests/captures/llama.cpp/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgelab.adapters.llama_bench import by_test, parse_bench
from edgelab.adapters.llama_perf import parse_build_info, parse_perf, parse_perf_all
from edgelab.adapters.llama_placement import buffer_processor, parse_placement, reconcile
from edgelab.adapters.llama_server import (
    CHAT,
    COMPLETION,
    classify_health,
    parse_prometheus,
    record_from_sse,
    record_to_events,
    request_body,
)
from edgelab.errors import BenchOutputError
from edgelab.metrics import events as ev
from edgelab.metrics.text import text_metrics

CAP = Path(__file__).parents[1] / "captures" / "llama.cpp"


def cap(name: str) -> str:
    return (CAP / name).read_text()


def test_perf_lines_of_llama_completion():
    rep = parse_perf(cap("completion_default.stderr"))
    assert rep.source == "common_perf_print"
    assert rep.load_ms == pytest.approx(13.85)
    assert (rep.prompt.ms, rep.prompt.tokens, rep.prompt.tokens_per_s) == (0.35, 2, 5780.35)
    assert (rep.eval.ms, rep.eval.tokens, rep.eval.per_token_ms) == (13.11, 7, 1.87)
    assert rep.total_ms == 13.84 and rep.total_tokens == 9 and rep.sampling_ms == 0.12
    assert parse_perf(cap("completion.stderr")).eval.tokens == 7  # with the -lv 4 load log around it


def test_perf_lines_older_prefixes_and_server_slots_and_cli():
    old = (
        "llama_perf_context_print:        load time =     512.10 ms\n"
        "llama_perf_context_print: prompt eval time =      69.05 ms /    15 tokens (    4.60 ms per token,   217.24 tokens per second)\n"
        "llama_perf_context_print:        eval time =    1000.00 ms /   127 runs   (    7.87 ms per token,   127.00 tokens per second)\n"
    )
    rep = parse_perf(old)
    assert (
        rep.source == "llama_perf_context_print" and rep.load_ms == 512.10 and rep.eval.tokens_per_s == 127.0
    )
    slots = parse_perf_all(cap("server.stderr"))
    assert [r.eval.tokens for r in slots] == [16, 16]  # one report per request
    assert slots[0].source == "print_timing" and slots[0].prompt.tokens == 6
    cli = parse_perf("> hi\n\n[ Prompt: 258.6 t/s | Generation: 197.4 t/s ]\n")
    assert cli.prompt.tokens_per_s == 258.6 and cli.eval.tokens_per_s == 197.4 and cli.eval.ms is None
    assert parse_perf("nothing here") is None


def test_build_info_lines():
    info = parse_build_info(cap("server.stderr"))
    assert info["commit"] == "0c1e570" and info["build"] == "1" and info["compiler"] == "GNU 12.2.0"
    v = parse_build_info(
        "version: 0.5.0-dev (build 1, commit 0c1e57098)\nbuilt with GNU 12.2.0 for Linux x86_64\n"
    )
    assert v == {
        "version": "0.5.0-dev",
        "build": "1",
        "commit": "0c1e57098",
        "compiler": None,
        "target": None,
    }


@pytest.mark.parametrize("name", ["bench.json", "bench.jsonl"])
def test_llama_bench_json_and_jsonl(name):
    recs = by_test(parse_bench(cap(name)))
    assert set(recs) == {"pp16", "tg8"}
    tg = recs["tg8"]
    assert tg.kind == "tg" and tg.n_gen == 8 and tg.n_prompt == 0 and tg.n_threads == 1
    assert tg.build_commit == "0c1e570" and tg.backends == "CPU"
    assert len(tg.samples_ns) == 2 and tg.avg_ts > 0 and tg.stddev_ts >= 0
    # avg_ts is the mean over the repetitions of n_gen / sample time
    assert tg.avg_ts == pytest.approx(sum(8e9 / ns for ns in tg.samples_ns) / 2, rel=1e-3)
    assert tg.to_dict()["kind"] == "tg" and "raw" not in tg.to_dict()


def test_llama_bench_rejects_other_text():
    with pytest.raises(BenchOutputError):
        parse_bench("| model | size |\n")
    with pytest.raises(BenchOutputError):
        parse_bench("")
    with pytest.raises(BenchOutputError):
        parse_bench('[{"x": 1}]')


def test_placement_of_a_cpu_run_is_cpu():
    p = parse_placement(cap("server.stderr"))
    assert p.model_mib == {"CPU_Mapped": 62.87, "CPU_REPACK": 35.96}
    assert p.kv_mib == {"CPU": 16.5} and p.compute_mib == {"CPU": 18.51}
    assert p.observed == "cpu" and p.layers_offloaded is None
    out = reconcile("gpu", p)  # planned on a GPU, the log says CPU: reported as CPU
    assert out["observed"] == "cpu" and out["fallback"] is True
    assert reconcile("cpu", p)["fallback"] is False
    # the default verbosity shows no load log: placement unknown, never guessed
    assert parse_placement(cap("completion_default.stderr")).observed is None


def test_placement_of_a_cuda_offload():
    # written from the vendored llama.cpp's format strings (no GPU on this host; see SOURCES.md)
    log = (
        "llama_model_load_from_file_impl: using device CUDA0 (NVIDIA Jetson AGX Orin) (0000:00:00.0) - 28000 MiB free\n"
        "load_tensors: offloading output layer to GPU\n"
        "load_tensors: offloading 32 repeating layers to GPU\n"
        "load_tensors: offloaded 33/33 layers to GPU\n"
        "load_tensors:   CPU_Mapped model buffer size =    70.31 MiB\n"
        "load_tensors:        CUDA0 model buffer size =  3800.25 MiB\n"
        "llama_kv_cache:      CUDA0 KV buffer size =   256.00 MiB\n"
        "sched_reserve:      CUDA0 compute buffer size =   300.75 MiB\n"
        "sched_reserve:  CUDA_Host compute buffer size =    12.01 MiB\n"
    )
    p = parse_placement(log)
    assert p.devices == ["CUDA0 (NVIDIA Jetson AGX Orin)"]
    assert (p.layers_offloaded, p.layers_total) == (33, 33)
    assert p.observed == "mixed:cpu+gpu" and p.weights_mib("gpu") == 3800.25
    assert reconcile("gpu", p)["fallback"] is False
    assert buffer_processor("CUDA_Host") == "cpu" and buffer_processor("Vulkan0") == "gpu"
    assert buffer_processor("HTP0") == "npu"


def test_health_states():
    seen = json.loads(cap("health.json"))
    states = [classify_health(s["status"], s.get("body")) for s in seen]
    assert states == ["loading", "ok"]
    assert "Loading model" in seen[0]["body"]
    assert classify_health(None, "ConnectError") == "refused" and classify_health(500, "") == "error"


def test_completion_stream_to_record_and_events():
    times = [100.0 + 0.050 + 0.005 * i for i in range(17)]
    rec = record_from_sse(
        cap("completion_stream.sse"),
        COMPLETION,
        prompt="hello world",
        n_predict=16,
        times=times,
        submitted=100.0,
    )
    assert rec.ok and rec.tokens == 16 and rec.tokens_predicted == 16 and rec.stop_type == "limit"
    assert rec.timings["predicted_n"] == 16 and rec.timings["cache_n"] == 0 and rec.timings["prompt_ms"] > 0
    assert rec.prompt_tokens == 6 and len(rec.token_chunks) == 16
    m = rec.metrics()
    assert m["ttft_ms"] == pytest.approx(50.0)
    assert m["decode_tok_s"] == pytest.approx(15 / 0.075)
    assert len(m["itl_all_ms"]) == 15 and all(x == pytest.approx(5.0) for x in m["itl_all_ms"])
    assert m["server"]["predicted_per_second"] == rec.timings["predicted_per_second"]
    evs = record_to_events(rec, "run-1", "r0", "warmup")
    assert isinstance(evs[0], ev.RequestStart) and evs[0].t == 100.0 and evs[0].phase == "warmup"
    assert isinstance(evs[-1], ev.RequestEnd) and evs[-1].ok
    toks = [e for e in evs if isinstance(e, ev.TextToken)]
    assert sum(e.n for e in toks) == 16 and all(e.request == "r0" and e.run == "run-1" for e in toks)
    # the events round-trip through the JSON-lines protocol and give the same text metrics
    back = [ev.decode(ev.encode(e)) for e in evs]
    tm = text_metrics([(e.t, e.n) for e in back if isinstance(e, ev.TextToken)], back[0].t)
    assert tm["ttft_ms"] == pytest.approx(m["ttft_ms"]) and tm["decode_tok_s"] == pytest.approx(
        m["decode_tok_s"]
    )


def test_chat_stream_to_record():
    rec = record_from_sse(cap("chat_stream.sse"), CHAT)
    assert rec.ok and rec.stop_type == "length" and rec.tokens == 16 == rec.timings["predicted_n"]
    assert rec.text.strip() and rec.prompt_tokens == rec.timings["prompt_n"]
    assert cap("chat_stream.sse").rstrip().endswith("data: [DONE]")


def test_a_chunk_carrying_two_tokens_counts_two():
    # llama-server holds back an incomplete UTF-8 character and sends it with the next token
    raw = (
        'data: {"content":"a","tokens_predicted":1,"stop":false}\n\n'
        'data: {"content":"\\u00e9b","tokens_predicted":3,"stop":false}\n\n'
        'data: {"content":"","stop":true,"tokens_predicted":3,"stop_type":"limit","timings":{"predicted_n":3}}\n\n'
    )
    rec = record_from_sse(raw, COMPLETION)
    assert [c.n for c in rec.chunks] == [1, 2] and rec.tokens == 3


def test_an_in_band_error_and_a_missing_end_are_failures():
    rec = record_from_sse('data: {"error":{"code":500,"message":"boom"}}\n\n', COMPLETION)
    assert not rec.ok and rec.error == "boom"
    ends = record_to_events(rec, None, "r1")
    assert ends[-1].ok is False and ends[-1].error == "boom"


def test_request_body_measures_the_whole_prompt():
    b = request_body("hi", 8, chat=False)
    assert b["cache_prompt"] is False and b["stream"] is True and b["n_predict"] == 8
    c = request_body("hi", 8, chat=True)
    assert c["messages"][0]["content"] == "hi" and c["max_tokens"] == 8 and c["timings_per_token"] is True


def test_prometheus_metrics_text():
    m = parse_prometheus(cap("metrics.txt"))
    assert m["llamacpp:tokens_predicted_total"] == 32 and m["llamacpp:prompt_tokens_total"] == 41
    assert cap("metrics_disabled.txt").startswith("501")
