"""Where a follower runs: a daemon thread of the caller, or a detached process of its own.

A detached follower (``python -m edgelab.deploy.follow RUN``) outlives the command that started it,
so it writes its log to a file of its own under the edgelab home (:func:`log_path`), through the
one log handler (secrets masked); SIGTERM makes it hand over as a stopped thread does (offset
stored, the lease left to expire). Which of the two a caller gets, and when, is decided by
:mod:`edgelab.deploy.supervise` (the follower as a service).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from edgelab.deploy.follow.follower import Follower
from edgelab.deploy.follow.lease import LEASE_S, record_failure
from edgelab.errors import EdgelabError
from edgelab.store.db import session_scope
from edgelab.store.deployments import ACTIVE_STATES, get_deployment
from edgelab.store.runs import get_run

log = logging.getLogger(__name__)


class FollowerThread(threading.Thread):
    """A follower in a daemon thread (``edgelab watch``, ``logs -f``, the TUI's run screen, a play)."""

    def __init__(self, follower: Follower):
        super().__init__(name=f"follow-{follower.run_id}", daemon=True)
        self.follower = follower
        self.stop_event = threading.Event()
        self.exc: BaseException | None = None

    def run(self) -> None:
        try:
            self.follower.run(self.stop_event)
        except BaseException as e:  # noqa: BLE001 - reported to whoever joins
            self.exc = e

    def stop(self, timeout: float = 30.0) -> None:
        self.stop_event.set()
        self.join(timeout)


def ensure_follower(
    engine: Engine, run_id: str, *, transport: dict[str, Any] | None = None, lease_s: float = LEASE_S
) -> FollowerThread | None:
    """Start a follower thread for an active deployment unless a live one holds the run; None otherwise."""
    with session_scope(engine, write=False) as s:
        run = get_run(s, run_id)
        if run.kind != "deploy":
            return None
        try:
            dep = get_deployment(s, run.id)
        except EdgelabError:
            return None
    if dep.state not in ACTIVE_STATES and (run.meta.get("follower") or {}).get("done"):
        return None
    f = Follower(engine, run.id, transport=transport, lease_s=lease_s)
    if not f.acquire():
        return None
    th = FollowerThread(f)
    th.start()
    return th


def log_path(run_id: str) -> Path:
    """A detached follower's log: ``<edgelab home>/logs/follow-<run>.log`` (EDGELAB_HOME or ~/.edgelab)."""
    from edgelab.config import state_dir

    return state_dir() / "logs" / f"follow-{re.sub(r'[^A-Za-z0-9._-]', '_', run_id)}.log"


def spawn_detached(run_id: str, env: dict[str, str] | None = None) -> int:
    """A follower process that outlives the caller (the deploying CLI); returns its pid.

    The database URL travels in the environment (EDGELAB_DB), never on the command line. Its log
    and anything it prints go to :func:`log_path` (appended: a replaced follower continues it).
    """
    import subprocess
    import sys

    path = log_path(run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as out:  # the child holds its own descriptor: closed here once started
        proc = subprocess.Popen(
            [sys.executable, "-m", "edgelab.deploy.follow", run_id, "--log-file", str(path)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    return proc.pid


def main(argv: list[str] | None = None) -> int:
    import argparse
    import signal
    import sys

    from edgelab import logs
    from edgelab.store.db import get_engine

    ap = argparse.ArgumentParser(
        prog="python -m edgelab.deploy.follow", description="Follow one run's events."
    )
    logs.add_argument(ap)
    ap.add_argument("run")
    ap.add_argument("--lease-s", type=float, default=LEASE_S)
    ap.add_argument("--ssh-config", default=None)
    ap.add_argument(
        "--log-file", default=None, help="append the log here (default level info; secrets are masked)"
    )
    args = ap.parse_args(argv)
    out = open(args.log_file, "a", encoding="utf-8", buffering=1) if args.log_file else None  # noqa: SIM115
    try:
        logs.setup(args.log_level, default="info" if out else "warning", stream=out)

        def say(level: int, text: str, exc_info: bool = False) -> None:
            """To the terminal as before; a detached follower's to its log file (secrets masked)."""
            if out is None:
                print(logs.redact(text), file=sys.stderr)
            else:
                log.log(level, "%s", text, exc_info=exc_info)

        try:
            engine = get_engine(os.environ.get("EDGELAB_DB"))
            f = Follower(
                engine,
                args.run,
                lease_s=args.lease_s,
                transport={"ssh_config": args.ssh_config} if args.ssh_config else None,
            )
            taken = f.acquire()
        except Exception as err:
            if out is None:
                raise  # on a terminal, as before
            say(
                logging.ERROR, f"error: {type(err).__name__}: {err}", exc_info=True
            )  # masked, not a raw traceback
            return 1
        if not taken:
            say(logging.INFO, f"run {args.run}: another follower holds it")
            return 0
        log.info("run %s: following (pid %d)", f.run_id, os.getpid())
        stop = threading.Event()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: stop.set())  # hand over, as a stopped thread does
        try:
            f.run(stop)
        except KeyboardInterrupt:
            return 130
        except Exception as err:  # noqa: BLE001 - a detached follower must leave its reason in the run
            why = str(err) if isinstance(err, EdgelabError) else f"{type(err).__name__}: {err}"
            record_failure(engine, f.run_id, why)
            say(logging.ERROR, f"error: {why}", exc_info=not isinstance(err, EdgelabError))
            return 1
        log.info("run %s: follower ended (%s)", f.run_id, "handed over" if stop.is_set() else "run final")
        return 0
    finally:
        if out is not None:
            logs.setup(args.log_level)  # the file's handler is replaced before the file closes
            out.close()
