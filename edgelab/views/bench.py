"""A finished bench as lines: what `edgelab bench` prints after a run, built once from the
result's report (``BenchResult.report()``), so whatever else shows a bench shows the same figures.

Plain text only; a part marked ``alert`` is a problem the UI marks (a placement that fell back,
a failed parity check).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgelab.units import mib


@dataclass(frozen=True)
class BenchRow:
    """One line of the report: a label and its text in parts, each part ``(text, alert)``."""

    key: str
    parts: tuple[tuple[str, bool], ...]


def _row(key: str, *parts: str | tuple[str, bool]) -> BenchRow:
    return BenchRow(key, tuple(p if isinstance(p, tuple) else (p, False) for p in parts))


def p50_p95(d: dict[str, Any] | None, unit: str = "") -> str:
    """``p50 X  p95 Y  (n=N)`` of a stored distribution, ``-`` when nothing was measured."""
    if not d or d.get("p50") is None:
        return "-"
    return f"p50 {d['p50']:.1f}{unit}  p95 {d['p95']:.1f}{unit}  (n={d['count']})"


def virtual_note(rep: dict[str, Any]) -> str | None:
    """What a run on a virtual device measured (the machinery, never a model figure); None on hardware."""
    if not rep["virtual"]:
        return None
    pv = rep.get("provenance") or {}
    runtime = pv.get("runtime")
    what = (
        "reference runtime"
        if runtime == "reference"
        else f"{runtime} ({pv.get('weights')} weights)"
        + (", the lab host's build" if rep.get("note") else "")
    )
    return f"VIRTUAL device, {what}: machinery only, not a model figure"


def endpoint_line(rep: dict[str, Any]) -> str | None:
    """The measured server edgelab did not launch and what it said of itself; None for a launched run."""
    ep = rep.get("endpoint")
    if not ep:
        return None
    said = ", ".join(f"{k} {v}" for k, v in ep["reported"].items() if k in ("model", "runtime", "weights"))
    return f"endpoint {ep['url']} ({ep['protocol']}; {said or 'reported nothing'})"


def bench_rows(rep: dict[str, Any]) -> list[BenchRow]:
    """The report's figures by kind (audio, action, controller, llama-bench, llama-tts, text), then
    what ran (strategy, runtime, library, models) for a launched run."""
    pv = rep.get("provenance") or {}
    r = rep["requests"] or {}
    rows = [
        _row(
            "requests",
            f"{r.get('total', 0)} ({', '.join(f'{k} {v}' for k, v in (r.get('by_phase') or {}).items())}"
            f"), failed {r.get('failed', 0)}",
        )
    ]
    if a := rep.get("audio"):
        rows += [
            _row("TTFA", p50_p95(a["ttfa_ms"], " ms")),
            _row("playback start", p50_p95(a["playback_start_ms"], " ms")),
            _row(
                "underruns",
                f"{a['underruns_at_ttfa']} at TTFA, stall {p50_p95(a['stall_ms_at_ttfa'], ' ms')}",
            ),
            _row("RTF streamed", p50_p95(a["rtf_streamed"])),
            _row("RTF total", p50_p95(a["rtf_total"])),
            _row("chunk gaps", p50_p95(a["chunk_gaps_ms"], " ms")),
        ]
    if a := rep.get("action"):
        rows += [
            _row("latency", p50_p95(a["latency_ms"], " ms")),
            _row("obs age", p50_p95(a["age_ms"], " ms")),
            _row(
                "deadline misses",
                f"{a['deadline_misses']} of {a['chunks']} (period {a['control_period_ms']} ms)",
            ),
        ]
    if rep.get("controller"):  # edgelab's S3 controller on a real runtime
        for stage, pl in (rep.get("placement") or {}).items():
            seen = f"{pl.get('observed')} ({str(pl.get('detail', ''))[:90]})"
            if pl.get("fallback"):
                rows.append(
                    _row(f"placement {stage}", seen, "  ", (f"FALLBACK from {pl.get('requested')}", True))
                )
            else:
                rows.append(_row(f"placement {stage}", seen))
        if par := rep.get("parity"):
            rows.append(
                _row("parity", "ok")
                if par.get("ok")
                else _row("parity", ("FAILED", True), f" {par.get('error', '')}")
            )
    for test, b in (rep.get("llama_bench") or {}).items():
        sd = f" +- {b['stddev_ts']:.1f}" if b.get("stddev_ts") is not None else ""
        rows.append(
            _row(
                f"llama-bench {test}",
                f"{b['avg_ts']:.1f}{sd} tok/s  (threads {b.get('n_threads')}, "
                f"{b.get('backends')}, build {str(b.get('build_commit'))[:9]})",
            )
        )
    if lt := rep.get("llama_tts"):  # S5: llama-tts's own log, one process per request
        rows += [
            _row(
                "llama-tts total", p50_p95(lt["total_s"], " s") + "  (its TTFA: the audio comes all at once)"
            ),
            _row("llama-tts load", p50_p95(lt["load_s"], " s")),
            _row("generation", p50_p95(lt["generation_frames_per_s"], " frames/s")),
            _row("vocoder", p50_p95(lt["vocoder_s"], " s")),
        ]
        if lt.get("peak_rss_bytes"):
            rows.append(_row("peak RSS", mib(lt["peak_rss_bytes"], 1) + " (sampled every 0.25 s)"))
        rows.append(_row("placement", f"{rep.get('placement')} (observed in the load log)"))
        rows.append(_row("runtime", f"{pv.get('runtime_build')} {str(pv.get('runtime_sha256'))[:12]}"))
    if x := rep.get("text"):
        rows += [
            _row("TTFT", p50_p95(x.get("ttft_ms"), " ms")),
            _row("inter-token", p50_p95(x.get("itl_ms"), " ms")),
            _row("decode", p50_p95(x.get("decode_tok_s"), " tok/s")),
        ]
        if x.get("server_predicted_per_second"):
            rows.append(_row("server decode", p50_p95(x.get("server_predicted_per_second"), " tok/s")))
            rows.append(_row("server prompt", p50_p95(x.get("server_prompt_ms"), " ms")))
        if x.get("peak_rss_bytes"):
            rows.append(_row("peak RSS", mib(x["peak_rss_bytes"], 1)))
        if rep.get("placement"):
            rows.append(_row("placement", f"{rep['placement']} (observed in the load log)"))
    if not rep.get("endpoint"):  # what ran: the same provenance `runs show` and --json hold
        rows.append(_row("strategy", str(rep.get("strategy") or "-")))
        rows.append(
            _row(
                "runtime",
                f"{pv.get('runtime_build')} {str(pv.get('runtime_sha256'))[:12]}, threads {pv.get('threads')}",
            )
        )
        lib = pv.get("runtime_library")
        if isinstance(lib, dict):
            rows.append(
                _row(
                    "library", f"{lib.get('name')} {lib.get('version')} sha256 {str(lib.get('sha256'))[:12]}"
                )
            )
        for role, m in (pv.get("models") or {}).items():
            rows.append(
                _row(
                    f"model {role}",
                    f"{m.get('artifact')} sha256 {str(m.get('sha256'))[:12]}, weights {m.get('weights')}",
                )
            )
    return rows
