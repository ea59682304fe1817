"""`edgelab deploy`, `ps`, `logs`, `stop`: thin over edgelab.deploy (planning, launch, control)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from edgelab.cli.common import (
    JsonOpt,
    LabHostBuildOpt,
    LeaseOpt,
    TargetOpt,
    ThreadsOpt,
    console,
    emit_error,
    err_console,
    escape,
    fail,
    fail_from,
    open_engine,
    print_json,
)
from edgelab.errors import EdgelabError
from edgelab.labels import placement_line, strategy_label
from edgelab.states import DeploymentState
from edgelab.units import when

if TYPE_CHECKING:
    from edgelab.deploy.pipeline import PhaseEvent


def _dep_dict(d) -> dict[str, Any]:
    return {
        "run": d.run_id,
        "device": d.device_name,
        "pipeline": d.pipeline,
        "strategy": d.strategy,
        "strategy_label": strategy_label(d.strategy, d.runtime),
        "runtime": d.runtime,
        "state": d.state,
        "virtual": d.virtual,
        "execution": (getattr(d, "plan", None) or {}).get("execution") or None,
        "remote_dir": d.remote_dir,
        "error": d.error,
        "phases": d.phases,
        "placement": d.placement,
        "admission": d.admission,
        "created_at": d.created_at.isoformat() if d.created_at else None,
        "lease": getattr(d, "lease_id", None),
        "to_stop": bool(getattr(d, "to_stop", False)),
    }


def _render_plan(planned) -> None:
    """The plan rows of the read model (edgelab.views.plan), under a one-line headline."""
    from edgelab.views.plan import plan_rows

    p = planned.plan
    virtual = "  [dim]VIRTUAL[/]" if planned.virtual else ""
    console.print(
        f"[bold]{escape(p.pipeline)}[/] on [bold]{escape(p.device)}[/]: strategy [bold]{escape(strategy_label(p.strategy, p.runtime))}[/] "
        f"runtime {escape(p.runtime)}{virtual}"
    )
    for row in plan_rows(planned.to_dict()):
        style = "red" if row.alert else "bold"
        console.print(f"  [{style}]{escape(row.key)}[/]: {escape(row.value)}", highlight=False)


def deploy(
    pipeline: Annotated[str, typer.Argument(help="Pipeline (qwen3-tts, qwen3-tts-1.7b, internvla-a1, ...).")],
    device: Annotated[str, typer.Option("--device", "-d", help="Device name.")],
    strategy: Annotated[
        str | None, typer.Option("--strategy", help="S1, S3, S4 or S5 (default: automatic).")
    ] = None,
    runtime: Annotated[
        str | None, typer.Option("--runtime", help="Runtime override (reference, llama.cpp, ...).")
    ] = None,
    endpoint: Annotated[
        str | None, typer.Option("--endpoint", help="S4 server endpoint (ws://host:port).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", help="Model artifact by name (default: the newest registered for the pipeline)."
        ),
    ] = None,
    threads: ThreadsOpt = None,
    lab_host_build: LabHostBuildOpt = False,
    target: TargetOpt = None,
    ready_timeout: Annotated[
        float | None,
        typer.Option(
            "--ready-timeout",
            help="Seconds the start-up may take (default: from the profile's load-time estimate).",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan and admission; touch nothing.")
    ] = False,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow/--no-follow",
            help="Ingest its events into the store (a detached follower that ends with the run).",
        ),
    ] = True,
    lease: LeaseOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Plan, admit, push and start PIPELINE on a device; refused early (with why) when it cannot run."""
    from edgelab.deploy import launch, planning
    from edgelab.errors import Refusal

    engine = open_engine()
    req = planning.DeployRequest(
        device,
        pipeline,
        strategy,
        runtime,
        endpoint,
        model=model,
        threads=threads,
        ready_timeout=ready_timeout,
        lab_host_build=lab_host_build,
        target=target,
    )
    if dry_run:
        try:
            planned = planning.plan(engine, req)
        except Refusal as r:
            if json_out:
                print_json({"device": device, "pipeline": pipeline, "refusal": r.to_dict()})
                raise typer.Exit(1) from None
            fail_from(r)
        if json_out:
            print_json(planned.to_dict())
        else:
            _render_plan(planned)
            if planned.refusal:
                fail_from(planned.refusal)
        raise typer.Exit(1 if planned.refusal else 0)

    from edgelab.deploy.supervise import Follow

    try:
        # detached: a follower of its own outlives this command (--no-follow: none, and supervision leaves it so)
        with launch.deploy_steps(
            engine, req, lease_id=lease, follow=Follow.DETACHED if follow else Follow.NONE
        ) as steps:
            for event in steps:
                _show_phase(event, json_out)
        dep = steps.result
        assert dep is not None  # the iteration ended: the deployment is running
    except Refusal as r:
        if json_out:
            print_json({"device": device, "pipeline": pipeline, "refusal": r.to_dict()})
            raise typer.Exit(1) from None
        fail_from(r)
    except KeyboardInterrupt:
        fail("interrupted: what was started is stopped and its memory released", code=130)
    if json_out:
        print_json(_dep_dict(dep))
        return
    console.print(
        f"run [bold]{dep.run_id}[/]: {escape(dep.pipeline)} on {escape(dep.device_name)} "
        f"({escape(strategy_label(dep.strategy, dep.runtime))}, {escape(dep.runtime)}) is {dep.state}"
    )
    for pl in dep.placement:
        console.print(f"  {escape(placement_line(pl))}", highlight=False)


