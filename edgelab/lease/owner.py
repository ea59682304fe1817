"""Who is asking: ``user@host``, and the CI job when one runs us (read from the CI's own variables).

``EDGELAB_OWNER`` overrides the user@host part (a shared service account naming its operator).
Two processes of one holder (same owner, same CI job) share that holder's leases.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from edgelab.identity import identity

# (variable, label): the first one set names the job; GitHub's run id is per workflow run.
CI_VARS = (
    ("GITHUB_RUN_ID", "github run"),
    ("CI_JOB_ID", "gitlab job"),
    ("BUILDKITE_JOB_ID", "buildkite job"),
    ("BUILD_TAG", "jenkins"),
    ("CIRCLE_WORKFLOW_JOB_ID", "circleci job"),
)


@dataclass(frozen=True)
class Holder:
    owner: str
    ci_job: str | None = None

    def label(self) -> str:
        return f"{self.owner} ({self.ci_job})" if self.ci_job else self.owner


def whoami(env: Mapping[str, str] | None = None) -> Holder:
    """This process's holder: ``EDGELAB_OWNER`` or ``user@host`` (:func:`edgelab.identity.identity`),
    and the CI job running it."""
    env = os.environ if env is None else env
    owner = env.get("EDGELAB_OWNER") or identity().user_at_host
    job = None
    for var, label in CI_VARS:
        if env.get(var):
            job = f"{label} {env[var]}"
            if var == "GITHUB_RUN_ID" and env.get("GITHUB_RUN_ATTEMPT"):
                job += f".{env['GITHUB_RUN_ATTEMPT']}"
            if var == "GITHUB_RUN_ID" and env.get("GITHUB_JOB"):
                job += f" {env['GITHUB_JOB']}"
            break
    return Holder(owner[:128], job[:128] if job else None)
