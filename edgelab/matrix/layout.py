"""The study's matrix layout: 12 device configurations (rows) x 5 models (columns), DESIGN §6.

Row keys are the device-catalog entry ids that carry ``matrix_row``; column keys are pipeline
spec ids. Both are checked against the catalogs in the tests, so a renamed entry shows up.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class Axis:
    index: int  # 1-based, as the study numbers them
    key: str
    label: str


ROWS: tuple[Axis, ...] = (
    Axis(1, "hx370-wsl-cpu", "HX370 CPU / WSL"),
    Axis(2, "hx370-win-cpu", "HX370 CPU / native Windows"),
    Axis(3, "hx370-rtx5090-wsl", "HX370 + RTX 5090 Laptop / WSL"),
    Axis(4, "hx370-rtx5090-win", "HX370 + RTX 5090 Laptop / Windows"),
    Axis(5, "hx370-890m-win", "HX370 + Radeon 890M / Windows"),
    Axis(6, "hx370-npu-win", "HX370 + AMD NPU / Windows"),
    Axis(7, "pc-joint-cpu-igpu-npu", "PC CPU+iGPU+NPU (+/- discrete GPU) joint execution"),
    Axis(8, "snapdragon-x-elite-pc", "Snapdragon X Elite PC"),
    Axis(9, "galaxy-s25", "Galaxy S25 (Snapdragon 8 Elite for Galaxy)"),
    Axis(10, "galaxy-s24", "Galaxy S24 (Snapdragon 8 Gen 3)"),
    Axis(11, "sa8775p-adp", "SA8775P ADP"),
    Axis(12, "rb3-gen2", "RB3 Gen 2 (QCS6490)"),
)

COLUMNS: tuple[Axis, ...] = (
    Axis(1, "spark-x2.5", "Spark-X2.5"),
    Axis(2, "qwen3-tts-0.6b", "Qwen3-TTS 0.6B CustomVoice"),
    Axis(3, "qwen3.8-27b", "Qwen3.8-27B"),
    Axis(4, "minicpm-o-4.5", "MiniCPM-o 4.5"),
    Axis(5, "internvla-a1", "InternVLA-A1"),
)


def cell_id(row_key: str, pipeline: str) -> str:
    return f"{row_key}/{pipeline}"


def row_by(ref: str | int) -> Axis | None:
    for r in ROWS:
        if str(r.index) == str(ref) or r.key == ref:
            return r
    return None


@cache
def _catalog_aliases() -> dict[str, str]:
    from edgelab.catalog.pipelines import pipeline_aliases

    return pipeline_aliases()


def column_by(ref: str | int) -> Axis | None:
    # a pipeline alias from the catalog stands for its column (the reference workloads name the family)
    ref = _catalog_aliases().get(str(ref), ref)
    for c in COLUMNS:
        if str(c.index) == str(ref) or c.key == ref:
            return c
    return None
