"""`edgelab bench PIPELINE --device D`: the study's measured-run protocol, thin over edgelab.bench."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from edgelab.cli.common import (
    LabHostBuildOpt,
    LeaseOpt,
    TargetOpt,
    ThreadsOpt,
    console,
    err_console,
    escape,
    fail,
    fail_from,
    print_json,
    state,
)
from edgelab.errors import ConfigError


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
    threads: ThreadsOpt = None,
    lab_host_build: LabHostBuildOpt = False,
    target: TargetOpt = None,
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
    _print_report(result, rep)


def _print_report(result: Any, rep: dict[str, Any]) -> None:
    """The report's lines (edgelab.views.bench) drawn: a header, the endpoint, a table of figures."""
    from rich.table import Table

    from edgelab.views.bench import bench_rows, endpoint_line, virtual_note

    note = virtual_note(rep)
    virtual = f"  [yellow]{escape(note)}[/]" if note else ""
    console.print(f"run [bold]{result.run_id}[/] {result.state} ({rep['protocol']}){virtual}")
    if (line := endpoint_line(rep)) is not None:
        console.print(escape(line), highlight=False)
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    for row in bench_rows(rep):
        t.add_row(
            escape(row.key),
            "".join(f"[red]{escape(text)}[/]" if alert else escape(text) for text, alert in row.parts),
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
        runtime=args["runtime"],
        strategy=args["strategy"],
        warmup=args["warmup"],
        requests=args["requests"],
        band=args["band"],
        control_hz=args["control_hz"],
        frames_per_s=args["frames_per_s"],
        frames=args["frames"],
        slow_every=args["slow_every"],
        slow_ms=args["slow_ms"],
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
