"""Every error edgelab raises to its callers, in one module; the CLI turns each into one line plus a remedy.

``str(err)`` is the one-line message and ``err.remedy`` what to do next; the CLI's root handler
(:class:`edgelab.cli.root.ErrorsGroup`) prints both on stderr and exits ``err.exit_code or 1``.
Catch the narrowest class that fits; test for a kind with ``isinstance``, never by class name.
This module imports nothing from edgelab, so every layer (store and transport included) may raise
from it. The hierarchy::

    EdgelabError                    base: message + remedy (+ exit_code when the class fixes it)
    ├── ConfigError                 bad input from the operator: a name, an address, a URL
    │   ├── CatalogError            a devices/ or pipelines/ file; message starts file:line; exit 2
    │   │   ├── PlaybookError       an invalid playbooks/*.yaml
    │   │   └── RuntimeSpecError    an invalid runtimes/*.yaml
    │   ├── TemplateError           a launch template the plan's values cannot render
    │   ├── UnknownName             a strategy or runtime name the catalog does not know; exit 2
    │   ├── BadCapture              a file that is no captured command output; exit 2
    │   └── InvalidInput            an imported file with bad lines (``problems``); exit 2
    ├── NotFound                    a device, run or artifact the database does not hold
    ├── Interrupted                 the operator stopped it (Ctrl-C): what was done is kept; exit 130
    ├── TransportError              a device unreachable, or a remote operation failed in transport
    │   ├── HostKeyError            an SSH host key unknown or changed: refused until trusted
    │   │   └── LabHostKeyError     the same about a lab host on the way (jump host, adb tunnel)
    │   ├── DeviceStateError        an ADB device offline, unauthorized or not ready
    │   ├── RemoteTimeout           a remote command ran past its timeout and was killed
    │   ├── DeviceNotAnswering      listed/accepted, but never answers (frozen, hung, overloaded)
    │   ├── SSHAuthError            the server refused every key we have
    │   ├── SSHUnreachable          no SSH session: refused, timed out, unresolvable, bad handshake
    │   │   └── SSHNotAnswering     accepted, no banner/handshake (also a DeviceNotAnswering)
    │   ├── HashMismatch            pushed bytes on the device do not hash to what was sent
    │   ├── BulkUnavailable         the OpenSSH client cannot be used here: SFTP or paramiko instead
    │   ├── SessionEnded            the one-login OpenSSH session ended before it answered
    │   └── FrameError              a codec-token frame that does not match its header or stream
    ├── Refusal                     a plan refused before anything ran: code, device, pool, numbers
    │   └── RefusedPlan             the same with the plan it refuses (S1 is shown where it cannot run)
    ├── DeviceInUse                 a device with running deployments or an open lease
    ├── LeaseHeld                   a device under someone else's lease (or too few free)
    ├── LeaseLost                   a lease ended while a workload relied on it
    ├── BenchFailed                 a bench workload started but did not finish (``run_id``)
    ├── ServerNotReady              llama-server never answered /health in time
    ├── ReadyCancelled              waiting for llama-server was cancelled (the run was stopped)
    ├── BenchOutputError            text that is not llama-bench JSON output
    ├── EventError                  a line that is not a valid edgelab event
    ├── AlreadyImported             the same input (content hash) is already a stored run
    ├── VirtualEvidence             qualification asked on a virtual-device run
    ├── EvidenceRefused             a cell change on runs that do not show it (``verdicts``)
    ├── SourceError                 a runtime source that cannot be fetched, unpacked or recognised
    ├── BuildError                  a build recipe that could not run, or a step that failed
    ├── ConvertError                MNN's converter failed (or reached for the network or pip)
    ├── QuantizeError               llama-quantize could not run or failed
    └── EngineError                 the controller's runtime cannot load or run a stage

    StepFailure (Exception)         a playbook step's verdict with whose fault it is (``category``);
                                    the playbook runner records it as the step's result. Not an
                                    EdgelabError on purpose: the steps' ``except EdgelabError``
                                    wrappers must let it through unchanged.
    PlayInterrupted (KeyboardInterrupt)
                                    a second Ctrl-C during ``play``: the cleanup was cut short;
                                    ``result`` says what ran and what is left. A KeyboardInterrupt
                                    so that nothing on the way mistakes it for a step's failure.

Not here, on purpose: the virtual devices' own exceptions (``edgelab.sim``: the PowerShell
evaluator's ``PSError``/flow signals, the ADB emulator's protocol errors). They model another
program's behaviour inside a simulated device and never reach an edgelab caller.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

MAX_REPORTED = 50  # bad input lines listed one by one (InvalidInput, `runs import`); the rest are counted


class EdgelabError(Exception):
    """Base class: ``str(err)`` is the one-line message, ``remedy`` what to do next."""

    remedy: str | None = None
    exit_code: int | None = None  # the CLI's exit code when the class fixes it (2: bad input, a usage error)

    def __init__(self, message: str, *, remedy: str | None = None):
        super().__init__(message)
        if remedy is not None:
            self.remedy = remedy


# ---------------------------------------------------------------- bad input


class ConfigError(EdgelabError):
    """Bad input from the operator: a name, an address, a URL."""


class CatalogError(ConfigError):
    """A catalog file (device entry, pipeline spec) that cannot be used; the message starts with file:line."""

    remedy = "fix the named line of the catalog file (see devices/README.md for the schema)"
    exit_code = 2  # a bad file is bad input: a usage error, whatever command read it


class PlaybookError(CatalogError):
    """An invalid playbook; the message starts with file:line."""

    remedy = "fix the named line of the playbook (the files in playbooks/ show every step kind)"


class RuntimeSpecError(CatalogError):
    """A runtimes/*.yaml file that cannot be used; the message starts with file:line."""

    remedy = "fix the named line of the runtime file (schema: edgelab/runtimes/spec.py)"


class TemplateError(ConfigError):
    """A template that cannot be rendered with the values the plan has."""

    remedy = (
        "fix the template (runtimes/*.yaml, schema in edgelab/runtimes/spec.py) or give the missing value"
    )


class UnknownName(ConfigError):
    """A strategy or runtime named on the command line that edgelab does not know: a usage error,
    like an unknown pipeline (a CatalogError), so every misspelt catalog name exits 2."""

    exit_code = 2


class BadCapture(ConfigError):
    """A file that is no captured command output; the message starts with ``file:line``."""

    exit_code = 2
    remedy = "give the command's own output, saved as text (e.g. `getprop > getprop.txt`)"


class InvalidInput(ConfigError):
    """An input file with bad lines; ``problems`` holds each as ``file:line: reason``."""

    exit_code = 2

    def __init__(self, problems: list[str], *, remedy: str | None = None, more: int = 0):
        shown = problems[:MAX_REPORTED]
        more += len(problems) - len(shown)
        text = "\n".join(shown) + (f"\n... and {more} more" if more else "")
        super().__init__(text, remedy=remedy or "fix or remove those lines; nothing was imported")
        self.problems = problems
        self.more = more  # bad lines beyond ``problems``, counted (a huge input's are not all kept)


class NotFound(EdgelabError):
    """A device, run or artifact that the database does not hold."""


class Interrupted(EdgelabError):
    """The operator stopped the operation (Ctrl-C): what was done is kept, what was not is said."""

    exit_code = 130


# ---------------------------------------------------------------- reaching devices


class TransportError(EdgelabError):
    """A device could not be reached or a remote operation failed at the transport level."""


class HostKeyError(TransportError):
    """An SSH host key that is unknown or changed: refused until the operator trusts it."""


class LabHostKeyError(HostKeyError):
    """A host-key refusal about a lab host on the way to a device (a jump host, the SSH host of an
    ``ssh://`` adb server), worded for the device it carries. ``host_text``, ``host_name`` and
    ``host_remedy`` keep the first host's own words, so rewording again further out keeps them."""

    def __init__(self, message: str, *, remedy: str, host_text: str, host_name: str, host_remedy: str | None):
        super().__init__(message, remedy=remedy)
        self.host_text = host_text
        self.host_name = host_name
        self.host_remedy = host_remedy


class DeviceStateError(TransportError):
    """An ADB device that is offline, unauthorized or otherwise not ready."""


class RemoteTimeout(TransportError):
    """A remote command ran past its timeout and was killed."""


class DeviceNotAnswering(TransportError):
    """A device that is listed (its server or sshd accepted us) but never answers: frozen, hung or
    overloaded. Raised when a transport call's timeout ran out before the device said anything."""


class SSHAuthError(TransportError):
    """The server refused every key we have (agent, IdentityFile, ~/.ssh/id_*)."""


class SSHUnreachable(TransportError):
    """No SSH session: refused, timed out, unresolvable, or the handshake failed."""


class SSHNotAnswering(SSHUnreachable, DeviceNotAnswering):
    """The TCP connection was accepted but sshd never sent its banner or finished the handshake:
    the host (or its sshd) is frozen, hung or overloaded."""


class HashMismatch(TransportError):
    """Bytes on the device do not hash to what was sent."""


class BulkUnavailable(TransportError):
    """The system OpenSSH client cannot be used here (no binary, it could not log in, no trusted
    key on file, ...); the message says why. The SSH transport falls back to SFTP for an upload,
    a push's one-login session to the paramiko transport."""


class SessionEnded(TransportError):
    """The OpenSSH session of a push (``transport.ssh.openssh.session``) ended before it answered: its
    ``ssh`` quit, or the connection was cut. The transport reads ssh's log to say why."""


class FrameError(TransportError):
    """A codec-frame message that does not match its header or the stream's geometry."""

    remedy = "the server and client disagree on the codec stream format (codebooks, int16 frame-major)"


# ---------------------------------------------------------------- plans, leases, runs


class RefusalCode(StrEnum):
    """Why a plan is refused: the codes DESIGN §5b names, strategy refusals, a build for another
    machine, an S4 server that does not answer."""

    NO_RUNNABLE_DEVICE = "no_runnable_device"
    WEIGHT_FORMAT_UNSUPPORTED = "weight_format_unsupported"
    BUDGET_EXCEEDS_DEVICE = "budget_exceeds_device"
    NO_EXPORTED_GRAPH = "no_exported_graph"
    DEVICE_UNREACHABLE = "device_unreachable"
    STRATEGY_REFUSED = "strategy_refused"
    BUILD_TARGET_MISMATCH = "build_target_mismatch"
    ENDPOINT_UNREACHABLE = "endpoint_unreachable"


class Refusal(EdgelabError):
    """Raised before anything is pushed or launched; stored with the attempt. Its code is a
    :class:`RefusalCode` (checked: a stored code is always one a reader knows)."""

    CODES = tuple(c.value for c in RefusalCode)

    def __init__(
        self,
        code: str,
        message: str,
        *,
        device: str,
        remedy: str,
        pool: str | None = None,
        numbers: dict[str, Any] | None = None,
        strategy: str | None = None,
    ):
        if code not in Refusal.CODES:
            raise ValueError(f"unknown refusal code {code!r} (one of {', '.join(Refusal.CODES)})")
        super().__init__(f"{code}: {device}: {message}", remedy=remedy)
        self.code = RefusalCode(code)
        self.device = device
        self.detail = message
        self.pool = pool
        self.numbers = numbers or {}
        self.strategy = strategy

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "device": self.device,
            "message": self.detail,
            "pool": self.pool,
            "numbers": self.numbers,
            "strategy": self.strategy,
            "remedy": self.remedy,
        }


class RefusedPlan(Refusal):
    """A refusal that comes with the plan it refuses (``plan``: an ExecutionPlan), so a dry run shows
    what would have run: S1's command, environment and deploy config on a device it cannot serve."""

    def __init__(self, refusal: Refusal, plan: Any):
        super().__init__(
            refusal.code,
            refusal.detail,
            device=refusal.device,
            remedy=refusal.remedy or "",
            pool=refusal.pool,
            numbers=refusal.numbers,
            strategy=refusal.strategy,
        )
        self.plan = plan


class DeviceInUse(EdgelabError):
    """A device with running deployments or an open lease."""


class LeaseHeld(EdgelabError):
    """A device is under someone else's lease (or not enough devices are free)."""

    def __init__(self, message: str, *, remedy: str, lease: Any = None, device: str | None = None):
        super().__init__(message, remedy=remedy)
        # ``lease`` is an edgelab.store.leases.Lease (typed Any: this module imports no other layer).
        # A copy: the session that read it rolls back (and expires its objects) as this propagates.
        self.lease = type(lease)(**lease.model_dump()) if lease is not None else None
        self.device = device


class LeaseLost(EdgelabError):
    """A lease ended (expired, kicked, released) while a workload relied on it."""


class BenchFailed(EdgelabError):
    """The workload started but did not finish; its run (``run_id``) is stored as failed.

    ``workload_exit`` is the workload process's own exit status; it is not ``exit_code`` (the CLI's),
    so a workload that exits 127 still makes ``edgelab bench`` exit 1."""

    def __init__(
        self, message: str, *, run_id: str, remedy: str, workload_exit: int | None = None, stderr: str = ""
    ):
        super().__init__(message, remedy=remedy)
        self.run_id = run_id
        self.workload_exit = workload_exit
        self.stderr = stderr


class ServerNotReady(EdgelabError):
    """llama-server did not answer /health with 200 in time (or its process ended)."""

    remedy = "read the server's log (model path, port in use, memory), or raise the ready timeout"


class ReadyCancelled(EdgelabError):
    """Waiting for llama-server was cancelled (the run was stopped)."""


class BenchOutputError(EdgelabError):
    """Text that is not llama-bench JSON output."""

    remedy = "run llama-bench with -o json or -o jsonl and pass its stdout"


class EventError(EdgelabError):
    """A line that is not a valid edgelab event."""

    remedy = "the source must emit edgelab event JSON lines (edgelab.metrics.events.encode)"


class AlreadyImported(EdgelabError):
    """The same input (same content hash) is already stored as a run."""


class VirtualEvidence(EdgelabError):
    """Qualification asked on the strength of a virtual-device run."""

    remedy = "qualify from runs on real devices; virtual runs stay attached as demonstration evidence"


class EvidenceRefused(EdgelabError):
    """A cell change asked on runs that do not show what the change claims."""

    remedy = (
        "qualify from finished runs of this row's device and this column's pipeline, on a real "
        "runtime with real weights, >= 1 warm-up and >= 20 measured requests per band, with complete "
        "provenance (see `edgelab runs show RUN --json`)"
    )

    def __init__(self, message: str, verdicts: list[Any], remedy: str | None = None):
        super().__init__(message, remedy=remedy)
        self.verdicts = verdicts  # edgelab.matrix.evidence.Verdict, one per run judged


# ---------------------------------------------------------------- runtimes and models


class SourceError(EdgelabError):
    """A source that cannot be fetched, unpacked or recognised."""

    remedy = (
        "pass --source PATH: a source folder, a tarball, or the llama-cpp-python sdist "
        "(pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36)"
    )


class BuildError(EdgelabError):
    """A recipe that could not run, or a step that failed."""


class ConvertError(EdgelabError):
    """MNN's converter failed, or tried to reach the network or start pip."""

    remedy = "see the converter output above; `pip install MNN==3.6.1` gives the extension"


class QuantizeError(EdgelabError):
    """llama-quantize could not run or failed."""


class EngineError(EdgelabError):
    """The runtime cannot load or run the stage (missing package, bad model, strict placement refused)."""

    remedy = "install the runtime (`pip install -e '.[vla]'`) and export the stage (`edgelab model export`)"


# ---------------------------------------------------------------- playbook step verdicts


class StepFailure(Exception):
    """Raised by a step: ``category`` says whose fault it is (see the module doc: not an EdgelabError)."""

    def __init__(self, message: str, category: str = "infra", details: dict[str, Any] | None = None):
        super().__init__(message)
        self.category = category
        self.details = details or {}


class PlayInterrupted(KeyboardInterrupt):
    """A second Ctrl-C: the cleanup was cut short; ``result`` (a ``PlayResult``) says what ran and
    what is left."""

    def __init__(self, result: Any):
        super().__init__("play interrupted twice")
        self.result = result
