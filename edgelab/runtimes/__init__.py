"""Runtimes (runtimes/*.yaml): per target, how to build a runtime and how to launch it.

``load_runtimes()`` validates every file (errors name file:line); ``build_runtime()`` runs a
recipe where its toolchain is present and registers the output with provenance;
``build.ensure_build()`` builds a source tree once per (source hash, target, flags) into the
cache (``cache``, ``source``); ``isa_supported()`` says whether a CPU can run a build.
"""

from edgelab.runtimes.isa import isa_supported
from edgelab.runtimes.spec import RuntimeSpec, TargetRecipe, load_runtime, load_runtimes

__all__ = ["RuntimeSpec", "TargetRecipe", "isa_supported", "load_runtime", "load_runtimes"]
