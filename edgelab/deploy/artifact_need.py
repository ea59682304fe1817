"""What a plan's processes need from the artifact registry, and what resolution found for each.

A strategy plans :class:`ArtifactNeed` values (a launch template's runtime build and the files it
binds to placeholders, or a stage's role when its process has no template); resolution against
the registry (``edgelab.deploy.artifacts.resolve``) turns each into a :class:`ResolvedArtifact`:
the need plus what was found. Both are frozen: resolving makes new values, it edits none.

Their stored form is the plain dict a plan has always written (``runs.plan``, ``deployments.plan``,
``deploy --dry-run --json``): a key is written only where the need's shape has it (a stage's role
has no ``process``, a build no ``placeholder``), so :meth:`ArtifactNeed.to_dict` gives the same keys
and values as ever, and :func:`artifact_from_dict` reads old plans (missing or extra keys) back.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

RUNTIME = "runtime"  # the kind of a runtime build (linked into {bin}) or of a zipapp bound to a placeholder


@dataclass(frozen=True)
class ArtifactNeed:
    """One artifact a plan needs on the device, before it is looked up.

    A template need has ``process`` and ``kind``: a ``runtime`` build for ``target`` (no
    ``placeholder``: its files become the process's ``{bin}``), or a file of type ``ext`` bound to
    ``placeholder`` (a model of ``pipeline``, of role ``want_role`` when the template names one).
    A stage's role (``role`` and ``stage`` only) is asked for by a process without a template.
    """

    role: str
    stage: str | None = None
    process: str | None = None  # the process whose launch template asks for it
    kind: str | None = None  # runtime, model, weights, graph ...
    runtime: str | None = None  # a runtime need's runtime
    target: str | None = None  # the build target it is for (once found: the artifact's)
    placeholder: str | None = None  # the template placeholder the file is bound to; None: the build itself
    ext: str | None = None  # the file type wanted (.gguf, .pyz); None: any
    want_role: str | None = None  # a model need's role (talker, code2wav, mmproj); None: any
    pipeline: str | None = None  # a model need's pipeline
    pipeline_kind: str | None = None  # text_lm, tts ... (what remedy to offer)
    optional: bool | None = None  # a missing optional need does not refuse the plan
    layout: str | None = None  # dir: every file linked into a folder; None: one file
    fallback: str | None = None  # the value the placeholder gets when no file is registered

    @property
    def present(self) -> bool:
        """A need not looked up yet is not present (:class:`ResolvedArtifact` says what was found)."""
        return False

    @property
    def build(self) -> bool:
        """A runtime build linked into ``{bin}`` (not a file bound to a placeholder)."""
        return self.kind == RUNTIME and self.placeholder is None

    def resolved(self, **found: Any) -> ResolvedArtifact:
        """This need with what resolution found (``present``, ``name``, ``sha256`` ...)."""
        if isinstance(self, ResolvedArtifact):
            return replace(self, **found)
        need = {f.name: getattr(self, f.name) for f in fields(ArtifactNeed)}
        return ResolvedArtifact(**{**need, **found})

    def to_dict(self) -> dict[str, Any]:
        """The stored form: the keys this need's shape has always written, in their order."""
        order = _RUNTIME_ORDER if self.kind == RUNTIME else _OTHER_ORDER if self.kind else _STAGE_ORDER
        return {k: getattr(self, k) for k in order if self._written(k)}

    def _written(self, key: str) -> bool:
        value = getattr(self, key)
        if value is not None:
            return True
        if key == "stage":  # every need names its stage (None: the process's, not one stage's)
            return True
        if key == "ext":  # a bound file's type, None for any
            return self.placeholder is not None
        if key == "want_role":  # a model need's role, None for any
            return self.pipeline is not None
        return False


@dataclass(frozen=True)
class ResolvedArtifact(ArtifactNeed):
    """A need looked up in the registry: present (with what was found) or not."""

    present: bool = False  # the need's "not yet" (a property above) becomes the answer
    programs: list[str] | None = None  # a runtime need: the programs in {bin} its process runs
    name: str | None = None  # the registered artifact's name
    digest: str | None = None  # the registered artifact's digest
    sha256: str | None = None  # the bound file's (or a one-file artifact's) SHA-256
    weights: str | None = None  # random | real, as the artifact's meta says
    files: dict[str, str] | None = None  # a build's files (path -> sha256), or a dir layout's tree
    names: list[str] | None = None  # every artifact of the build (one per product)
    isa: Any = None  # the build's instruction-set extensions (targetcheck)
    cuda_archs: Any = None  # the build's CUDA architectures (targetcheck)
    source_commit: str | None = None  # the build's source (provenance)
    build_key: str | None = None
    file: str | None = None  # the bound file's path inside the artifact
    bytes: int | None = None  # the bound file's size (admission sizes the model by it)
    shape: dict[str, int] | None = None  # the bound model's KV shape (n_layer, n_head_kv, head_dim)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for k in _FOUND_ORDER if self.kind else _STAGE_FOUND_ORDER:
            value = getattr(self, k)
            if value is not None or k == "present":
                out[k] = value
        return out


# the order the keys have always been written in (a runtime need names its target before its ext)
_RUNTIME_ORDER = ("role", "stage", "process", "placeholder", "kind", "runtime", "target", "ext", "optional")
_OTHER_ORDER = (
    "layout",
    "fallback",
    "role",
    "stage",
    "process",
    "placeholder",
    "kind",
    "runtime",
    "ext",
    "want_role",
    "pipeline",
    "pipeline_kind",
    "target",
    "optional",
)
_FOUND_ORDER = (
    "programs",
    "present",
    "name",
    "digest",
    "sha256",
    "weights",
    "files",
    "names",
    "isa",
    "cuda_archs",
    "source_commit",
    "build_key",
    "file",
    "bytes",
    "shape",
)
# a stage's role (no template) gets its target once found, after the name and digest
_STAGE_ORDER = tuple(k for k in _OTHER_ORDER if k != "target")
_STAGE_FOUND_ORDER = (*_FOUND_ORDER[:4], "target", *_FOUND_ORDER[4:])
_NEED_KEYS = frozenset(f.name for f in fields(ArtifactNeed))
_FOUND_KEYS = frozenset(_FOUND_ORDER)


def artifact_from_dict(data: dict[str, Any]) -> ArtifactNeed:
    """A stored artifact entry: resolved when it says whether it is present, else a need.

    Keys this version does not know are left out; a stored plan without a ``role`` gets ``""``.
    """
    need = {k: v for k, v in data.items() if k in _NEED_KEYS}
    need.setdefault("role", "")
    if "present" not in data:
        return ArtifactNeed(**need)
    found = {k: v for k, v in data.items() if k in _FOUND_KEYS}
    found["present"] = bool(found["present"])
    return ResolvedArtifact(**need, **found)


__all__ = ["RUNTIME", "ArtifactNeed", "ResolvedArtifact", "artifact_from_dict"]
