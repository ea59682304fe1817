"""The artifact registry: add, list, show, remove artifacts with their files and provenance.

An artifact is a named set of files for one target ABI. Its ``digest`` (SHA-256 of the canonical
``{path: sha256}`` map) identifies the exact bytes; provenance says where they came from.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from edgelab.artifacts.hashing import cached_sha256
from edgelab.errors import ConfigError, NotFound
from edgelab.store.artifacts import Artifact, ArtifactFile

KINDS = ("runtime", "model", "weights", "graph", "tokenizer", "voice", "config", "other")
"""runtime build, a whole model file (GGUF: weights + tokenizer), model weights, exported graph,
tokenizer, voice/speaker data, config, other."""

PROVENANCE_KEYS = (
    "source_repo",
    "source_commit",
    "build_flags",
    "toolchain",
    "precision",
    "quantization",
    "checkpoint_id",
    "checkpoint_revision",
    "exporter_version",
    "recipe",
    "built_on",
)
"""Well-known provenance fields; ``--meta k=v`` with one of these keys lands in provenance."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
_TARGET = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class FileSpec:
    """One file to register: where it lies here and its name inside the artifact."""

    source: Path
    path: str


def files_digest(files: Mapping[str, str]) -> str:
    """SHA-256 of the canonical ``{path: sha256}`` JSON: the artifact's identity."""
    canon = json.dumps(dict(sorted(files.items())), separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(canon.encode()).hexdigest()


def parse_meta(pairs: Iterable[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``k=v`` strings -> (provenance, metadata); provenance keys are the PROVENANCE_KEYS."""
    prov: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--meta {pair!r} is not KEY=VALUE", remedy="e.g. --meta source_commit=abc123")
        (prov if key in PROVENANCE_KEYS else meta)[key] = value
    return prov, meta


def file_specs(paths: Iterable[Path | str]) -> list[FileSpec]:
    """Files named on the command line; a directory contributes its files with relative names."""
    specs: list[FileSpec] = []
    for raw in paths:
        p = Path(raw).expanduser()
        if p.is_dir():
            for f in sorted(x for x in p.rglob("*") if x.is_file()):
                specs.append(FileSpec(f.resolve(), f"{p.name}/{f.relative_to(p).as_posix()}"))
        elif p.is_file():
            specs.append(FileSpec(p.resolve(), p.name))
        else:
            raise ConfigError(f"{p}: no such file or directory", remedy="check the path")
    names = [s.path for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(
            f"two files would share the name {dupes[0]!r} in one artifact",
            remedy="add them as separate artifacts",
        )
    if not specs:
        raise ConfigError("no files given", remedy="name at least one file")
    return specs


def _check(name: str, kind: str, target: str) -> None:
    if not _NAME.fullmatch(name):
        raise ConfigError(f"artifact name {name!r} is not valid", remedy="letters, digits, . _ + - (max 128)")
    if kind not in KINDS:
        raise ConfigError(f"unknown artifact kind {kind!r}", remedy=f"use one of: {', '.join(KINDS)}")
    if not _TARGET.fullmatch(target):
        raise ConfigError(
            f"target {target!r} is not valid", remedy="e.g. android-arm64, linux-aarch64-cuda-sm87, any"
        )


def add_artifact(
    session: Session,
    name: str,
    paths: Iterable[Path | str],
    *,
    kind: str,
    target: str,
    component: str | None = None,
    provenance: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
    validation: list | None = None,
    replace: bool = False,
    names: list[str] | None = None,
) -> Artifact:
    """Hash (cached) and register the files under ``name``; ``replace`` overwrites an existing name.

    ``names`` gives each file's name inside the artifact (default: its base name).
    """
    _check(name, kind, target)
    if names is not None:
        paths = list(paths)
        if len(names) != len(paths):
            raise ConfigError("one name per file, please")
        specs = [FileSpec(Path(p).resolve(), n) for p, n in zip(paths, names, strict=True)]
    else:
        specs = file_specs(paths)
    existing = session.exec(select(Artifact).where(Artifact.name == name)).first()
    if existing is not None:
        if not replace:
            raise ConfigError(
                f"artifact {name!r} already exists", remedy="choose another name, or remove it first"
            )
        session.delete(existing)
        session.flush()
    rows = []
    for spec in specs:
        digest, size, _cached = cached_sha256(session, spec.source)
        rows.append(
            ArtifactFile(artifact_id=0, path=spec.path, size=size, sha256=digest, source=str(spec.source))
        )
    art = Artifact(
        name=name,
        digest=files_digest({r.path: r.sha256 for r in rows}),
        kind=kind,
        target=target,
        component=component or name,
        total_size=sum(r.size for r in rows),
        provenance=dict(provenance or {}),
        meta=dict(meta or {}),
        validation=list(validation or []),
    )
    session.add(art)
    session.flush()
    for r in rows:
        r.artifact_id = art.id
        session.add(r)
    session.flush()
    return art


def get_artifact(session: Session, ref: str) -> Artifact:
    """By name, or by digest (a unique prefix of at least 8 hex digits)."""
    art = session.exec(select(Artifact).where(Artifact.name == ref)).first()
    if art is not None:
        return art
    if re.fullmatch(r"[0-9a-f]{8,64}", ref):
        found = session.exec(select(Artifact).where(Artifact.digest.startswith(ref))).all()
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise ConfigError(
                f"digest prefix {ref} names {len(found)} artifacts", remedy="give more digits or the name"
            )
    raise NotFound(f"no artifact {ref!r}", remedy="see `edgelab artifact ls`")


def artifact_files(session: Session, art: Artifact) -> list[ArtifactFile]:
    return list(
        session.exec(
            select(ArtifactFile).where(ArtifactFile.artifact_id == art.id).order_by(ArtifactFile.path)
        ).all()
    )


def list_artifacts(session: Session, *, kind: str | None = None, target: str | None = None) -> list[Artifact]:
    q = select(Artifact).order_by(Artifact.name)
    if kind:
        q = q.where(Artifact.kind == kind)
    if target:
        q = q.where(Artifact.target == target)
    return list(session.exec(q).all())


def remove_artifact(session: Session, ref: str) -> Artifact:
    art = get_artifact(session, ref)
    for f in artifact_files(session, art):
        session.delete(f)
    session.flush()
    session.delete(art)
    session.flush()
    return art


def referenced_hashes(session: Session) -> set[str]:
    """Every file hash some registered artifact still names (what gc keeps)."""
    return set(session.exec(select(ArtifactFile.sha256)).all())


def add_validation(session: Session, ref: str, record: Mapping[str, Any]) -> Artifact:
    """Append a validation record (e.g. a run that checked this artifact on a device)."""
    art = get_artifact(session, ref)
    art.validation = [*art.validation, dict(record)]
    session.add(art)
    session.flush()
    return art
