"""What a one-shot runtime reported, read from the logs its run left (the template's output adapter)."""

from __future__ import annotations

from typing import Any

PERF_LOST = (
    "no perf lines in its stderr: an upstream llama.cpp logger writes from a thread it never joins "
    "at exit, so a busy host can lose the last lines (ggml-org/llama.cpp#22142); edgelab's own "
    "build flushes them (runtimes/patches/llama.cpp/common-log-flush-at-exit.patch)"
)


def adapter_results(plan: dict[str, Any], logs: dict[str, str]) -> dict[str, Any]:
    """What a one-shot runtime reported, read by its template's adapter from the logs it left.

    llama-completion: the ``common_perf_print`` / ``llama_perf_context_print`` lines (load, prompt
    eval, eval: ms, tokens, tokens/s) and the placement its load log shows.
    """
    out: dict[str, Any] = {}
    for pr in plan.get("processes", []):
        err = logs.get(f"{pr.get('name')}/stderr.log") or ""
        if pr.get("adapter") == "llama-completion" and err:
            from edgelab.adapters.llama_perf import parse_perf
            from edgelab.adapters.llama_placement import parse_placement

            perf = parse_perf(err)
            out[pr["name"]] = {
                "adapter": "llama-completion",
                "perf": perf.to_dict() if perf else None,
                "placement": parse_placement(err).observed or "unobserved",
            }
            if perf is None:  # said, never guessed: the run finished but its figures are not in the log
                out[pr["name"]]["perf_missing"] = PERF_LOST
    return out


def reported_entries(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The runtime's own figures from :func:`adapter_results`, as requests to store
    (:mod:`edgelab.metrics.reported`)."""
    from edgelab.metrics.reported import from_perf

    out: list[dict[str, Any]] = []
    for res in results.values():
        if res.get("perf"):
            out += from_perf(res["perf"])
    return out
