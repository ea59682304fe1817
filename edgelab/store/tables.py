"""Every table module, imported: ``SQLModel.metadata`` then holds the whole schema.

The migrations environment and the schema check import this module. A table module imports only
the tables its foreign keys refer to, so importing any one of them registers what it needs, and
no table module imports this one (it would close an import cycle).
"""

from __future__ import annotations

from edgelab.store import artifacts, baselines, deployments, leases, matrix, models, runs

__all__ = ["artifacts", "baselines", "deployments", "leases", "matrix", "models", "runs"]
