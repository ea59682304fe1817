"""llama-bench's machine-readable output (``-o json``: one array; ``-o jsonl``: one object a line).

Each object is one test: ``n_prompt`` > 0 and ``n_gen`` = 0 is prompt processing (``pp512``),
the reverse is generation (``tg128``), both is ``pp512+tg128``. ``avg_ts``/``stddev_ts`` are
tokens/s over the repetitions in ``samples_ns``/``samples_ts``. Pure functions of text.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from edgelab.errors import BenchOutputError


@dataclass
class BenchRecord:
    test: str  # pp16, tg8, pp512+tg128
    n_prompt: int
    n_gen: int
    avg_ts: float | None
    stddev_ts: float | None
    samples_ns: list[int] = field(default_factory=list)
    samples_ts: list[float] = field(default_factory=list)
    n_threads: int | None = None
    n_gpu_layers: int | None = None
    build_commit: str | None = None
    build_number: int | None = None
    backends: str | None = None
    cpu_info: str | None = None
    gpu_info: str | None = None
    model_filename: str | None = None
    model_type: str | None = None
    model_size: int | None = None
    model_n_params: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def kind(self) -> str:
        return "tg" if self.n_prompt == 0 and self.n_gen > 0 else "pp" if self.n_gen == 0 else "pp+tg"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("raw")
        d["kind"] = self.kind
        return d


def test_name(n_prompt: int, n_gen: int) -> str:
    if n_gen == 0:
        return f"pp{n_prompt}"
    if n_prompt == 0:
        return f"tg{n_gen}"
    return f"pp{n_prompt}+tg{n_gen}"


def _record(d: dict[str, Any]) -> BenchRecord:
    if not isinstance(d, dict) or "n_prompt" not in d or "n_gen" not in d:
        raise BenchOutputError(f"not a llama-bench test object: {str(d)[:80]!r}")
    npr, ngen = int(d["n_prompt"]), int(d["n_gen"])
    return BenchRecord(
        test=test_name(npr, ngen),
        n_prompt=npr,
        n_gen=ngen,
        avg_ts=d.get("avg_ts"),
        stddev_ts=d.get("stddev_ts"),
        samples_ns=[int(x) for x in d.get("samples_ns") or []],
        samples_ts=[float(x) for x in d.get("samples_ts") or []],
        n_threads=d.get("n_threads"),
        n_gpu_layers=d.get("n_gpu_layers"),
        build_commit=d.get("build_commit"),
        build_number=d.get("build_number"),
        backends=d.get("backends"),
        cpu_info=d.get("cpu_info"),
        gpu_info=d.get("gpu_info"),
        model_filename=d.get("model_filename"),
        model_type=d.get("model_type"),
        model_size=d.get("model_size"),
        model_n_params=d.get("model_n_params"),
        raw=d,
    )


def parse_bench(text: str) -> list[BenchRecord]:
    """Records from ``-o json`` or ``-o jsonl`` output (told apart by the first character)."""
    s = text.strip()
    if not s:
        raise BenchOutputError("llama-bench printed nothing")
    try:
        if s.startswith("["):
            items = json.loads(s)
        else:
            items = [json.loads(line) for line in s.splitlines() if line.strip()]
    except ValueError as err:
        raise BenchOutputError(f"llama-bench output is not JSON: {err}") from err
    return [_record(d) for d in items]


def by_test(records: list[BenchRecord]) -> dict[str, BenchRecord]:
    return {r.test: r for r in records}


__all__ = ["BenchOutputError", "BenchRecord", "by_test", "parse_bench", "test_name"]
