"""Output adapters: pure functions that turn a real runtime's output (logs, JSON, SSE streams)
into edgelab's figures and events. One module per output format:

- ``llama_server``: llama-server readiness (/health), streamed /completion and
  /v1/chat/completions measured on the lab clock, /metrics; records -> events.
- ``llama_perf``: the ``common_perf_print`` / ``llama_perf_context_print`` timing lines.
- ``llama_bench``: ``llama-bench -o json|jsonl``.
- ``llama_placement``: where the load log says the weights went (CPU_Mapped, CUDA0, ...).
"""