def _show_phase(event: PhaseEvent, json_out: bool) -> None:
    """One short line per start-up phase; the placement table is printed once the run is up."""
    if not json_out:
        fields = " ".join(
            f"{k}={v}" for k, v in event.info.items() if k != "placement" and v not in ({}, [], None)
        )
        err_console.print(f"[dim]{event.name:<10}[/] {escape(fields)}", highlight=False)


def ps(
    all_: Annotated[bool, typer.Option("--all", help="Finished runs too.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Deployments and their state (running ones are checked on their device)."""
    from edgelab.deploy import control
    from edgelab.deploy.reap import reap
    from edgelab.store.db import session_scope
    from edgelab.store.deployments import ACTIVE_STATES, list_deployments

    engine = open_engine()
    unreachable: dict[str, EdgelabError | str] = {}  # device -> why; one slow device is asked once
    reap(engine, unreachable=unreachable)  # what a dead deploy or bench left is finished first
    with session_scope(engine, write=False) as s:
        deps = list_deployments(s, active_only=not all_)
    out = []
    for d in deps:
        if d.device_name in unreachable:
            out.append(d)
            continue
        try:
            now = control.refresh(engine, d.run_id)
        except EdgelabError as err:  # kept: one unreachable device is listed as such, the rest still shown
            unreachable[d.device_name] = err
            out.append(d)
            continue
        if now.state == DeploymentState.DEVICE_LOST and d.state != DeploymentState.DEVICE_LOST:
            unreachable[d.device_name] = now.error or "device lost"
        out.append(now)
    _revive_followers(
        engine, [d for d in out if d.state == DeploymentState.RUNNING and d.device_name not in unreachable]
    )
    if not all_:
        out = [d for d in out if d.state in ACTIVE_STATES or d.to_stop] or out
    if json_out:
        print_json([_dep_dict(d) for d in out])
    else:
        _ps_table(out)
    for why in unreachable.values():  # after the table: every device that did not answer, then exit 1
        remedy = (
            getattr(why, "remedy", None)
            or "check the device (`edgelab device check`), then `edgelab ps` again"
        )
        emit_error(str(why), remedy)
    if unreachable:
        raise typer.Exit(1)


def _revive_followers(engine, deps) -> None:
    """A running deployment whose follower is gone (its pid, host and start time; or silent past its
    lease) gets a new one, resuming from the stored log offset; said on stderr."""
    from edgelab.deploy import supervise

    for d in deps:
        service = supervise.FollowerService(engine, d.run_id, supervise.Follow.DETACHED, asked=False)
        try:
            was = supervise.status(engine, d.run_id)
            started = service.start()
        except (OSError, EdgelabError) as err:
            err_console.print(f"[yellow]{d.run_id}: no follower could be started: {escape(str(err))}[/]")
            continue
        if started:
            err_console.print(
                f"[dim]{d.run_id}: follower {escape(was.why or was.state)}; started a new one "
                f"(pid {service.pid}, its log {escape(str(service.log_path))})[/]",
                highlight=False,
            )


def _ps_table(out) -> None:
    from rich.table import Table

    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col in ("run", "device", "pipeline", "strategy", "runtime", "state", "started", ""):
        table.add_column(col, overflow="fold")
    for d in out:
        table.add_row(
            d.run_id,
            escape(d.device_name),
            escape(d.pipeline),
            escape(strategy_label(d.strategy, d.runtime)),
            escape(d.runtime),
            d.state + (" (to stop)" if d.to_stop else ""),
            when(d.started_at),
            ("[dim]VIRTUAL[/]" if d.virtual else "")
            + (
                " [yellow]EMULATED[/]"
                if ((getattr(d, "plan", None) or {}).get("execution") or {}).get("emulated")
                else ""
            ),
        )
    console.print(table)


def logs(
    run: Annotated[str, typer.Argument(help="Run id (see `edgelab ps`).")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep streaming new lines.")] = False,
    stderr: Annotated[bool, typer.Option("--stderr", help="The stderr log instead of stdout.")] = False,
) -> None:
    """A run's remote log (kept with the run once it ended)."""
    import sys

    from edgelab.deploy import control
    from edgelab.deploy.supervise import Follow, FollowerService

    ingest = None
    try:
        engine = open_engine()
        if follow:  # nobody ingests it: do it while we follow
            ingest = FollowerService(engine, run, Follow.THREAD)
            ingest.start()
        for line in control.log_lines(engine, run, follow=follow, stream="stderr" if stderr else "stdout"):
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
    except KeyboardInterrupt:
        return
    finally:
        if ingest is not None:
            ingest.stop()


def stop(
    run: Annotated[str, typer.Argument(help="Run id (see `edgelab ps`).")],
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Stop it even when it runs under someone else's lease (recorded on the run)."
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Kill the run's remote process groups, verify they are gone, release its memory; then read
    the device's log to its end, so every chunk it wrote is stored.

    A run under someone else's lease is refused, naming whose it is, unless --force."""
    from edgelab.deploy import control, supervise
    from edgelab.lease.owner import whoami

    engine = open_engine()
    with_holder = whoami()
    from edgelab.store.db import session_scope
    from edgelab.store.deployments import get_deployment

    with session_scope(engine, write=False) as s:
        before = get_deployment(s, run)
    theirs = control.owner_of(engine, before, with_holder)
    # killed, seen gone, released; then its log read to the end
    dep = supervise.stop(engine, run, holder=with_holder, force=force)
    if json_out:
        print_json({**_dep_dict(dep), "stopped_for": theirs})
        return
    console.print(
        f"run {dep.run_id} is {dep.state}"
        + (f" (it ran under {escape(theirs)}; stopped with --force)" if theirs else "")
    )


def register(app: typer.Typer) -> None:
    app.command("deploy")(deploy)
    app.command("ps")(ps)
    app.command("logs")(logs)
    app.command("stop")(stop)
