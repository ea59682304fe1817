"""Runtimes (runtimes/*.yaml): per target, how to build a runtime and how to launch it.

``load_runtimes()`` validates every file (errors name file:line); ``build_runtime()`` runs a
recipe where its toolchain is present and registers the output with provenance.
"""

from edgelab.runtimes.spec import RuntimeSpec, TargetRecipe, load_runtime, load_runtimes

__all__ = ["RuntimeSpec", "TargetRecipe", "load_runtime", "load_runtimes"]
