"""Push, list and collect device stores by name: artifacts and devices resolved from the database."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import select

from edgelab.artifacts.devstore import StoreEntry, open_store
from edgelab.artifacts.hashing import cached_sha256
from edgelab.artifacts.push import BlobSpec, DeviceResult, push_parallel
from edgelab.artifacts.registry import artifact_files, get_artifact, referenced_hashes
from edgelab.artifacts.stamps import DbStamps
from edgelab.errors import ConfigError
from edgelab.store.artifacts import Artifact, ArtifactFile
from edgelab.store.db import session_scope
from edgelab.store.devices import get_device, list_devices
from edgelab.store.models import Device
from edgelab.transport import open_transport


def blobs_for(engine: Engine, refs: Sequence[str]) -> list[BlobSpec]:
    """The distinct files of the named artifacts, each re-checked against its registered hash."""
    out: dict[str, BlobSpec] = {}
    with session_scope(engine) as s:
        for ref in refs:
            art = get_artifact(s, ref)
            for f in artifact_files(s, art):
                if f.sha256 in out:
                    continue
                if not f.source or not Path(f.source).is_file():
                    raise ConfigError(
                        f"{art.name}: {f.path} is no longer at {f.source}",
                        remedy="put the file back, or re-add the artifact from where it is now",
                    )
                digest, size, _ = cached_sha256(s, Path(f.source))
                if digest != f.sha256:
                    raise ConfigError(
                        f"{art.name}: {f.source} changed since it was registered (sha256 {digest[:12]}, was {f.sha256[:12]})",
                        remedy="re-add the artifact (`edgelab artifact add ... --replace`) or restore the file",
                    )
                out[f.sha256] = BlobSpec(Path(f.source), f.sha256, size)
    return list(out.values())


def resolve_devices(engine: Engine, names: Sequence[str], all_devices: bool = False) -> list[Device]:
    with session_scope(engine, write=False) as s:
        if all_devices:
            return list(list_devices(s))
        if not names:
            raise ConfigError("no device named", remedy="give --device NAME (repeatable) or --all")
        return [get_device(s, n) for n in names]


def push_artifacts(
    engine: Engine,
    refs: Sequence[str],
    devices: Sequence[Device],
    *,
    verify: bool = False,
    progress: Callable[[str, str, int, int], None] | None = None,
    workers: int = 8,
    lease_id: str | None = None,
) -> tuple[list[BlobSpec], list[DeviceResult]]:
    """Push the artifacts' files to every device in parallel; per-device results, never raised.

    Runs under a lease on every device (the caller's, or one of its own; LeaseHeld when someone
    else holds one of them, before anything is sent).
    """
    from edgelab.lease import held

    blobs = blobs_for(engine, refs)
    jobs = []
    for d in devices:
        ep = d.endpoint()
        jobs.append((d.name, (lambda ep=ep: open_transport(ep)), DbStamps(engine, d.id)))
    with held(engine, [d.name for d in devices], f"push {', '.join(refs)}"[:200], lease_id=lease_id):
        return blobs, push_parallel(jobs, blobs, verify=verify, progress=progress, workers=workers)


@dataclass
class StoreRow:
    name: str
    size: int
    artifacts: list[str]
    verified_at: str | None

    @property
    def referenced(self) -> bool:
        return bool(self.artifacts)


def store_ls(engine: Engine, device_name: str) -> tuple[str, list[StoreRow]]:
    """(store root, entries) of a device's store, each with the artifacts naming it."""
    with session_scope(engine, write=False) as s:
        dev = get_device(s, device_name)
        names: dict[str, list[str]] = {}
        for sha, art in s.exec(select(ArtifactFile.sha256, Artifact.name).join(Artifact)).all():
            names.setdefault(sha, []).append(art)
    records = DbStamps(engine, dev.id).all()
    t = open_transport(dev.endpoint())
    try:
        store = open_store(t)
        entries = store.list()
    finally:
        t.close()
    rows = []
    for e in entries:
        sha = e.sha256 or e.name.split(".", 1)[0]
        rec = records.get(e.name)
        rows.append(
            StoreRow(
                e.name,
                e.size,
                sorted(names.get(sha, [])) if e.sha256 else [],
                rec.verified_at.isoformat() if rec else None,
            )
        )
    return store.root, rows


STALE_PART_S = 15 * 60  # a partial upload untouched this long is abandoned (a resume would have written it)


def _remove_from_store(
    engine: Engine,
    dev: Device,
    purpose: str,
    pick: Callable[[StoreEntry], bool],
    *,
    dry_run: bool,
    lease_id: str | None,
    forget: Sequence[str] = (),
) -> list[StoreEntry]:
    """Remove the entries ``pick`` chooses from a device's store, and the records that said their
    blobs (and ``forget``'s) were verified there; under a lease on the device, as a push."""
    from edgelab.lease import held

    with held(engine, [dev.name], purpose[:200], lease_id=lease_id):
        t = open_transport(dev.endpoint())
        try:
            store = open_store(t)
            doomed = [e for e in store.list() if pick(e)]
            if not dry_run and doomed:
                store.remove([store.blob(e.name) for e in doomed])
        finally:
            t.close()
        if not dry_run:
            stamps = DbStamps(engine, dev.id)
            for sha in dict.fromkeys([*(e.sha256 for e in doomed if e.sha256), *forget]):
                stamps.drop(sha)
    return doomed


def _blob_of(e: StoreEntry) -> str:
    """The blob an entry holds or is on its way to (``<sha>.part``, ``.<sha>.sha256``, ``.<sha>.adb-part``)."""
    return e.sha256 or e.name.lstrip(".").split(".", 1)[0]


def gc_device(
    engine: Engine, device_name: str, *, dry_run: bool = False, lease_id: str | None = None
) -> list[StoreRow]:
    """Remove blobs no registered artifact names, and leftover partial uploads (under a lease on the
    device, as a push: never while someone else holds it)."""
    with session_scope(engine, write=False) as s:
        dev = get_device(s, device_name)
        keep = referenced_hashes(s)

    def pick(e: StoreEntry) -> bool:
        # a partial still being written (an upload in flight, resumable) stays; a stale one goes
        fresh_part = e.partial and e.age_s is not None and e.age_s < STALE_PART_S
        return e.sha256 not in keep and not fresh_part

    doomed = _remove_from_store(engine, dev, "gc", pick, dry_run=dry_run, lease_id=lease_id)
    return [StoreRow(e.name, e.size, [], None) for e in doomed]


def store_rm(
    engine: Engine,
    device_name: str,
    refs: Sequence[str],
    *,
    dry_run: bool = False,
    lease_id: str | None = None,
) -> list[StoreRow]:
    """Remove the named artifacts' blobs (and their partial uploads) from a device's store, and the
    records that said they were verified there: to free space, or so the next push sends them again.

    The artifacts stay registered here; only the device's copies go. Runs under a lease on the
    device (the caller's, or one of its own), as a push does.
    """
    with session_scope(engine, write=False) as s:
        dev = get_device(s, device_name)
        names: dict[str, list[str]] = {}
        for ref in refs:
            art = get_artifact(s, ref)
            for f in artifact_files(s, art):
                names.setdefault(f.sha256, []).append(art.name)
    doomed = _remove_from_store(
        engine,
        dev,
        f"store rm {', '.join(refs)}",
        lambda e: _blob_of(e) in names,
        dry_run=dry_run,
        lease_id=lease_id,
        forget=list(names),
    )
    return [StoreRow(e.name, e.size, sorted(names[_blob_of(e)]), None) for e in doomed]
