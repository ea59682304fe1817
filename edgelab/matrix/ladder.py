"""The cell state machine (DESIGN §6) and the study's status words.

A cell climbs artifact_ready -> correct -> executes -> profiled -> qualified, or ends as
blocked (failing layer, reason, next experiment) or rejected (capacity: no smaller model is
substituted silently). Functional and performance status are separate words.
"""

from __future__ import annotations

from edgelab.errors import ConfigError

LADDER = ("none", "artifact_ready", "correct", "executes", "profiled", "qualified")
ENDS = ("blocked", "rejected")
STAGES = LADDER + ENDS
STATUS_WORDS = ("PASS", "PARTIAL", "COMPONENT", "PROFILE_ONLY", "FAILED", "REJECTED", "BLOCKED")
LAYERS = ("artifact", "runtime", "transport", "device", "memory", "correctness", "performance", "other")
# a blocker is the device's (feasibility: it cannot, e.g. capacity) or the lab's still to build
# (implementation: a runtime build, a launch template, an exported model)
BLOCKER_KINDS = ("feasibility", "implementation")
EVIDENCED_WORDS = ("PASS",)  # status words above PARTIAL: claimed only on evidence runs


def rank(stage: str) -> int:
    return LADDER.index(stage) if stage in LADDER else -1


def check_stage(stage: str) -> str:
    if stage not in STAGES:
        raise ConfigError(f"unknown cell stage {stage!r}", remedy=f"use one of {', '.join(STAGES)}")
    return stage


def check_word(word: str | None, what: str = "status") -> str | None:
    if word is None:
        return None
    up = word.upper().replace("-", "_")
    if up not in STATUS_WORDS:
        raise ConfigError(f"unknown {what} {word!r}", remedy=f"use one of {', '.join(STATUS_WORDS)}")
    return up


def stage_for_word(word: str, current: str) -> str:
    """The stage a functional status word implies (never lowers a cell that climbed further)."""
    implied = {
        "PASS": "executes",
        "PARTIAL": "correct",
        "COMPONENT": "correct",
        "BLOCKED": "blocked",
        "REJECTED": "rejected",
    }.get(word)
    if implied is None:
        return current
    if implied in ENDS or current in ENDS:
        return implied
    return implied if rank(implied) > rank(current) else current


def check_kind(kind: str | None) -> str | None:
    if kind is not None and kind not in BLOCKER_KINDS:
        raise ConfigError(f"unknown blocker kind {kind!r}", remedy=f"use one of {', '.join(BLOCKER_KINDS)}")
    return kind


def check_transition(
    before: str,
    after: str,
    *,
    reason: str | None,
    layer: str | None,
    next_experiment: str | None,
    kind: str | None = "implementation",
) -> None:
    """Blocked needs layer, reason, next experiment and its kind; rejected needs the capacity reason."""
    if after == "blocked":
        missing = [
            n
            for n, v in (
                ("--layer", layer),
                ("--reason", reason),
                ("--next", next_experiment),
                ("--kind", kind),
            )
            if not v
        ]
        if missing:
            raise ConfigError(
                f"a blocked cell needs {', '.join(missing)}",
                remedy="say which layer fails, why, and the next experiment to run",
            )
        if layer not in LAYERS:
            raise ConfigError(f"unknown failing layer {layer!r}", remedy=f"use one of {', '.join(LAYERS)}")
    if after == "rejected" and not reason:
        raise ConfigError(
            "a rejected cell needs --reason (the capacity that does not fit)",
            remedy="e.g. --reason 'weights 54 GiB > pool 8 GiB'",
        )
