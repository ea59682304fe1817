# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""SIGINT and SIGKILL after every recorded phase of ``deploy``, ``bench``, ``push`` and ``play``.

Each trial is the real CLI in a child process on the virtual lab. A small harness (``HARNESS``)
wraps one product function so that right after it returns (a deploy phase, a bench's admission,
its push, a playbook step, the first MiB of a push) the child prints ``HELD <phase>`` and waits:
the signal then lands exactly between that phase and the next, every time. After a SIGINT the
child must exit 130 on its own; after a SIGKILL nothing of it can run, so the next command that
looks (``edgelab ps``) must finish what it left. Then the database and the device must agree:
no deployment ``pending``/``starting``, no bench run still ``pending``/``running``, no open
reservation, no process of the run (or the pushed blob) left on the lab host, where the virtual
devices run their processes. Trials, failures and orphans are printed at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deploy.test_deploy_helpers import cli_env, deploy_lab  # noqa: F401 - fixture
from sqlmodel import select

from edgelab.store.db import session_scope
from edgelab.store.deployments import Deployment, Reservation
from edgelab.store.runs import Run

pytestmark = [pytest.mark.ssh, pytest.mark.adb, pytest.mark.slow]

HARNESS = r"""
import functools, importlib, os, sys, time
spec = os.environ["EDGELAB_TEST_HOLD"]  # [before:]module:attr[|phase]
release = os.environ["EDGELAB_TEST_RELEASE"]
where, _, phase = spec.partition("|")
before = where.startswith("before:")
mod_name, path = where.removeprefix("before:").split(":")
owner = importlib.import_module(mod_name)
*outer, attr = path.split(".")
for part in outer:  # Class.method
    owner = getattr(owner, part)
real = getattr(owner, attr)
held = []

def hold(label):
    if held:
        return
    held.append(label)
    print(f"HELD {label}", file=sys.stderr, flush=True)
    end = time.monotonic() + 120
    while not os.path.exists(release) and time.monotonic() < end:  # a SIGINT lands here (main thread)
        time.sleep(0.05)

def matches(args):
    if not phase or phase == "progress":
        return True
    first = args[1] if len(args) > 1 else None  # a phase name, a step (its name) or an event (its class)
    return first == phase or getattr(first, "name", None) == phase or type(first).__name__ == phase

@functools.wraps(real)
def wrapper(*args, **kw):
    if phase == "progress":  # held inside the first progress report: bytes are on their way
        inner = kw.get("progress")
        kw["progress"] = lambda *a: (inner(*a) if inner else None, hold("progress"))
        return real(*args, **kw)
    if before and matches(args):
        hold(phase or attr)
    out = real(*args, **kw)
    if not before and matches(args):
        hold(phase or attr)
    return out

setattr(owner, attr, wrapper)
from edgelab.cli import main
main()
"""

DEPLOY_PHASES = [
    ("edgelab.deploy.pipeline:logged|" + p, p)
    for p in ("admitted", "connected", "pushed", "spawned", "ready_line", "ready")
]
BENCH_PHASES = [
    ("edgelab.deploy.pipeline:logged|admitted", "admitted"),
    ("edgelab.bench.steps:measure_offset", "connected"),
    ("edgelab.deploy.artifacts:push", "pushed"),
    ("edgelab.bench.steps:_set_meta", "started"),
    ("edgelab.metrics.ingest:Ingestor.feed|RequestEnd", "measuring"),
]
SIGNALS = [signal.SIGINT, signal.SIGKILL]


def _cmdlines() -> dict[int, str]:
    out = {}
    for p in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            out[int(p.parent.name)] = p.read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
    return out


def orphans(*needles: str) -> list[str]:
    """Processes on the lab host (where virtual devices run theirs) naming a run id or blob."""
    me = os.getpid()
    return [
        f"{pid}: {cmd[:200]}"
        for pid, cmd in _cmdlines().items()
        if pid != me and any(n and n in cmd for n in needles) and "pytest" not in cmd
    ]


def settled_orphans(*needles: str, within: float = 30.0) -> list[str]:
    """:func:`orphans` once a device helper whose client was killed had the moment it needs to see
    its connection gone (it notices on its next write: a push's hasher prints a dot about once a
    second, slower on a loaded host). What is still there after ``within`` is an orphan; the wait
    is a hang guard, not a figure."""
    end = time.monotonic() + within
    while (left := orphans(*needles)) and time.monotonic() < end:
        time.sleep(0.2)
    return left


