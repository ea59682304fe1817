"""JUnit XML for CI: one testsuite per job (device x pipeline), one testcase per step.

Each suite carries provenance properties (device, virtual flag, facts hash, artifact SHA-256s,
run ids, edgelab version); each failure carries its class (infra / device / test) as the
``type`` attribute, so CI dashboards can tell lab trouble from a real regression. A step cut short
by Ctrl-C is an ``<error type="interrupted">``; the steps it kept from running are skipped.

Every name and message comes from a playbook or a device, so each attribute and text passes
through :func:`edgelab.safetext.xml_text` (and :func:`edgelab.credentials.mask_text`): a control
character (an ANSI-coloured path in a device's error) never makes the file malformed, and no URL
password reaches CI's logs.
"""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from edgelab.credentials import mask_text
from edgelab.playbook.results import PlayResult, StepStatus
from edgelab.safetext import xml_text


def _clean(value: object) -> str:
    return xml_text(mask_text(str(value)))


def _make_safe(root: ET.Element) -> None:
    """Every attribute and text of the tree through :func:`_clean`, once, after it is built."""
    for el in root.iter():
        for key, value in el.attrib.items():
            el.set(key, _clean(value))
        if el.text:
            el.text = _clean(el.text)


def to_junit(result: PlayResult) -> str:
    root = ET.Element(
        "testsuites",
        name=result.playbook,
        tests="0",
        failures="0",
        errors="0",
        time=f"{result.duration_s:.3f}",
    )
    total = failures = errors = skipped_total = 0
    stamp = datetime.now(UTC).replace(microsecond=0).isoformat()
    for job in result.jobs:
        tests = len(job.steps)
        fails = sum(1 for s in job.steps if s.status == StepStatus.FAILED and s.category == "test")
        errs = sum(
            1
            for s in job.steps
            if (s.status == StepStatus.FAILED and s.category != "test") or s.status == StepStatus.INTERRUPTED
        )
        skips = sum(1 for s in job.steps if s.status == StepStatus.SKIPPED)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"{result.playbook}.{job.label}",
            tests=str(tests),
            failures=str(fails),
            errors=str(errs),
            skipped=str(skips),
            time=f"{job.duration_s:.3f}",
            timestamp=stamp,
            hostname=socket.gethostname(),
        )
        props = ET.SubElement(suite, "properties")
        pairs = [
            ("device", job.device),
            ("pipeline", job.pipeline or ""),
            ("virtual", str(job.virtual).lower()),
            ("device_class", job.device_class or ""),
            ("catalog_entry", job.catalog_entry or ""),
            ("facts_hash", job.facts_hash or ""),
            ("edgelab_version", result.edgelab_version),
            ("playbook_file", result.file),
            ("runs", ",".join(job.run_ids)),
        ]
        pairs += [(f"artifact_sha256:{name}", sha) for name, sha in sorted(job.artifacts.items())]
        for step in job.steps:  # the baseline each relative gate judged against, by its runs
            base = step.details.get("baseline") if step.kind == "gate" else None
            if base:
                pairs.append((f"baseline:{base['name']}", ",".join(base["runs"])))
        for name, value in pairs:
            ET.SubElement(props, "property", name=name, value=value)
        for step in job.steps:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"{result.playbook}.{job.label}",
                name=("cleanup: " if step.cleanup else "") + step.name,
                time=f"{step.duration_s:.3f}",
            )
            if step.status == StepStatus.FAILED:
                # a test failure is <failure>; lab or device trouble is <error>, both typed by class
                tag = "failure" if step.category == "test" else "error"
                el = ET.SubElement(
                    case,
                    tag,
                    type=step.category or "infra",
                    message=f"[{step.category or 'infra'}] {step.message}"[:1000],
                )
                el.text = step.message
            elif (
                step.status == StepStatus.INTERRUPTED
            ):  # stopped by Ctrl-C while it ran: neither passed nor failed
                el = ET.SubElement(
                    case, "error", type="interrupted", message=f"[interrupted] {step.message}"[:1000]
                )
                el.text = step.message
            elif step.status == StepStatus.SKIPPED:
                ET.SubElement(case, "skipped", message=step.message)
            out = step.message + (f"\nrun: {step.run_id}" if step.run_id else "")
            ET.SubElement(case, "system-out").text = out
        total += tests
        failures += fails
        errors += errs
        skipped_total += skips
    root.set("tests", str(total))
    root.set("failures", str(failures))
    root.set("errors", str(errors))
    _make_safe(root)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
