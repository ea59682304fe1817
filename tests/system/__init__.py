"""Cross-cutting tests: import hygiene and cycles, the test lanes, the documented protocol, the demo, and the top-level modules (errors, logs, units, safetext)."""
