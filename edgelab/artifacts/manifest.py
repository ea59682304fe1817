"""JSON manifests, close to the edge study's: component, files {path: sha256}, metadata.

Exported manifests carry sizes and provenance too, so a manifest moved to another lab host
re-registers the same artifact once the files are there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlmodel import Session

from edgelab.artifacts.hashing import cached_sha256
from edgelab.artifacts.registry import add_artifact, artifact_files, get_artifact
from edgelab.errors import ConfigError
from edgelab.store.artifacts import Artifact

SCHEMA = "edgelab.artifact/v1"


def to_manifest(session: Session, art: Artifact) -> dict[str, Any]:
    files = artifact_files(session, art)
    return {
        "schema": SCHEMA,
        "name": art.name,
        "component": art.component,
        "kind": art.kind,
        "target": art.target,
        "digest": art.digest,
        "files": {f.path: f.sha256 for f in files},
        "sizes": {f.path: f.size for f in files},
        "metadata": {**art.meta, "provenance": art.provenance},
        "validation": art.validation,
    }


def export_manifest(session: Session, ref: str) -> dict[str, Any]:
    return to_manifest(session, get_artifact(session, ref))


def import_manifest(
    session: Session, manifest_path: Path, *, base: Path | None = None, replace: bool = False
) -> Artifact:
    """Register the artifact a manifest describes; every file must be here and hash as stated.

    Files are looked up relative to ``base`` (default: the manifest's directory).
    """
    manifest_path = Path(manifest_path)
    try:
        data = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(
            f"{manifest_path}: not a readable JSON manifest: {e}", remedy="check the file"
        ) from e
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict) or not data["files"]:
        raise ConfigError(f"{manifest_path}: a manifest needs a non-empty 'files' {{path: sha256}} map")
    base = Path(base) if base else manifest_path.parent
    meta = dict(data.get("metadata") or {})
    provenance = dict(meta.pop("provenance", None) or data.get("provenance") or {})
    paths = []
    for rel, want in data["files"].items():
        local = (base / rel).resolve()
        got, _size, _ = cached_sha256(session, local)
        if got != str(want).lower():
            raise ConfigError(
                f"{rel}: sha256 {got[:16]}... but the manifest says {str(want)[:16]}...",
                remedy="the file differs from the one the manifest was made from; fetch the right one",
            )
        paths.append((local, rel))
    name = data.get("name") or data.get("component")
    if not name:
        raise ConfigError(f"{manifest_path}: the manifest names no 'name' or 'component'")
    art = add_artifact(
        session,
        str(name),
        [p for p, _ in paths],
        kind=data.get("kind", "other"),
        target=data.get("target", "any"),
        component=data.get("component"),
        provenance=provenance,
        meta=meta,
        validation=list(data.get("validation") or []),
        replace=replace,
        names=[rel for _, rel in paths],
    )
    return art
