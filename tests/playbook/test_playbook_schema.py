"""Playbook validation (file:line, offending key), variables, and gate expressions (no eval)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgelab.errors import ConfigError, PlaybookError
from edgelab.playbook import load_playbook, loads_playbook, parse_gate, parse_var_overrides
from edgelab.playbook.gates import evaluate
from edgelab.playbook.schema import substitute

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
SUMMARY = {
    "audio": {
        "ttfa_ms": {"count": 3, "p50": 200.0, "p95": 420.0},
        "underruns_at_ttfa": 0,
        "rtf_total": {"count": 3, "p95": 0.8},
    },
    "action": {"chunks": 200, "deadline_misses": 3, "latency_ms": {"p95": 80.0}},
    "requests": {"total": 3, "failed": 0},
    "errors": {},
}


@pytest.mark.parametrize("path", sorted(PLAYBOOKS.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_playbooks_are_valid(path):
    pb = load_playbook(path)
    assert pb.steps and pb.devices


@pytest.mark.parametrize(
    "text,where,needle",
    [
        (
            "name: t\ndevices: [all]\nsteps:\n  - probe: {}\n  - bench:\n      workload: tts\n      reqests: 2\n",
            ":7:",
            "reqests",
        ),
        ("name: t\ndevices: [all]\nsteps:\n  - bnch: {}\n", ":4:", "bnch"),
        ("name: t\ndevices: [all]\nsteps:\n  - gate:\n      - rtf_totl.p95 < 1\n", ":5:", "rtf_totl"),
        ("name: t\ndevices: [all]\nsteps:\n  - bench:\n      requests: ${n}x\n", ":5:", "${n}"),
        ("name: t\ndevices: [all]\nsteps:\n  - probe: {}\n    timeout: soon\n", ":5:", "timeout"),
        ("devices: [all]\nsteps:\n  - probe: {}\n", ":1:", "'name'"),
        ("name: t\ndevices: [all\n", ":3:", "YAML"),
        (
            "name: t\ndevices: [all]\nsteps:\n  - gate: {checks: ['underruns == 0'], run: nope}\n",
            ":4:",
            "nope",
        ),
    ],
)
def test_errors_name_file_line_and_key(text, where, needle):
    with pytest.raises(PlaybookError) as exc:
        loads_playbook(text, "pb.yaml")
    msg = str(exc.value)
    assert msg.startswith("pb.yaml" + where) and needle in msg and "\n" not in msg


def test_variables_substitute_with_types_and_overrides_parse_as_yaml():
    assert parse_var_overrides(["n=3", "py=python3.11", "on=true"]) == {
        "n": 3,
        "py": "python3.11",
        "on": True,
    }
    assert substitute({"requests": "${n}", "argv": "run-${device}"}, {"n": 3, "device": "s25"}) == {
        "requests": 3,
        "argv": "run-s25",
    }
    with pytest.raises(ConfigError):
        parse_var_overrides(["novalue"])


@pytest.mark.parametrize(
    "expr,ok",
    [
        ("rtf_total.p95 < 1.0", True),
        ("underruns == 0", True),
        ("ttfa.p95 < 500ms", True),
        ("ttfa.p95 < 0.4s", False),
        ("deadline_miss_rate < 0.01", False),
        ("deadline_miss_rate < 2%", True),
        ("action_latency.p95 <= 80ms", True),
        ("requests_failed == 0", True),
        ("errors == 0", True),
    ],
)
def test_gates_on_a_summary(expr, ok):
    assert evaluate(parse_gate(expr), SUMMARY).ok is ok


def test_a_metric_the_run_lacks_fails_as_unknown():
    res = evaluate(parse_gate("ttft.p95 < 100ms"), SUMMARY)
    assert not res.ok and res.actual is None and "no value" in res.message


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os') < 1",
        "rtf_total.p95 < 1 or 1",
        "underruns == 0ms",
        "ttfa.p99 < 5",
        "nonsense < 1",
        "rtf_total.p95 << 1",
    ],
)
def test_gates_reject_anything_but_metric_op_number(expr):
    with pytest.raises(ConfigError):
        parse_gate(expr)


def test_numbers_out_of_range_are_refused_before_any_step_runs_variables_too(tmp_path):
    """``requests: -3`` was valid to --dry-run and failed only when the step ran; through a
    variable (``${n}`` with n: -3, or --var n=-3) it is refused as early."""
    from edgelab.errors import PlaybookError
    from edgelab.playbook.schema import check_values

    with pytest.raises(PlaybookError) as err:
        loads_playbook(
            "name: x\ndevices: [all]\nsteps:\n  - bench: {workload: tts, requests: -3, warmup: -1}\n",
            "x.yaml",
        )
    assert "x.yaml:4: requests must be >= 1, got -3" in str(err.value)
    pb = loads_playbook(
        "name: x\ndevices: [all]\nvars: {n: 2}\nsteps:\n  - bench: {workload: tts, requests: '${n}'}\n",
        "x.yaml",
    )
    check_values(pb)  # n = 2: fine
    check_values(pb, {"n": 5})
    for bad in ({"n": -3}, {"n": "-3"}, {"n": 0}):
        with pytest.raises(PlaybookError) as err:
            check_values(pb, bad)
        assert "x.yaml:5" in str(err.value) and "requests must be >= 1" in str(err.value)
