"""`edgelab bench PIPELINE --device D`: the study's measured-run protocol, thin over edgelab.bench."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from edgelab.cli.common import LeaseOpt, console, err_console, escape, fail, fail_from, print_json, state
from edgelab.errors import ConfigError
from edgelab.units import mib


def _p(d: dict[str, Any] | None, unit: str = "") -> str:
    if not d or d.get("p50") is None:
        return "-"
    return f"p50 {d['p50']:.1f}{unit}  p95 {d['p95']:.1f}{unit}  (n={d['count']})"


def bench(
    pipeline: Annotated[str, typer.Argument(help="Pipeline (qwen3-tts, internvla-a1, ...).")],
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            "-d",
            help="Device name (with --endpoint: the device the server runs on, if it is in the inventory).",
        ),
    ] = None,
    endpoint: Annotated[
        str | None,
        typer.Option(
            "--endpoint",
            help="Measure a server edgelab did not launch: "
            "ws://HOST:PORT (vLLM-Omni speech stream, OpenPI policy) or http://HOST:PORT.",
        ),
    ] = None,
    endpoint_option: Annotated[
        list[str] | None,
        typer.Option(
            "--endpoint-option",
            "-o",
            help="KEY=VALUE, repeatable: for an --endpoint its session's options (voice, "
            "response_format, split_granularity, observation=droid|aloha|libero); for a launched "
            "workload a launch template value (schedule=2,4,8, ctx=4096, ...).",
        ),
    ] = None,
    runtime: Annotated[str | None, typer.Option("--runtime", help="Runtime (reference, ...).")] = None,
    strategy: Annotated[
        str | None, typer.Option("--strategy", help="S1, S3, S4 or S5 (default: automatic).")
    ] = None,
    warmup: Annotated[
        int, typer.Option("--warmup", help="Warm-up requests (not in the headline figures).")
    ] = 1,
    requests: Annotated[int, typer.Option("--requests", help="Measured requests (VLA: control ticks).")] = 20,
    band: Annotated[str, typer.Option("--band", help="Length band: short, medium or long.")] = "short",
    control_hz: Annotated[
        float, typer.Option("--control-hz", help="VLA control rate (deadline = 1/Hz).")
    ] = 10.0,
    frames: Annotated[
        int | None, typer.Option("--frames", help="Reference TTS: codec frames per request.")
    ] = None,
    frames_per_s: Annotated[
        float | None, typer.Option("--frames-per-s", help="Reference TTS talker pace.")
    ] = None,
    slow_every: Annotated[int, typer.Option("--slow-every", help="Reference VLA: a slow step every N.")] = 0,
    slow_ms: Annotated[
        float, typer.Option("--slow-ms", help="Reference VLA: length of the slow step.")
    ] = 0.0,
    hog: Annotated[
        int,
        typer.Option(
            "--hog",
            help="S3 controller (mnn, onnxruntime): N busy CPU processes "
            "beside the control loop (fault injection).",
        ),
    ] = 0,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Model artifact by name (llama.cpp: a GGUF; "
            "default: the newest registered for the pipeline).",
        ),
    ] = None,
    threads: Annotated[
        int | None, typer.Option("--threads", help="Threads (default: the profile's).")
    ] = None,
    lab_host_build: Annotated[
        bool,
        typer.Option(
            "--lab-host-build",
            help="On a virtual device, run the lab host's build instead of the device's own (which runs "
            "emulated: qemu for aarch64, wine for Windows); faster, and labelled so in every result.",
        ),
    ] = False,
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            help="Launch the build for this target (default: the device's own, most specific first); "
            "a build the device cannot run is refused before anything is pushed.",
        ),
    ] = None,
    ready_timeout: Annotated[
        float | None, typer.Option("--ready-timeout", help="Seconds a server may take to load (default 120).")
    ] = None,
    ab: Annotated[
        str | None,
        typer.Option(
            "--ab",
            help="Interleaved A/B: also measure OTHER (threads=1, model=NAME, strategy=S5, "
            "runtime=NAME, schedule=1+25, ...; ';' joins several) in alternating blocks under one "
            "lease; two linked runs and their comparison.",
        ),
    ] = None,
    sweep: Annotated[
        list[str] | None,
        typer.Option(
            "--sweep",
            help="KEY=V1,V2,...: measure the cross product of all --sweep axes in interleaved "
            "rounds; one run per point, a table and the best point per metric.",
        ),
    ] = None,
    block: Annotated[
        int,
        typer.Option("--block", help="--ab/--sweep: measured requests per block (1: request by request)."),
    ] = 5,
    order: Annotated[
        str, typer.Option("--order", help="--ab/--sweep: interleaved (ABBA rounds) or back-to-back.")
    ] = "interleaved",
    confidence: Annotated[
        float, typer.Option("--confidence", help="--ab: confidence of the comparison's interval.")
    ] = 0.99,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="Tag the stored run(s) (compare with tag:NAME).")
    ] = None,
    lease: LeaseOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")] = False,
) -> None:
    """Warm-up then measured requests, batch 1 (single_request_batch1_v1); raw records and summary stored."""
    from rich.table import Table

    from edgelab.bench import run_bench
    from edgelab.errors import Refusal
    from edgelab.store.db import get_engine

    try:
        engine = get_engine(state.db)
    except ConfigError as err:
        fail_from(err, code=2)
    if endpoint is None and device is None:
        fail("pass --device DEVICE (a launched workload) or --endpoint URL (a running server)", code=2)
    if endpoint is not None and (runtime or strategy):
        fail(
            "--runtime/--strategy choose what edgelab launches; an --endpoint server is already running",
            code=2,
        )
    if (ab is not None or sweep) and (endpoint is not None or (ab is not None and sweep)):
        fail("--ab and --sweep measure launched workloads, one of them at a time", code=2)
    where = escape(endpoint or device or "")
    if ab is not None or sweep:
        from edgelab.cli import sweep as sweep_cli

        base = _request(locals())
        sweep_cli.run(
            engine,
            base,
            ab=ab,
            sweep=sweep,
            block=block,
            order=order,
            confidence=confidence,
            tags=tag,
            lease=lease,
            json_out=json_out,
        )
        return
    if not json_out:
        err_console.print(
            f"[dim]bench {escape(pipeline)} on {where}: {warmup} warm-up + {requests} measured ...[/]",
            highlight=False,
        )
    try:
        if endpoint is not None:
            from edgelab.bench.endpoint import EndpointBenchRequest, run_endpoint_bench

            result = run_endpoint_bench(
                engine,
                EndpointBenchRequest(
                    pipeline, endpoint, device, warmup, requests, band, control_hz, _options(endpoint_option)
                ),
            )
        else:
            result = run_bench(engine, _request(locals()), lease_id=lease)
            if tag:
                from edgelab.metrics.runsets import tag_runs
                from edgelab.store.db import session_scope

                with session_scope(engine) as s:
                    tag_runs(s, [result.run_id], tag)
    except Refusal as r:
        if json_out:
            print_json({"device": device, "pipeline": pipeline, "refusal": r.to_dict()})
            raise typer.Exit(1) from None
        fail_from(r)
    except ConfigError as err:
        fail_from(err, code=2)
    except KeyboardInterrupt:
        fail("interrupted: the workload is stopped; what was measured is stored", code=130)
    rep = result.report()
    if json_out:
        print_json(rep)
        return
    pv = rep.get("provenance") or {}
    runtime = pv.get("runtime")
    what = (
        "reference runtime"
        if runtime == "reference"
        else f"{runtime} ({pv.get('weights')} weights)"
        + (", the lab host's build" if rep.get("note") else "")
    )
    virtual = (
        f"  [yellow]VIRTUAL device, {escape(what)}: machinery only, not a model figure[/]"
        if rep["virtual"]
        else ""
    )
    console.print(f"run [bold]{result.run_id}[/] {result.state} ({rep['protocol']}){virtual}")
    if ep := rep.get("endpoint"):
        said = ", ".join(
            f"{k} {v}" for k, v in ep["reported"].items() if k in ("model", "runtime", "weights")
        )
        console.print(
            f"endpoint {escape(ep['url'])} ({ep['protocol']}; {escape(said or 'reported nothing')})",
            highlight=False,
        )
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    r = rep["requests"] or {}
    t.add_row(
        "requests",
        f"{r.get('total', 0)} ({', '.join(f'{k} {v}' for k, v in (r.get('by_phase') or {}).items())}"
        f"), failed {r.get('failed', 0)}",
    )
    if a := rep.get("audio"):
        t.add_row("TTFA", _p(a["ttfa_ms"], " ms"))
        t.add_row("playback start", _p(a["playback_start_ms"], " ms"))
        t.add_row("underruns", f"{a['underruns_at_ttfa']} at TTFA, stall {_p(a['stall_ms_at_ttfa'], ' ms')}")
        t.add_row("RTF streamed", _p(a["rtf_streamed"]))
        t.add_row("RTF total", _p(a["rtf_total"]))
        t.add_row("chunk gaps", _p(a["chunk_gaps_ms"], " ms"))
    if a := rep.get("action"):
        t.add_row("latency", _p(a["latency_ms"], " ms"))
        t.add_row("obs age", _p(a["age_ms"], " ms"))
        t.add_row(
            "deadline misses", f"{a['deadline_misses']} of {a['chunks']} (period {a['control_period_ms']} ms)"
        )
    if rep.get("controller"):  # edgelab's S3 controller on a real runtime
        for stage, pl in (rep.get("placement") or {}).items():
            flag = f"  [red]FALLBACK from {pl.get('requested')}[/]" if pl.get("fallback") else ""
            t.add_row(
                f"placement {stage}", f"{pl.get('observed')} ({escape(str(pl.get('detail', '')))[:90]}){flag}"
            )
        if par := rep.get("parity"):
            t.add_row(
                "parity", "ok" if par.get("ok") else f"[red]FAILED[/] {escape(str(par.get('error', '')))}"
            )
    for test, b in (rep.get("llama_bench") or {}).items():
        sd = f" +- {b['stddev_ts']:.1f}" if b.get("stddev_ts") is not None else ""
        t.add_row(
            f"llama-bench {test}",
            f"{b['avg_ts']:.1f}{sd} tok/s  (threads {b.get('n_threads')}, "
            f"{b.get('backends')}, build {str(b.get('build_commit'))[:9]})",
        )
    if lt := rep.get("llama_tts"):  # S5: llama-tts's own log, one process per request
        t.add_row("llama-tts total", _p(lt["total_s"], " s") + "  (its TTFA: the audio comes all at once)")
        t.add_row("llama-tts load", _p(lt["load_s"], " s"))
        t.add_row("generation", _p(lt["generation_frames_per_s"], " frames/s"))
        t.add_row("vocoder", _p(lt["vocoder_s"], " s"))
        if lt.get("peak_rss_bytes"):
            t.add_row("peak RSS", mib(lt["peak_rss_bytes"], 1) + " (sampled every 0.25 s)")
        t.add_row("placement", f"{rep.get('placement')} (observed in the load log)")
        pv = rep.get("provenance") or {}
        t.add_row("runtime", f"{pv.get('runtime_build')} {str(pv.get('runtime_sha256'))[:12]}")
    if x := rep.get("text"):
        t.add_row("TTFT", _p(x.get("ttft_ms"), " ms"))
        t.add_row("inter-token", _p(x.get("itl_ms"), " ms"))
        t.add_row("decode", _p(x.get("decode_tok_s"), " tok/s"))
        if x.get("server_predicted_per_second"):
            t.add_row("server decode", _p(x.get("server_predicted_per_second"), " tok/s"))
            t.add_row("server prompt", _p(x.get("server_prompt_ms"), " ms"))
        if x.get("peak_rss_bytes"):
            t.add_row("peak RSS", mib(x["peak_rss_bytes"], 1))
        if rep.get("placement"):
            t.add_row("placement", f"{rep['placement']} (observed in the load log)")
    if not rep.get("endpoint"):  # what ran: the same provenance `runs show` and --json hold
        t.add_row("strategy", escape(str(rep.get("strategy") or "-")))
        t.add_row(
            "runtime",
            escape(
                f"{pv.get('runtime_build')} {str(pv.get('runtime_sha256'))[:12]}, threads {pv.get('threads')}"
            ),
        )
        lib = pv.get("runtime_library")
        if isinstance(lib, dict):
            t.add_row(
                "library",
                escape(f"{lib.get('name')} {lib.get('version')} sha256 {str(lib.get('sha256'))[:12]}"),
            )
        for role, m in (pv.get("models") or {}).items():
            t.add_row(
                f"model {escape(role)}",
                escape(f"{m.get('artifact')} sha256 {str(m.get('sha256'))[:12]}, weights {m.get('weights')}"),
            )
    console.print(t)


def _request(args: dict[str, Any]) -> Any:
    """The launched workload's request from the command's arguments (-o pairs: template values)."""
    from edgelab.bench import BenchRequest
    from edgelab.bench.sweep import ALIASES

    values = {ALIASES.get(k, k): v for k, v in _options(args["endpoint_option"]).items()}
    if "schedule" in values:
        values["schedule"] = str(values["schedule"]).replace("+", ",")
    return BenchRequest(
        args["device"],
        args["pipeline"],
        args["runtime"],
        args["strategy"],
        args["warmup"],
        args["requests"],
        args["band"],
        args["control_hz"],
        args["frames_per_s"],
        args["frames"],
        args["slow_every"],
        args["slow_ms"],
        model=args["model"],
        threads=args["threads"],
        ready_timeout=args["ready_timeout"],
        hog=args["hog"],
        values={k: str(v) for k, v in values.items()},
        lab_host_build=args["lab_host_build"],
        target=args["target"],
    )


def _options(pairs: list[str] | None) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; true/false and integers become JSON values."""
    import json

    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            fail(f"--endpoint-option {pair!r} is not KEY=VALUE", code=2)
        try:
            out[key] = (
                json.loads(value) if value in ("true", "false") or value.lstrip("-").isdigit() else value
            )
        except ValueError:
            out[key] = value
    return out


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
