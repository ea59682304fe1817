"""``edgelab bench``: the study's measured-run protocol (single_request_batch1_v1) on a device."""

from edgelab.bench.runner import PROTOCOL, BenchRequest, BenchResult, run_bench

__all__ = ["PROTOCOL", "BenchRequest", "BenchResult", "run_bench"]
