"""Playbooks: YAML jobs over devices x pipelines, gates on metrics, JUnit for CI.

from edgelab.playbook import load_playbook, run_playbook, to_junit
"""

from edgelab.playbook.gates import parse_gate
from edgelab.playbook.junit import to_junit
from edgelab.playbook.results import JobResult, PlayResult, StepResult
from edgelab.playbook.runner import plan_jobs, run_playbook, select_devices
from edgelab.playbook.schema import Playbook, load_playbook, loads_playbook, parse_var_overrides

__all__ = [
    "JobResult",
    "PlayResult",
    "Playbook",
    "StepResult",
    "load_playbook",
    "loads_playbook",
    "parse_gate",
    "parse_var_overrides",
    "plan_jobs",
    "run_playbook",
    "select_devices",
    "to_junit",
]
