"""Artifact tables: what was registered (files, hashes, provenance), the local hash cache, and
what each device's content-addressed store holds.

Kept apart from models.py (one concept per module); models.py imports this module so the one
metadata that migrations are checked against holds these tables too.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, BigInteger, Column, ForeignKey, Index, Integer, UniqueConstraint
from sqlmodel import Field, Session, SQLModel, col, select

import edgelab.store.models  # noqa: F401 - the device table device_store_entry refers to
from edgelab.store.base import _ts, utcnow


class Artifact(SQLModel, table=True):
    """One registered artifact: a set of files for one target, with its provenance.

    ``digest`` is the SHA-256 of the canonical ``{path: sha256}`` map, so the same bytes under
    the same names are the same artifact wherever they were added from.
    """

    __tablename__ = "artifact"
    __table_args__ = (UniqueConstraint("name", name="uq_artifact_name"),)

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=128)
    digest: str = Field(max_length=64, index=True)
    kind: str = Field(max_length=32)  # runtime | weights | graph | tokenizer | voice | other
    target: str = Field(max_length=64, index=True)  # android-arm64, linux-aarch64-cuda-sm87, any, ...
    component: str | None = Field(default=None, max_length=128)
    total_size: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    provenance: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    meta: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    validation: list = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts(nullable=False))


class ArtifactFile(SQLModel, table=True):
    """One file of an artifact: its name inside the artifact, size, SHA-256 and where it lies here."""

    __tablename__ = "artifact_file"
    __table_args__ = (UniqueConstraint("artifact_id", "path", name="uq_artifact_file_path"),)

    id: int | None = Field(default=None, primary_key=True)
    artifact_id: int = Field(
        sa_column=Column(Integer, ForeignKey("artifact.id", ondelete="CASCADE"), nullable=False)
    )
    path: str = Field(max_length=512)  # relative name inside the artifact
    size: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    sha256: str = Field(max_length=64, index=True)
    source: str | None = Field(default=None, max_length=4096)  # local absolute path, if any


class HashCacheEntry(SQLModel, table=True):
    """A local file's SHA-256, valid while its size and mtime_ns are unchanged: large files hash once."""

    __tablename__ = "hash_cache"

    path: str = Field(primary_key=True, max_length=4096)
    size: int = Field(sa_column=Column(BigInteger, nullable=False))
    mtime_ns: int = Field(sa_column=Column(BigInteger, nullable=False))
    sha256: str = Field(max_length=64)
    hashed_at: datetime = Field(default_factory=utcnow, sa_column=_ts(nullable=False))


class DeviceStoreEntry(SQLModel, table=True):
    """A blob verified in a device's store, with the stat stamp seen right after verification.

    A later push trusts the blob without re-hashing only while size and stamp (change time, which
    any write moves) are the same; ``--verify`` always re-hashes.
    """

    __tablename__ = "device_store_entry"
    __table_args__ = (
        UniqueConstraint("device_id", "sha256", name="uq_device_store_entry"),
        Index("ix_device_store_entry_sha256", "sha256"),
    )

    id: int | None = Field(default=None, primary_key=True)
    device_id: int = Field(
        sa_column=Column(Integer, ForeignKey("device.id", ondelete="CASCADE"), nullable=False)
    )
    sha256: str = Field(max_length=64)
    size: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    stamp: str | None = Field(default=None, max_length=128)
    verified_at: datetime = Field(default_factory=utcnow, sa_column=_ts(nullable=False))


def device_blobs(session: Session, device_id: int) -> list[tuple[DeviceStoreEntry, list[str]]]:
    """The blobs verified in one device's store, newest first, each with the ``artifact/path``
    names of the registered files that hold it (empty for a blob no artifact names), in two queries."""
    entries = list(
        session.exec(
            select(DeviceStoreEntry)
            .where(DeviceStoreEntry.device_id == device_id)
            .order_by(col(DeviceStoreEntry.verified_at).desc())
        ).all()
    )
    names: dict[str, list[str]] = {}
    shas = [e.sha256 for e in entries]
    if shas:
        for sha, a_name, path in session.exec(
            select(ArtifactFile.sha256, Artifact.name, ArtifactFile.path)
            .join(Artifact, col(Artifact.id) == col(ArtifactFile.artifact_id))
            .where(col(ArtifactFile.sha256).in_(shas))
        ).all():
            names.setdefault(sha, []).append(f"{a_name}/{path}")
    return [(e, sorted(names.get(e.sha256, []))) for e in entries]
