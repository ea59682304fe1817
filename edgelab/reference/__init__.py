"""The ``reference`` runtime: the pipelines' interfaces with real computation on random weights.

It exercises the whole lab path (launch, stream, events, metrics, store) on machines with no
model weights. Its numbers measure this machine running small numpy networks, never a model:
every run and event it emits says ``runtime: reference, weights: random``.
"""

RUNTIME = "reference"
WEIGHTS = "random"
PROVENANCE = {"runtime": RUNTIME, "weights": WEIGHTS}
