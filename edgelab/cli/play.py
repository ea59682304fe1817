"""`edgelab play FILE`: run a playbook; exit 0 pass, 1 failed, 2 invalid. Thin over edgelab.playbook."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from edgelab.cli.common import LeaseOpt, console, err_console, escape, fail_from, print_json, state
from edgelab.errors import ConfigError, EdgelabError


def play(
    file: Annotated[Path, typer.Argument(help="Playbook YAML (see playbooks/).")],
    limit: Annotated[
        str | None, typer.Option("--limit", help="Only these devices (comma-separated names).")
    ] = None,
    var: Annotated[
        list[str] | None, typer.Option("--var", help="Override a variable: NAME=VALUE (repeatable).")
    ] = None,
    junit: Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML here.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable result on stdout.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Validate and list the jobs; touch nothing.")
    ] = False,
    collect: Annotated[
        Path | None, typer.Option("--collect", help="Directory for collect steps' files.")
    ] = None,
    update_baseline: Annotated[
        bool,
        typer.Option(
            "--update-baseline",
            help="On a job's success, make the runs its relative gates judged its step's baseline "
            "(the old one stays as history).",
        ),
    ] = False,
    lease: LeaseOpt = None,
) -> None:
    """Run a playbook over its devices in parallel; per-step output, JUnit for CI."""
    from edgelab.playbook import load_playbook, parse_var_overrides, plan_jobs, run_playbook, to_junit
    from edgelab.playbook.schema import check_values
    from edgelab.store.db import get_engine

    try:
        pb = load_playbook(file)
        overrides = parse_var_overrides(list(var or []))
        check_values(pb, overrides)  # numbers that come from variables, checked before any step
        engine = get_engine(state.db)
        limits = limit.split(",") if limit else None
        jobs = plan_jobs(engine, pb, limits)
    except EdgelabError as err:  # kept: an unusable playbook or selection is a usage error (exit 2)
        _invalid(err)
    if dry_run:
        rows = [
            {
                "device": j.device,
                "pipeline": j.pipeline,
                "virtual": j.virtual,
                "steps": [s.name for s in pb.steps],
                "cleanup": [s.name for s in pb.cleanup],
            }
            for j in jobs
        ]
        if json_out:
            print_json(
                {
                    "playbook": pb.name,
                    "file": str(file),
                    "jobs": rows,
                    "variables": _masked({**pb.vars, **overrides}),
                }
            )
        else:
            console.print(f"[bold]{escape(pb.name)}[/]: {len(jobs)} job(s), valid", highlight=False)
            for r in rows:
                label = r["device"] + (f"/{r['pipeline']}" if r["pipeline"] else "")
                console.print(
                    f"  {escape(label)}{' (virtual)' if r['virtual'] else ''}: "
                    f"{escape(' -> '.join(r['steps']))}",
                    highlight=False,
                )
        raise typer.Exit(0)

    from edgelab.playbook.results import StepStatus

    mark = {
        StepStatus.PASSED: "[green]ok[/]",
        StepStatus.FAILED: "[bold red]FAILED[/]",
        StepStatus.SKIPPED: "[dim]skipped[/]",
    }

    def on_step(job, step) -> None:
        if json_out:
            return
        extra = f" [dim]({step.category})[/]" if step.status == StepStatus.FAILED else ""
        err_console.print(
            f"[cyan]{escape(job.label)}[/] {escape(step.name)}: {mark.get(step.status, step.status)}"
            f"{extra} {escape(step.message)} [dim]{step.duration_s:.1f}s[/]",
            highlight=False,
        )

    from edgelab.errors import PlayInterrupted

    try:
        result = run_playbook(
            engine,
            pb,
            limit=limits,
            variables=overrides,
            out_dir=collect,
            on_step=on_step,
            lease_id=lease,
            update_baseline=update_baseline,
            on_stop=lambda: err_console.print(
                "stopping: the current steps end, then the cleanup runs "
                "(Ctrl-C again cuts the cleanup short)",
                highlight=False,
            ),
        )
    except PlayInterrupted as stop:  # a second Ctrl-C: JUnit of what ran, what is left said, out now
        _write_junit(junit, to_junit(stop.result))
        if json_out:
            print_json(stop.result.to_dict())
        err_console.print(
            "interrupted twice: cleanup cut short; left for the next command (or `edgelab stop`): "
            + escape("; ".join(stop.result.cleanup_left) or "nothing recorded"),
            highlight=False,
        )
        _exit_now(130)
    except ConfigError as err:
        fail_from(err, code=2)
    _write_junit(junit, to_junit(result))
    if result.interrupted:
        if json_out:
            print_json(result.to_dict())
        err_console.print(
            "interrupted: the current steps were stopped and the cleanup ran"
            + (f"; JUnit in {escape(str(junit))}" if junit else ""),
            highlight=False,
        )
        raise typer.Exit(130)
    if json_out:
        print_json(result.to_dict())
    else:
        f = result.failures()
        word = "[green]passed[/]" if result.ok else "[bold red]FAILED[/]"
        console.print(
            f"{escape(pb.name)}: {word}, {len(result.jobs)} job(s) in {result.duration_s:.1f}s; "
            f"failures infra {f['infra']}, device {f['device']}, test {f['test']}",
            highlight=False,
        )
        for job in result.jobs:
            for note in job.matrix:
                console.print(f"  matrix: {escape(note)}", highlight=False)
            for note in job.baselines:
                console.print(f"  baseline: {escape(note)}", highlight=False)
    raise typer.Exit(0 if result.ok else 1)


def _write_junit(path: Path | None, xml: str) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(xml, encoding="utf-8")


def _exit_now(code: int) -> None:
    """Exit without waiting for job threads a second Ctrl-C cut short: what they left is recorded
    (deployments marked to_stop; a deploy cut mid-start is reaped once this process is gone)."""
    import os
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _invalid(err: EdgelabError) -> None:
    """Exit 2 with the error on one unwrapped line (file:line first), so CI logs can grep it."""
    typer.echo(f"error: {err}", err=True)
    if err.remedy:
        typer.echo(f"  -> {err.remedy}", err=True)
    raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    app.command("play")(play)


def _masked(variables: dict) -> dict:
    """Variables as printed: a URL's password masked (a variable may hold an endpoint)."""
    from edgelab.credentials import mask_text

    return {k: mask_text(v) if isinstance(v, str) else v for k, v in variables.items()}
