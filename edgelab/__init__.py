"""edgelab: run an edge-AI device lab from the terminal.

The domain layers (store, transport, probe, sim, ...) are usable from Python
without the CLI; the UI (``edgelab.cli``, ``edgelab.tui``) sits on top.
"""

__version__ = "0.1.0"