class Trial:
    """One child CLI, held after ``phase``, then signalled."""

    def __init__(self, tmp: Path, env: dict[str, str], hold: str, args: list[str]):
        self.release = tmp / f"release-{os.urandom(4).hex()}"
        self.env = {
            **env,
            "EDGELAB_TEST_HOLD": hold,
            "EDGELAB_TEST_RELEASE": str(self.release),
            "COLUMNS": "300",
        }
        self.args = args

    def run(self, sig: int, timeout: float = 240) -> tuple[int, str, str, bool]:
        proc = subprocess.Popen(
            [sys.executable, "-c", HARNESS, *self.args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        held, err_head = False, []
        try:
            for line in proc.stderr:
                err_head.append(line)
                if line.startswith("HELD "):
                    held = True
                    proc.send_signal(sig)
                    self.release.touch()  # a hold in a worker thread lets go: the interrupt is seen next
                    break
            out, err = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        return proc.returncode, out, "".join(err_head) + (err or ""), held


def _cli(env: dict[str, str], *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from edgelab.cli import main; main()", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _newest(engine, kind: str, before: set[str]) -> Run | None:
    with session_scope(engine, write=False) as s:
        runs = [r for r in s.exec(select(Run).where(Run.kind == kind)).all() if r.id not in before]
    return runs[-1] if runs else None


def _run_ids(engine) -> set[str]:
    with session_scope(engine, write=False) as s:
        return {r.id for r in s.exec(select(Run)).all()}


def consistency(engine, env, run_id: str | None, *, allow_running: bool = True) -> list[str]:
    """What is wrong after a trial, once the next command looked (empty: consistent).

    ``allow_running``: a deployment still running is no leak (a deploy that finished before its
    signal); it is stopped here. A play's deployments must not outlive the play.
    """
    problems = []
    ps = _cli(env, "ps", "--json")
    if ps.returncode != 0 or "Traceback" in ps.stderr:
        problems.append(f"ps after the trial: exit {ps.returncode}: {ps.stderr[-300:]}")
    with session_scope(engine, write=False) as s:
        running = [d.run_id for d in s.exec(select(Deployment).where(Deployment.state == "running")).all()]
    for run in running:
        if not allow_running:
            problems.append(f"deployment {run} still running")
        res = _cli(env, "stop", run)
        if res.returncode != 0:
            problems.append(f"stop {run}: {res.stderr[-300:]}")
    with session_scope(engine, write=False) as s:
        for d in s.exec(select(Deployment)).all():
            if d.state in ("pending", "starting") or d.to_stop:
                problems.append(f"deployment {d.run_id} left {d.state}{' to stop' if d.to_stop else ''}")
        for r in s.exec(select(Run).where(Run.kind == "bench")).all():
            if r.state in ("pending", "running"):
                problems.append(f"bench run {r.id} left {r.state}")
        open_rows = s.exec(select(Reservation).where(Reservation.released_at == None)).all()  # noqa: E711
        problems += [
            f"reservation {x.id} ({x.pool}, run {x.run_id or x.deployment_id}) still open" for x in open_rows
        ]
    return problems


def _trials(name, engine, env, tmp, phases, args, kind, fault_figures, extra_check=None):
    failures, orphan_total, trials = [], 0, 0
    for hold, phase in phases:
        for sig in SIGNALS:
            trials += 1
            before = _run_ids(engine)
            code, _out, err, held = Trial(tmp, env, hold, args).run(sig)
            run = _newest(engine, kind, before)
            run_id = run.id if run else None
            where = f"{name} {signal.Signals(sig).name} after {phase}"
            if not held:
                failures.append(f"{where}: never reached the phase (exit {code}): {err[-500:]}")
                continue
            if sig == signal.SIGINT and (code != 130 or "Traceback" in err):
                failures.append(f"{where}: exit {code} (want 130): {err[-500:]}")
            problems = consistency(engine, env, run_id)
            if extra_check is not None:
                problems += extra_check(sig, phase)
            left = orphans(run_id) if run_id else []
            orphan_total += len(left)
            if problems or left:
                failures.append(f"{where} (run {run_id}): {problems} orphans {left}")
    fault_figures[f"kill {name}"].add(trials=trials, failures=len(failures), orphans=orphan_total)
    print(f"kill {name}: trials {trials}, failures {len(failures)}, orphans left {orphan_total}")
    assert not failures, "\n".join(failures)


def test_deploy_survives_sigint_and_sigkill_after_every_phase(deploy_lab, ssh_lab, tmp_path, fault_figures):
    url, engine, _opts = deploy_lab
    _trials(
        "deploy",
        engine,
        cli_env(url, ssh_lab),
        tmp_path,
        DEPLOY_PHASES,
        ["deploy", "qwen3-tts", "--device", "s25"],
        "deploy",
        fault_figures,
    )


def test_bench_survives_sigint_and_sigkill_after_every_phase(deploy_lab, ssh_lab, tmp_path, fault_figures):
    url, engine, _opts = deploy_lab
    _trials(
        "bench",
        engine,
        cli_env(url, ssh_lab),
        tmp_path,
        BENCH_PHASES,
        ["bench", "qwen3-tts", "--device", "orin-agx", "--warmup", "1", "--requests", "3"],
        "bench",
        fault_figures,
    )


def test_push_stops_sending_on_sigint_and_leaves_nothing_on_sigkill(
    deploy_lab, ssh_lab, tmp_path, fault_figures
):
    url, engine, _opts = deploy_lab
    env = cli_env(url, ssh_lab)
    failures, trials, orphan_total = [], 0, 0
    for sig in SIGNALS:
        for device in ("s25", "orin-agx"):
            trials += 1
            blob = tmp_path / f"kill-{device}-{sig}.bin"
            blob.write_bytes(os.urandom(24 << 20))
            name = blob.stem
            res = _cli(
                env, "artifact", "add", str(blob), "--kind", "other", "--target", "any", "--name", name
            )
            assert res.returncode == 0, res.stderr
            sha = hashlib.sha256(blob.read_bytes()).hexdigest()
            where = f"push {signal.Signals(sig).name} to {device}"
            code, _out, err, held = Trial(
                tmp_path, env, "edgelab.artifacts.push:push_blob|progress", ["push", name, "--device", device]
            ).run(sig)
            if not held:
                failures.append(f"{where}: never sent a byte (exit {code}): {err[-400:]}")
                continue
            if sig == signal.SIGINT and (code != 130 or "Traceback" in err):
                failures.append(f"{where}: exit {code} (want 130): {err[-400:]}")
            ls = json.loads(_cli(env, "store", "ls", device, "--json").stdout)
            entries = ls["entries"] if isinstance(ls, dict) else ls
            if sig == signal.SIGINT and any(e.get("name") == sha for e in entries):
                failures.append(f"{where}: the blob arrived whole: the push kept sending after Ctrl-C")
            left = settled_orphans(sha)
            orphan_total += len(left)
            again = _cli(env, "push", name, "--device", device, "--json")  # resumes and verifies
            if again.returncode != 0:
                failures.append(f"{where}: the next push failed: {again.stderr[-400:]}")
            if left:
                failures.append(f"{where}: orphans {left}")
    fault_figures["kill push"].add(trials=trials, failures=len(failures), orphans=orphan_total)
    print(f"kill push: trials {trials}, failures {len(failures)}, orphans left {orphan_total}")
    assert not failures, "\n".join(failures)


PLAYBOOK = """
name: kill
devices: [s25]
steps:
  - name: look
    probe: {}
    timeout: 90
  - name: deploy tts
    deploy: {pipeline: qwen3-tts}
    timeout: 180
  - name: soak
    soak: {minutes: 5, interval_s: 1}
    timeout: 400
cleanup:
  - name: stop all
    stop: {}
"""
PLAY_PHASES = [
    ("edgelab.playbook.runner:_run_step|look", "look"),
    ("edgelab.playbook.runner:_run_step|deploy tts", "deploy tts"),
    ("edgelab.playbook.steps:_mem_available", "soaking"),
]


def _junit_cases(path: Path) -> dict[str, str]:
    import xml.etree.ElementTree as ET

    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        kids = [k for k in case if k.tag in ("failure", "error", "skipped")]
        out[case.get("name")] = (kids[0].tag + ":" + (kids[0].get("type") or "")) if kids else "passed"
    return out


def test_play_first_ctrl_c_stops_the_step_runs_cleanup_and_writes_junit(
    deploy_lab, ssh_lab, tmp_path, fault_figures
):
    url, engine, _opts = deploy_lab
    env = cli_env(url, ssh_lab)
    book = tmp_path / "kill.yaml"
    book.write_text(PLAYBOOK)
    failures, trials, orphan_total = [], 0, 0
    for hold, phase in PLAY_PHASES:
        for sig in SIGNALS:
            trials += 1
            junit = tmp_path / f"junit-{trials}.xml"
            before = _run_ids(engine)
            code, _out, err, held = Trial(
                tmp_path, env, hold, ["play", str(book), "--junit", str(junit)]
            ).run(sig)
            where = f"play {signal.Signals(sig).name} after {phase}"
            run = _newest(engine, "deploy", before)
            if not held:
                failures.append(f"{where}: never reached the phase (exit {code}): {err[-500:]}")
                continue
            if sig == signal.SIGINT:
                cases = _junit_cases(junit) if junit.exists() else {}
                if code != 130 or "Traceback" in err:
                    failures.append(f"{where}: exit {code} (want 130): {err[-500:]}")
                if cases.get("cleanup: stop all") != "passed":
                    failures.append(f"{where}: cleanup did not run (JUnit {cases}): {err[-300:]}")
                if "error:interrupted" not in cases.values():
                    failures.append(f"{where}: no interrupted case in the JUnit: {cases}")
            problems = consistency(engine, env, None, allow_running=False)
            left = orphans(run.id) if run else []
            orphan_total += len(left)
            if problems or left:
                failures.append(f"{where}: {problems} orphans {left}")
    fault_figures["kill play"].add(trials=trials, failures=len(failures), orphans=orphan_total)
    print(f"kill play: trials {trials}, failures {len(failures)}, orphans left {orphan_total}")
    assert not failures, "\n".join(failures)


def test_play_second_ctrl_c_records_the_cleanup_left_and_the_next_command_finishes_it(
    deploy_lab, ssh_lab, tmp_path
):
    url, engine, _opts = deploy_lab
    env = cli_env(url, ssh_lab)
    book = tmp_path / "kill.yaml"
    book.write_text(PLAYBOOK)
    junit = tmp_path / "twice.xml"
    trial = Trial(
        tmp_path,
        env,
        "before:edgelab.playbook.runner:_run_step|stop all",
        ["play", str(book), "--junit", str(junit)],
    )
    env2 = {**trial.env, "EDGELAB_TEST_RELEASE": str(tmp_path / "never")}  # the cleanup stays held
    before = _run_ids(engine)
    proc = subprocess.Popen(
        [sys.executable, "-c", HARNESS, *trial.args],
        env=env2,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    seen = []
    try:
        for line in proc.stderr:  # deployed, now soaking: the first Ctrl-C ends the soak
            seen.append(line)
            if "deploy tts:" in line:
                proc.send_signal(signal.SIGINT)
            if line.startswith("stopping:"):
                break
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("HELD "):  # in the cleanup now, held: a second Ctrl-C cuts it short
                proc.send_signal(signal.SIGINT)
                break
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = "".join(seen) + err
    assert proc.returncode == 130 and "Traceback" not in err, err[-1500:]
    assert "interrupted twice" in err and "edgelab stop" in err, err[-1500:]
    run = _newest(engine, "deploy", before)
    with session_scope(engine, write=False) as s:  # recorded: the play's deployment is marked to stop
        dep = s.exec(select(Deployment).where(Deployment.run_id == run.id)).one()
        assert dep.to_stop and dep.state == "running", (dep.state, dep.to_stop)
    cases = _junit_cases(junit)
    assert "error:interrupted" in cases.values(), cases
    assert consistency(engine, env, None, allow_running=False) == []  # the next command (ps) finished it
    assert orphans(run.id) == []


BENCH_PLAYBOOK = """
name: twice
devices: [s25]
steps:
  - name: measure
    bench: {workload: tts, warmup: 0, requests: 3, frames: 24, frames_per_s: 0}
    timeout: 180
"""


def test_play_second_ctrl_c_during_a_bench_names_the_open_bench_and_the_next_command_ends_it(
    deploy_lab, ssh_lab, tmp_path
):
    """Twice Ctrl-C while a bench measures: the bench run and its memory are still open when the
    play exits, so the play says so (it said 'nothing recorded'), and the next ``ps`` ends them."""
    url, engine, _opts = deploy_lab
    env = cli_env(url, ssh_lab)
    book = tmp_path / "twice.yaml"
    book.write_text(BENCH_PLAYBOOK)
    trial = Trial(
        tmp_path, env, "edgelab.metrics.ingest:Ingestor.feed|RequestEnd", ["play", str(book)]
    )  # held in the bench's worker thread until the release file appears, which it never does
    before = _run_ids(engine)
    proc = subprocess.Popen(
        [sys.executable, "-c", HARNESS, *trial.args],
        env=trial.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    seen = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("HELD "):  # measuring: the first Ctrl-C
                proc.send_signal(signal.SIGINT)
            if line.startswith("stopping:"):  # the bench is still held: the second one
                proc.send_signal(signal.SIGINT)
                break
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = "".join(seen) + err
    bench = _newest(engine, "bench", before)
    assert proc.returncode == 130 and "Traceback" not in err, err[-1500:]
    assert bench is not None and f"bench run {bench.id}" in err and "nothing recorded" not in err, err[-1500:]
    assert consistency(engine, env, None, allow_running=False) == []  # ps ended the bench, memory released
    assert orphans(bench.id) == []
