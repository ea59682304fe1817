"""A Ctrl-C that lands between two steps still shows in the play's report and its JUnit.

The first Ctrl-C marks the step it ends ``interrupted``; when it comes after one step finished and
before the next began, the step it kept from running is the interrupted one (CI must see an
``<error type="interrupted">`` either way), the rest are skipped and the cleanup runs. Driven in
process with the runner's own stop event, on a real SQLite database; no device is reached.
"""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET

from edgelab.playbook import run_playbook, to_junit
from edgelab.playbook.schema import parse_playbook
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.devices import add_device
from edgelab.store.models import Device


def test_a_stop_between_steps_marks_the_next_step_interrupted_and_runs_the_cleanup(tmp_path):
    dbmod.dispose_engines()
    engine = get_engine(str(tmp_path / "play.db"))
    try:
        with session_scope(engine) as s:
            add_device(s, Device(name="bench-pc", transport="ssh", ssh_host="127.0.0.1", ssh_port=9))
        pb = parse_playbook(
            {
                "name": "between",
                "devices": ["bench-pc"],
                "steps": [
                    {"name": "first", "soak": {"minutes": 1}},  # would need the device: never runs
                    {"name": "second", "soak": {"minutes": 1}},
                ],
                "cleanup": [{"name": "stop all", "stop": {}}],
            },
            "between.yaml",
        )
        stop = threading.Event()
        stop.set()  # the Ctrl-C came before the job's next step began
        res = run_playbook(engine, pb, stop_event=stop)
        (job,) = res.jobs
        got = [(st.name, st.status, st.message) for st in job.steps]
        assert got == [
            ("first", "interrupted", "interrupted (Ctrl-C) before it started"),
            ("second", "skipped", "skipped: the play was stopped"),
            ("stop all", "passed", "nothing of this job is running"),
        ]
        assert res.interrupted
        errors = [e.get("type") for e in ET.fromstring(to_junit(res)).iter("error")]
        assert errors == ["interrupted"]
    finally:
        dbmod.dispose_engines()
