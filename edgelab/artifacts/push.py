"""Push blobs into device stores: skip what is present and verified, resume cut uploads, verify the
SHA-256 on the device, rename into place atomically. Devices are pushed in parallel.

The "present" check always compares size; it re-hashes on the device unless the database holds a
verification of this exact file (same size and change-time stamp: any write moves the stamp), and
always with ``verify=True``. A blob whose hash is wrong is removed and uploaded again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from edgelab.artifacts.batch import push_small
from edgelab.artifacts.devstore import DeviceStore, open_store
from edgelab.artifacts.hashing import sha256_path
from edgelab.artifacts.upload import upload
from edgelab.errors import DeviceNotAnswering, EdgelabError, HashMismatch, Interrupted, TransportError
from edgelab.transport.base import Progress

log = logging.getLogger(__name__)

BlobProgress = Callable[[str, int, int], None]
"""Called with (sha256, bytes done, bytes total) while a blob uploads."""


class Stamps(Protocol):
    """Where verifications of device blobs are remembered (the database, or nothing)."""

    def get(self, sha: str) -> tuple[int, str | None] | None: ...
    def put(self, sha: str, size: int, stamp: str | None) -> None: ...
    def drop(self, sha: str) -> None: ...


class NoStamps:
    """Remember nothing: every present check hashes on the device."""

    def get(self, sha: str) -> tuple[int, str | None] | None:
        return None

    def put(self, sha: str, size: int, stamp: str | None) -> None:
        pass

    def drop(self, sha: str) -> None:
        pass


@dataclass
class BlobResult:
    """What one blob push did. status: present | verified | uploaded | resumed | replaced."""

    sha256: str
    size: int
    status: str
    remote_path: str
    sent: int = 0
    resumed_from: int = 0
    attempts: int = 1
    seconds: float = 0.0
    upload_seconds: float = 0.0  # the transfer alone (last attempt)
    verify_seconds: float = 0.0  # device-side SHA-256 + rename
    notes: list[str] = field(default_factory=list)
    via: str | None = None  # how the bytes travelled (the transport's ``last_put_via``); None: none sent
    hasher: str | None = None  # the device-side SHA-256 tool that checked them

    @property
    def throughput(self) -> float:
        """Bytes per second over the wire (0 when nothing was sent)."""
        return self.sent / self.seconds if self.sent and self.seconds > 0 else 0.0


@dataclass(frozen=True)
class BlobSpec:
    """A local file to push, with its known SHA-256 and size (from the registry's hash cache)."""

    path: Path
    sha256: str
    size: int


def _resume_offset(
    store: DeviceStore, local: Path, sha: str, total: int, part: tuple[int, str] | None, notes: list[str]
) -> int:
    """Bytes of ``<sha>.part`` already on the device that match the local file's prefix (else 0)."""
    if part is None:
        return 0
    have = part[0]
    if have == 0 or have > total:
        return 0  # rewritten from zero
    if store.sha256(store.part(sha), have, prefix=have) == sha256_path(local, prefix=have):
        notes.append(f"resumed at {have} of {total} bytes")
        return have
    notes.append("partial upload did not match the local file; started over")
    return 0


def _stop(store: DeviceStore, follower, why: BaseException | None = None) -> None:
    """Cancel a follower; after a cut its channel is already gone, so also kill it by pid over the
    (reconnected) transport, lest it rename ``.part`` under the retry's feet. Not when the device
    stopped answering: the kill would wait out its own timeout, and the retry asks the device first
    (a frozen one fails it, a thawed one's follower only ever renames a ``.part`` that hashed right)."""
    follower.cancel()
    kill = getattr(store.t, "kill_remote", None)
    pid = getattr(follower, "pid", None)
    if kill is not None and pid and not isinstance(why, DeviceNotAnswering):
        try:
            kill(pid, "KILL")
        except EdgelabError as e:
            log.info("%s: could not kill follower %s: %s", store.t_name, pid, e)


def _drop_stale_part(store: DeviceStore, sha: str, part: tuple[int, str] | None, notes: list[str]) -> None:
    """The blob is in the store, verified: a ``.part`` beside it (an upload a Ctrl-C or a killed
    deploy cut after its last byte) will never be resumed, so it goes instead of taking the space."""
    if part is not None:
        store.remove([store.part(sha)])
        notes.append(f"removed a stale .part of {part[0]} bytes beside the verified blob")


def _upload_and_verify(
    store: DeviceStore,
    local: Path,
    sha: str,
    offset: int,
    total: int,
    part: tuple[int, str] | None,
    progress: Progress,
) -> tuple[tuple[int, str] | None, float]:
    """Upload, with the device hashing ``.part`` while it arrives: in the command that receives the
    bytes where the transport feeds one (``store.receive``: ADB), else by a follower beside the
    transfer (``store.follow``: SSH). The blob's stat after the rename, and when the upload finished."""
    if store.receives:  # stale bytes beyond ``offset`` are cut off by the receive itself
        sent_at = [time.monotonic()]

        def timed(done: int, size: int) -> None:
            progress(done, size)
            if done == size:
                sent_at[0] = time.monotonic()

        return store.receive(local, sha, offset, total, timed), sent_at[0]
    if not store.follows:
        upload(store, local, sha, offset, progress)
        uploaded = time.monotonic()
        return store.finalize(sha, total), uploaded
    if offset == 0 and part is not None:
        store.remove([store.part(sha)])  # stale bytes: the follower must not hash them
    follower = store.follow(sha, total)
    try:
        upload(store, local, sha, offset, progress)
    except BaseException as e:
        _stop(store, follower, e)
        raise
    uploaded = time.monotonic()
    try:
        after = store.finish_follow(follower, sha, total)
    finally:
        follower.cancel()
    if after is False:  # not confirmed: hash it all again, which also handles a real mismatch
        log.info("%s: follower did not confirm %s; hashing again", store.t_name, sha[:12])
        after = store.finalize(sha, total)
    return after, uploaded  # type: ignore[return-value]


def push_blob(
    store: DeviceStore,
    blob: BlobSpec,
    *,
    stamps: Stamps | None = None,
    verify: bool = False,
    progress: BlobProgress | None = None,
    attempts: int = 3,
    cancel: threading.Event | None = None,
) -> BlobResult:
    """Make ``store`` hold ``blob`` under its SHA-256, verified on the device.

    A cut upload (TransportError) is retried up to ``attempts`` times, each resuming from the
    verified prefix of ``.part`` left on the device. Setting ``cancel`` (a Ctrl-C) stops the
    sending at its next progress report with Interrupted; ``.part`` stays for the next push to resume.
    """
    stamps = stamps or NoStamps()
    sha, total, local = blob.sha256, blob.size, blob.path
    start = time.monotonic()
    target = store.blob(sha)
    notes: list[str] = []
    status = "uploaded"
    sent_total = 0
    for attempt in range(1, attempts + 1):
        if cancel is not None and cancel.is_set():
            raise Interrupted(f"push of {sha[:12]} interrupted", remedy="push again")
        try:
            have, part = store.inspect(sha, probe=True)  # the device's hasher asked on the way
            if attempt == 1 and have is not None:
                size, stamp = have
                if size == total and not verify and stamps.get(sha) == (size, stamp):
                    _drop_stale_part(store, sha, part, notes)
                    return BlobResult(
                        sha, total, "present", target, seconds=time.monotonic() - start, notes=notes
                    )
                if size == total and store.sha256(target, size) == sha:
                    stamps.put(sha, size, stamp)
                    _drop_stale_part(store, sha, part, notes)
                    return BlobResult(
                        sha,
                        total,
                        "verified",
                        target,
                        seconds=time.monotonic() - start,
                        hasher=store.hasher_name,
                        notes=notes,
                    )
                notes.append(f"store copy was corrupt (size {size}, expected {total}); replaced")
                stamps.drop(sha)
                store.remove([target])
                status = "replaced"
            offset = _resume_offset(store, local, sha, total, part, notes)
            if offset and status == "uploaded":
                status = "resumed"
            done = offset

            def sent(now: int, _size: int) -> None:
                nonlocal done, sent_total
                if cancel is not None and cancel.is_set():
                    raise Interrupted(
                        f"push of {sha[:12]} interrupted after {done} of {total} bytes",
                        remedy="push again: it resumes from what arrived",
                    )
                sent_total += now - done
                done = now
                if progress:
                    progress(sha, done, total)

            t_up = time.monotonic()
            after = _upload_and_verify(store, local, sha, offset, total, part, sent)
            t_verify, t_done = after[1], time.monotonic()
            after = after[0]
            if after is not None:
                stamps.put(sha, after[0], after[1])
            return BlobResult(
                sha,
                total,
                status,
                target,
                sent=sent_total,
                resumed_from=offset,
                attempts=attempt,
                seconds=t_done - start,
                upload_seconds=t_verify - t_up,
                verify_seconds=t_done - t_verify,
                notes=notes,
                via=store.t.last_put_via,
                hasher=store.hasher_name,
            )
        except HashMismatch:
            raise
        except TransportError as e:
            # a device that is frozen stays frozen: a fresh connection that gets no answer either
            # ends the push, and the error says how long it took in all, not one wait's bound
            gave_up = attempt == attempts or (attempt > 1 and isinstance(e, DeviceNotAnswering))
            if gave_up and attempt > 1:
                first = notes[0].split(": ", 1)[1] if notes else str(e)
                first = first if len(first) <= 200 else first[:120] + " ... " + first[-60:]
                raise type(e)(
                    f"the push of {sha[:12]} stopped after {time.monotonic() - start:.0f} s in all "
                    f"({attempt} tries; the first: {first}); the last: {e}",
                    remedy=getattr(e, "remedy", None),
                ) from e
            if gave_up:
                raise
            notes.append(f"attempt {attempt} cut: {e}")
            log.info("%s: push of %s cut (%s); retrying", store.t_name, sha[:12], e)
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")


@dataclass
class DeviceResult:
    device: str
    blobs: list[BlobResult] = field(default_factory=list)
    error: str | None = None
    remedy: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def push_to_device(
    transport_factory: Callable[[], object],
    device: str,
    blobs: Sequence[BlobSpec],
    *,
    stamps: Stamps | None = None,
    verify: bool = False,
    progress: Callable[[str, str, int, int], None] | None = None,
    cancel: threading.Event | None = None,
) -> DeviceResult:
    """Push every blob to one device; failures are returned, not raised (others keep going)."""
    out = DeviceResult(device)
    transport = None
    try:
        transport = transport_factory()
        if stamps is None or any(stamps.get(b.sha256) is None for b in blobs):
            # a blob with no verification on record is likely sent: the upload's set-up (SSH: the
            # OpenSSH client's connection) overlaps the store's round trips
            transport.prepare_put()  # type: ignore[attr-defined]
        # the store and the first blob's stats in one round trip where resolving the store costs one
        store = open_store(transport, inspect=blobs[0].sha256 if blobs else None)  # type: ignore[arg-type]
        store.prefetch([b.sha256 for b in blobs])  # every other blob's stats: one more round trip
        cb = (lambda sha, d, t: progress(device, sha, d, t)) if progress else None
        # small files the device lacks: one stream for them all (``batch``); the rest one by one
        streamed = push_small(store, blobs, progress=cb, cancel=cancel)
        for blob in blobs:
            if (got := streamed.get(blob.sha256)) is not None:
                (stamps or NoStamps()).put(blob.sha256, *got.stat)
                out.blobs.append(
                    BlobResult(
                        blob.sha256,
                        blob.size,
                        "uploaded",
                        store.blob(blob.sha256),
                        sent=blob.size,
                        seconds=got.seconds,
                        via=got.via,
                        hasher=store.hasher_name,
                    )
                )
                continue
            out.blobs.append(push_blob(store, blob, stamps=stamps, verify=verify, progress=cb, cancel=cancel))
    except EdgelabError as e:
        out.error, out.remedy = str(e), e.remedy
    finally:
        if transport is not None:
            transport.close()  # type: ignore[attr-defined]
    return out


def push_parallel(
    jobs: Sequence[tuple[str, Callable[[], object], Stamps | None]],
    blobs: Sequence[BlobSpec],
    *,
    verify: bool = False,
    progress: Callable[[str, str, int, int], None] | None = None,
    workers: int = 8,
    cancel: threading.Event | None = None,
) -> list[DeviceResult]:
    """Push ``blobs`` to several devices at once: one thread per device (up to ``workers``).

    A Ctrl-C (KeyboardInterrupt in the waiting thread) sets ``cancel``: every upload stops at its
    next progress report (within about a MiB), then the interrupt goes on up.
    """
    lock = threading.Lock()
    cancel = cancel if cancel is not None else threading.Event()

    def guarded(device: str, sha: str, done: int, total: int) -> None:
        if progress:
            with lock:
                progress(device, sha, done, total)

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs)))) as pool:
        futures = [
            pool.submit(
                push_to_device,
                factory,
                name,
                blobs,
                stamps=stamps,
                verify=verify,
                progress=guarded,
                cancel=cancel,
            )
            for name, factory, stamps in jobs
        ]
        try:
            return [f.result() for f in futures]
        except BaseException:
            cancel.set()  # before the pool's exit waits for the workers: they stop sending now
            raise
